"""Chapman-Shaoxing (Zheng et al., 2020): ``load_chapman`` for both layouts, ``fetch_chapman``.

- The original release (figshare): ``Diagnostics.xlsx`` with one row per
  record (FileName, Rhythm, Beat, PatientAge, Gender, ...) and one CSV per
  record in ``ECGData/`` (or ``ECGDataDenoised/``), 5000 rows x 12 leads in
  microvolts.
- The WFDB form (PhysioNet's "ecg-arrhythmia" release and the CinC 2020/2021
  challenge sets): ``.hea`` + ``.mat`` per record with ``#Age``, ``#Sex`` and
  ``#Dx`` (SNOMED CT codes) header comments.

Rhythms are grouped as in the paper (Zheng et al.'s merging into four
classes): AFIB (AFIB, AF = atrial flutter), GSVT (SVT, AT, AVNRT, AVRT, SAAWR,
ST), SB, SR (SR, SI/SA = sinus irregularity).
"""

import io
import os
from pathlib import Path

import numpy as np
import pandas as pd
from sklearn.utils import Bunch

from .._utils import _read_regular, _warn
from ._base import (
    STANDARD_LEADS,
    ExclusionLog,
    InvalidRecordError,
    canonical_lead_name,
    check_leads,
    check_on_error,
    get_data_home,
    load_descr,
    parse_age,
    parse_comments,
    parse_sex,
    path_inside,
    progress,
)
from ._download import CHECKSUM_FILE, check_fetch_args, checksum_list, ensure_files
from ._records import (
    MAX_RECORD_BYTES,
    RawRecord,
    SignalCache,
    check_fs,
    check_signal_length,
    collect_signals,
    file_stats,
)
from ._wfdb import (
    find_wfdb_records,
    read_header_comments,
    read_wfdb_signals,
    regular_file_size,
)

CHAPMAN_URL = "https://physionet.org/files/ecg-arrhythmia/1.0.0/"
CHAPMAN_FOLDER = "ecg-arrhythmia-1.0.0"

#: Rhythm acronyms of the original release (Diagnostics.xlsx, RhythmNames.xlsx)
#: and their CROCS group.
CHAPMAN_RHYTHM_GROUPS = {
    "AFIB": "AFIB",  # atrial fibrillation
    "AF": "AFIB",  # atrial flutter
    "SVT": "GSVT",  # supraventricular tachycardia
    "AT": "GSVT",  # atrial tachycardia
    "AVNRT": "GSVT",  # atrioventricular node reentrant tachycardia
    "AVRT": "GSVT",  # atrioventricular reentrant tachycardia
    "SAAWR": "GSVT",  # sinus atrium to atrial wandering rhythm
    "ST": "GSVT",  # sinus tachycardia
    "SB": "SB",  # sinus bradycardia
    "SR": "SR",  # sinus rhythm
    "SI": "SR",  # sinus irregularity
    "SA": "SR",  # sinus arrhythmia (another name for SI)
}

#: SNOMED CT codes of the same rhythms, as used in the WFDB ``#Dx`` comments.
CHAPMAN_SNOMED_GROUPS = {
    "164889003": "AFIB",  # atrial fibrillation
    "164890007": "AFIB",  # atrial flutter
    "426761007": "GSVT",  # supraventricular tachycardia
    "713422000": "GSVT",  # atrial tachycardia
    "233896004": "GSVT",  # AV node reentrant tachycardia
    "233897008": "GSVT",  # AV reentrant tachycardia
    "195101003": "GSVT",  # sinus atrium to atrial wandering rhythm
    "427084000": "GSVT",  # sinus tachycardia
    "426177001": "SB",  # sinus bradycardia
    "426783006": "SR",  # sinus rhythm
    "427393009": "SR",  # sinus irregularity / arrhythmia
}

#: Label of records kept with ``unmapped="keep"``.
UNMAPPED_LABEL = "OTHER"

_LAYOUTS = ("auto", "original", "wfdb")
_UNMAPPED = ("drop", "keep", "raise")
_CSV_UNITS = {"uV": 1e-3, "mV": 1.0}
_XLSX_COLUMNS = ("FileName", "Rhythm", "PatientAge", "Gender")


