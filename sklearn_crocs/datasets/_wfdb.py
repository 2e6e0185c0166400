"""Reading WFDB records robustly, and the generic ``load_wfdb`` loader.

Records are decoded by ``wfdb.rdrecord``. One real-world defect is recovered
here rather than reported: headers of the Georgia 12-lead database as
distributed in the PhysioNet/CinC challenges (e.g. ``E00271.hea``) name the
record ``E00271.mat`` on their record line, which wfdb rejects as a syntax
error. With ``repair_headers=True`` the record line is corrected in a
temporary copy (the files themselves are never modified) and the record is
read from there; the loader warns once with the number of repaired headers.
Every other problem raises :class:`InvalidRecordError` naming the file.

Before a record is decoded its header is checked: the sampling frequency
must be a positive finite number and each ADC gain non-zero (WFDB reads a
missing frequency as 250 Hz and a zero or missing gain as 200 adu/mV, which
is rarely true; ``wfdb_defaults=True`` accepts them), and the header and
every signal file must be regular files (a link to ``/dev/zero`` is never
read), of bounded sizes, and each signal file must hold the
bytes the header announces (so that a corrupt length cannot make wfdb
allocate gigabytes). After decoding, each signal's sum is compared
with the header's checksum, when it has one (``verify_checksums``).
"""

import contextlib
import math
import os
import re
import shutil
import tempfile
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import pandas as pd
import wfdb
from sklearn.utils import Bunch
from wfdb.io._signal import _required_byte_num
from wfdb.io.header import HeaderSyntaxError, parse_header_content, rx_signal

from .._utils import _read_regular, _regular_size, _warn
from ..preprocessing._signals import check_rate
from ._base import (
    UNIT_SCALE,
    ExclusionLog,
    InvalidRecordError,
    attribute_parser,
    canonical_lead_name,
    check_leads,
    check_on_error,
    parse_comments,
)
from ._records import (
    MAX_RECORD_BYTES,
    RawRecord,
    SignalCache,
    check_fs,
    check_signal_length,
    collect_signals,
    file_stats,
)


def _record_base(path):
    """A record path without the ``.hea`` extension, as a Path."""
    path = Path(os.path.expanduser(os.fspath(path)))
    if path.suffix == ".hea":
        path = path.with_suffix("")
    return path


def _repair_record_line(text, record_name):
    """Header text with a ``<name>.<ext>`` record name corrected, or None."""
    lines = text.splitlines(keepends=True)
    for i, line in enumerate(lines):
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        first, _, rest = stripped.partition(" ")
        if first != record_name and first.split(".", 1)[0] == record_name:
            newline = "\n" if line.endswith("\n") else ""
            lines[i] = f"{record_name} {rest}{newline}"
            return "".join(lines)
        return None
    return None


@contextlib.contextmanager
def _repaired_copy(base, header_path, error):
    """A temporary WFDB record with a corrected record line (see module doc)."""
    text = _read_header(header_path).decode("utf-8", errors="replace")
    fixed = _repair_record_line(text, base.name)
    if fixed is None:
        raise InvalidRecordError(
            f"{header_path}: malformed WFDB header ({error}). Fix the file or "
            f"pass on_error='skip' to leave the record out."
        )
    with tempfile.TemporaryDirectory(prefix="sklearn_crocs_wfdb_") as tmp:
        tmp_base = Path(tmp) / base.name
        tmp_base.with_suffix(".hea").write_text(fixed, encoding="utf-8")
        try:
            header = wfdb.rdheader(str(tmp_base))
        except Exception as exc:
            raise InvalidRecordError(
                f"{header_path}: malformed WFDB header ({error}); correcting its "
                f"record line did not help ({exc})."
            ) from exc
        for file_name in sorted(set(header.file_name or [])):
            source = base.parent / file_name
            if not source.exists():
                raise InvalidRecordError(
                    f"{header_path}: signal file {source} not found. Restore it "
                    f"or pass on_error='skip'."
                )
            target = Path(tmp) / file_name
            try:
                os.symlink(source.resolve(), target)
            except OSError:  # no symlinks (e.g. Windows without privileges)
                shutil.copyfile(source, target)
        yield tmp_base


