"""Records of the command line's RECORDS argument, read as frames with their attributes.

Every input (a folder of WFDB and EDF records, one WFDB record, an EDF file,
a ``.npy`` or ``.npz`` array, a bundled data set) becomes candidate records, read one at a
time as :class:`~sklearn_crocs.datasets._records.RawRecord` at their own
rate. Each record is conditioned whole (band-pass, optional notch,
resampling to the working rate, per-lead scaling:
:class:`~sklearn_crocs.preprocessing.SignalConditioner`) or, without
conditioning, resampled only; it is then cut into frames.
"""

import io
import math
import os
import warnings
import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from .._guards import available_memory
from .._utils import _MAX_TABLE_BYTES, _open_regular, _read_regular, _regular_size
from ..datasets import load_ludb, load_ptbxl_sample
from ..datasets._base import ExclusionLog, attribute_parser, parse_comments
from ..datasets._edf import EDF_SUFFIXES, find_edf_files, import_edfio, read_edf_record
from ..datasets._records import RawRecord, collect_signals
from ..datasets._wfdb import (
    MAX_COMPRESSION_RATIO,
    find_wfdb_records,
    read_wfdb_record,
    warn_repaired,
)
from ..preprocessing import (
    SignalConditioner,
    check_signal_layout,
    make_frames,
    normalize_frames,
    resample_signals,
)
from ..preprocessing._signals import check_rate
from ._common import ARRAY_SUFFIXES, BUNDLED, CommandError, note

# collect_signals' warning about skipped records, replaced by one line per record.
_SKIPPED_WARNING = r"Skipped \d+ of \d+ records that could not be used"
# Largest .npy or .npz file of records: a .npy is mapped and read record by
# record, an .npz member is bounded by the memory available, but either ends as
# frames in memory, which no machine holds from a file much larger.
_MAX_ARRAY_BYTES = 1 << 40


@dataclass
class _Source:
    """Candidate records of RECORDS, before any is read."""

    names: list  # one display name per candidate
    read: object  # read(i, leads) -> RawRecord
    description: str
    attributes: object = None  # DataFrame, one row per candidate (bundled data), or None
    groups: object = None  # patient id per candidate, or None (one patient per record)
    in_order: bool = False  # arrays: --labels rows may follow the candidates' order
    from_headers: bool = False  # WFDB: attributes come from the header comments


@dataclass
class _Records:
    """The usable records of RECORDS, as frames at the working rate."""

    names: np.ndarray  # record names
    frames: np.ndarray  # (n_frames, n_leads, frame_length), float32
    frame_record: np.ndarray  # row of names of each frame
    lead_names: list
    attributes: object  # DataFrame, one row per record (may be empty), or None
    groups: np.ndarray  # patient id per record
    all_names: list  # every candidate's name, in order (for --labels in row order)


# ----------------------------------------------------------------- sources


def _bundled(name):
    if name == "bundled:ptbxl-sample":
        data = load_ptbxl_sample()
        names = [str(i) for i in data.ecg_ids]
        what = "the bundled PTB-XL sample"
    else:
        data = load_ludb()
        names = [str(i) for i in data.record_names]
        what = "the bundled LUDB records"
    signals, fs, leads = data.data, float(data.fs), list(data.lead_names)

    def read(i, _leads):
        return RawRecord(signal=signals[i], fs=fs, lead_names=leads, source=f"{name}:{names[i]}")

    return _Source(
        names,
        read,
        what,
        attributes=data.attributes.reset_index(drop=True),
        groups=np.asarray(data.groups),
    )


