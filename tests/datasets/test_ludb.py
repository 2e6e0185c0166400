"""The bundled LUDB dataset: shape, labels, licence text and fidelity to WFDB."""

import shutil
import sys

import numpy as np
import pandas as pd
import pytest
import wfdb

from sklearn_crocs.datasets import load_ludb
from sklearn_crocs.datasets._ludb import ludb_attributes_from_comments

from .conftest import REPO_ROOT

sys.path.insert(0, str(REPO_ROOT / "scripts"))
import build_ludb_dataset  # noqa: E402

# The mapping of the issue / data README, written out independently of the code.
EXPECTED_GROUP = {
    "Atrial fibrillation": "AFIB",
    "Atrial flutter": "AFIB",
    "Sinus tachycardia": "GSVT",
    "Sinus bradycardia": "SB",
    "Sinus rhythm": "SR",
    "Sinus arrhythmia": "SR",
    "Irregular sinus rhythm": "SR",
}


@pytest.fixture(scope="module")
def ludb():
    return load_ludb()


def test_shapes_and_dtypes(ludb):
    assert ludb.data.shape == (102, 12, 5000)
    assert ludb.data.dtype == np.float32
    assert ludb.data.flags.c_contiguous
    assert np.isfinite(ludb.data).all()
    assert list(ludb.attributes.columns) == ["rhythm", "sex", "age"]
    assert len(ludb.attributes) == 102
    assert ludb.attributes["age"].dtype == np.float64
    assert ludb.groups.shape == (102,)
    assert ludb.groups.dtype == np.int64
    assert ludb.fs == 500
    assert ludb.lead_names == [
        "I", "II", "III", "aVR", "aVL", "aVF", "V1", "V2", "V3", "V4", "V5", "V6"
    ]  # fmt: skip
    assert list(ludb.metadata.columns) == ["rhythm_statement"]


def test_labels(ludb):
    attrs = ludb.attributes
    counts = attrs["rhythm"].value_counts().to_dict()
    assert counts == {"AFIB": 9, "GSVT": 3, "SB": 13, "SR": 77}
    assert attrs["sex"].value_counts().to_dict() == {"M": 59, "F": 43}
    assert attrs["age"].notna().all()
    assert attrs["age"].between(15, 88).all()
    # One record per subject: groups are the record ids, all distinct.
    assert len(np.unique(ludb.groups)) == 102
    np.testing.assert_array_equal(ludb.groups, ludb.record_names.astype(int))
    # The rhythm group follows the original statement.
    statements = ludb.metadata["rhythm_statement"].to_numpy()
    np.testing.assert_array_equal(
        attrs["rhythm"].to_numpy(), [EXPECTED_GROUP[s] for s in statements]
    )


def test_return_X_y(ludb):
    X, y = load_ludb(return_X_y=True)
    np.testing.assert_array_equal(X, ludb.data)
    pd.testing.assert_frame_equal(y, ludb.attributes)


def test_descr(ludb):
    descr = " ".join(ludb.DESCR.split())  # ignore line wrapping
    for text in [
        "Open Data Commons Attribution License v1.0",
        "ODC-By 1.0",
        "https://physionet.org/content/ludb/1.0.1/",
        "https://doi.org/10.13026/eegm-h675",
        "Kalyakulina",
        "(102, 12, 5000)",
        "500 Hz",
        "Sinus tachycardia",
        "GSVT",
        "Irregular sinus rhythm",
        ">89",
        "90.0",
        "ludb.csv",
    ]:
        assert text in descr, text


def _subset_rows(ludb, ludb_dir):
    """Rows of the bundled records whose originals are in ``ludb_dir`` (12 of 102)."""
    present = {p.stem for p in ludb_dir.glob("*.hea")}
    rows = [(i, name) for i, name in enumerate(ludb.record_names) if name in present]
    assert len(rows) == len(present) >= 12  # every original is a bundled record
    return rows


def test_signals_equal_wfdb_originals(ludb, ludb_dir):
    """Every shipped sample equals wfdb's physical value (mV) in float32."""
    for i, name in _subset_rows(ludb, ludb_dir):
        record = wfdb.rdrecord(str(ludb_dir / name), physical=True)
        assert record.sig_name == [
            "i", "ii", "iii", "avr", "avl", "avf", "v1", "v2", "v3", "v4", "v5", "v6"
        ]  # fmt: skip
        expected = record.p_signal.T  # float64 (leads, time)
        np.testing.assert_allclose(ludb.data[i], expected, rtol=1e-6, atol=1e-7)
        np.testing.assert_array_equal(ludb.data[i], expected.astype(np.float32))


def test_attributes_equal_headers_and_csv(ludb, ludb_dir):
    sheet = pd.read_csv(ludb_dir / "ludb.csv").set_index("ID")
    for i, name in _subset_rows(ludb, ludb_dir):
        comments = wfdb.rdheader(str(ludb_dir / name)).comments
        header = dict(c.split(":", 1) for c in comments if c.startswith("<"))
        row = ludb.attributes.iloc[i]
        assert row["sex"] == header["<sex>"].strip()
        assert row["age"] == float(header["<age>"])
        assert row["sex"] == sheet.loc[int(name), "Sex"].strip()
        assert row["age"] == float(sheet.loc[int(name), "Age"])


