"""load_ptbxl and fetch_ptbxl on a PTB-XL tree made of the six real PTB-XL records in cinc2021."""

import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import scipy.io

import sklearn_crocs.datasets._wfdb as wfdb_module
from sklearn_crocs.datasets import (
    InvalidRecordError,
    fetch_ptbxl,
    load_ptbxl,
    ptbxl_fold_split,
)
from sklearn_crocs.datasets._download import MANIFEST_FILE
from sklearn_crocs.datasets._ptbxl import PTBXL_FOLDER
from sklearn_crocs.preprocessing import make_frames, normalize_frames

from .conftest import PTBXL_EXPECTED_CLASS, sha256_of, write_checksums

ECG_IDS = [3961, 7911, 7968, 8040, 8883, 9008]


def _mat_mv(cinc_dir, ecg_id):
    return scipy.io.loadmat(str(cinc_dir / f"HR{ecg_id:05d}.mat"))["val"] / 1000.0


def _edit_database(folder, changes):
    """Rewrite ptbxl_database.csv with ``{ecg_id: {column: value}}`` changes."""
    path = folder / "ptbxl_database.csv"
    table = pd.read_csv(path)
    for ecg_id, row in changes.items():
        for column, value in row.items():
            table.loc[table["ecg_id"] == ecg_id, column] = value
    table.to_csv(path, index=False)


def test_load_500hz(ptbxl_dir, cinc_dir):
    bunch = load_ptbxl(ptbxl_dir)
    assert bunch.data.shape == (6, 12, 5000)
    assert bunch.data.dtype == np.float32
    assert bunch.fs == 500
    assert bunch.lead_names == [
        "I", "II", "III", "aVR", "aVL", "aVF", "V1", "V2", "V3", "V4", "V5", "V6"
    ]  # fmt: skip
    assert bunch.ecg_ids.tolist() == ECG_IDS
    for i, ecg_id in enumerate(ECG_IDS):
        np.testing.assert_allclose(bunch.data[i], _mat_mv(cinc_dir, ecg_id), atol=1e-6)
    assert list(bunch.attributes.columns) == ["diagnostic_superclass", "sex", "age"]
    assert bunch.attributes["diagnostic_superclass"].tolist() == [
        PTBXL_EXPECTED_CLASS[i] for i in ECG_IDS
    ]
    assert bunch.groups.tolist() == [7050, 14202, 3208, 6799, 11218, 14925]
    assert bunch.groups.dtype == np.int64
    assert bunch.folds.tolist() == [5, 8, 1, 4, 1, 4]
    assert bunch.record_names[0] == "records500/03000/03961_hr"
    assert bunch.metadata["scp_codes"].iloc[4] == {
        "ASMI": 100.0, "PVC": 100.0, "ABQRS": 0.0, "SR": 0.0
    }  # fmt: skip
    assert bunch.excluded.empty
    assert "CC BY 4.0" in bunch.DESCR and "300" in bunch.DESCR


def test_sex_and_age_match_the_cinc_headers(ptbxl_dir, cinc_dir):
    """The CSV metadata and the challenge headers describe the same patients."""
    bunch = load_ptbxl(ptbxl_dir)
    for i, ecg_id in enumerate(ECG_IDS):
        header = (cinc_dir / f"HR{ecg_id:05d}.hea").read_text()
        info = dict(line[1:].split(": ", 1) for line in header.splitlines() if line[:1] == "#")
        assert bunch.attributes["sex"].iloc[i] == info["Sex"][0]
        assert bunch.attributes["age"].iloc[i] == float(info["Age"])


def test_load_100hz(ptbxl_dir):
    bunch = load_ptbxl(ptbxl_dir, sampling_rate=100)
    assert bunch.data.shape == (6, 12, 1000)
    assert bunch.fs == 100
    assert bunch.record_names[0] == "records100/03000/03961_lr"
    high = load_ptbxl(ptbxl_dir)
    # Same recording: the 100 Hz version follows the 500 Hz one.
    corr = np.corrcoef(bunch.data[0, 1], high.data[0, 1, ::5])[0, 1]
    assert corr > 0.95


