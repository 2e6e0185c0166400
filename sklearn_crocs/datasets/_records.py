"""The record loop shared by every loader: conform, collect, skip, cache.

A loader supplies a ``read(i)`` callable that decodes its ``i``-th record into
a :class:`RawRecord` (signal in mV, sampling rate, lead names) or raises
:class:`InvalidRecordError`. :func:`collect_signals` then

- selects and orders the leads, checks the sampling rate (or resamples),
  applies the length policy and rejects NaN/inf samples, with an error that
  names the file;
- stores the records one at a time into a preallocated float32 array, or into
  a ``.npy`` file that is memory-mapped on return when a cache folder is given
  (so that neither the first nor the second load needs RAM for the whole set);
- skips unusable records when asked to (``on_error="skip"``), recording the
  reason and warning once with the count.

Cache files are written under a temporary name and renamed into place only
when complete; a cache is keyed by the loader's parameters and the size and
modification time of every source file, so a changed source is never served
from a stale cache.
"""

import hashlib
import json
import os
import re
import stat
import sys
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .._display import escape
from .._utils import _atomic_path, _move_into_place
from ..preprocessing import resample_signals
from ..preprocessing._signals import check_amplitude, check_rate, check_resampling
from ._base import InvalidRecordError, progress

#: Bump when the meaning of cached arrays changes.
CACHE_VERSION = 1

# Largest record file read (a WFDB signal file, an EDF or CSV record), read
# whole into memory: a day of 12 leads at 1 kHz in 16-bit samples is half of it.
MAX_RECORD_BYTES = 4 << 30

_SIGNAL_LENGTH_MODES = ("equal", "variable")


@dataclass
class RawRecord:
    """One decoded record, before leads, rate and length are conformed."""

    signal: np.ndarray  # (n_leads, n_samples), physical units (mV)
    fs: float
    lead_names: list
    source: str  # the file named in error messages
    info: dict = field(default_factory=dict)  # JSON-serialisable extras


@dataclass
class SignalSet:
    """What :func:`collect_signals` returns."""

    data: object  # ndarray (n, leads, T), memmap, or list of (leads, T_i)
    kept: np.ndarray  # indices of the loaded records among the candidates
    infos: list  # RawRecord.info of each kept record
    lead_names: list
    fs: float  # None when the records keep rates that differ
    rates: object = None  # rate of each kept record, or None (a cached set: fs)


def check_signal_length(signal_length):
    if signal_length in _SIGNAL_LENGTH_MODES:
        return signal_length
    if isinstance(signal_length, (int, np.integer)) and not isinstance(signal_length, bool):
        if signal_length < 1:
            raise ValueError(f"signal_length must be >= 1, got {signal_length}.")
        return int(signal_length)
    raise ValueError(
        f"signal_length must be 'equal' (all records must have the same "
        f"length), 'variable' (return a list of arrays) or a positive int "
        f"(crop every record to that many samples), got {signal_length!r}."
    )


def check_fs(value, name):
    if value is None:
        return None
    value = check_rate(value, name)
    return int(value) if value.is_integer() else value


def file_stats(paths):
    """``[path, size, mtime_ns]`` of each existing file (``None`` if missing)."""
    stats = []
    for path in paths:
        try:
            st = os.stat(path)
        except FileNotFoundError:
            stats.append([str(path), None, None])
        else:
            stats.append([str(path), st.st_size, st.st_mtime_ns])
    return stats


def _json_default(value):
    if isinstance(value, np.generic):
        return value.item()
    raise TypeError(f"cannot store {type(value).__name__} in a cache index")


def _is_regular(path):
    """Whether ``path`` is a regular file itself (no link followed)."""
    try:
        return stat.S_ISREG(os.lstat(path).st_mode)
    except OSError:
        return False