def _check_header_values(text, header_path, wfdb_defaults):
    """Refuse a sampling frequency or ADC gain that is invalid or a silent WFDB default.

    Returns the header's sampling frequency, or None where it gives none.
    """
    lines, _ = parse_header_content(text)
    if not lines:
        raise InvalidRecordError(f"{header_path}: the header has no record line.")
    tokens = lines[0].split()
    if "/" in tokens[0]:  # "name/n_segments": its lines are segments, not signals
        raise InvalidRecordError(
            f"{header_path}: a multi-segment record ({tokens[0].split('/', 1)[1]} segments), "
            "which this reader does not join. Convert it to one segment (wfdb's "
            "MultiRecord.multi_to_single) or pass on_error='skip'."
        )
    # The frequency is the third field, "fs[/counter[(base)]]". wfdb's own
    # parser reads "-500" as no frequency at all, hence 250 Hz.
    field = tokens[2] if len(tokens) > 2 else ""
    fs_text = re.split(r"[/(]", field)[0]
    fs = None
    if not fs_text:
        if not wfdb_defaults:
            raise InvalidRecordError(
                f"{header_path}: the record line gives no sampling frequency (WFDB "
                f"would assume 250 Hz). Fix the header, pass wfdb_defaults=True to "
                f"accept the default, or on_error='skip'."
            )
    else:
        try:
            fs = check_rate(float(fs_text), "it")
        except ValueError as exc:
            problem = str(exc) if "Hz" in str(exc) else "it must be a number of Hz."
            raise InvalidRecordError(
                f"{header_path}: invalid sampling frequency {field!r}; {problem} Fix the "
                "header or pass on_error='skip'."
            ) from exc
    for number, line in enumerate(lines[1:], start=1):
        if rx_signal.match(line) is None:
            continue  # wfdb reports the syntax error
        # Fields by position: file, format, "gain(baseline)/units", ..., and
        # the description (the lead name) from the ninth on. wfdb's pattern
        # does not read a gain such as "nan" and then takes later fields for
        # the lead name, so the fields are split here.
        fields = line.split()
        name = " ".join(fields[8:]) or f"signal {number}"
        gain_field = fields[2] if len(fields) > 2 else ""
        gain_text = re.split(r"[(/]", gain_field)[0]
        try:
            gain = float(gain_text or 0)
        except ValueError:
            gain = math.nan
        if not math.isfinite(gain):
            raise InvalidRecordError(
                f"{header_path}: lead {name!r} (signal line {number}) has an invalid ADC "
                f"gain {gain_text!r} in its gain field {gain_field!r}; it must be a finite "
                f"number of adu per physical unit. Fix the header or pass on_error='skip'."
            )
        if gain == 0 and not wfdb_defaults:
            raise InvalidRecordError(
                f"{header_path}: lead {name!r} has an ADC gain of 0 or none, which WFDB "
                f"reads as 200 adu/mV (uncalibrated). Pass wfdb_defaults=True to accept "
                f"that, or on_error='skip'."
            )
    return fs


# Largest header read: real ones hold a few kB (12 leads and their comments).
_MAX_HEADER_BYTES = 1 << 20
# Compressed ECGs (FLAC signal files, formats 508, 516 and 524; .npz members)
# take a half to a fifth of their samples' bytes; a header announcing more than
# this many times the compressed size would have a small file decode to gigabytes.
MAX_COMPRESSION_RATIO = 64


def regular_file_size(path, header_path, what, limit=None):
    """Size of ``path``, refused unless it is a regular file (links followed) of at most
    ``limit`` bytes (default ``MAX_RECORD_BYTES``).

    A device (``/dev/zero``), pipe or folder has no size that bounds what
    reading it returns; None when ``path`` does not exist (wfdb reports it).
    """
    limit = MAX_RECORD_BYTES if limit is None else limit
    try:
        return _regular_size(path, limit=limit, what=what)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise InvalidRecordError(f"{header_path}: cannot read {what} {path} ({exc}).") from exc
    except ValueError as exc:
        raise InvalidRecordError(
            f"{header_path}: {exc} Replace it with the record's file, or pass on_error='skip'."
        ) from exc


def _check_header_file(path, header_path=None):
    """Refuse a header that is not a regular file, or too large to be one."""
    regular_file_size(path, path if header_path is None else header_path, "WFDB header",
                      _MAX_HEADER_BYTES)  # fmt: skip


