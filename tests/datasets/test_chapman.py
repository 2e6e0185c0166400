"""load_chapman on real Chapman-Shaoxing records, in both of its layouts, and fetch_chapman."""

import builtins
import os
import re

import numpy as np
import pandas as pd
import pytest
import scipy.io

from sklearn_crocs.datasets import (
    InvalidRecordError,
    fetch_chapman,
    load_chapman,
    patient_split,
)
from sklearn_crocs.datasets._chapman import CHAPMAN_FOLDER
from sklearn_crocs.preprocessing import leads_as_instances, make_frames, normalize_frames

from .conftest import CHAPMAN_EXPECTED_RHYTHM, CHAPMAN_RECORDS, call_with_warnings


def _mat_mv(cinc_dir, name):
    return scipy.io.loadmat(str(cinc_dir / f"{name}.mat"))["val"] / 1000.0


def test_wfdb_layout(chapman_wfdb_dir, cinc_dir):
    bunch = load_chapman(chapman_wfdb_dir)
    assert bunch.data.shape == (9, 12, 5000)
    assert bunch.fs == 500
    assert bunch.record_names.tolist() == CHAPMAN_RECORDS
    np.testing.assert_array_equal(bunch.groups, bunch.record_names)
    assert bunch.attributes["rhythm"].tolist() == [
        CHAPMAN_EXPECTED_RHYTHM[n] for n in CHAPMAN_RECORDS
    ]
    assert bunch.attributes.iloc[0].to_dict() == {"rhythm": "SB", "sex": "F", "age": 56.0}
    assert bunch.metadata.loc["JS09740", "dx"] == "164890007,698252002,55827005,164934002"
    for i, name in enumerate(CHAPMAN_RECORDS):
        np.testing.assert_allclose(bunch.data[i], _mat_mv(cinc_dir, name), atol=1e-6)
    assert bunch.excluded.empty
    assert "CC BY 4.0" in bunch.DESCR and "SAAWR" in bunch.DESCR


def test_original_layout_matches_wfdb_layout(chapman_original_dir, chapman_wfdb_dir):
    original = load_chapman(chapman_original_dir)
    wfdb_form = load_chapman(chapman_wfdb_dir)
    assert original.record_names.tolist() == CHAPMAN_RECORDS
    np.testing.assert_allclose(original.data, wfdb_form.data, atol=1e-6)
    pd.testing.assert_frame_equal(original.attributes, wfdb_form.attributes)
    assert original.metadata.loc["JS09740", "rhythm_source"] == "AF"
    assert original.metadata.loc["JS01560", "Beat"] == "STTC"
    assert list(original.metadata.columns)[:5] == [
        "FileName", "rhythm_source", "Beat", "PatientAge", "Gender"
    ]  # fmt: skip


def test_original_layout_headerless_denoised_csv(chapman_original_dir, copy_tree):
    folder = copy_tree(chapman_original_dir)
    (folder / "ECGDataDenoised").mkdir()
    for name in CHAPMAN_RECORDS:
        table = pd.read_csv(folder / "ECGData" / f"{name}.csv")
        # The denoised files carry no header row and are already in mV here.
        (table / 1000.0).to_csv(
            folder / "ECGDataDenoised" / f"{name}.csv", header=False, index=False
        )
    denoised = load_chapman(folder, denoised=True, csv_units="mV")
    np.testing.assert_allclose(denoised.data, load_chapman(folder).data, atol=1e-6)


def test_paper_preprocessing(chapman_wfdb_dir):
    """500 -> 250 Hz, 2500-sample frames, leads as instances, min-max."""
    bunch = load_chapman(chapman_wfdb_dir, target_fs=250)
    assert bunch.data.shape == (9, 12, 2500)
    assert bunch.fs == 250
    frames, attrs, groups = make_frames(
        bunch.data, 2500, attributes=bunch.attributes, groups=bunch.groups
    )
    X, attrs, groups, lead = leads_as_instances(frames, attrs, groups)
    X = normalize_frames(X, "minmax")
    assert X.shape == (108, 1, 2500)
    assert X.min() == 0 and X.max() == 1
    train, val, test = patient_split(groups, random_state=0)
    assert not set(groups[train]) & set(groups[test])
    assert not set(groups[val]) & set(groups[test])
    assert len(train) + len(val) + len(test) == 108