def _arrays(path, sampling_rate, model_leads):
    """A ``.npy`` array (n_records, n_leads, n_samples), or a ``.npz`` file of one.

    The ``.npz`` file holds ``X`` and optionally ``record_ids`` and ``lead_names``.
    """
    if sampling_rate is None:
        raise CommandError(
            f"{path}: arrays carry no sampling rate; pass --sampling-rate HZ (e.g. "
            f"--sampling-rate 500)."
        )
    try:
        sampling_rate = check_rate(sampling_rate, "--sampling-rate")
    except ValueError as exc:
        raise CommandError(str(exc)) from exc
    try:
        if path.suffix.lower() == ".npz":
            opened = _open_regular(path, limit=_MAX_ARRAY_BYTES, what="array file")
            with opened, zipfile.ZipFile(opened) as archive:
                found = {name.removesuffix(".npy") for name in archive.namelist()}
                # Only the arrays used are read: another member may be a bomb.
                stored = {
                    key: _npz_member(archive, key, path)
                    for key in ("X", "record_ids", "lead_names")
                    if key in found
                }
        else:  # mapped, read record by record; a header larger than the file is refused
            found = {"X"}
            _regular_size(path, limit=_MAX_ARRAY_BYTES, what="array file")
            stored = {"X": np.load(path, mmap_mode="r", allow_pickle=False)}
    except (OSError, ValueError, zipfile.BadZipFile) as exc:  # also object arrays
        raise CommandError(f"cannot read {path}: {exc}") from exc
    if "X" not in stored:
        raise CommandError(
            f"{path} has no array named 'X' (found {', '.join(sorted(found)) or 'none'}); save the "
            f"signals with np.savez(path, X=X, record_ids=ids)."
        )
    X = stored["X"]
    if X.ndim != 3 or not np.issubdtype(X.dtype, np.number):
        raise CommandError(
            f"{path}: expected numbers of shape (n_records, n_leads, n_samples), got "
            f"{X.dtype} of shape {X.shape}. For one lead, save X[:, np.newaxis, :]."
        )
    try:  # swapped axes (wfdb's layout), or a rate that makes records too short
        check_signal_layout(X.shape, sampling_rate, name="X")
    except ValueError as exc:
        raise CommandError(f"{path}: {exc}") from exc
    names = (
        [str(v) for v in stored["record_ids"]]
        if "record_ids" in stored
        else [str(i) for i in range(len(X))]
    )
    if len(names) != len(X) or len(set(names)) != len(names):
        raise CommandError(
            f"{path}: record_ids must name each of the {len(X)} records once, got "
            f"{len(names)} ids ({len(set(names))} distinct)."
        )
    if "lead_names" in stored:
        leads = [str(v) for v in stored["lead_names"]]
        if len(leads) != X.shape[1]:
            raise CommandError(f"{path}: {len(leads)} lead_names for {X.shape[1]} leads in X.")
    elif model_leads is not None and len(model_leads) == X.shape[1]:
        leads = list(model_leads)  # unnamed leads are taken to be in the model's order
    else:
        leads = [str(j + 1) for j in range(X.shape[1])]
    fs = float(sampling_rate)

    def read(i, _leads):
        return RawRecord(signal=X[i], fs=fs, lead_names=leads, source=f"{path}[{names[i]}]")

    return _Source(names, read, str(path), in_order=True)


def _npz_member(archive, key, path):
    """The array ``key`` of an open ``.npz`` archive, its header checked before its data is read.

    The size the header declares must fit in the member, in ``MAX_COMPRESSION_RATIO``
    times its compressed size (and 1 MiB) and in the memory available.
    """
    info = archive.getinfo(f"{key}.npy")
    with archive.open(info) as fh:
        version = np.lib.format.read_magic(fh)
        read_header = (
            np.lib.format.read_array_header_1_0
            if version == (1, 0)
            else np.lib.format.read_array_header_2_0
        )
        shape, _, dtype = read_header(fh)
        declared = math.prod(shape) * dtype.itemsize
        if dtype.hasobject or declared > info.file_size - fh.tell():
            raise ValueError(
                f"its array {key!r} declares {declared} bytes of {dtype} in a member of "
                f"{info.file_size} bytes: the file is damaged or crafted"
            )
        # Plus 1 MiB: record ids and lead names are short strings padded with zeros.
        if declared > MAX_COMPRESSION_RATIO * info.compress_size + (1 << 20):
            raise ValueError(
                f"its array {key!r} declares {declared} bytes, compressed to "
                f"{info.compress_size}: more than {MAX_COMPRESSION_RATIO} times as much as "
                "ECGs compress to. The file is crafted, or mostly padding; save genuine "
                "signals with np.savez (uncompressed)"
            )
    if declared > available_memory():
        raise CommandError(
            f"{path}: its array {key!r} needs {declared / 1e9:.3g} GB, more than the "
            f"{available_memory() / 1e9:.3g} GB of memory available. Split it into smaller files."
        )
    with archive.open(info) as fh:
        return np.lib.format.read_array(fh, allow_pickle=False)


