"""The bundled LUDB records: ``load_ludb`` and the LUDB header conventions.

The package data file ``data/ludb.npz`` is built from the PhysioNet WFDB
originals by ``scripts/build_ludb_dataset.py``, which uses the parsing helpers
of this module so that the shipped labels follow exactly the rules documented
in ``descr/ludb.rst``.
"""

import numpy as np
import pandas as pd
from sklearn.utils import Bunch

from .._split import patient_split
from ..preprocessing import AgeGroupEncoder, leads_as_instances, normalize_frames, resample_signals
from ._base import data_file, load_descr, parse_age, parse_comments, parse_sex

LUDB_FILENAME = "ludb.npz"

#: Version of the layout of ``ludb.npz``; bump it when the layout changes.
LUDB_FORMAT_VERSION = 1

#: LUDB ``#Rhythm:`` statements (lower case, without the final period) and the
#: CROCS rhythm group (Chapman grouping of Zheng et al. 2020) each maps to.
LUDB_RHYTHM_GROUPS = {
    "atrial fibrillation": "AFIB",
    "atrial flutter": "AFIB",
    "sinus tachycardia": "GSVT",
    "sinus bradycardia": "SB",
    "sinus rhythm": "SR",
    "sinus arrhythmia": "SR",
    "irregular sinus rhythm": "SR",
}


def ludb_attributes_from_comments(comments, record_name="?"):
    """Rhythm group, sex, age and rhythm statement of one LUDB header.

    Parameters
    ----------
    comments : list of str
        The header comments as returned by ``wfdb.rdheader(...).comments``, e.g.
        ``["<age>: 76", "<sex>: F", "<diagnoses>:", "Rhythm: Sinus rhythm.", ...]``.
    record_name : str, default="?"
        Used in error messages only.

    Returns
    -------
    attributes : dict
        Keys ``rhythm`` (AFIB/GSVT/SB/SR), ``sex`` ("M"/"F"), ``age`` (float,
        ``>89`` becomes 90.0) and ``rhythm_statement`` (the header's text).

    Raises
    ------
    ValueError
        If the header has no ``Rhythm:`` statement, an unknown rhythm, or an
        unreadable sex.
    """
    parsed = parse_comments(comments)
    statement = parsed.get("Rhythm")
    if statement is None:
        raise ValueError(
            f"LUDB record {record_name}: no '#Rhythm:' statement in the header "
            f"comments {list(comments)}."
        )
    key = statement.strip().rstrip(".").strip().lower()
    if key not in LUDB_RHYTHM_GROUPS:
        raise ValueError(
            f"LUDB record {record_name}: rhythm statement {statement!r} has no "
            f"CROCS rhythm group; known statements are "
            f"{sorted(LUDB_RHYTHM_GROUPS)}."
        )
    sex = parse_sex(parsed.get("sex"))
    if not isinstance(sex, str):
        raise ValueError(f"LUDB record {record_name}: unreadable sex {parsed.get('sex')!r}.")
    return {
        "rhythm": LUDB_RHYTHM_GROUPS[key],
        "sex": sex,
        "age": parse_age(parsed.get("age")),
        "rhythm_statement": statement.strip().rstrip(".").strip(),
    }


def _decode_ludb(archive):
    """Physical signals (mV, float32) from the arrays stored in ``ludb.npz``."""
    # The time axis holds the first sample followed by first differences; a
    # cumulative sum in int32 restores the WFDB digital values exactly.
    digital = np.cumsum(archive["signal_deltas"], axis=-1, dtype=np.int32)
    gain = archive["adc_gain"][:, :, np.newaxis]
    baseline = archive["baseline"][:, :, np.newaxis]
    # Same arithmetic as wfdb's digital-to-physical conversion (float64).
    return ((digital - baseline) / gain).astype(np.float32)