def _group_tables(rhythm_groups):
    acronyms = dict(CHAPMAN_RHYTHM_GROUPS)
    codes = dict(CHAPMAN_SNOMED_GROUPS)
    if rhythm_groups is not None:
        if not hasattr(rhythm_groups, "items"):
            raise TypeError(
                "rhythm_groups must be a dict {rhythm acronym or SNOMED code: "
                f"group}}, got {type(rhythm_groups).__name__}."
            )
        for key, group in rhythm_groups.items():
            key = str(key).strip()
            (codes if key.isdigit() else acronyms)[key if key.isdigit() else key.upper()] = group
    return acronyms, codes


def _rhythm_from_dx(dx, codes):
    """``(group or None, reason)`` from a ``#Dx`` value such as "426177001,..."."""
    found = [c.strip() for c in str(dx or "").split(",") if c.strip()]
    groups = sorted({codes[c] for c in found if c in codes})
    if len(groups) == 1:
        return groups[0], None
    if not groups:
        return None, f"no AFIB/GSVT/SB/SR rhythm among the Dx codes {dx!r}"
    return None, f"Dx codes {dx!r} name several rhythm groups {groups}"


def _rhythm_from_acronym(rhythm, acronyms):
    key = str(rhythm).strip().upper()
    if key in acronyms:
        return acronyms[key], None
    return None, f"rhythm {rhythm!r} is not one of the grouped rhythms"


def _apply_unmapped(names, groups, reasons, unmapped, log):
    """Keep mask after handling records without a rhythm group."""
    keep = np.ones(len(names), dtype=bool)
    unmapped_idx = [i for i, g in enumerate(groups) if g is None]
    if not unmapped_idx:
        return keep
    if unmapped == "raise":
        detail = "; ".join(f"{names[i]}: {reasons[i]}" for i in unmapped_idx[:5])
        raise ValueError(
            f"{len(unmapped_idx)} record(s) have no AFIB/GSVT/SB/SR rhythm: "
            f"{detail}. Pass unmapped='drop' to leave them out, "
            f"unmapped='keep' to label them {UNMAPPED_LABEL!r}, or extend the "
            f"grouping with rhythm_groups={{...}}."
        )
    for i in unmapped_idx:
        if unmapped == "keep":
            groups[i] = UNMAPPED_LABEL
        else:
            log.add(names[i], reasons[i], kind="filtered")
            keep[i] = False
    if unmapped == "drop":
        _warn(
            f"Left out {len(unmapped_idx)} of {len(names)} records whose rhythm "
            f"is not in the paper's four groups (unmapped='drop'), e.g. "
            f"{names[unmapped_idx[0]]}: {reasons[unmapped_idx[0]]}. They are "
            f"listed in the Bunch's 'excluded' DataFrame; unmapped='keep' "
            f"labels them {UNMAPPED_LABEL!r} instead."
        )
    return keep


def _read_xlsx(path):
    try:
        import openpyxl  # noqa: F401
    except ImportError:
        raise ImportError(
            f"Reading {path.name} needs the openpyxl package: pip install "
            f"openpyxl (or pip install 'sklearn-crocs[xlsx]')."
        ) from None
    regular_file_size(path, path, "spreadsheet")
    try:
        table = pd.read_excel(path, sheet_name=0, engine="openpyxl")
    except Exception as exc:
        raise InvalidRecordError(f"{path}: cannot be read as a spreadsheet ({exc}).") from exc
    missing = [c for c in _XLSX_COLUMNS if c not in table.columns]
    if missing:
        raise InvalidRecordError(
            f"{path}: missing column(s) {missing}; expected the Chapman "
            f"Diagnostics.xlsx columns (FileName, Rhythm, Beat, PatientAge, "
            f"Gender, ...)."
        )
    table["FileName"] = table["FileName"].astype(str).str.strip()
    if table["FileName"].duplicated().any():
        dup = table.loc[table["FileName"].duplicated(), "FileName"].tolist()[:5]
        raise InvalidRecordError(f"{path}: duplicate FileName values {dup}.")
    return table