def test_unmapped_rhythms_on_cinc_records(cinc_dir):
    """E00271 (#Dx 59118001, a bundle branch block) has no rhythm group."""
    # A1041 is 17 s long: cropped to the others' 10 s (a length is no reason to skip).
    bunch, messages = call_with_warnings(
        load_chapman, cinc_dir, on_error="skip", signal_length=5000
    )
    assert len(messages) == 2
    assert re.match(r"Left out 1 of 20 records.*E00271", messages[0])
    assert messages[1].startswith("Repaired 2 WFDB header(s)")  # E01137, E03823
    excluded = bunch.excluded.set_index("record")
    assert excluded.loc["E00271", "kind"] == "filtered"
    assert "59118001" in excluded.loc["E00271", "reason"]
    assert list(excluded.index) == ["E00271"]
    assert len(bunch.record_names) == 19
    rhythms = dict(zip(bunch.record_names, bunch.attributes["rhythm"]))
    assert rhythms["E01137"] == "SB"
    assert rhythms["E03823"] == "GSVT"  # sinus tachycardia + ST-T change
    assert rhythms["HR08883"] == "SR"
    assert rhythms["A0689"] == "AFIB"

    with pytest.raises(ValueError, match=r"E00271: no AFIB/GSVT/SB/SR rhythm"):
        load_chapman(cinc_dir, unmapped="raise", on_error="skip")
    kept, messages = call_with_warnings(
        load_chapman, cinc_dir, unmapped="keep", signal_length="variable"
    )
    assert [m[:16] for m in messages] == ["Repaired 3 WFDB "]
    assert dict(zip(kept.record_names, kept.attributes["rhythm"]))["E00271"] == "OTHER"
    extended, _ = call_with_warnings(
        load_chapman, cinc_dir, rhythm_groups={"59118001": "SR"}, signal_length=5000
    )
    assert dict(zip(extended.record_names, extended.attributes["rhythm"]))["E00271"] == "SR"


def test_ambiguous_rhythm_codes(chapman_wfdb_dir, copy_tree):
    folder = copy_tree(chapman_wfdb_dir)
    header = folder / "WFDBRecords/01/010/JS03291.hea"
    header.write_text(header.read_text().replace("#Dx: 426783006", "#Dx: 426783006,164889003"))
    with pytest.warns(UserWarning, match="Left out 1 of 9"):
        bunch = load_chapman(folder)
    reason = bunch.excluded.set_index("record").loc["JS03291", "reason"]
    assert "several rhythm groups ['AFIB', 'SR']" in reason


def test_records_subset_and_leads(chapman_wfdb_dir, chapman_original_dir):
    for folder in (chapman_wfdb_dir, chapman_original_dir):
        bunch = load_chapman(folder, records=["JS07875", "JS01048"], leads=["avl", "I"])
        assert bunch.record_names.tolist() == ["JS07875", "JS01048"]
        assert bunch.lead_names == ["aVL", "I"]
        assert bunch.data.shape == (2, 2, 5000)
        with pytest.raises(ValueError, match=r"records \['JS00000'\] are not in"):
            load_chapman(folder, records=["JS00000"])


def test_original_layout_bad_files(chapman_original_dir, copy_tree):
    folder = copy_tree(chapman_original_dir)
    (folder / "ECGData" / "JS05282.csv").unlink()
    with pytest.raises(InvalidRecordError, match=r"JS05282\.csv: ECG file not found"):
        load_chapman(folder)
    csv = folder / "ECGData" / "JS06908.csv"
    lines = csv.read_text().splitlines()
    lines[10] = lines[10].replace(lines[10].split(",")[3], "", 1)
    csv.write_text("\n".join(lines) + "\n")
    with pytest.warns(UserWarning, match="Skipped 2 of 9"):
        bunch = load_chapman(folder, on_error="skip")
    reasons = bunch.excluded.set_index("record")["reason"]
    assert "NaN" in reasons["JS06908"]
    assert bunch.data.shape == (7, 12, 5000)
    (folder / "ECGData" / "JS01048.csv").write_text("I,II\nfoo,bar\n")
    with pytest.raises(InvalidRecordError, match=r"JS01048\.csv: cannot be read"):
        load_chapman(folder, records=["JS01048"])
    table = pd.read_excel(folder / "Diagnostics.xlsx")
    table.drop(columns="Gender").to_excel(folder / "Diagnostics.xlsx", index=False)
    with pytest.raises(InvalidRecordError, match=r"missing column\(s\) \['Gender'\]"):
        load_chapman(folder)


def test_unknown_acronym_in_original_layout(chapman_original_dir, copy_tree):
    folder = copy_tree(chapman_original_dir)
    table = pd.read_excel(folder / "Diagnostics.xlsx")
    table.loc[0, "Rhythm"] = "AVB"
    table.to_excel(folder / "Diagnostics.xlsx", index=False)
    with pytest.warns(UserWarning, match="Left out 1 of 9"):
        bunch = load_chapman(folder)
    assert "JS01048" not in bunch.record_names
    assert bunch.excluded["reason"].iloc[0] == ("rhythm 'AVB' is not one of the grouped rhythms")
    mapped = load_chapman(folder, rhythm_groups={"avb": "SB"})
    assert mapped.attributes["rhythm"].iloc[0] == "SB"


