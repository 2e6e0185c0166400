"""PTB-XL (Wagner et al., 2020) in its PhysioNet layout: ``load_ptbxl`` and ``fetch_ptbxl``.

The folder holds ``ptbxl_database.csv`` (one row per ECG), ``scp_statements.csv``
(the SCP-ECG statements and their diagnostic classes) and the WFDB records in
``records100/`` (100 Hz) and ``records500/`` (500 Hz). CROCS uses the five
diagnostic superclasses of Strodthoff et al. (2020) and keeps the records with
exactly one of them.
"""

import ast
import numbers
import os
from pathlib import Path

import numpy as np
import pandas as pd
from sklearn.utils import Bunch

from ._base import (
    STANDARD_LEADS,
    ExclusionLog,
    InvalidRecordError,
    check_leads,
    check_on_error,
    get_data_home,
    load_descr,
    path_inside,
)
from ._download import check_fetch_args, checksum_list, ensure_files
from ._records import check_signal_length
from ._wfdb import read_wfdb_signals, regular_file_size

PTBXL_URL = "https://physionet.org/files/ptb-xl/1.0.3/"
PTBXL_FOLDER = "ptb-xl-1.0.3"

#: The diagnostic superclasses of PTB-XL (scp_statements.csv's diagnostic_class).
PTBXL_SUPERCLASSES = ("CD", "HYP", "MI", "NORM", "STTC")

#: PTB-XL stores ages above 89 as 300; the loader reports them as this age.
PTBXL_AGE_CAP = 90.0

_DATABASE_COLUMNS = (
    "patient_id",
    "age",
    "sex",
    "scp_codes",
    "strat_fold",
    "filename_lr",
    "filename_hr",
)
_STATEMENT_COLUMNS = ("diagnostic", "diagnostic_class")
_FILENAME_COLUMN = {100: "filename_lr", 500: "filename_hr"}


def _read_csv(path, what, **kwargs):
    if not path.exists():
        raise FileNotFoundError(
            f"{path} not found: {path.parent} is not a PTB-XL folder (it needs "
            f"{what}). Download PTB-XL from https://physionet.org/content/ptb-xl/ "
            f"or call fetch_ptbxl()."
        )
    regular_file_size(path, path, what)  # never a device or pipe: unbounded
    try:
        return pd.read_csv(path, **kwargs)
    except (ValueError, pd.errors.ParserError) as exc:
        raise InvalidRecordError(f"{path}: cannot be read as CSV ({exc}).") from exc


def _parse_scp_codes(value, where):
    try:
        codes = ast.literal_eval(value) if isinstance(value, str) else value
    except (ValueError, SyntaxError):
        codes = None
    if not isinstance(codes, dict):
        raise InvalidRecordError(
            f"{where}: scp_codes {value!r} is not a dict such as \"{{'NORM': 100.0, 'SR': 0.0}}\"."
        )
    return codes


def _read_ptbxl_tables(path):
    """``ptbxl_database.csv`` with parsed codes and each record's superclasses.

    Returns the database (indexed by ``ecg_id``, ``scp_codes`` as dicts, and a
    ``diagnostic_superclasses`` column holding the sorted list of superclasses
    of each record's diagnostic statements).
    """
    path = Path(os.path.expanduser(os.fspath(path)))
    db_path = path / "ptbxl_database.csv"
    database = _read_csv(db_path, "ptbxl_database.csv")
    statements = _read_csv(path / "scp_statements.csv", "scp_statements.csv", index_col=0)
    for table, where, columns in (
        (database, db_path, ("ecg_id",) + _DATABASE_COLUMNS),
        (statements, path / "scp_statements.csv", _STATEMENT_COLUMNS),
    ):
        missing = [c for c in columns if c not in table.columns]
        if missing:
            raise InvalidRecordError(
                f"{where}: missing column(s) {missing}; is this the PhysioNet PTB-XL file?"
            )
    if database["ecg_id"].duplicated().any():
        dup = database.loc[database["ecg_id"].duplicated(), "ecg_id"].tolist()[:5]
        raise InvalidRecordError(f"{db_path}: duplicate ecg_id values {dup}.")
    database = database.set_index("ecg_id")
    database["scp_codes"] = [
        _parse_scp_codes(value, f"{db_path} (ecg_id {ecg_id})")
        for ecg_id, value in database["scp_codes"].items()
    ]
    diagnostic = statements[statements["diagnostic"] == 1]["diagnostic_class"]
    diagnostic = diagnostic.dropna().to_dict()
    database["diagnostic_superclasses"] = [
        sorted({diagnostic[code] for code in codes if code in diagnostic})
        for codes in database["scp_codes"]
    ]
    return database