def _read_chapman_csv(path, scale):
    """One ``ECGData`` CSV (rows = samples, columns = leads) as a RawRecord."""
    if not path.exists():
        raise InvalidRecordError(f"{path}: ECG file not found. Restore it or pass on_error='skip'.")
    regular_file_size(path, path, "ECG file")  # never a device or pipe: unbounded
    try:  # the bytes checked are the bytes parsed
        data = _read_regular(path, limit=MAX_RECORD_BYTES, what="ECG file")
        first = data.split(b"\n", 1)[0].decode("utf-8", errors="replace").strip().split(",")
        has_header = bool(first) and all(
            canonical_lead_name(t) in STANDARD_LEADS for t in first if t.strip()
        )
        values = pd.read_csv(io.BytesIO(data), header=0 if has_header else None)
        signal = values.to_numpy(dtype=np.float64).T * scale
    except (ValueError, pd.errors.ParserError, pd.errors.EmptyDataError) as exc:
        raise InvalidRecordError(
            f"{path}: cannot be read as a numeric CSV ({exc}). Restore it or pass on_error='skip'."
        ) from exc
    if has_header:
        lead_names = [canonical_lead_name(c) for c in values.columns]
    elif signal.shape[0] == len(STANDARD_LEADS):
        lead_names = list(STANDARD_LEADS)
    else:
        raise InvalidRecordError(
            f"{path}: {signal.shape[0]} columns and no header row; expected the "
            f"12 leads {list(STANDARD_LEADS)}."
        )
    return RawRecord(signal=signal, fs=500, lead_names=lead_names, source=str(path))


def _detect_layout(path, layout):
    if layout not in _LAYOUTS:
        raise ValueError(f"layout must be one of {_LAYOUTS}, got {layout!r}.")
    if layout != "auto":
        return layout
    if (path / "Diagnostics.xlsx").exists():
        return "original"
    if next(path.rglob("*.hea"), None) is not None:
        return "wfdb"
    raise FileNotFoundError(
        f"{path} holds neither Diagnostics.xlsx (original Chapman release) nor "
        f"WFDB headers (*.hea). Download Chapman-Shaoxing or call fetch_chapman()."
    )


def _record_names(records):
    """``records`` as a list of names; one string is one record, not its characters."""
    if records is None:
        return None
    if isinstance(records, str):
        return [records]
    if isinstance(records, np.ndarray):
        records = np.atleast_1d(records)
    return [str(r) for r in records]


def _select(candidates, records, what):
    if records is None:
        return candidates
    wanted = _record_names(records)
    unknown = sorted(set(wanted) - set(candidates))
    if unknown:
        raise ValueError(f"records {unknown[:10]} are not in the {what}.")
    return wanted


def _load_original(
    path,
    *,
    records,
    leads,
    target_fs,
    denoised,
    csv_units,
    acronyms,
    unmapped,
    signal_length,
    on_error,
    cache_dir,
    verbose,
    log,
):
    table = _read_xlsx(path / "Diagnostics.xlsx")
    table = table.set_index("FileName", drop=False)
    names = _select(table.index.tolist(), records, "Diagnostics.xlsx FileName column")
    table = table.loc[names]
    groups, reasons = zip(*(_rhythm_from_acronym(r, acronyms) for r in table["Rhythm"]))
    groups, reasons = list(groups), list(reasons)
    keep = _apply_unmapped(names, groups, reasons, unmapped, log)
    table = table[keep]
    groups = [g for g, k in zip(groups, keep) if k]
    if table.empty:
        raise ValueError(
            f"No record in {path / 'Diagnostics.xlsx'} has an AFIB/GSVT/SB/SR "
            f"rhythm; see unmapped= and rhythm_groups=."
        )
    folder = path / ("ECGDataDenoised" if denoised else "ECGData")
    source = f"{path / 'Diagnostics.xlsx'} (column FileName)"
    files = [path_inside(folder, f"{name}.csv", source) for name in table.index]
    scale = _CSV_UNITS[csv_units]
    cache = None
    if cache_dir is not None:
        cache = SignalCache(
            cache_dir,
            "chapman-original",
            {
                "sources": file_stats(files),
                "params": [leads, target_fs, on_error, csv_units, signal_length],
            },
        )
    signal_set = collect_signals(
        table.index.tolist(),
        lambda i: _read_chapman_csv(files[i], scale),
        leads=leads,
        fs=500,
        target_fs=target_fs,
        signal_length=signal_length,
        on_error=on_error,
        log=log,
        cache=cache,
        verbose=verbose,
        caller="load_chapman",
    )
    kept = table.iloc[signal_set.kept]
    attributes = pd.DataFrame(
        {
            "rhythm": [groups[i] for i in signal_set.kept],
            "sex": [parse_sex(v) for v in kept["Gender"]],
            "age": [parse_age(v) for v in kept["PatientAge"]],
        }
    )
    metadata = kept.rename(columns={"Rhythm": "rhythm_source"})
    metadata.index.name = "record_name"
    return signal_set, attributes, metadata, kept.index.to_numpy().astype(str)


