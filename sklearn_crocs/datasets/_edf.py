"""Reading EDF and EDF+ files (the ``edf`` extra: edfio).

edfio was chosen over pyedflib and MNE (measured on a 12-lead 10-s 500 Hz
EDF+ file): it is pure Python with numpy as its only dependency (0.3 MB
installed, against 13 MB for pyedflib and 29 MB plus matplotlib, jinja2 and
pooch for MNE), reads a record in 0.25 ms (pyedflib 1.9 ms, MNE 1.6 ms),
reads EDF, EDF+ and their annotations, and writes EDF files (which MNE itself
needs edfio for).
"""

import os
from pathlib import Path

import numpy as np
from sklearn.utils import Bunch

from ..preprocessing._signals import check_rate
from ._base import (
    UNIT_SCALE,
    ExclusionLog,
    InvalidRecordError,
    canonical_lead_name,
    check_leads,
    check_on_error,
)
from ._records import RawRecord, check_fs, check_signal_length, collect_signals
from ._wfdb import regular_file_size

EDF_SUFFIXES = (".edf",)
# EDF+ labels name the signal type first ("ECG V2", "EKG II"): dropped to get the lead.
_ECG_PREFIXES = ("ecg ", "ekg ")


def import_edfio():
    try:
        import edfio
    except ImportError as exc:
        raise ImportError(
            "Reading EDF files needs the edfio package: pip install sklearn-crocs[edf]"
        ) from exc
    return edfio


def edf_lead_name(label):
    """The lead of an EDF signal label: ``"ECG V2"`` -> ``"V2"``, ``"ekg avr"`` -> ``"aVR"``."""
    label = str(label).strip()
    if label.lower().startswith(_ECG_PREFIXES):
        label = label[4:].strip()
    return canonical_lead_name(label)


def read_edf_record(path, *, leads=None):
    """Decode one EDF or EDF+ file into a :class:`RawRecord` (signals in mV).

    ``leads`` (canonical names) restricts the signals read, so that a file
    whose other signals (respiration, annotations) have other rates is usable.

    Raises
    ------
    InvalidRecordError
        For an unreadable file, a discontinuous EDF+D recording, signals of
        different rates or unknown physical units; the message names the file.
    """
    edfio = import_edfio()
    path = Path(os.path.expanduser(os.fspath(path)))
    # A link to a regular file is read; a FIFO or device would block or never end.
    regular_file_size(path, path, "EDF file")
    try:
        # EDF asks for ASCII headers; latin-1 decodes any byte, so a stray
        # accent in a patient field does not make the file unreadable.
        edf = edfio.read_edf(path, header_encoding="latin-1")
    except FileNotFoundError:
        raise InvalidRecordError(f"{path}: EDF file not found.") from None
    except Exception as exc:  # edfio raises several types for corrupt files
        raise InvalidRecordError(
            f"{path}: cannot read the EDF file ({type(exc).__name__}: {exc}). It is "
            f"corrupt or not an EDF file; restore it or pass on_error='skip'."
        ) from exc
    if not edf.is_continuous:
        raise InvalidRecordError(
            f"{path}: a discontinuous EDF+D recording; its gaps would be read as "
            f"continuous signal. Export the segments as separate files, or pass "
            f"on_error='skip'."
        )
    signals = list(edf.signals)
    names = [edf_lead_name(signal.label) for signal in signals]
    if leads is not None:
        signals = [s for s, name in zip(signals, names) if name in leads]
        names = [name for name in names if name in leads]
    if not signals:
        raise InvalidRecordError(f"{path}: the EDF file has no signals to read.")
    try:  # a NaN or zero record duration in the header gives such rates
        rates = {check_rate(float(s.sampling_frequency), "its sampling rate") for s in signals}
    except ValueError as exc:
        raise InvalidRecordError(
            f"{path}: {exc} Fix the header (its record duration) or pass on_error='skip'."
        ) from exc
    if len(rates) > 1:
        raise InvalidRecordError(
            f"{path}: the signals {names} have different sampling rates "
            f"({', '.join(f'{r:g}' for r in sorted(rates))} Hz). Pass leads=[...] (or "
            f"--leads) to read leads of one rate."
        )
    scale = []
    for signal, name in zip(signals, names):
        unit = signal.physical_dimension.strip()
        if unit.lower() not in UNIT_SCALE:
            raise InvalidRecordError(
                f"{path}: signal {name!r} has the physical dimension {unit!r}; expected "
                f"mV, uV or V."
            )
        scale.append(UNIT_SCALE[unit.lower()])
    data = np.stack([signal.data for signal in signals]) * np.asarray(scale)[:, np.newaxis]
    fs = rates.pop()
    return RawRecord(
        signal=data,
        fs=int(fs) if fs.is_integer() else fs,
        lead_names=names,
        source=str(path),
    )


def find_edf_files(folder):
    """The EDF files under ``folder`` (recursively), sorted by their relative path."""
    folder = Path(os.path.expanduser(os.fspath(folder)))
    return sorted(
        (p for p in folder.rglob("*") if p.suffix.lower() in EDF_SUFFIXES and p.is_file()),
        key=lambda p: p.relative_to(folder).as_posix(),
    )