def _read_header(path, header_path=None):
    """The bytes of a header, read as :func:`_check_header_file` checks it."""
    _check_header_file(path, header_path)
    try:
        data = _read_regular(path, limit=_MAX_HEADER_BYTES, what="WFDB header")
    except ValueError as exc:  # replaced by a special or larger file since the check
        raise InvalidRecordError(f"{header_path or path}: {exc}") from exc
    return data


def _check_file_sizes(header, folder, header_path):
    """Refuse signal files shorter than the header announces, before wfdb reads them."""
    for file_name in dict.fromkeys(header.file_name or []):
        regular_file_size(folder / file_name, header_path, "signal file")
    if header.sig_len is None:
        return  # wfdb infers the length from the file
    per_file = {}
    for i, file_name in enumerate(header.file_name or []):
        fmt, offset = header.fmt[i], header.byte_offset[i] or 0
        samples = header.sig_len * (header.samps_per_frame[i] or 1)
        entry = per_file.setdefault(file_name, [fmt, offset, 0])
        entry[2] += samples
    for file_name, (fmt, offset, samples) in per_file.items():
        if fmt in ("508", "516", "524"):  # FLAC: compressed, bounded by a ratio
            size = regular_file_size(folder / file_name, header_path, "signal file")
            decoded = samples * int(fmt[1:]) // 8
            if size is not None and decoded > MAX_COMPRESSION_RATIO * max(size, 1):
                raise InvalidRecordError(
                    f"{header_path}: FLAC signal file {file_name} has {size} bytes, but the "
                    f"header announces {header.sig_len} samples ({decoded} bytes), more than "
                    f"{MAX_COMPRESSION_RATIO} times as many as real ECGs compress to. The "
                    "header is corrupt or crafted; restore it or pass on_error='skip'."
                )
            continue
        try:
            needed = offset + _required_byte_num("read", fmt, samples)
        except Exception:  # an unknown format: wfdb's own error follows
            continue
        path = folder / file_name
        size = regular_file_size(path, header_path, "signal file")
        if size is not None and size < needed:
            raise InvalidRecordError(
                f"{header_path}: signal file {path} has {size} bytes, but the header "
                f"announces {header.sig_len} samples ({needed} bytes). The file is "
                f"truncated or the header corrupt; restore it or pass on_error='skip'."
            )


def _verify_checksums(record, header_path):
    """Compare each signal's 16-bit sum with the header's checksum (where it has one)."""
    if record.checksum is None:
        return
    digital = record.e_d_signal if record.d_signal is None else record.d_signal.T
    for name, expected, values in zip(record.sig_name, record.checksum, digital):
        if expected is None:
            continue
        found = int(np.sum(values, dtype=np.int64)) % 65536
        if (found - expected) % 65536:
            raise InvalidRecordError(
                f"{header_path}: lead {name!r} fails its WFDB checksum (header "
                f"{expected}, samples sum to {found - 65536 if found >= 32768 else found} "
                f"mod 2**16): the signal file is corrupt. Restore it, or pass "
                f"verify_checksums=False to load it anyway or on_error='skip'."
            )


def _read_checked(record_name, header_path, *, verify_checksums, wfdb_defaults):
    """``wfdb.rdrecord(record_name)`` (physical), after and with the checks of this module."""
    hea = Path(record_name + ".hea")
    text = _read_header(hea, header_path).decode("ascii", errors="ignore")  # as wfdb reads it
    fs = _check_header_values(text, header_path, wfdb_defaults)
    header = wfdb.rdheader(record_name)
    if fs is not None and fs != header.fs:  # e.g. "5e2", which wfdb reads as 5
        raise InvalidRecordError(
            f"{header_path}: invalid sampling frequency: the header's field cannot be "
            f"read unambiguously (it gives {fs:g}, wfdb reads {header.fs:g}). Write it as "
            f"a plain number, or pass on_error='skip'."
        )
    _check_file_sizes(header, hea.parent, header_path)
    # Frames with several samples per signal are averaged by a plain read;
    # the checksum covers every sample, so those are read unaveraged for it.
    expanded = any((n or 1) > 1 for n in header.samps_per_frame or [])
    record = wfdb.rdrecord(record_name, physical=False, smooth_frames=not expanded)
    if verify_checksums:
        _verify_checksums(record, header_path)
    if expanded:
        return wfdb.rdrecord(record_name)
    record.dac(expanded=False, return_res=64, inplace=True)
    return record