def _load_wfdb_layout(
    path,
    *,
    records,
    leads,
    target_fs,
    codes,
    unmapped,
    signal_length,
    on_error,
    repair_headers,
    cache_dir,
    verbose,
    log,
):
    found = find_wfdb_records(path)
    by_name = {p.name: p for p in found}
    names = _select(list(by_name), records, f"WFDB records under {path}")
    paths = [by_name[n] for n in names]
    # Attributes first, from the header comments alone, so that unmapped
    # records are removed before any signal is decoded. A header that cannot
    # even be read is left to the signal reader, which reports it (or skips it
    # with on_error="skip") like any other unusable record.
    comments, groups, reasons, readable = [], [], [], []
    for record in progress(paths, verbose=verbose, desc="load_chapman", unit="header"):
        try:
            parsed = parse_comments(read_header_comments(record))
        except InvalidRecordError:
            parsed = None
        readable.append(parsed is not None)
        comments.append(parsed or {})
        group, reason = _rhythm_from_dx((parsed or {}).get("Dx"), codes)
        groups.append(group)
        reasons.append(reason)
    mapped_or_unreadable = [g if ok else "?" for g, ok in zip(groups, readable)]
    keep = _apply_unmapped(names, mapped_or_unreadable, reasons, unmapped, log)
    chosen = np.flatnonzero(keep).tolist()
    if not chosen:
        raise ValueError(
            f"No record under {path} has an AFIB/GSVT/SB/SR rhythm; see "
            f"unmapped= and rhythm_groups=."
        )
    chosen_groups = [mapped_or_unreadable[i] for i in chosen]
    signal_set = read_wfdb_signals(
        [paths[i] for i in chosen],
        [names[i] for i in chosen],
        leads=leads,
        fs=None,
        target_fs=target_fs,
        signal_length=signal_length,
        on_error=on_error,
        repair_headers=repair_headers,
        log=log,
        cache_dir=cache_dir,
        cache_tag="chapman-wfdb",
        verbose=verbose,
        caller="load_chapman",
    )
    kept = [chosen[i] for i in signal_set.kept]
    parsed = [comments[i] for i in kept]
    attributes = pd.DataFrame(
        {
            "rhythm": [chosen_groups[i] for i in signal_set.kept],
            "sex": [parse_sex(c.get("Sex")) for c in parsed],
            "age": [parse_age(c.get("Age")) for c in parsed],
        }
    )
    record_names = np.asarray([names[i] for i in kept])
    metadata = pd.DataFrame(
        {
            "dx": [c.get("Dx") for c in parsed],
            "age_source": [c.get("Age") for c in parsed],
            "sex_source": [c.get("Sex") for c in parsed],
        },
        index=pd.Index(record_names, name="record_name"),
    )
    return signal_set, attributes, metadata, record_names