def load_ludb(*, return_X_y=False):
    """Load the 102 bundled LUDB records (12-lead, 500 Hz, 10 s, real ECGs).

    The records come from the Lobachevsky University Electrocardiography
    Database (LUDB, PhysioNet, ODC-By 1.0) and ship with the package, so this
    needs no network. Each record is one subject. Rhythm statements are mapped
    onto the four rhythm groups that CROCS uses for Chapman (AFIB, GSVT, SB,
    SR); see ``DESCR`` for the mapping, the licence and the attribution.

    ==================  ==============================
    Records (subjects)  102
    Leads               12 (I, II, III, aVR, ... V6)
    Samples per lead    5000 (10 s at 500 Hz)
    Units               mV
    Classes (rhythm)    AFIB 9, GSVT 3, SB 13, SR 77
    ==================  ==============================

    Read more in the :ref:`User Guide <datasets>`.

    Parameters
    ----------
    return_X_y : bool, default=False
        If True, return ``(data, attributes)`` instead of a Bunch.

    Returns
    -------
    data : :class:`~sklearn.utils.Bunch`
        Dictionary-like object with the following attributes.

        data : ndarray of shape (102, 12, 5000), dtype float32
            The signals in mV, channel-first.
        attributes : pandas.DataFrame of shape (102, 3)
            Columns ``rhythm`` (AFIB/GSVT/SB/SR), ``sex`` ("M"/"F") and
            ``age`` (years, float).
        groups : ndarray of shape (102,), dtype int64
            Subject ids (the LUDB record id: one record per subject).
        record_names : ndarray of shape (102,), dtype str
            WFDB record names.
        fs : int
            Sampling frequency in Hz (500).
        lead_names : list of str
            ``["I", "II", "III", "aVR", "aVL", "aVF", "V1", ..., "V6"]``.
        metadata : pandas.DataFrame of shape (102, 1)
            ``rhythm_statement``: the original ``#Rhythm:`` text of each header.
        DESCR : str
            Description: source, citation, licence, mapping, shape.

    (data, attributes) : tuple if ``return_X_y`` is True

    Examples
    --------
    >>> from sklearn_crocs.datasets import load_ludb
    >>> ludb = load_ludb()
    >>> ludb.data.shape
    (102, 12, 5000)
    >>> ludb.attributes["rhythm"].value_counts().sort_index().to_dict()
    {'AFIB': 9, 'GSVT': 3, 'SB': 13, 'SR': 77}
    >>> ludb.lead_names[:4]
    ['I', 'II', 'III', 'aVR']
    """
    with data_file(LUDB_FILENAME).open("rb") as fh, np.load(fh, allow_pickle=False) as archive:
        version = int(archive["format_version"])
        if version != LUDB_FORMAT_VERSION:
            raise RuntimeError(
                f"The bundled {LUDB_FILENAME} has layout version {version}, this "
                f"code reads version {LUDB_FORMAT_VERSION}. Rebuild it with "
                f"scripts/build_ludb_dataset.py or reinstall sklearn-crocs."
            )
        data = _decode_ludb(archive)
        record_names = archive["record_names"].astype(str)
        attributes = pd.DataFrame(
            {
                "rhythm": archive["rhythm"].astype(str),
                "sex": archive["sex"].astype(str),
                "age": archive["age"].astype(np.float64),
            }
        )
        metadata = pd.DataFrame(
            {"rhythm_statement": archive["rhythm_statement"].astype(str)},
            index=pd.Index(record_names, name="record_name"),
        )
        lead_names = [str(name) for name in archive["lead_names"]]
        fs = int(archive["fs"])
    if return_X_y:
        return data, attributes
    return Bunch(
        data=data,
        attributes=attributes,
        groups=record_names.astype(np.int64),
        record_names=record_names,
        fs=fs,
        lead_names=lead_names,
        metadata=metadata,
        DESCR=load_descr("ludb.rst"),
    )


def load_ludb_instances(*, target_fs=250, test_size=0.2, n_age_groups=4, random_state=0):
    """The bundled LUDB records prepared like the paper's Chapman data, split by patient.

    The paper's Chapman protocol applied to :func:`load_ludb`: every 10-s
    record resampled to ``target_fs`` (2500 samples at 250 Hz), each of its 12
    leads a single-lead instance scaled to [0, 1], attributes rhythm group x
    sex x age group, with age groups (quartiles by default) learned on the
    training patients only, and a patient-level train/test split stratified by
    rhythm group, so that both parts hold every rhythm group (LUDB has only
    three GSVT patients and nine AFIB ones). The main
    job, the gallery and the benchmarks use it; hold out a validation part of
    the training patients with ``CROCSClusterer(validation_fraction=...)``
    and ``groups``.

    Read more in the :ref:`User Guide <datasets>`.

    Parameters
    ----------
    target_fs : int, default=250
        Sampling rate after resampling (Hz); 250 gives 2500 samples.
    test_size : float, default=0.2
        Fraction of the patients held out for testing.
    n_age_groups : int, default=4
        Number of age groups (quantiles of the training patients' ages).
    random_state : int, RandomState instance or None, default=0
        Seed of the patient split (:func:`patient_split` with ``stratify``).

    Returns
    -------
    data : :class:`~sklearn.utils.Bunch`
        With ``X_train`` and ``X_test`` (float32, shape (n, 1, n_samples)),
        ``y_train`` and ``y_test`` (DataFrames with columns ``rhythm``,
        ``sex`` and ``age``; ``age`` is an ordered categorical of the group
        labels), ``groups_train`` and ``groups_test`` (patient ids),
        ``lead_train`` and ``lead_test`` (lead index of each instance),
        ``age_encoder`` (the fitted
        :class:`~sklearn_crocs.preprocessing.AgeGroupEncoder`), ``fs`` and
        ``lead_names``.

    Examples
    --------
    >>> from sklearn_crocs.datasets import load_ludb_instances
    >>> data = load_ludb_instances(random_state=0)
    >>> data.X_train.shape, data.X_test.shape
    ((972, 1, 2500), (252, 1, 2500))
    >>> list(data.y_train.columns)
    ['rhythm', 'sex', 'age']
    >>> sorted(data.y_test["rhythm"].unique())
    ['AFIB', 'GSVT', 'SB', 'SR']
    >>> set(data.groups_train) & set(data.groups_test)
    set()
    """
    ludb = load_ludb()
    signals = resample_signals(ludb.data, ludb.fs, target_fs)
    train, _, test = patient_split(
        ludb.groups,
        stratify=ludb.attributes["rhythm"],
        val_size=0.0,
        test_size=test_size,
        random_state=random_state,
    )
    ages = AgeGroupEncoder(n_groups=n_age_groups).fit(ludb.attributes[["age"]].iloc[train])
    attributes = pd.DataFrame(
        {
            "rhythm": ludb.attributes["rhythm"].to_numpy(),
            "sex": ludb.attributes["sex"].to_numpy(),
            "age": pd.Categorical(
                ages.transform(ludb.attributes[["age"]]).ravel(),
                categories=ages.labels_,
                ordered=True,
            ),
        }
    )
    out = Bunch(age_encoder=ages, fs=target_fs, lead_names=ludb.lead_names)
    for name, records in (("train", train), ("test", test)):
        X, y, groups, lead = leads_as_instances(
            signals[records], attributes.iloc[records].reset_index(drop=True), ludb.groups[records]
        )
        out[f"X_{name}"] = normalize_frames(X, method="minmax")
        out[f"y_{name}"] = y.reset_index(drop=True)
        out[f"groups_{name}"] = groups
        out[f"lead_{name}"] = lead
    return out