def _check_folds(folds):
    if folds is None:
        return None
    folds = np.atleast_1d(np.asarray(folds))
    if folds.size == 0 or not np.issubdtype(folds.dtype, np.integer):
        raise ValueError(f"folds must be None or a list of strat_fold numbers 1-10, got {folds!r}.")
    bad = sorted(set(folds.tolist()) - set(range(1, 11)))
    if bad:
        raise ValueError(f"folds must be in 1-10 (PTB-XL's strat_fold), got {bad}.")
    return folds


def _select_ptbxl_records(database, *, folds, ecg_ids, single_label, log):
    """The rows of ``database`` to load, logging the single-label exclusions."""
    selected = database
    if ecg_ids is not None:
        ecg_ids = np.atleast_1d(np.asarray(ecg_ids))
        if not np.issubdtype(ecg_ids.dtype, np.integer):
            raise ValueError(f"ecg_ids must be integers, got {ecg_ids.dtype}.")
        unknown = np.setdiff1d(ecg_ids, database.index.to_numpy())
        if unknown.size:
            raise ValueError(f"ecg_ids {unknown[:10].tolist()} are not in ptbxl_database.csv.")
        selected = selected.loc[ecg_ids]
    folds = _check_folds(folds)
    if folds is not None:
        selected = selected[selected["strat_fold"].isin(folds)]
    if single_label:
        n_classes = selected["diagnostic_superclasses"].map(len)
        for ecg_id, classes in selected.loc[n_classes != 1, "diagnostic_superclasses"].items():
            reason = (
                f"{len(classes)} diagnostic superclasses ({', '.join(classes)})"
                if classes
                else "no diagnostic superclass"
            )
            log.add(ecg_id, f"{reason}; single_label=True keeps one", kind="filtered")
        selected = selected[n_classes == 1]
    if selected.empty:
        raise ValueError("No PTB-XL record matches the selection (folds, ecg_ids, single_label).")
    return selected


def _check_sampling_rate(sampling_rate):
    if sampling_rate not in _FILENAME_COLUMN or isinstance(sampling_rate, bool):
        raise ValueError(
            f"sampling_rate must be 100 (records100/) or 500 (records500/), got {sampling_rate!r}."
        )
    return int(sampling_rate)


def _ptbxl_record_files(path, sampling_rate, selected):
    """Relative ``.hea``/``.dat`` paths of the selected records."""
    column = _FILENAME_COLUMN[_check_sampling_rate(sampling_rate)]
    files = []
    for name in selected[column]:
        files += [f"{name}.hea", f"{name}.dat"]
    return files


def _ptbxl_attributes(selected):
    superclass = [
        "|".join(classes) if classes else np.nan for classes in selected["diagnostic_superclasses"]
    ]
    sex = selected["sex"].map({0: "M", 1: "F"})
    age = pd.to_numeric(selected["age"], errors="coerce").astype(np.float64)
    age = age.mask(age >= 300, PTBXL_AGE_CAP)  # NaN (unknown) stays NaN
    return pd.DataFrame(
        {
            "diagnostic_superclass": superclass,
            "sex": sex.to_numpy(dtype=object),
            "age": age.to_numpy(),
        }
    )