def load_chapman(
    path,
    *,
    layout="auto",
    records=None,
    leads=None,
    target_fs=None,
    unmapped="drop",
    rhythm_groups=None,
    denoised=False,
    csv_units="uV",
    signal_length="equal",
    on_error="raise",
    repair_headers=True,
    cache_dir=None,
    verbose=0,
    return_X_y=False,
):
    """Load the Chapman-Shaoxing 12-lead ECG database with the paper's rhythms.

    Reads either the original release (``Diagnostics.xlsx`` + ``ECGData/*.csv``)
    or the WFDB form (``.hea`` + ``.mat`` with ``#Age``/``#Sex``/``#Dx``
    comments, e.g. PhysioNet's ecg-arrhythmia release or the CinC 2020/2021
    sets), and groups rhythms as in the paper (Zheng et al., 2020):

    ======  ================================================================
    group   rhythms (acronym of the original release / SNOMED CT code)
    ======  ================================================================
    AFIB    AFIB 164889003, AF (atrial flutter) 164890007
    GSVT    SVT 426761007, AT 713422000, AVNRT 233896004, AVRT 233897008,
            SAAWR 195101003, ST 427084000
    SB      SB 426177001
    SR      SR 426783006, SI/SA 427393009
    ======  ================================================================

    A WFDB record whose ``#Dx`` codes name exactly one group gets that group;
    codes of other conditions (e.g. ST-T changes) are ignored. Records with no
    group, or with codes of two groups, are *unmapped*: their original rhythm
    is kept in ``metadata`` and ``unmapped`` decides what happens to them.
    Attributes are read and unmapped records removed before any signal is
    decoded.

    Read more in the :ref:`User Guide <datasets>`.

    Parameters
    ----------
    path : str or path-like
        The database folder.
    layout : {"auto", "original", "wfdb"}, default="auto"
        "auto" picks "original" when ``Diagnostics.xlsx`` exists, else "wfdb"
        (headers searched recursively).
    records : str or list of str, default=None
        Only these records (FileName values, or WFDB record names; one
        string is one record).
    leads : list of str, default=None
        Leads to load, in this order; None for the 12 standard leads.
    target_fs : float, default=None
        Resample to this rate; the paper uses 250 (from 500 Hz).
    unmapped : {"drop", "keep", "raise"}, default="drop"
        Records whose rhythm has no group: leave them out (listed in
        ``excluded``, with a warning), keep them with rhythm ``"OTHER"``, or
        raise a ValueError.
    rhythm_groups : dict, default=None
        Extra or replacement entries ``{acronym or SNOMED code: group}`` for
        the tables above, e.g. ``{"164909002": "AFIB"}``.
    denoised : bool, default=False
        Original layout: read ``ECGDataDenoised/`` instead of ``ECGData/``.
    csv_units : {"uV", "mV"}, default="uV"
        Unit of the original CSV files (the release stores microvolts);
        ``data`` is always in mV.
    signal_length : "equal", "variable" or int, default="equal"
        As in :func:`load_wfdb`: "equal": all records must have the same
        length (records of several lengths raise one error that counts them,
        whatever ``on_error``); an int crops every record to that many samples
        (at the output rate; shorter records are errors); "variable":
        ``data`` is a list of arrays of shape (n_leads, n_samples_i).
    on_error : {"raise", "skip"}, default="raise"
        Unusable record (missing/malformed file, NaN, other leads, rate, or
        fewer samples than an int ``signal_length``): raise an
        :class:`InvalidRecordError` naming the file, or skip it with a
        warning that counts the skipped records.
    repair_headers : bool, default=True
        WFDB layout: recover Georgia/CinC-style record lines (see
        :func:`load_wfdb`).
    cache_dir : str or path-like, default=None
        Folder for a ``.npy`` cache of the decoded signals (``data`` is then a
        read-only memory map).
    verbose : int, default=0
        Show progress bars of the headers and records read (tqdm, on stderr)
        when > 0.
    return_X_y : bool, default=False
        Return ``(data, attributes)`` instead of a Bunch.

    Returns
    -------
    data : :class:`~sklearn.utils.Bunch`
        data : ndarray of shape (n_records, n_leads, n_samples), dtype float32
            Signals in mV, channel-first.
        attributes : pandas.DataFrame
            ``rhythm`` (AFIB/GSVT/SB/SR, or "OTHER"), ``sex`` ("M"/"F") and
            ``age`` (years, NaN when unknown).
        groups : ndarray of str
            Patient ids: the record name (one record per patient).
        record_names : ndarray of str
            Name of each record (the file name without extension).
        fs : float
            Sampling rate in Hz (``target_fs`` when given).
        lead_names : list of str
            Names of the leads, in the order of ``data``'s second axis.
        metadata : pandas.DataFrame
            Original release: the rows of Diagnostics.xlsx (``Rhythm`` renamed
            ``rhythm_source``). WFDB: the ``dx`` codes and the raw age/sex.
        excluded : pandas.DataFrame
            Records left out and why ("filtered": unmapped rhythm; "skipped":
            unusable files).
        DESCR : str
            Description of the dataset, its licence and references.

    (data, attributes) : tuple if ``return_X_y`` is True

    See Also
    --------
    fetch_chapman : Download the WFDB release and load it.
    sklearn_crocs.preprocessing.leads_as_instances : Each lead an instance, as
        the paper does for Chapman (after resampling and min-max scaling).

    Examples
    --------
    Two records written in the WFDB layout, with ``#Dx`` SNOMED codes:

    >>> import tempfile
    >>> import wfdb
    >>> from sklearn_crocs.datasets import load_chapman, load_ludb
    >>> ludb = load_ludb()
    >>> snomed = {"SR": "426783006", "SB": "426177001"}
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     for i in (0, 1):
    ...         rhythm, sex, age = ludb.attributes.iloc[i]
    ...         wfdb.wrsamp(
    ...             f"JS{i + 1:05d}", fs=500, units=["mV"] * 12,
    ...             sig_name=ludb.lead_names, p_signal=ludb.data[i].T.astype(float),
    ...             fmt=["16"] * 12, write_dir=folder,
    ...             comments=[f"Age: {age:.0f}", f"Sex: {sex}", f"Dx: {snomed[rhythm]}"])
    ...     chapman = load_chapman(folder, target_fs=250)
    >>> chapman.data.shape
    (2, 12, 2500)
    >>> chapman.attributes
      rhythm sex   age
    0     SR   M  53.0
    1     SB   M  76.0
    """
    path = Path(os.path.expanduser(os.fspath(path)))
    if not path.is_dir():
        raise FileNotFoundError(f"{path} is not a folder.")
    layout = _detect_layout(path, layout)
    if unmapped not in _UNMAPPED:
        raise ValueError(f"unmapped must be one of {_UNMAPPED}, got {unmapped!r}.")
    if csv_units not in _CSV_UNITS:
        raise ValueError(f"csv_units must be 'uV' or 'mV', got {csv_units!r}.")
    on_error = check_on_error(on_error)
    signal_length = check_signal_length(signal_length)
    leads = check_leads(leads) or list(STANDARD_LEADS)
    target_fs = check_fs(target_fs, "target_fs")
    acronyms, codes = _group_tables(rhythm_groups)
    log = ExclusionLog()
    if layout == "original":
        signal_set, attributes, metadata, names = _load_original(
            path,
            records=records,
            leads=leads,
            target_fs=target_fs,
            denoised=denoised,
            csv_units=csv_units,
            acronyms=acronyms,
            unmapped=unmapped,
            signal_length=signal_length,
            on_error=on_error,
            cache_dir=cache_dir,
            verbose=verbose,
            log=log,
        )
    else:
        signal_set, attributes, metadata, names = _load_wfdb_layout(
            path,
            records=records,
            leads=leads,
            target_fs=target_fs,
            codes=codes,
            unmapped=unmapped,
            signal_length=signal_length,
            on_error=on_error,
            repair_headers=repair_headers,
            cache_dir=cache_dir,
            verbose=verbose,
            log=log,
        )
    if return_X_y:
        return signal_set.data, attributes
    return Bunch(
        data=signal_set.data,
        attributes=attributes,
        groups=names.copy(),
        record_names=names,
        fs=signal_set.fs,
        lead_names=signal_set.lead_names,
        metadata=metadata,
        excluded=log.frame(),
        DESCR=load_descr("chapman.rst"),
    )