def _files(path, repair_headers):
    """A folder of WFDB records and EDF files, a single EDF file or one WFDB header."""
    if path.is_dir():
        wfdb_records = find_wfdb_records(path)
        edf_files = find_edf_files(path)
        if edf_files:
            import_edfio()  # a missing extra is one error, not one skipped record per file
        if not wfdb_records and not edf_files:
            raise CommandError(f"{path} holds no WFDB records (*.hea) and no EDF files (*.edf).")
        paths = [*wfdb_records, *edf_files]
        relative = [p.relative_to(path) for p in paths]
    elif path.suffix == ".hea":  # one WFDB record, named without its extension
        base = path.with_suffix("")
        wfdb_records, edf_files, paths, relative = [base], [], [base], [Path(base.name)]
    else:
        import_edfio()
        wfdb_records, edf_files, paths, relative = [], [path], [path], [Path(path.name)]
    n_wfdb = len(wfdb_records)
    # EDF records are named without their extension, as WFDB records are.
    names = [p.name if i < n_wfdb else p.stem for i, p in enumerate(paths)]
    if len(set(names)) != len(names):
        names = [
            r.as_posix() if i < n_wfdb else r.with_suffix("").as_posix()
            for i, r in enumerate(relative)
        ]

    def read(i, leads):
        if i < n_wfdb:
            return read_wfdb_record(paths[i], repair_headers=repair_headers)
        return read_edf_record(paths[i], leads=leads)

    return _Source(names, read, str(path), from_headers=n_wfdb > 0)


def _source(args, model_leads=None):
    text = str(args.records)
    if text.startswith("bundled:"):
        if text not in BUNDLED:
            raise CommandError(f"unknown bundled data {text!r}; choose {' or '.join(BUNDLED)}.")
        if args.sampling_rate is not None:
            raise CommandError(f"{text} has its own rate; leave out --sampling-rate.")
        return _bundled(text)
    path = Path(os.path.expanduser(text))
    if not path.exists() and path.name and path.with_name(path.name + ".hea").exists():
        path = path.with_name(path.name + ".hea")  # a WFDB record named without .hea
    if not path.exists():
        raise CommandError(
            f"{path} does not exist; RECORDS is a folder of WFDB or EDF records, a WFDB "
            f"record (its .hea file or its name without it), an .edf, .npy or .npz file, or "
            f"{' or '.join(BUNDLED)}."
        )
    if not path.is_dir() and not path.is_file():  # links are followed
        raise CommandError(
            f"{path} is not a regular file or a folder but a FIFO, device or socket, which "
            "could block or never end; copy the records into a file or folder."
        )
    if path.is_file() and path.suffix.lower() in ARRAY_SUFFIXES:
        return _arrays(path, args.sampling_rate, model_leads)
    if args.sampling_rate is not None:
        raise CommandError(
            "--sampling-rate is for .npy and .npz arrays; WFDB and EDF records give their own rate."
        )
    if path.is_file() and path.suffix.lower() not in EDF_SUFFIXES and path.suffix != ".hea":
        raise CommandError(
            f"{path} is not a folder, a WFDB header (.hea), an .edf, .npy or .npz file."
        )
    return _files(path, not args.no_repair_headers)


# ----------------------------------------------------------------- reading


def _condition_function(settings):
    """``f(signal, rate) -> signal at the working rate``, as recorded in ``settings``."""
    working_rate = settings["working_rate"]
    conditioning = settings["conditioning"]
    if conditioning is None:

        def resample(signal, rate):
            return signal if rate == working_rate else resample_signals(signal, rate, working_rate)

        return resample
    options = {
        "target_rate": working_rate,
        "bandpass": None if conditioning["bandpass"] is None else tuple(conditioning["bandpass"]),
        "notch": conditioning["notch"],
        "normalize": conditioning["normalize"],
    }

    conditioner = SignalConditioner(**options)

    def condition(signal, rate):
        # Whole records, one at a time, each at its own rate (as the Python path's
        # sampling_rates): records may differ in length and rate.
        signal = np.asarray(signal, dtype=np.float64)[np.newaxis]
        return conditioner.fit_transform(signal, sampling_rates=[rate])[0]

    return condition


