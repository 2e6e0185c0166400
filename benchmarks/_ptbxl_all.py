"""The PTB-XL records on this machine at the size users train on: the bundled
500-record sample together with ``ptbxl-more`` (3,903 raw records), split by
patient, for the learning-curve benchmark (``bench_accuracy.py --curve``).

``ptbxl-more`` is raw (int16 microvolts, 100 Hz, with wander and noise); it
goes through the documented path, :class:`SignalConditioner` (band-pass
0.5-40 Hz, the default when the curve was measured; z-score per lead) on whole
records, then :func:`make_frames`.
The sample was band-passed and z-scored by a third party at 500 Hz before it
was resampled to 100 Hz; ``condition_sample=True`` puts it through the same
conditioner as well (a no-op up to the filter's edge effects).
"""

from pathlib import Path

import numpy as np
import pandas as pd
from sklearn.utils import Bunch

from sklearn_crocs.datasets import load_ptbxl_sample, patient_split
from sklearn_crocs.preprocessing import AgeGroupEncoder, SignalConditioner, make_frames

MORE = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "ptbxl-more"


def load_more(more=MORE):
    """``ptbxl-more`` as stored: raw records in mV (float32, (n, 12, 1000) at 100 Hz), class
    (NORM/ABN), sex and age in years (300: over 89, as PTB-XL writes it) and patient ids."""
    with np.load(more / "signals.npz") as archive:
        raw = archive["X"].astype(np.float32) / 1000.0  # microvolts -> mV
    table = pd.read_csv(more / "records.csv")
    return Bunch(
        X=raw,
        attributes=table.rename(columns={"label": "class"})[["class", "sex", "age"]],
        groups=table["patient_id"].to_numpy(),
    )


def load_records(more=MORE, condition_sample=False):
    """Every record (float32, (n, 12, 1000) at 100 Hz), with class, sex and age in years,
    patient ids and the folder each came from ("sample" or "more")."""
    sample = load_ptbxl_sample()
    raw = load_more(more)
    # The band of the learning curve's data, fixed so that its rows stay comparable: the
    # default edge moved to 0.67 Hz after they were measured (bench_recordings --bands).
    conditioner = SignalConditioner(sampling_rate=100, bandpass=(0.5, 40.0))
    X_more = conditioner.fit_transform(raw.X)
    X_sample = sample.data.astype(np.float32)
    if condition_sample:
        X_sample = conditioner.fit_transform(X_sample)
    attributes = pd.concat(
        [sample.attributes[["class", "sex", "age"]], raw.attributes], ignore_index=True
    )
    return Bunch(
        X=np.concatenate([X_sample, X_more]),
        attributes=attributes,
        groups=np.concatenate([sample.groups, raw.groups]),
        source=np.array(["sample"] * len(X_sample) + ["more"] * len(X_more)),
    )


def split(records, seed, test_size=0.2):
    """(train, test) record indices of one patient split, stratified by class."""
    train, _, test = patient_split(
        records.groups, stratify=records.attributes["class"].to_numpy(), val_size=0.0,
        test_size=test_size, random_state=seed,
    )  # fmt: skip
    return train, test


def frames(records, train, parts, n_age_groups=4, frame_length=500):
    """Frames ``(X, y, groups)`` of each index set in ``parts``, age as quantile groups
    fitted on the patients of ``train`` (one age per patient)."""
    patients = pd.DataFrame({"patient": records.groups[train],
                             "age": records.attributes["age"].to_numpy()[train]})  # fmt: skip
    ages = AgeGroupEncoder(n_groups=n_age_groups).fit(patients.drop_duplicates("patient")[["age"]])
    attributes = records.attributes.assign(
        age=pd.Categorical(ages.transform(records.attributes[["age"]]).ravel(),
                           categories=ages.labels_, ordered=True)  # fmt: skip
    )
    out = []
    for idx in parts:
        X, y, groups = make_frames(
            records.X[idx], frame_length,
            attributes=attributes.iloc[idx].reset_index(drop=True), groups=records.groups[idx],
        )  # fmt: skip
        out.append((X, y, groups))
    return out


def subsample_patients(records, train, n_records, seed):
    """About ``n_records`` of the ``train`` records, whole patients drawn at random."""
    if n_records >= len(train):
        return train
    rng = np.random.RandomState(seed)
    patients = rng.permutation(np.unique(records.groups[train]))
    counts = pd.Series(records.groups[train]).value_counts()
    keep = patients[: np.searchsorted(np.cumsum(counts[patients].to_numpy()), n_records) + 1]
    return train[np.isin(records.groups[train], keep)]