def fetch_chapman(
    data_home=None,
    *,
    download_if_missing=True,
    records=None,
    leads=None,
    target_fs=None,
    unmapped="drop",
    rhythm_groups=None,
    on_error="raise",
    cache_dir=None,
    n_retries=3,
    delay=1.0,
    n_jobs=1,
    base_url=CHAPMAN_URL,
    sha256sums_sha256=None,
    verbose=0,
    return_X_y=False,
):
    """Download Chapman-Shaoxing (WFDB form) from PhysioNet and load it.

    Fetches the ``.hea``/``.mat`` files of PhysioNet's "A large scale 12-lead
    electrocardiogram database for arrhythmia study" (ecg-arrhythmia 1.0.0,
    Zheng et al.; 45,152 records that include the Chapman-Shaoxing records of
    the paper) into ``<data_home>/ecg-arrhythmia-1.0.0``, verified against its
    ``SHA256SUMS.txt``, with resumable downloads. The original figshare
    release (``Diagnostics.xlsx`` + ``ECGData``) has no checksum list; download
    it yourself and use :func:`load_chapman`.

    Read more in the :ref:`User Guide <datasets>`.

    Parameters
    ----------
    data_home : str or path-like, default=None
        Download folder, see :func:`get_data_home`.
    download_if_missing : bool, default=True
        If False, raise an OSError instead of downloading missing files.
    records : str or list of str, default=None
        Only download and load these records (e.g. ``["JS00001"]``; one
        string is one record).
    leads, target_fs, unmapped, rhythm_groups, on_error, cache_dir, return_X_y
        As in :func:`load_chapman`.
    n_retries : int, default=3
        Further attempts per file after a failure.
    delay : float, default=1.0
        Seconds between attempts.
    n_jobs : int, default=1
        Files downloaded in parallel (threads).
    base_url : str, default="https://physionet.org/files/ecg-arrhythmia/1.0.0/"
        Where the PhysioNet file tree is served.
    sha256sums_sha256 : str, default=None
        SHA-256 (hex) of the release's ``SHA256SUMS.txt``; ``None``: trust on
        first use, as in :func:`fetch_ptbxl`.
    verbose : int, default=0
        Show progress bars of the downloads and of the records read (tqdm,
        on stderr) when > 0.

    Returns
    -------
    data : :class:`~sklearn.utils.Bunch`
        As returned by :func:`load_chapman`.

    Examples
    --------
    >>> from sklearn_crocs.datasets import fetch_chapman
    >>> chapman = fetch_chapman(target_fs=250)  # doctest: +SKIP
    """
    base_url = check_fetch_args(n_retries, delay, n_jobs, base_url, sha256sums_sha256)
    root = Path(get_data_home(data_home)) / CHAPMAN_FOLDER
    options = {
        "download_if_missing": download_if_missing,
        "n_retries": n_retries,
        "delay": delay,
        "name": "Chapman-Shaoxing",
    }
    checksums = checksum_list(root, base_url, expected_sha256=sha256sums_sha256, **options)
    records = _record_names(records)
    wanted = None if records is None else set(records)
    relpaths = [
        p
        for p in checksums
        if p.endswith((".hea", ".mat")) and (wanted is None or Path(p).stem in wanted)
    ]
    if wanted is not None:
        unknown = sorted(wanted - {Path(p).stem for p in relpaths})
        if unknown:
            raise ValueError(f"records {unknown[:10]} are not listed in {root / CHECKSUM_FILE}.")
    if not relpaths:
        raise OSError(f"{root / CHECKSUM_FILE} lists no .hea/.mat files.")
    ensure_files(
        root,
        base_url,
        relpaths,
        checksums,
        n_jobs=n_jobs,
        verbose=verbose,
        **options,
    )
    return load_chapman(
        root,
        layout="wfdb",
        records=records,
        leads=leads,
        target_fs=target_fs,
        unmapped=unmapped,
        rhythm_groups=rhythm_groups,
        on_error=on_error,
        cache_dir=cache_dir,
        verbose=verbose,
        return_X_y=return_X_y,
    )