def test_openpyxl_missing_gives_a_clear_error(chapman_original_dir, monkeypatch):
    real_import = builtins.__import__

    def fake_import(name, *args, **kwargs):
        if name == "openpyxl":
            raise ImportError("No module named 'openpyxl'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", fake_import)
    with pytest.raises(ImportError, match=r"pip install openpyxl"):
        load_chapman(chapman_original_dir)


def test_layout_detection_and_argument_errors(tmp_path, chapman_wfdb_dir):
    with pytest.raises(FileNotFoundError, match="neither Diagnostics.xlsx"):
        load_chapman(tmp_path)
    with pytest.raises(FileNotFoundError, match="is not a folder"):
        load_chapman(tmp_path / "missing")
    with pytest.raises(ValueError, match="layout must be one of"):
        load_chapman(chapman_wfdb_dir, layout="csv")
    with pytest.raises(ValueError, match="unmapped must be one of"):
        load_chapman(chapman_wfdb_dir, unmapped="ignore")
    with pytest.raises(ValueError, match="csv_units must be"):
        load_chapman(chapman_wfdb_dir, csv_units="V")
    with pytest.raises(TypeError, match="rhythm_groups must be a dict"):
        load_chapman(chapman_wfdb_dir, rhythm_groups=["SR"])


def test_return_X_y_and_cache(chapman_wfdb_dir, chapman_original_dir, tmp_path):
    for folder in (chapman_wfdb_dir, chapman_original_dir):
        X, y = load_chapman(folder, cache_dir=tmp_path, return_X_y=True)
        X2, y2 = load_chapman(folder, cache_dir=tmp_path, return_X_y=True)
        assert isinstance(X2, np.memmap)
        np.testing.assert_array_equal(X, X2)
        pd.testing.assert_frame_equal(y, y2)
    assert len(list(tmp_path.glob("*.npy"))) == 2


def test_verbose_shows_header_and_record_progress_on_stderr(chapman_wfdb_dir, capsys):
    load_chapman(chapman_wfdb_dir)
    assert capsys.readouterr() == ("", "")
    load_chapman(chapman_wfdb_dir, verbose=1)
    out, err = capsys.readouterr()
    assert out == ""
    assert re.search(r"load_chapman.* 9/9 .*header/s", err)
    assert re.search(r"load_chapman.* 9/9 .*record/s", err)


# -------------------------------------------------------------- fetch_chapman
def test_fetch_chapman(chapman_server, chapman_wfdb_dir, tmp_path):
    bunch = fetch_chapman(data_home=tmp_path, base_url=chapman_server.url, delay=0)
    expected = load_chapman(chapman_wfdb_dir)
    np.testing.assert_array_equal(bunch.data, expected.data)
    pd.testing.assert_frame_equal(bunch.attributes, expected.attributes)
    assert (tmp_path / CHAPMAN_FOLDER / "WFDBRecords/01/010/JS09740.mat").exists()
    chapman_server.requests.clear()
    subset = fetch_chapman(
        data_home=tmp_path / "other", base_url=chapman_server.url, delay=0,
        records=["JS05457"], target_fs=250,
    )  # fmt: skip
    assert subset.data.shape == (1, 12, 2500)
    assert sorted(r for r, _ in chapman_server.requests) == [
        "SHA256SUMS.txt",
        "WFDBRecords/01/010/JS05457.hea",
        "WFDBRecords/01/010/JS05457.mat",
    ]
    with pytest.raises(ValueError, match=r"records \['JS00000'\] are not listed"):
        fetch_chapman(data_home=tmp_path, base_url=chapman_server.url, records=["JS00000"])


@pytest.mark.bad_input(
    "Read", "Chapman ECG CSV that is a device (a link to /dev/zero)", "InvalidRecordError"
)
def test_original_layout_reads_regular_files_only(chapman_original_dir, copy_tree):
    # pandas would read /dev/zero without end; the file is refused before it is opened.
    if not os.path.exists("/dev/zero"):
        pytest.skip("no /dev/zero on this platform")
    folder = copy_tree(chapman_original_dir)
    csv = folder / "ECGData" / f"{CHAPMAN_RECORDS[0]}.csv"
    csv.unlink()
    csv.symlink_to("/dev/zero")
    with pytest.raises(InvalidRecordError, match=r"ECG file .* is not a regular file"):
        load_chapman(folder)
    with pytest.warns(UserWarning, match="1 of"):
        skipped = load_chapman(folder, on_error="skip")
    assert CHAPMAN_RECORDS[0] not in list(skipped.record_names)