def test_build_script_reproduces_shipped_file(ludb, ludb_dir, tmp_path):
    """Built from the originals at hand, the archive holds the shipped rows of those records."""
    out = tmp_path / "ludb.npz"
    build_ludb_dataset.build(ludb_dir, out)
    shipped = REPO_ROOT / "sklearn_crocs" / "datasets" / "data" / "ludb.npz"
    assert shipped.stat().st_size <= 6 * 1024 * 1024
    rows = [i for i, _ in _subset_rows(ludb, ludb_dir)]
    with np.load(out) as built, np.load(shipped) as ref:
        assert sorted(built.files) == sorted(ref.files)
        for key in ref.files:
            per_record = ref[key].ndim >= 1 and len(ref[key]) == len(ludb.record_names)
            expected = ref[key][rows] if per_record else ref[key]
            np.testing.assert_array_equal(built[key], expected, err_msg=key)
    assert not list(tmp_path.glob(".*.tmp"))  # the temporary file was renamed


def test_build_script_stops_when_csv_disagrees(ludb_dir, tmp_path):
    src = tmp_path / "ludb"
    src.mkdir()
    for name in ["1", "3", "6"]:
        for ext in [".hea", ".dat"]:
            if (ludb_dir / f"{name}{ext}").exists():
                shutil.copy(ludb_dir / f"{name}{ext}", src)
    names = sorted(p.stem for p in src.glob("*.hea"))
    sheet = pd.read_csv(ludb_dir / "ludb.csv")
    sheet = sheet[sheet["ID"].astype(str).isin(names)].copy()
    sheet.loc[sheet.index[0], "Sex"] = "F" if "M" in sheet.iloc[0]["Sex"] else "M"
    sheet.to_csv(src / "ludb.csv", index=False)
    out = tmp_path / "out.npz"
    with pytest.raises(SystemExit, match="disagrees with the headers"):
        build_ludb_dataset.build(src, out)
    assert not out.exists()


def test_header_parsing_rules():
    comments = ["<age>: >89", "<sex>: M", "<diagnoses>:", "Rhythm: Atrial flutter."]
    parsed = ludb_attributes_from_comments(comments, "x")
    assert parsed == {
        "rhythm": "AFIB",
        "sex": "M",
        "age": 90.0,
        "rhythm_statement": "Atrial flutter",
    }
    with pytest.raises(ValueError, match="no '#Rhythm:' statement"):
        ludb_attributes_from_comments(["<age>: 5", "<sex>: F"], "7")
    with pytest.raises(ValueError, match="rhythm statement 'Paced rhythm.' has no"):
        ludb_attributes_from_comments(["<age>: 5", "<sex>: F", "Rhythm: Paced rhythm."], "7")
    with pytest.raises(ValueError, match="unreadable sex"):
        ludb_attributes_from_comments(["<sex>: ?", "Rhythm: Sinus rhythm."], "7")


def test_load_ludb_instances_follows_the_chapman_protocol():
    from sklearn_crocs.datasets import load_ludb, load_ludb_instances

    data = load_ludb_instances(random_state=0)
    X, y, groups = data.X_train, data.y_train, data.groups_train
    assert X.shape[1:] == (1, 2500)  # 10 s at 250 Hz, one lead per instance
    assert X.dtype == np.float32
    assert X.min() >= 0.0
    assert X.max() <= 1.0  # min-max scaled per instance
    assert len(X) + len(data.X_test) == 102 * 12
    assert not set(groups) & set(data.groups_test)  # patient-level split
    assert len(set(data.groups_test)) == 21  # 20 % of 102 patients, rounded up
    # Stratified by rhythm: even GSVT (3 patients) is on both sides.
    assert set(y["rhythm"]) == set(data.y_test["rhythm"]) == {"AFIB", "GSVT", "SB", "SR"}
    assert list(y.columns) == ["rhythm", "sex", "age"]
    assert data.lead_train.tolist()[:13] == [*range(12), 0]
    # Age groups are quartiles of the training patients only, ordered young to old.
    ludb = load_ludb()
    train_ages = ludb.attributes.set_index(ludb.groups).loc[np.unique(groups), "age"]
    counts = pd.Series(data.age_encoder.transform(train_ages.to_frame()).ravel()).value_counts()
    assert counts.max() - counts.min() <= 3
    assert list(y["age"].cat.categories) == data.age_encoder.labels_
    assert y["age"].cat.ordered
    # Every instance keeps the attributes of its record.
    rhythm = ludb.attributes.set_index(ludb.groups)["rhythm"]
    assert (y["rhythm"].to_numpy() == rhythm.loc[groups].to_numpy()).all()
    other = load_ludb_instances(random_state=1)
    assert set(other.groups_test) != set(data.groups_test)
