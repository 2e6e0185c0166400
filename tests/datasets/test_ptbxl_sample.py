"""The bundled PTB-XL sample: fidelity to the published files, attributes and the frame split."""

import hashlib

import numpy as np
import pandas as pd

from sklearn_crocs.datasets import load_ptbxl_sample, load_ptbxl_sample_frames
from sklearn_crocs.preprocessing import AgeGroupEncoder

from .conftest import REPO_ROOT

DATA = REPO_ROOT / "sklearn_crocs" / "datasets" / "data"


def _sha256(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_shipped_files_are_the_published_ones(ptbxl_sample_dir):
    assert _sha256(DATA / "ptbxl_sample.npz") == _sha256(ptbxl_sample_dir / "signals.npz")
    assert _sha256(DATA / "ptbxl_sample.csv") == _sha256(ptbxl_sample_dir / "records.csv")
    assert (DATA / "ptbxl_sample.npz").stat().st_size <= 11 * 2**20


def test_signals_and_attributes_equal_the_published_values(ptbxl_sample_dir):
    sample = load_ptbxl_sample()
    with np.load(ptbxl_sample_dir / "signals.npz") as published:
        raw = published["X"]
        assert raw.dtype == np.float16
        np.testing.assert_array_equal(sample.data.astype(np.float16), raw)  # lossless
        np.testing.assert_array_equal(sample.data, raw.astype(np.float32))
    records = pd.read_csv(ptbxl_sample_dir / "records.csv")
    assert sample.data.dtype == np.float32
    assert sample.data.shape == (500, 12, 1000)
    np.testing.assert_array_equal(sample.ecg_ids, records["ecg_id"])
    np.testing.assert_array_equal(sample.groups, records["patient_id"])
    assert sample.attributes["class"].tolist() == records["label"].tolist()
    assert sample.attributes["sex"].tolist() == records["sex"].tolist()
    over_89 = records["age"] == 300
    assert over_89.sum() == 6
    assert (sample.attributes["age"][over_89] == 90).all()
    np.testing.assert_array_equal(sample.attributes["age"][~over_89], records["age"][~over_89])


def test_sample_description_and_layout():
    sample = load_ptbxl_sample()
    assert sample.fs == 100
    assert sample.lead_names == [
        "I",
        "II",
        "III",
        "aVR",
        "aVL",
        "aVF",
        *(f"V{i}" for i in range(1, 7)),
    ]
    assert sample.attributes["class"].value_counts().to_dict() == {"NORM": 281, "ABN": 219}
    assert sample.attributes["sex"].value_counts().to_dict() == {"F": 261, "M": 239}
    assert len(np.unique(sample.groups)) == 493
    for text in ["PTB-XL", "CC BY 4.0", "Wagner", "100 Hz", "z-scored", "0.5-40 Hz", "physionet"]:
        assert text in sample.DESCR, text
    X, y = load_ptbxl_sample(return_X_y=True)
    assert X.shape == (500, 12, 1000)
    assert list(y.columns) == ["class", "sex", "age"]


def test_frames_are_split_by_patient_with_training_quartiles():
    sample = load_ptbxl_sample()
    data = load_ptbxl_sample_frames(random_state=3)
    assert data.X_train.shape[1:] == data.X_test.shape[1:] == (12, 500)
    assert len(data.X_train) + len(data.X_test) == 1000
    assert not set(data.groups_train) & set(data.groups_test)
    n_test = len(np.unique(data.groups_test))
    assert n_test == int(np.ceil(0.4 * 493))  # 40 % of the patients
    # The frames are the records' halves, in order, with the records' attributes.
    first = np.flatnonzero(sample.groups == data.groups_train[0])[0]
    np.testing.assert_array_equal(data.X_train[0], sample.data[first, :, :500])
    np.testing.assert_array_equal(data.X_train[1], sample.data[first, :, 500:])
    assert data.y_train["class"][0] == sample.attributes["class"][first]
    # Age quartiles are fitted on the training patients only (one age each).
    train = np.isin(sample.groups, data.groups_train)
    ages = pd.DataFrame({"g": sample.groups[train], "age": sample.attributes["age"][train]})
    expected = AgeGroupEncoder().fit(ages.drop_duplicates("g")[["age"]])
    np.testing.assert_array_equal(data.age_encoder.bin_edges_, expected.bin_edges_)
    assert list(data.y_test["age"].cat.categories) == expected.labels_
    assert data.y_train["age"].cat.ordered
    other = load_ptbxl_sample_frames(random_state=4, frame_length=1000, test_size=0.2)
    assert other.X_test.shape[2] == 1000
    assert set(other.groups_test) != set(data.groups_test)