def test_subsets_read_only_the_selected_records(ptbxl_dir, monkeypatch):
    read = []
    original = wfdb_module.read_wfdb_record

    def spy(path, **kwargs):
        read.append(path.name)
        return original(path, **kwargs)

    monkeypatch.setattr(wfdb_module, "read_wfdb_record", spy)
    bunch = load_ptbxl(ptbxl_dir, folds=[1, 4], leads=["v1", "II"])
    assert bunch.ecg_ids.tolist() == [7968, 8040, 8883, 9008]
    assert bunch.data.shape == (4, 2, 5000)
    assert bunch.lead_names == ["V1", "II"]
    assert read == ["07968_hr", "08040_hr", "08883_hr", "09008_hr"]
    read.clear()
    by_id = load_ptbxl(ptbxl_dir, ecg_ids=[9008, 3961])
    assert by_id.ecg_ids.tolist() == [9008, 3961]
    assert read == ["09008_hr", "03961_hr"]
    np.testing.assert_array_equal(by_id.data[1, 6], load_ptbxl(ptbxl_dir).data[0, 6])


def test_single_label_filter(ptbxl_dir, copy_tree):
    folder = copy_tree(ptbxl_dir)
    _edit_database(
        folder,
        {
            7911: {"scp_codes": "{'IMI': 100.0, 'CLBBB': 100.0, 'SR': 0.0}"},
            8040: {"scp_codes": "{'SR': 0.0, 'AFIB': 0.0}"},
        },
    )
    bunch = load_ptbxl(folder)
    assert bunch.ecg_ids.tolist() == [3961, 7968, 8883, 9008]
    excluded = bunch.excluded.set_index("record")
    assert set(excluded["kind"]) == {"filtered"}
    assert "2 diagnostic superclasses (CD, MI)" in excluded.loc["7911", "reason"]
    assert "no diagnostic superclass" in excluded.loc["8040", "reason"]
    everything = load_ptbxl(folder, single_label=False)
    classes = everything.attributes["diagnostic_superclass"]
    assert classes.iloc[:3].tolist() == ["NORM", "CD|MI", "NORM"]
    assert pd.isna(classes.iloc[3])  # 8040: rhythm statements only
    assert everything.excluded.empty


def test_age_300_means_over_89(ptbxl_dir, copy_tree):
    folder = copy_tree(ptbxl_dir)
    _edit_database(folder, {7968: {"age": 300.0}, 9008: {"age": np.nan}})
    bunch = load_ptbxl(folder)
    ages = dict(zip(bunch.ecg_ids, bunch.attributes["age"]))
    assert ages[7968] == 90.0
    assert np.isnan(ages[9008])
    assert bunch.metadata.loc[7968, "age"] == 300.0


def test_pipeline_frames_and_zscore(ptbxl_dir):
    bunch = load_ptbxl(ptbxl_dir)
    frames, attrs, groups = make_frames(
        bunch.data, 2500, attributes=bunch.attributes, groups=bunch.groups
    )
    frames = normalize_frames(frames, "zscore")
    assert frames.shape == (12, 12, 2500)
    np.testing.assert_allclose(frames.std(axis=-1), 1, atol=1e-4)
    folds = make_frames(bunch.data, 2500, groups=bunch.folds)[2]
    train, val, test = ptbxl_fold_split(folds, val_folds=[5], test_folds=[8])
    assert set(groups[test]) == {14202} and set(groups[val]) == {7050}
    assert len(train) == 8