class SignalCache:
    """A ``.npy`` + ``.json`` pair in ``cache_dir`` keyed by ``payload``."""

    def __init__(self, cache_dir, tag, payload):
        self.cache_dir = Path(os.path.expanduser(os.fspath(cache_dir)))
        blob = json.dumps(
            {"version": CACHE_VERSION, "tag": tag, **payload},
            sort_keys=True,
            default=str,
        )
        self.key = hashlib.sha256(blob.encode("utf-8")).hexdigest()
        stem = f"{tag}-{self.key[:20]}"
        self.npy_path = self.cache_dir / f"{stem}.npy"
        self.json_path = self.cache_dir / f"{stem}.json"

    def load(self):
        """The cached :class:`SignalSet` (memory-mapped), or None."""
        # Files this package wrote itself: never read through a link (the
        # rebuild replaces the link, not its target) or from a special file.
        if not all(_is_regular(p) for p in (self.npy_path, self.json_path)):
            return None
        try:
            meta = json.loads(self.json_path.read_text(encoding="utf-8"))
            data = np.load(self.npy_path, mmap_mode="r", allow_pickle=False)
        except (OSError, ValueError):
            return None  # unreadable: rebuilt (and atomically replaced) below
        if meta.get("key") != self.key or list(data.shape) != meta.get("shape"):
            return None
        return meta, SignalSet(
            data=data,
            kept=np.asarray(meta["kept"], dtype=np.int64),
            infos=meta["infos"],
            lead_names=meta["lead_names"],
            fs=meta["fs"],
        )

    def save_meta(self, signal_set, skipped):
        meta = {
            "key": self.key,
            "shape": list(signal_set.data.shape),
            "kept": signal_set.kept.tolist(),
            "infos": signal_set.infos,
            "lead_names": list(signal_set.lead_names),
            "fs": signal_set.fs,
            "skipped": skipped,
        }
        with _atomic_path(self.json_path, replace="cache") as tmp:
            tmp.write_text(json.dumps(meta, default=_json_default), encoding="utf-8")


class _MemorySink:
    def __init__(self, n, variable):
        self.n = n
        self.variable = variable
        self.rows = [] if variable else None
        self.count = 0

    def put(self, signal):
        if self.variable:
            self.rows.append(signal)
        else:
            if self.rows is None:
                self.rows = np.empty((self.n, *signal.shape), dtype=np.float32)
            self.rows[self.count] = signal
        self.count += 1

    def finish(self):
        if self.variable:
            return self.rows
        # Kept records fill the first rows; a view avoids copying the array.
        return self.rows[: self.count]

    def abort(self):
        self.rows = None


class _MemmapSink:
    """Writes rows into a temporary .npy, renamed into the cache when done."""

    def __init__(self, n, cache):
        self.n = n
        self.cache = cache
        self.tmp = None
        self.array = None
        self.count = 0

    def put(self, signal):
        if self.array is None:
            self.cache.cache_dir.mkdir(parents=True, exist_ok=True)
            self.tmp = self.cache.npy_path.with_name(
                f".{self.cache.npy_path.name}.{uuid.uuid4().hex}.tmp"
            )
            self.array = np.lib.format.open_memmap(
                self.tmp, mode="w+", dtype=np.float32, shape=(self.n, *signal.shape)
            )
        self.array[self.count] = signal
        self.count += 1

    def finish(self):
        if self.count < self.n:
            # Records were skipped: copy the kept rows into a file of the
            # right size, a chunk at a time.
            with _atomic_path(self.cache.npy_path, replace="cache") as final_tmp:
                out = np.lib.format.open_memmap(
                    final_tmp,
                    mode="w+",
                    dtype=np.float32,
                    shape=(self.count, *self.array.shape[1:]),
                )
                for start in range(0, self.count, 256):
                    stop = min(start + 256, self.count)
                    out[start:stop] = self.array[start:stop]
                out.flush()
                del out
            self._drop_tmp()
        else:
            self.array.flush()
            self.array = None
            _move_into_place(self.tmp, self.cache.npy_path, "cache")
            self.tmp = None
        return np.load(self.cache.npy_path, mmap_mode="r", allow_pickle=False)

    def _drop_tmp(self):
        self.array = None
        if self.tmp is not None and self.tmp.exists():
            self.tmp.unlink()
        self.tmp = None

    def abort(self):
        self._drop_tmp()