def load_edf(
    path_or_files,
    *,
    leads=None,
    target_fs=None,
    signal_length="equal",
    on_error="raise",
    verbose=0,
):
    """Load a folder (or list) of EDF or EDF+ files, one record per file.

    Needs the ``edf`` extra (``pip install sklearn-crocs[edf]``, which
    installs `edfio <https://edfio.readthedocs.io>`_). Signals are converted
    to mV from each signal's physical dimension (mV, uV or V), leads are
    named after the signal labels (``"ECG V2"`` and ``"V2"`` are lead V2),
    and EDF+ annotation signals are ignored. EDF files carry no patient
    attributes that CROCS can use; give them as a table in the order of
    ``record_names``.

    Read more in the :ref:`User Guide <datasets>`.

    Parameters
    ----------
    path_or_files : str, path-like or list of them
        A folder (searched recursively for ``*.edf``), one file, or a list
        of files.
    leads : list of str, default=None
        Leads to load, in this order. None: the leads of the first file,
        which every file must have.
    target_fs : float, default=None
        Resample every record to this rate (Hz). None: all records must have
        the first record's rate.
    signal_length : "equal", "variable" or int, default="equal"
        As in :func:`load_wfdb`.
    on_error : {"raise", "skip"}, default="raise"
        What to do with an unusable file (unreadable, discontinuous EDF+D,
        leads missing or of different rates, unknown units).
    verbose : int, default=0
        Show a progress bar of the files read when > 0.

    Returns
    -------
    data : :class:`~sklearn.utils.Bunch`
        data : ndarray of shape (n_records, n_leads, n_samples), dtype float32
            Signals in mV (a list for ``signal_length="variable"``).
        record_names : ndarray of shape (n_records,)
            File names without the extension (relative paths if names repeat).
        filenames : ndarray of shape (n_records,)
            Paths of the files.
        fs : float
            Sampling rate of ``data`` in Hz.
        lead_names : list of str
            Lead of each channel.
        excluded : pandas.DataFrame
            Skipped files with the reason (columns record, reason, kind).
        DESCR : str
            Where the records came from.

    See Also
    --------
    load_wfdb : The same for WFDB records, with attributes from the headers.

    Examples
    --------
    >>> import tempfile, os
    >>> import numpy as np
    >>> from edfio import Edf, EdfSignal
    >>> from sklearn_crocs.datasets import load_edf
    >>> rng = np.random.default_rng(0)
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     for name in ["r1", "r2"]:
    ...         signals = [EdfSignal(rng.normal(size=5000), 500, label=f"ECG {lead}",
    ...                              physical_dimension="uV", physical_range=(-5000, 5000))
    ...                    for lead in ["I", "II"]]
    ...         Edf(signals).write(os.path.join(folder, f"{name}.edf"))
    ...     bunch = load_edf(folder)
    >>> bunch.data.shape, bunch.fs, bunch.lead_names, bunch.record_names.tolist()
    ((2, 2, 5000), 500, ['I', 'II'], ['r1', 'r2'])
    """
    import_edfio()  # the missing extra is one error, not one skipped record per file
    on_error = check_on_error(on_error)
    leads = check_leads(leads)
    target_fs = check_fs(target_fs, "target_fs")
    signal_length = check_signal_length(signal_length)
    files, names = resolve_edf_files(path_or_files)
    log = ExclusionLog()
    signal_set = collect_signals(
        names,
        lambda i: read_edf_record(files[i], leads=leads),
        leads=leads,
        target_fs=target_fs,
        signal_length=signal_length,
        on_error=on_error,
        log=log,
        verbose=verbose,
        caller="load_edf",
    )
    kept = signal_set.kept
    source = (
        os.fspath(path_or_files)
        if isinstance(path_or_files, (str, os.PathLike))
        else f"{len(files)} listed files"
    )
    return Bunch(
        data=signal_set.data,
        record_names=np.asarray([names[i] for i in kept]),
        filenames=np.asarray([str(files[i]) for i in kept]),
        fs=signal_set.fs,
        lead_names=signal_set.lead_names,
        excluded=log.frame(),
        DESCR=(
            f"{len(kept)} EDF records loaded from {source} "
            f"({len(signal_set.lead_names)} leads at {signal_set.fs} Hz); "
            f"{log.count('skipped')} skipped."
        ),
    )


def resolve_edf_files(path_or_files):
    """``(file paths, record names)`` for a folder, a file or a list of files."""
    if isinstance(path_or_files, (str, os.PathLike)):
        path = Path(os.path.expanduser(os.fspath(path_or_files)))
        if path.is_dir():
            files = find_edf_files(path)
            if not files:
                raise ValueError(f"No EDF files (*.edf) found under {path}.")
            relative = [p.relative_to(path) for p in files]
        else:
            files = relative = [path]
    else:
        try:
            files = relative = [Path(os.path.expanduser(os.fspath(p))) for p in path_or_files]
        except TypeError:
            raise TypeError(
                "path_or_files must be a folder, an EDF file, or a list of EDF files, got "
                f"{type(path_or_files).__name__}."
            ) from None
        if not files:
            raise ValueError("path_or_files is an empty list of files.")
    names = [p.stem for p in files]
    if len(set(names)) != len(names):
        names = [p.with_suffix("").as_posix() for p in relative]
    return files, names