def read_wfdb_record(path, *, repair_headers=True, verify_checksums=True, wfdb_defaults=False):
    """Decode one WFDB record into a :class:`RawRecord` (signal in mV).

    Parameters
    ----------
    path : str or path-like
        The record, with or without the ``.hea`` extension.
    repair_headers : bool, default=True
        Recover headers whose record line names the record with a file
        extension (Georgia/CinC); ``info["repaired"]`` tells when it happened.
    verify_checksums : bool, default=True
        Compare each signal with the checksum in its header line, if any.
    wfdb_defaults : bool, default=False
        Accept a missing sampling frequency (250 Hz) and a zero or missing
        ADC gain (200 adu/mV), as WFDB does.

    Raises
    ------
    InvalidRecordError
        For a missing or malformed header, an invalid sampling frequency or
        ADC gain, a missing, truncated or unreadable signal file, a checksum
        mismatch, or unknown physical units; the message names the file.
    """
    base = _record_base(path)
    header_path = base.with_name(base.name + ".hea")
    if not header_path.exists():
        raise InvalidRecordError(f"{header_path}: WFDB header file not found.")
    repaired = False
    checks = {"verify_checksums": verify_checksums, "wfdb_defaults": wfdb_defaults}
    try:
        try:
            record = _read_checked(str(base), header_path, **checks)
        except HeaderSyntaxError as exc:
            if not repair_headers:
                raise InvalidRecordError(
                    f"{header_path}: malformed WFDB header ({exc}). Pass "
                    f"repair_headers=True to correct a record line that names "
                    f"the record with a file extension, or on_error='skip'."
                ) from exc
            with _repaired_copy(base, header_path, exc) as tmp_base:
                record = _read_checked(str(tmp_base), header_path, **checks)
            repaired = True
    except InvalidRecordError:
        raise
    except FileNotFoundError as exc:
        missing = exc.filename or "a signal file"
        raise InvalidRecordError(
            f"{header_path}: signal file {missing} not found. Restore it or pass on_error='skip'."
        ) from exc
    except Exception as exc:  # wfdb raises many types for corrupt files
        raise InvalidRecordError(
            f"{header_path}: cannot read the record ({type(exc).__name__}: "
            f"{exc}). The header or signal file is corrupt or truncated; "
            f"restore it or pass on_error='skip'."
        ) from exc
    if record.p_signal is None or record.n_sig == 0:
        raise InvalidRecordError(f"{header_path}: the record has no signals.")
    scale = []
    for unit in record.units:
        key = str(unit).strip().lower()
        if key not in UNIT_SCALE:
            raise InvalidRecordError(
                f"{header_path}: unsupported physical unit {unit!r}; expected mV, uV or V."
            )
        scale.append(UNIT_SCALE[key])
    signal = record.p_signal.T * np.asarray(scale)[:, np.newaxis]
    fs = float(record.fs)
    return RawRecord(
        signal=signal,
        fs=int(fs) if fs.is_integer() else fs,
        lead_names=[canonical_lead_name(name) for name in record.sig_name],
        source=str(header_path),
        info={"comments": list(record.comments), "repaired": repaired},
    )


def read_header_comments(path):
    """The comment lines of a record's header (without ``#``), read quickly.

    Uses wfdb's header-text splitter without decoding the record, so that
    loaders can filter on attributes before reading any signal.
    """
    base = _record_base(path)
    header_path = base.with_name(base.name + ".hea")
    try:
        text = _read_header(header_path).decode("utf-8", errors="replace")
    except FileNotFoundError:
        raise InvalidRecordError(f"{header_path}: WFDB header file not found.") from None
    except OSError as exc:
        raise InvalidRecordError(f"{header_path}: cannot be read ({exc}).") from exc
    _, comment_lines = parse_header_content(text)
    return [line.strip(" \t#") for line in comment_lines]


def _natural_key(text):
    """Sort key that orders "2" before "10" (record numbers as numbers)."""
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", text)]


def find_wfdb_records(folder):
    """All records (paths without ``.hea``) under ``folder``, in natural order."""
    folder = Path(os.path.expanduser(os.fspath(folder)))
    return sorted(
        (p.with_suffix("") for p in folder.rglob("*.hea")),
        key=lambda p: _natural_key(p.relative_to(folder).as_posix()),
    )