class _Conformer:
    """Brings each record to the common leads, rate and length.

    What the caller does not fix (leads, native rate, length) is taken from the
    first usable record, and every later record must match it.
    """

    def __init__(self, leads, fs, target_fs, signal_length, condition=None, keep_rates=False):
        self.condition = condition
        self.keep_rates = keep_rates
        self.requested_leads = leads
        self.leads = leads
        self.expected_fs = fs
        self.fs = fs
        self.target_fs = target_fs
        self.signal_length = signal_length

    def _select_leads(self, raw):
        names = list(raw.lead_names)
        if self.leads is None:
            reference = names
        elif self.requested_leads is not None:
            missing = [lead for lead in self.leads if lead not in names]
            if missing:
                raise InvalidRecordError(
                    f"{raw.source}: does not have the requested lead(s) "
                    f"{missing}; its leads are {names}. Request leads that "
                    f"every record has, or pass on_error='skip'."
                )
            reference = self.leads
        else:
            if sorted(names) != sorted(self.leads):
                raise InvalidRecordError(
                    f"{raw.source}: unexpected lead names {names}; the other "
                    f"records have {list(self.leads)}. Pass leads=[...] to load "
                    f"a subset that every record has, or on_error='skip'."
                )
            reference = self.leads
        signal = np.asarray(raw.signal)[[names.index(lead) for lead in reference]]
        return signal, reference

    def _check_rate(self, raw):
        try:
            check_rate(raw.fs, "its sampling rate")
        except ValueError as exc:
            raise InvalidRecordError(f"{raw.source}: {exc}") from exc
        rate = raw.fs  # as the reader gave it: 500, not 500.0, in the Bunch
        if self.expected_fs is not None and rate != self.expected_fs:
            raise InvalidRecordError(
                f"{raw.source}: sampling rate {rate:g} Hz, expected "
                f"{self.expected_fs:g} Hz. Pass on_error='skip' to leave such "
                f"records out."
            )
        if (
            self.target_fs is None
            and not self.keep_rates
            and self.fs is not None
            and rate != self.fs
        ):
            raise InvalidRecordError(
                f"{raw.source}: sampling rate {rate:g} Hz differs from the "
                f"{self.fs:g} Hz of the other records. Pass target_fs=... to "
                f"resample every record to one rate, or on_error='skip'."
            )
        return rate

    def _apply_length(self, signal, source):
        # "equal" is checked over all records by collect_signals: a length
        # that differs from the first record's is no defect of the record.
        n_samples = signal.shape[-1]
        if self.signal_length not in ("equal", "variable"):
            if n_samples < self.signal_length:
                raise InvalidRecordError(
                    f"{source}: only {n_samples} samples, fewer than "
                    f"signal_length={self.signal_length}. Pass a smaller "
                    f"signal_length or on_error='skip'."
                )
            signal = signal[:, : self.signal_length]
        return signal

    def __call__(self, raw):
        signal, reference = self._select_leads(raw)
        rate = self._check_rate(raw)
        finite = np.isfinite(signal)
        if not finite.all():
            raise InvalidRecordError(
                f"{raw.source}: {int(finite.size - np.count_nonzero(finite))} "
                f"samples are NaN or infinite (WFDB marks missing samples this "
                f"way). Repair the record or pass on_error='skip'."
            )
        try:
            check_amplitude(signal, "the signal")
            if self.target_fs is not None:  # before conditioning or resampling
                check_resampling(signal.shape, rate, self.target_fs, "the record")
        except ValueError as exc:
            raise InvalidRecordError(f"{raw.source}: {exc}") from exc
        if self.condition is not None:
            try:
                signal = self.condition(signal, rate)
            except InvalidRecordError:
                raise
            except ValueError as exc:  # e.g. a record too short to filter: this record's problem
                raise InvalidRecordError(f"{raw.source}: {exc}") from exc
        elif self.target_fs is not None and rate != self.target_fs:
            signal = resample_signals(signal, rate, self.target_fs)
        signal = self._apply_length(signal, raw.source)
        # The first usable record fixes the reference for the others.
        self.leads = reference
        if self.fs is None:
            self.fs = rate
        return np.ascontiguousarray(signal, dtype=np.float32), (
            rate if self.target_fs is None else self.target_fs
        )


# The advice to skip an unusable record, at the end of InvalidRecordError messages.
_SKIP_ADVICE = r",? or (?:pass )?on_error='skip'(?= *\.?$)|,? or on_error='skip'"


def _length_message(lengths, caller):
    """The error for records of several lengths under signal_length="equal"."""
    by_count = sorted(lengths.items(), key=lambda item: -len(item[1]))
    described = "; ".join(
        f"{len(found)} of {n} samples ({', '.join(found[:3])}{', ...' if len(found) > 3 else ''})"
        for n, found in by_count[:5]
    )
    more = f"; and {len(by_count) - 5} other lengths" if len(by_count) > 5 else ""
    return (
        f"{caller}: the records have {len(lengths)} different lengths: {described}{more}. "
        "Pass signal_length='variable' to get a list of arrays, one per record "
        "(SignalConditioner, make_frames and CROCSClusterer(longer_signals='average') take "
        "it), or signal_length=<int> to crop every record to that many samples."
    )