def test_missing_files_and_columns(ptbxl_dir, copy_tree, tmp_path):
    with pytest.raises(FileNotFoundError, match="ptbxl_database.csv not found"):
        load_ptbxl(tmp_path)
    folder = copy_tree(ptbxl_dir)
    (folder / "records500/08000/08040_hr.dat").unlink()
    with pytest.raises(
        InvalidRecordError, match=r"08040_hr\.hea: signal file .*08040_hr\.dat not found"
    ):
        load_ptbxl(folder)
    with pytest.warns(UserWarning, match="Skipped 1 of 6"):
        bunch = load_ptbxl(folder, on_error="skip")
    assert 8040 not in bunch.ecg_ids
    assert bunch.excluded["kind"].tolist() == ["skipped"]
    # The 100 Hz records are still complete.
    assert load_ptbxl(folder, sampling_rate=100).data.shape == (6, 12, 1000)

    table = pd.read_csv(folder / "ptbxl_database.csv")
    table.drop(columns="strat_fold").to_csv(folder / "ptbxl_database.csv", index=False)
    with pytest.raises(InvalidRecordError, match=r"missing column\(s\) \['strat_fold'\]"):
        load_ptbxl(folder)
    table.loc[2, "scp_codes"] = "NORM"
    table.to_csv(folder / "ptbxl_database.csv", index=False)
    with pytest.raises(InvalidRecordError, match=r"ecg_id 7968.*scp_codes 'NORM' is not a dict"):
        load_ptbxl(folder)


def test_record_with_wrong_rate_or_leads(ptbxl_dir, copy_tree):
    folder = copy_tree(ptbxl_dir)
    header = folder / "records500/09000/09008_hr.hea"
    text = header.read_text()
    header.write_text(text.replace("09008_hr 12 500 5000", "09008_hr 12 250 5000"))
    with pytest.raises(
        InvalidRecordError, match=r"09008_hr\.hea: sampling rate 250 Hz, expected 500 Hz"
    ):
        load_ptbxl(folder)
    header.write_text(text.replace(" V6\n", " V7\n"))
    with pytest.raises(
        InvalidRecordError, match=r"09008_hr\.hea: does not have the requested lead\(s\) \['V6'\]"
    ):
        load_ptbxl(folder)


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"sampling_rate": 250}, ValueError, "sampling_rate must be 100"),
        ({"folds": [0, 3]}, ValueError, r"folds must be in 1-10.*\[0\]"),
        ({"folds": ["a"]}, ValueError, "folds must be None or a list"),
        ({"ecg_ids": [1, 3961]}, ValueError, r"ecg_ids \[1\] are not in"),
        ({"folds": [2]}, ValueError, "No PTB-XL record matches"),
        ({"single_label": "yes"}, TypeError, "single_label must be True or False"),
        ({"on_error": "warn"}, ValueError, "on_error must be"),
    ],
)
def test_argument_errors(ptbxl_dir, kwargs, error, match):
    with pytest.raises(error, match=match):
        load_ptbxl(ptbxl_dir, **kwargs)


def test_cache_and_return_X_y(ptbxl_dir, tmp_path):
    X, y = load_ptbxl(ptbxl_dir, cache_dir=tmp_path, return_X_y=True)
    assert isinstance(X, np.memmap)
    again = load_ptbxl(ptbxl_dir, cache_dir=tmp_path)
    np.testing.assert_array_equal(again.data, X)
    pd.testing.assert_frame_equal(again.attributes, y)
    assert len(list(tmp_path.glob("ptbxl500-*.npy"))) == 1


# ---------------------------------------------------------------- fetch_ptbxl
def _fetch(server, home, **kwargs):
    return fetch_ptbxl(data_home=home, base_url=server.url, delay=0, **kwargs)