def _resolve_records(path_or_records):
    """``(record paths, display names)`` for a folder, a record or a list."""
    if isinstance(path_or_records, (str, os.PathLike)):
        path = Path(os.path.expanduser(os.fspath(path_or_records)))
        if path.is_dir():
            records = find_wfdb_records(path)
            if not records:
                raise ValueError(f"No WFDB records (*.hea files) found under {path}.")
        else:
            records = [_record_base(path)]
    else:
        try:
            records = [_record_base(p) for p in path_or_records]
        except TypeError:
            raise TypeError(
                "path_or_records must be a folder, a record path, or a list of "
                f"record paths, got {type(path_or_records).__name__}."
            ) from None
        if not records:
            raise ValueError("path_or_records is an empty list of records.")
    names = [p.name for p in records]
    if len(set(names)) != len(names):
        names = [p.as_posix() for p in records]
    return records, names


def _wfdb_cache(cache_dir, tag, records, params):
    """The signal cache for WFDB records, keyed by their files' stats."""
    if cache_dir is None:
        return None
    sources = []
    for base in records:
        header = base.with_name(base.name + ".hea")
        sources.append(header)
        for ext in (".dat", ".mat"):
            candidate = base.with_name(base.name + ext)
            if candidate.exists():
                sources.append(candidate)
    return SignalCache(cache_dir, tag, {"sources": file_stats(sources), "params": params})


def read_wfdb_signals(
    records,
    names,
    *,
    leads,
    fs,
    target_fs,
    signal_length,
    on_error,
    repair_headers,
    log,
    cache_dir,
    cache_tag,
    verbose,
    caller,
    verify_checksums=True,
    wfdb_defaults=False,
    keep_rates=False,
):
    """:func:`collect_signals` over WFDB records, warning about repairs."""
    checks = {"verify_checksums": verify_checksums, "wfdb_defaults": wfdb_defaults}
    params = {
        "leads": leads,
        "fs": fs,
        "target_fs": target_fs,
        "signal_length": signal_length,
        "on_error": on_error,
        "repair_headers": repair_headers,
        **checks,
    }
    signal_set = collect_signals(
        names,
        lambda i: read_wfdb_record(records[i], repair_headers=repair_headers, **checks),
        leads=leads,
        fs=fs,
        target_fs=target_fs,
        signal_length=signal_length,
        on_error=on_error,
        log=log,
        cache=_wfdb_cache(cache_dir, cache_tag, records, params),
        verbose=verbose,
        caller=caller,
        keep_rates=keep_rates,
    )
    warn_repaired(names, signal_set)
    return signal_set


def warn_repaired(names, signal_set):
    """Warn once about the records of ``signal_set`` whose header was repaired."""
    repaired = [
        names[i] for i, info in zip(signal_set.kept, signal_set.infos) if info.get("repaired")
    ]
    if repaired:
        shown = ", ".join(repaired[:5]) + (" ..." if len(repaired) > 5 else "")
        _warn(
            f"Repaired {len(repaired)} WFDB header(s) whose record line names "
            f"the record with a file extension (e.g. 'E00271.mat' instead of "
            f"'E00271', as in the Georgia/CinC challenge data): {shown}. The "
            f"files were not modified. Pass repair_headers=False to treat such "
            f"headers as errors."
        )


def _attribute_extractor(attributes):
    """A ``comments -> dict`` function from the user's ``attributes``."""
    if attributes is None:
        return parse_comments
    if callable(attributes):
        return attributes
    if isinstance(attributes, Mapping):
        spec = dict(attributes)
        for column, source in spec.items():
            if not (isinstance(source, str) or callable(source)):
                raise TypeError(
                    f"attributes[{column!r}] must be a header comment key (str) "
                    f"or a callable taking the list of comments, got "
                    f"{type(source).__name__}."
                )

        def extract(comments):
            parsed = {key.lower(): value for key, value in parse_comments(comments).items()}
            row = {}
            for column, source in spec.items():
                if callable(source):
                    row[column] = source(comments)
                else:
                    row[column] = parsed.get(source.strip().strip("<>").lower())
            return row

        return extract
    raise TypeError(
        "attributes must be None, a mapping {column: comment key or callable} "
        f"or a callable, got {type(attributes).__name__}."
    )