def load_ptbxl(
    path,
    *,
    sampling_rate=500,
    folds=None,
    ecg_ids=None,
    leads=None,
    single_label=True,
    signal_length="equal",
    on_error="raise",
    cache_dir=None,
    verbose=0,
    return_X_y=False,
):
    """Load PTB-XL from a downloaded copy in the PhysioNet layout.

    Reads ``ptbxl_database.csv`` and ``scp_statements.csv``, selects records
    (by fold, id and the single-label rule) *before* reading any signal, and
    decodes only the selected records from ``records500/`` or
    ``records100/``. The diagnostic superclass of a record (CD, HYP, MI, NORM,
    STTC) comes from its ``scp_codes`` via the ``diagnostic_class`` of the
    diagnostic statements in ``scp_statements.csv`` (Strodthoff et al.,
    2020). As in the paper, only records with exactly one superclass are kept
    by default; the others are listed in ``excluded``.

    Read more in the :ref:`User Guide <datasets>`.

    Parameters
    ----------
    path : str or path-like
        The PTB-XL folder (the one holding ``ptbxl_database.csv``).
    sampling_rate : {500, 100}, default=500
        Which records to read: ``records500/`` (5000 samples) or
        ``records100/`` (1000 samples).
    folds : list of int, default=None
        Only these ``strat_fold`` values (1-10); None for all.
    ecg_ids : list of int, default=None
        Only these records; None for all.
    leads : list of str, default=None
        Leads to load, in this order (case-insensitive); None for the 12
        standard leads I, II, III, aVR, aVL, aVF, V1-V6.
    single_label : bool, default=True
        Keep only records with exactly one diagnostic superclass (the paper's
        setting). With False every record is kept and
        ``diagnostic_superclass`` joins several classes with "|" (e.g.
        "CD|MI"), NaN when there is none.
    signal_length : "equal", "variable" or int, default="equal"
        As in :func:`load_wfdb`: "equal": all records must have the same
        length (records of several lengths raise one error that counts them,
        whatever ``on_error``); an int crops every record to that many samples
        (at the output rate; shorter records are errors); "variable":
        ``data`` is a list of arrays of shape (n_leads, n_samples_i).
    on_error : {"raise", "skip"}, default="raise"
        What to do with a record whose files are missing or unusable: raise an
        :class:`InvalidRecordError` naming the file, or skip it with a warning
        that counts the skipped records.
    cache_dir : str or path-like, default=None
        Folder for a ``.npy`` cache of the decoded signals. ``data`` is then a
        read-only memory map (the whole 500 Hz set is about 5 GB as float32),
        and a second load with the same arguments reads neither the WFDB files
        nor the whole array into RAM.
    verbose : int, default=0
        Show a progress bar of the records read (tqdm, on stderr) when > 0.
    return_X_y : bool, default=False
        Return ``(data, attributes)`` instead of a Bunch.

    Returns
    -------
    data : :class:`~sklearn.utils.Bunch`
        data : ndarray of shape (n_records, n_leads, n_samples), dtype float32
            Signals in mV, channel-first (a memory map with ``cache_dir``).
        attributes : pandas.DataFrame
            ``diagnostic_superclass``, ``sex`` ("M"/"F" from 0/1) and ``age``
            (years; PTB-XL's 300, meaning "over 89", becomes 90.0).
        groups : ndarray of int64
            ``patient_id`` (several records can belong to one patient).
        folds : ndarray of int64
            ``strat_fold`` (1-10), see :func:`ptbxl_fold_split`.
        ecg_ids : ndarray of int64
            PTB-XL's ``ecg_id`` of each record.
        record_names : ndarray of str
            The ``filename_hr``/``filename_lr`` of each record.
        fs : int
            Sampling rate in Hz (500 or 100).
        lead_names : list of str
            Names of the leads, in the order of ``data``'s second axis.
        metadata : pandas.DataFrame
            The records' rows of ``ptbxl_database.csv`` (``scp_codes`` parsed
            into dicts, plus ``diagnostic_superclasses`` lists).
        excluded : pandas.DataFrame
            Records left out and why (``kind`` "filtered" for the single-label
            rule, "skipped" for unusable files).
        DESCR : str
            Description of the dataset, its licence and references.

    (data, attributes) : tuple if ``return_X_y`` is True

    See Also
    --------
    fetch_ptbxl : Download PTB-XL and load it.
    ptbxl_fold_split : Train/validation/test split by ``strat_fold``.

    Examples
    --------
    >>> from sklearn_crocs.datasets import load_ptbxl
    >>> ptbxl = load_ptbxl("path/to/ptb-xl", folds=[1, 2])  # doctest: +SKIP
    >>> ptbxl.data.shape  # doctest: +SKIP
    (3512, 12, 5000)
    """
    path = Path(os.path.expanduser(os.fspath(path)))
    sampling_rate = _check_sampling_rate(sampling_rate)
    on_error = check_on_error(on_error)
    signal_length = check_signal_length(signal_length)
    leads = check_leads(leads) or list(STANDARD_LEADS)
    if not isinstance(single_label, (bool, np.bool_)):
        raise TypeError(f"single_label must be True or False, got {single_label!r}.")
    if not isinstance(verbose, numbers.Integral):
        raise TypeError(f"verbose must be an int, got {verbose!r}.")

    log = ExclusionLog()
    database = _read_ptbxl_tables(path)
    selected = _select_ptbxl_records(
        database, folds=folds, ecg_ids=ecg_ids, single_label=single_label, log=log
    )
    column = _FILENAME_COLUMN[sampling_rate]
    source = f"{path / 'ptbxl_database.csv'} (column {column})"
    records = [path_inside(path, name, source) for name in selected[column]]
    signal_set = read_wfdb_signals(
        records,
        [str(i) for i in selected.index],
        leads=leads,
        fs=sampling_rate,
        target_fs=None,
        signal_length=signal_length,
        on_error=on_error,
        repair_headers=False,
        log=log,
        cache_dir=cache_dir,
        cache_tag=f"ptbxl{sampling_rate}",
        verbose=verbose,
        caller="load_ptbxl",
    )
    kept = selected.iloc[signal_set.kept]
    attributes = _ptbxl_attributes(kept)
    if return_X_y:
        return signal_set.data, attributes
    return Bunch(
        data=signal_set.data,
        attributes=attributes,
        groups=kept["patient_id"].to_numpy().astype(np.int64),
        folds=kept["strat_fold"].to_numpy().astype(np.int64),
        ecg_ids=kept.index.to_numpy().astype(np.int64),
        record_names=kept[column].to_numpy().astype(str),
        fs=signal_set.fs,
        lead_names=signal_set.lead_names,
        metadata=kept,
        excluded=log.frame(),
        DESCR=load_descr("ptbxl.rst"),
    )