def test_fetch_ptbxl_downloads_verifies_and_loads(ptbxl_server, ptbxl_dir, tmp_path):
    home = tmp_path / "home"
    bunch = _fetch(ptbxl_server, home)
    expected = load_ptbxl(ptbxl_dir)
    np.testing.assert_array_equal(bunch.data, expected.data)
    pd.testing.assert_frame_equal(bunch.attributes, expected.attributes)
    root = home / PTBXL_FOLDER
    fetched = sorted(r for r, _ in ptbxl_server.requests)
    # Only what the selection needs: the lists, the tables and 500 Hz records.
    assert "SHA256SUMS.txt" in fetched and "ptbxl_database.csv" in fetched
    assert not [r for r in fetched if r.startswith("records100/")]
    assert len([r for r in fetched if r.startswith("records500/")]) == 12
    for relpath in fetched:
        assert sha256_of(root / relpath) == sha256_of(ptbxl_server.httpd.root / relpath)
    assert not list(root.rglob("*.part"))
    assert (root / MANIFEST_FILE).exists()
    # Everything is there now: a second call makes no request at all.
    n_requests = len(ptbxl_server.requests)
    again = _fetch(ptbxl_server, home, download_if_missing=False)
    assert len(ptbxl_server.requests) == n_requests
    np.testing.assert_array_equal(again.data, bunch.data)


def test_fetch_selection_downloads_a_subset(ptbxl_server, tmp_path):
    # A base URL without the final slash works too.
    bunch = fetch_ptbxl(
        data_home=tmp_path,
        base_url=ptbxl_server.url.rstrip("/"),
        delay=0,
        sampling_rate=100,
        folds=[4],
        n_jobs=2,
    )
    assert bunch.ecg_ids.tolist() == [8040, 9008]
    records = sorted(r for r, _ in ptbxl_server.requests if r.startswith("records"))
    assert records == [
        "records100/08000/08040_lr.dat", "records100/08000/08040_lr.hea",
        "records100/09000/09008_lr.dat", "records100/09000/09008_lr.hea",
    ]  # fmt: skip


@pytest.mark.bad_input("Fetch", "record path in the server's metadata outside data_home", "ValueError")
def test_ptbxl_table_path_outside_data_home(ptbxl_server, tmp_path):
    table = ptbxl_server.httpd.root / "ptbxl_database.csv"
    frame = pd.read_csv(table)
    frame.loc[frame["ecg_id"] == 8883, "filename_hr"] = "../../escaped/08883_hr"
    frame.to_csv(table, index=False)
    write_checksums(ptbxl_server.httpd.root)
    with pytest.raises(ValueError, match=r"Refusing the entry '\.\./\.\./escaped/08883_hr\.hea'"):
        _fetch(ptbxl_server, tmp_path / "home")
    assert not (tmp_path / "escaped").exists()
    assert not list((tmp_path / "home" / PTBXL_FOLDER).glob("records500"))


def test_verbose_shows_download_and_reading_progress_on_stderr(ptbxl_server, tmp_path, capsys):
    _fetch(ptbxl_server, tmp_path / "quiet")
    assert capsys.readouterr() == ("", "")
    _fetch(ptbxl_server, tmp_path / "loud", verbose=1)
    out, err = capsys.readouterr()
    assert out == ""
    # The two tables, the six records' 12 files, then the six records read.
    assert re.search(r"Downloading PTB-XL.* 2/2 ", err)
    assert re.search(r"Downloading PTB-XL.* 12/12 ", err)
    assert re.search(r"load_ptbxl.* 6/6 ", err)


@pytest.mark.bad_input(
    "Read", "PTB-XL metadata CSV that is a device (a link to /dev/zero)", "InvalidRecordError"
)
def test_metadata_csv_must_be_a_regular_file(ptbxl_dir, copy_tree):
    # pandas would read /dev/zero without end; the file is refused before it is opened.
    if not Path("/dev/zero").exists():
        pytest.skip("no /dev/zero on this platform")
    folder = copy_tree(ptbxl_dir)
    (folder / "scp_statements.csv").unlink()
    (folder / "scp_statements.csv").symlink_to("/dev/zero")
    with pytest.raises(InvalidRecordError, match=r"scp_statements\.csv is not a regular file"):
        load_ptbxl(folder)