def load_wfdb(
    path_or_records,
    *,
    attributes=None,
    groups=None,
    leads=None,
    target_fs=None,
    signal_length="equal",
    on_error="raise",
    repair_headers=True,
    verify_checksums=True,
    wfdb_defaults=False,
    cache_dir=None,
    verbose=0,
):
    """Load a folder (or list) of WFDB records with attributes from headers.

    Works for any WFDB data whose patient attributes are written in the header
    comments, e.g. the PhysioNet/CinC challenge sets (``#Age: 68``, ``#Sex:
    Female``, ``#Dx: 426177001``) or LUDB (``#<age>: 51``). Every record must
    have the same leads, sampling rate and length unless told otherwise
    (``leads``, ``target_fs``, ``signal_length``); a record that does not
    match, or whose files are missing, malformed or contain NaN, raises an
    :class:`InvalidRecordError` naming the file, or is skipped with one
    warning that counts the skipped records when ``on_error="skip"``.

    Read more in the :ref:`User Guide <datasets>`.

    Parameters
    ----------
    path_or_records : str, path-like or list of them
        A folder (searched recursively for ``*.hea``), a single record, or a
        list of records (with or without ``.hea``).
    attributes : None, mapping or callable, default=None
        How to build the ``attributes`` DataFrame from each header's comments:

        - None: one string column per ``key: value`` comment (angle brackets
          of LUDB-style keys are dropped: ``<age>`` becomes ``age``);
        - a mapping ``{column: key}`` picks comment keys (case-insensitive),
          and ``{column: callable}`` calls ``callable(comments)`` with the list
          of comment lines;
        - a callable ``f(comments) -> dict`` gives the whole row.

        Values are kept as written (strings), except that a column named
        ``sex`` or ``age`` (any case) is read as :func:`load_ludb`,
        :func:`load_chapman` and the command line read it: sex as ``"M"`` or
        ``"F"`` (from Male, Female, M or F in any case; NaN otherwise), age
        as float years (``">89"`` and ``"90+"`` become 90; NaN when
        unknown). Convert other columns with pandas.
    groups : None, str or callable, default=None
        Patient id of each record: None uses the record name (one record per
        patient); a str names a comment key; a callable gets the comments.
    leads : list of str, default=None
        Leads to load, in this order (case-insensitive, e.g. ``["II",
        "V1"]``). None: the leads of the first record, which all must share.
    target_fs : float, default=None
        Resample every record to this rate (Hz). None: all records must have
        the first record's rate, except with ``signal_length="variable"``,
        where each keeps its own (``sampling_rates``).
    signal_length : "equal", "variable" or int, default="equal"
        "equal": all records must have the same length; an int crops every
        record to that many samples (at the output rate; shorter records are
        errors); "variable": ``data`` is a list of arrays of shape
        (n_leads, n_samples_i).
    on_error : {"raise", "skip"}, default="raise"
        What to do with an unusable record.
    repair_headers : bool, default=True
        Recover Georgia/CinC-style headers whose record line reads
        ``E00271.mat`` instead of ``E00271`` (with a warning).
    verify_checksums : bool, default=True
        Compare every signal with the checksum that its header line gives
        (when it gives one): a record whose samples do not sum to it is
        corrupt and raises an :class:`InvalidRecordError` naming the record
        and lead (or is skipped with ``on_error="skip"``).
    wfdb_defaults : bool, default=False
        Accept headers that leave WFDB to fill in the sampling frequency
        (250 Hz) or give an ADC gain of 0 (read as 200 adu/mV). By default
        such a record is an :class:`InvalidRecordError`, since the default is
        rarely the true value. A non-positive or non-finite frequency is
        always an error.
    cache_dir : str or path-like, default=None
        Folder for a ``.npy`` cache of the decoded signals; ``data`` is then a
        read-only memory map, and loading again with the same arguments and
        unchanged files reads neither the WFDB files nor all data into RAM.
    verbose : int, default=0
        Show a progress bar of the records read (tqdm, on stderr) when > 0.

    Returns
    -------
    data : :class:`~sklearn.utils.Bunch`
        data : ndarray of shape (n_records, n_leads, n_samples), dtype float32
            Signals in mV (a list for ``signal_length="variable"``).
        attributes : pandas.DataFrame
            One row per loaded record.
        groups : ndarray of shape (n_records,)
            Patient ids.
        record_names : ndarray of shape (n_records,)
            Record names (relative paths if names repeat).
        filenames : ndarray of shape (n_records,)
            Paths of the header files.
        fs : float or None
            Sampling rate of ``data`` in Hz; None when the records keep rates
            that differ.
        sampling_rates : ndarray of shape (n_records,)
            Sampling rate of each record of ``data`` in Hz; pass it to
            :meth:`SignalConditioner.fit_transform
            <sklearn_crocs.preprocessing.SignalConditioner.fit_transform>` as
            ``sampling_rates``.
        lead_names : list of str
            Lead of each channel (standard leads spelled I, II, III, aVR, aVL,
            aVF, V1-V6).
        excluded : pandas.DataFrame
            Skipped records with the reason (columns record, reason, kind).
        DESCR : str
            Where the records came from.

    See Also
    --------
    load_chapman : Chapman-Shaoxing, with the paper's rhythm groups.
    load_ptbxl : PTB-XL with its metadata files.

    Examples
    --------
    >>> import tempfile
    >>> import numpy as np
    >>> import wfdb
    >>> from sklearn_crocs.datasets import load_wfdb
    >>> rng = np.random.default_rng(0)
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     for name, age in [("r1", 61), ("r2", 47)]:
    ...         wfdb.wrsamp(name, fs=500, units=["mV", "mV"], sig_name=["I", "II"],
    ...                     p_signal=rng.normal(size=(1000, 2)), fmt=["16", "16"],
    ...                     comments=[f"Age: {age}", "Sex: Female"],
    ...                     write_dir=folder)
    ...     bunch = load_wfdb(folder, attributes={"age": "Age", "sex": "Sex"})
    >>> bunch.data.shape, bunch.fs, bunch.lead_names
    ((2, 2, 1000), 500, ['I', 'II'])
    >>> bunch.attributes
        age sex
    0  61.0   F
    1  47.0   F
    """
    on_error = check_on_error(on_error)
    leads = check_leads(leads)
    target_fs = check_fs(target_fs, "target_fs")
    signal_length = check_signal_length(signal_length)
    extract = _attribute_extractor(attributes)
    if not (groups is None or isinstance(groups, str) or callable(groups)):
        raise TypeError(
            f"groups must be None, a comment key (str) or a callable, got {type(groups).__name__}."
        )
    records, names = _resolve_records(path_or_records)
    log = ExclusionLog()
    signal_set = read_wfdb_signals(
        records,
        names,
        leads=leads,
        fs=None,
        target_fs=target_fs,
        signal_length=signal_length,
        on_error=on_error,
        repair_headers=repair_headers,
        verify_checksums=verify_checksums,
        wfdb_defaults=wfdb_defaults,
        log=log,
        cache_dir=cache_dir,
        cache_tag="wfdb",
        verbose=verbose,
        caller="load_wfdb",
        keep_rates=signal_length == "variable" and target_fs is None,
    )
    kept = signal_set.kept
    comments = [info["comments"] for info in signal_set.infos]
    rows = [extract(c) for c in comments]
    attribute_frame = pd.DataFrame.from_records(rows) if rows else pd.DataFrame()
    for column in attribute_frame.columns:
        parser = attribute_parser(column)
        if parser is not None:  # as load_ludb, load_chapman and the command line read them
            attribute_frame[column] = attribute_frame[column].map(parser)
    if groups is None:
        group_ids = np.asarray([names[i] for i in kept])
    elif isinstance(groups, str):
        key = groups.strip().strip("<>").lower()
        group_ids = np.asarray(
            [{k.lower(): v for k, v in parse_comments(c).items()}.get(key) for c in comments]
        )
    else:
        group_ids = np.asarray([groups(c) for c in comments])
    kept_records = [records[i] for i in kept]
    source = (
        os.fspath(path_or_records)
        if isinstance(path_or_records, (str, os.PathLike))
        else f"{len(records)} listed records"
    )
    return Bunch(
        data=signal_set.data,
        attributes=attribute_frame,
        groups=group_ids,
        record_names=np.asarray([names[i] for i in kept]),
        filenames=np.asarray([str(p.with_name(p.name + ".hea")) for p in kept_records]),
        fs=signal_set.fs,
        sampling_rates=np.asarray(
            [signal_set.fs] * len(kept) if signal_set.rates is None else signal_set.rates,
            dtype=np.float64,
        ),
        lead_names=signal_set.lead_names,
        excluded=log.frame(),
        DESCR=(
            f"{len(kept)} WFDB records loaded from {source} "
            f"({len(signal_set.lead_names)} leads at "
            f"{'several rates' if signal_set.fs is None else f'{signal_set.fs} Hz'}); "
            f"{log.count('skipped')} skipped."
        ),
    )