def fetch_ptbxl(
    data_home=None,
    *,
    download_if_missing=True,
    sampling_rate=500,
    folds=None,
    ecg_ids=None,
    leads=None,
    single_label=True,
    on_error="raise",
    cache_dir=None,
    n_retries=3,
    delay=1.0,
    n_jobs=1,
    base_url=PTBXL_URL,
    sha256sums_sha256=None,
    verbose=0,
    return_X_y=False,
):
    """Download PTB-XL 1.0.3 from PhysioNet (if needed) and load it.

    Downloads ``SHA256SUMS.txt``, the two metadata tables and then only the
    WFDB files of the records that the selection (``sampling_rate``,
    ``folds``, ``ecg_ids``, ``single_label``) needs, into
    ``<data_home>/ptb-xl-1.0.3``. Every file is verified against
    ``SHA256SUMS.txt`` before it is used; an interrupted download resumes
    where it stopped. Once everything is there it works offline. The result is
    :func:`load_ptbxl` of the downloaded folder.

    Read more in the :ref:`User Guide <datasets>`.

    Parameters
    ----------
    data_home : str or path-like, default=None
        Download folder, see :func:`get_data_home`.
    download_if_missing : bool, default=True
        If False, raise an OSError instead of downloading missing files.
    sampling_rate, folds, ecg_ids, leads, single_label, on_error, cache_dir, \
return_X_y
        As in :func:`load_ptbxl`.
    n_retries : int, default=3
        Further attempts per file after a failure.
    delay : float, default=1.0
        Seconds between attempts.
    n_jobs : int, default=1
        Files downloaded in parallel (threads).
    base_url : str, default="https://physionet.org/files/ptb-xl/1.0.3/"
        Where the PhysioNet file tree is served (a mirror, or a local server).
    sha256sums_sha256 : str, default=None
        SHA-256 (hex) of the release's ``SHA256SUMS.txt``, e.g. from
        PhysioNet's project page. ``None``: the hash recorded the first time
        the list was used in ``data_home`` (trust on first use); a list that
        differs from it is refused.
    verbose : int, default=0
        Show progress bars of the downloads and of the records read (tqdm,
        on stderr) when > 0.

    Returns
    -------
    data : :class:`~sklearn.utils.Bunch`
        As returned by :func:`load_ptbxl`.

    Examples
    --------
    >>> from sklearn_crocs.datasets import fetch_ptbxl
    >>> ptbxl = fetch_ptbxl(folds=[10])  # doctest: +SKIP
    """
    sampling_rate = _check_sampling_rate(sampling_rate)
    base_url = check_fetch_args(n_retries, delay, n_jobs, base_url, sha256sums_sha256)
    root = Path(get_data_home(data_home)) / PTBXL_FOLDER
    options = {
        "download_if_missing": download_if_missing,
        "n_retries": n_retries,
        "delay": delay,
        "name": "PTB-XL",
    }
    checksums = checksum_list(root, base_url, expected_sha256=sha256sums_sha256, **options)
    ensure_files(
        root,
        base_url,
        ["ptbxl_database.csv", "scp_statements.csv"],
        checksums,
        n_jobs=1,
        verbose=verbose,
        **options,
    )
    selected = _select_ptbxl_records(
        _read_ptbxl_tables(root),
        folds=folds,
        ecg_ids=ecg_ids,
        single_label=single_label,
        log=ExclusionLog(),
    )
    ensure_files(
        root,
        base_url,
        _ptbxl_record_files(root, sampling_rate, selected),
        checksums,
        n_jobs=n_jobs,
        verbose=verbose,
        **options,
    )
    return load_ptbxl(
        root,
        sampling_rate=sampling_rate,
        folds=folds,
        ecg_ids=ecg_ids,
        leads=leads,
        single_label=single_label,
        on_error=on_error,
        cache_dir=cache_dir,
        verbose=verbose,
        return_X_y=return_X_y,
    )
