"""The bundled PTB-XL sample: 500 real 12-lead records with class, sex and age.

``data/ptbxl_sample.npz`` (signals) and ``data/ptbxl_sample.csv`` (one row
per record) are byte-for-byte copies of the files they were published in;
see ``descr/ptbxl_sample.rst``.
"""

import numpy as np
import pandas as pd
from sklearn.utils import Bunch

from .._split import patient_split
from ..preprocessing import AgeGroupEncoder, make_frames
from ._base import STANDARD_LEADS, data_file, load_descr

SIGNALS_FILENAME = "ptbxl_sample.npz"
RECORDS_FILENAME = "ptbxl_sample.csv"
FS = 100
#: PTB-XL writes this age for patients over 89.
_AGE_OVER_89 = 300


def load_ptbxl_sample(*, return_X_y=False):
    """Load the 500 bundled PTB-XL records (12-lead, 100 Hz, 10 s, real ECGs).

    The records come from PTB-XL (Wagner et al. 2020, PhysioNet, CC BY 4.0)
    and ship with the package, so this needs no network. They were
    band-pass filtered (0.5-40 Hz) and z-scored per lead before release,
    then resampled from 500 Hz to 100 Hz; the signals are therefore in
    standard deviations, not mV. See ``DESCR`` for the source, licence and
    attribution.

    ==================  ==============================
    Records             500 (493 patients)
    Leads               12 (I, II, III, aVR, ... V6)
    Samples per lead    1000 (10 s at 100 Hz)
    Units               standard deviations (z-scored)
    Classes             NORM 281, ABN 219
    Sex                 F 261, M 239
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

        data : ndarray of shape (500, 12, 1000), dtype float32
            The signals, channel-first (stored as float16; every value is
            exact in float32).
        attributes : pandas.DataFrame of shape (500, 3)
            Columns ``class`` ("NORM": the record carries PTB-XL's NORM
            diagnostic superclass, "ABN": it does not), ``sex`` ("F"/"M")
            and ``age`` (years, float; patients over 89 are 90.0).
        groups : ndarray of shape (500,), dtype int64
            PTB-XL ``patient_id`` of each record.
        ecg_ids : ndarray of shape (500,), dtype int64
            PTB-XL ``ecg_id`` of each record.
        fs : int
            Sampling frequency in Hz (100).
        lead_names : list of str
            ``["I", "II", "III", "aVR", "aVL", "aVF", "V1", ..., "V6"]``.
        DESCR : str
            Description: source, preprocessing, licence and citation.

    (data, attributes) : tuple if ``return_X_y`` is True

    See Also
    --------
    load_ptbxl_sample_frames : The same records as 5-s frames, split by patient.

    Examples
    --------
    >>> from sklearn_crocs.datasets import load_ptbxl_sample
    >>> sample = load_ptbxl_sample()
    >>> sample.data.shape
    (500, 12, 1000)
    >>> sample.attributes["class"].value_counts().to_dict()
    {'NORM': 281, 'ABN': 219}
    >>> len(set(sample.groups))
    493
    """
    with data_file(SIGNALS_FILENAME).open("rb") as fh, np.load(fh, allow_pickle=False) as z:
        data = z["X"].astype(np.float32)
        ecg_ids = z["ecg_id"].astype(np.int64)
    with data_file(RECORDS_FILENAME).open("rb") as fh:
        records = pd.read_csv(fh)
    if not np.array_equal(records["ecg_id"].to_numpy(), ecg_ids):
        raise RuntimeError(
            f"The bundled {RECORDS_FILENAME} and {SIGNALS_FILENAME} list different records; "
            "reinstall sklearn-crocs."
        )
    age = records["age"].to_numpy(dtype=np.float64)
    attributes = pd.DataFrame(
        {
            "class": records["label"].astype(str).to_numpy(),
            "sex": records["sex"].astype(str).to_numpy(),
            "age": np.where(age == _AGE_OVER_89, 90.0, age),
        }
    )
    if return_X_y:
        return data, attributes
    return Bunch(
        data=data,
        attributes=attributes,
        groups=records["patient_id"].to_numpy(dtype=np.int64),
        ecg_ids=ecg_ids,
        fs=FS,
        lead_names=list(STANDARD_LEADS),
        DESCR=load_descr("ptbxl_sample.rst"),
    )


def load_ptbxl_sample_frames(*, frame_length=500, test_size=0.4, n_age_groups=4, random_state=0):
    """The bundled PTB-XL sample as 12-lead frames with class x sex x age group, split by patient.

    The records of :func:`load_ptbxl_sample` are cut into non-overlapping
    frames of ``frame_length`` samples (two 5-s frames per record by
    default, as the paper does for PTB-XL) and split by patient into a
    training and a test part. Age becomes ``n_age_groups`` quantile groups
    (quartiles by default) fitted on the training patients only (one age
    per patient). This is the data of the main job (``python -m
    sklearn_crocs``) and of the accuracy benchmark.

    Read more in the :ref:`User Guide <datasets>`.

    Parameters
    ----------
    frame_length : int, default=500
        Samples per frame (100 Hz): 500 gives two 5-s frames per record,
        1000 the whole 10-s records.
    test_size : float, default=0.4
        Fraction of the patients held out for testing.
    n_age_groups : int, default=4
        Number of age groups (quantiles of the training patients' ages).
    random_state : int, RandomState instance or None, default=0
        Seed of the patient split (:func:`patient_split`).

    Returns
    -------
    data : :class:`~sklearn.utils.Bunch`
        With ``X_train`` and ``X_test`` (float32, shape (n, 12,
        frame_length)), ``y_train`` and ``y_test`` (DataFrames with columns
        ``class``, ``sex`` and ``age``; ``age`` is an ordered categorical of
        the group labels), ``groups_train`` and ``groups_test`` (patient
        ids), ``age_encoder`` (the fitted
        :class:`~sklearn_crocs.preprocessing.AgeGroupEncoder`), ``fs`` and
        ``lead_names``.

    Examples
    --------
    >>> from sklearn_crocs.datasets import load_ptbxl_sample_frames
    >>> data = load_ptbxl_sample_frames(random_state=0)
    >>> data.X_train.shape[1:], data.X_test.shape[1:]
    ((12, 500), (12, 500))
    >>> len(data.X_train) + len(data.X_test)  # two frames per record
    1000
    >>> list(data.y_train.columns), len(data.y_train["age"].cat.categories)
    (['class', 'sex', 'age'], 4)
    >>> set(data.groups_train) & set(data.groups_test)
    set()
    """
    sample = load_ptbxl_sample()
    train, _, test = patient_split(
        sample.groups, val_size=0.0, test_size=test_size, random_state=random_state
    )
    patients = pd.DataFrame(
        {"patient": sample.groups[train], "age": sample.attributes["age"][train]}
    )
    ages = AgeGroupEncoder(n_groups=n_age_groups).fit(patients.drop_duplicates("patient")[["age"]])
    attributes = sample.attributes.assign(
        age=pd.Categorical(
            ages.transform(sample.attributes[["age"]]).ravel(),
            categories=ages.labels_,
            ordered=True,
        )
    )
    out = Bunch(age_encoder=ages, fs=sample.fs, lead_names=sample.lead_names)
    for name, records in (("train", train), ("test", test)):
        X, y, groups = make_frames(
            sample.data[records],
            frame_length,
            attributes=attributes.iloc[records].reset_index(drop=True),
            groups=sample.groups[records],
        )
        out[f"X_{name}"], out[f"y_{name}"], out[f"groups_{name}"] = X, y, groups
    return out