def read_records(args, settings, *, leads, model_leads=None):
    """The frames of every usable record of RECORDS, prepared as ``settings`` say."""
    source = _source(args, model_leads)
    frame_length = settings["frame_length"]
    working_rate = settings["working_rate"]
    log = ExclusionLog()
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=_SKIPPED_WARNING)
        signal_set = collect_signals(
            source.names,
            lambda i: source.read(i, leads),
            leads=leads,
            target_fs=working_rate,
            signal_length="variable",
            on_error="raise" if args.strict else "skip",
            log=log,
            verbose=0 if args.quiet else 1,
            caller="read",
            condition=_condition_function(settings),
        )
    warn_repaired(source.names, signal_set)
    skipped = log.frame()
    for record, reason in zip(skipped["record"], skipped["reason"]):
        note(f"skipped record {record}: {reason}")
    kept, signals = signal_set.kept, signal_set.data
    long_enough = np.array([x.shape[-1] >= frame_length for x in signals], dtype=bool)
    if not long_enough.all():
        short = [source.names[i] for i in kept[~long_enough]]
        note(
            f"skipped {len(short)} record(s) shorter than one frame ({frame_length} samples "
            f"at {working_rate:g} Hz): {', '.join(short)}"
        )
    if not long_enough.any():
        raise CommandError(f"no record of {source.description} is long enough for one frame.")
    signals = [x for x, ok in zip(signals, long_enough) if ok]
    infos = [info for info, ok in zip(signal_set.infos, long_enough) if ok]
    kept = kept[long_enough]
    frames, _, frame_record = make_frames(signals, frame_length, groups=np.arange(len(kept)))
    if settings["conditioning"] is None and settings["normalize"] != "none":
        frames = normalize_frames(frames, settings["normalize"])
    if source.attributes is not None:
        attributes = source.attributes.iloc[kept].reset_index(drop=True)
    elif source.from_headers:
        # EDF records and headers without comments give an empty row.
        attributes = pd.DataFrame.from_records(
            [parse_comments(info.get("comments", [])) for info in infos],
            index=range(len(infos)),
        )
    else:
        attributes = None
    names = np.asarray([source.names[i] for i in kept])
    if not args.quiet:
        note(
            f"read {len(kept)} of {len(source.names)} records of {source.description}: "
            f"{len(frames)} frames of {len(signal_set.lead_names)} leads x {frame_length} "
            f"samples at {working_rate:g} Hz"
        )
    return _Records(
        names=names,
        frames=np.asarray(frames, dtype=np.float32),
        frame_record=frame_record,
        lead_names=list(signal_set.lead_names),
        attributes=attributes,
        groups=names if source.groups is None else source.groups[kept],
        all_names=list(source.names),
    ), source


# ----------------------------------------------------------------- attributes


def _find_column(columns, name, where):
    """The column of ``columns`` named ``name``, ignoring case."""
    by_lower = {str(c).strip().lower(): c for c in columns}
    if name.lower() not in by_lower:
        raise CommandError(
            f"no attribute {name!r} in {where}; found {', '.join(map(str, columns)) or 'none'}."
        )
    return by_lower[name.lower()]


def _text(value):
    """A header or CSV value as stripped text; None where empty or missing."""
    if isinstance(value, str):
        return value.strip() or None
    if value is None or (isinstance(value, float) and np.isnan(value)):
        return None
    return str(value)


def record_attributes(args, records, source, wanted):
    """The attributes ``wanted`` of each record (NaN where unknown).

    Values are kept as written, except sex (M/F) and age (years); the
    commands read the class attribute's codes with the class map themselves.
    """
    if args.labels is None:
        if records.attributes is None:
            raise CommandError(
                f"{source.description} has no attributes of its own; pass --labels CSV "
                f"with a column per attribute"
                + (
                    " (rows in the order of the records, or --record-column)."
                    if source.in_order
                    else " and the record names in its first column."
                )
            )
        source_table, where = (
            records.attributes,
            ("the header comments" if source.from_headers else source.description),
        )
    else:
        try:
            data = _read_regular(args.labels, limit=_MAX_TABLE_BYTES, what="--labels")
        except ValueError as exc:  # a FIFO, device or a table far too large
            raise CommandError(str(exc)) from exc
        except OSError as exc:
            raise CommandError(f"cannot read --labels {args.labels}: {exc}") from exc
        try:
            table = pd.read_csv(io.BytesIO(data), dtype=str)
        except ValueError as exc:
            raise CommandError(f"cannot read --labels {args.labels}: {exc}") from exc
        where = f"--labels {args.labels}"
        if source.in_order and args.record_column is None:
            # Arrays: row i of the CSV describes record i of the array.
            if len(table) != len(records.all_names):
                raise CommandError(
                    f"{where} has {len(table)} rows for the {len(records.all_names)} records "
                    f"of {source.description}; give one row per record, in order, or name "
                    f"the column of record ids with --record-column."
                )
            names, key = pd.Series(records.all_names), "row order"
        else:
            key = (
                table.columns[0]
                if args.record_column is None
                else _find_column(table.columns, args.record_column, where)
            )
            names = table[key].astype(str).str.strip().str.removesuffix(".hea")
            names = names.str.replace(r"\.edf$", "", case=False, regex=True)
        if names.duplicated().any():
            raise CommandError(
                f"{where}: records named more than once in column {key!r}: "
                f"{', '.join(names[names.duplicated()].unique()[:5])}."
            )
        source_table = table.set_index(names).reindex(records.names).reset_index(drop=True)
    values = {}
    for name in wanted:
        column = source_table[_find_column(source_table.columns, name, where)]
        column = column.map(attribute_parser(name) or _text)  # sex and age as the loaders
        values[name] = column.to_numpy(dtype=object)
    return pd.DataFrame(values, index=range(len(records.names)))