def collect_signals(
    names,
    read,
    *,
    leads=None,
    fs=None,
    target_fs=None,
    signal_length="equal",
    on_error="raise",
    log,
    cache=None,
    verbose=0,
    caller="load",
    condition=None,
    keep_rates=False,
):
    """Read, conform and stack the records ``read(0) ... read(n - 1)``.

    Parameters
    ----------
    names : list of str
        Display name of each candidate record (for the exclusion log).
    read : callable
        ``read(i) -> RawRecord``; raises :class:`InvalidRecordError` for an
        unusable record.
    leads : list of str or None
        Leads to return, in this order. None: the leads of the first usable
        record, which every other record must have too.
    fs : float or None
        Required native sampling rate; None: the first usable record's.
    target_fs : float or None
        Resample every record to this rate.
    signal_length : {"equal", "variable"} or int
    on_error : {"raise", "skip"}
    log : ExclusionLog
    cache : SignalCache or None
    verbose : int
        Show a progress bar of the records read (on stderr) when > 0.
    caller : str
        Name used in progress messages.
    condition : callable or None
        ``condition(signal, rate) -> signal at target_fs``, applied to every
        record (its leads selected, at its own rate) instead of plain
        resampling, e.g. filtering before resampling. Needs ``target_fs``.
    keep_rates : bool
        Without ``target_fs``, let records keep rates that differ (their
        ``SignalSet.rates``; ``fs`` is then None) instead of refusing them.

    Returns
    -------
    SignalSet
    """
    n = len(names)
    if condition is not None and (target_fs is None or cache is not None):
        # Without target_fs the records' rates would have to match before
        # conditioning; a cache could not tell one condition from another.
        raise ValueError("condition needs target_fs and no cache.")
    if cache is not None:
        if signal_length == "variable":
            raise ValueError(
                "cache_dir needs records of one common length; pass "
                "signal_length='equal' or an int together with cache_dir."
            )
        hit = cache.load()
        if hit is not None:
            meta, signal_set = hit
            for record, reason in meta["skipped"]:
                log.add(record, reason, kind="skipped")
            log.warn_skipped(n)
            if verbose:
                print(
                    escape(f"{caller}: {len(signal_set.kept)} records from {cache.npy_path}"),
                    file=sys.stderr,
                )
            return signal_set

    conform = _Conformer(leads, fs, target_fs, signal_length, condition, keep_rates)
    if cache is not None:
        sink = _MemmapSink(n, cache)
    else:
        sink = _MemorySink(n, variable=signal_length == "variable")
    kept, infos, rates, skipped = [], [], [], []
    lengths = {}  # signal_length="equal": samples -> names of the records of that length
    try:
        for i in progress(range(n), verbose=verbose, desc=caller):
            try:
                raw = read(i)
                signal, rate = conform(raw)
            except InvalidRecordError as exc:
                if on_error == "raise":
                    raise
                log.add(names[i], str(exc), kind="skipped")
                skipped.append([str(names[i]), str(exc)])
                continue
            if signal_length == "equal":
                lengths.setdefault(signal.shape[-1], []).append(str(names[i]))
                if len(lengths) > 1:
                    continue  # not stackable: every length is reported below
            sink.put(signal)
            kept.append(i)
            infos.append(raw.info)
            rates.append(rate)
        if len(lengths) > 1:
            raise ValueError(_length_message(lengths, caller))
        if not kept:
            # A count, the first records and one reason: the others' are often the same.
            shown = ", ".join(name for name, _ in skipped[:3])
            raise ValueError(
                f"None of the {n} records could be loaded"
                + (
                    f" ({len(skipped)} unusable: {shown}{', ...' if len(skipped) > 3 else ''})."
                    # Its advice to skip it is moot: every record was skipped.
                    f" The first one: {re.sub(_SKIP_ADVICE, '', skipped[0][1])}"
                    if skipped
                    else "."
                )
            )
        data = sink.finish()
    except BaseException:
        sink.abort()
        raise
    out_fs = target_fs if target_fs is not None else conform.fs
    signal_set = SignalSet(
        data=data,
        kept=np.asarray(kept, dtype=np.int64),
        infos=infos,
        lead_names=list(conform.leads),
        fs=out_fs if len(set(rates)) == 1 else None,
        rates=rates,
    )
    if cache is not None:
        cache.save_meta(signal_set, skipped)
    log.warn_skipped(n)
    return signal_set
