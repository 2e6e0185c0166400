"""load_wfdb and the shared record reading, on the real CinC 2021 and LUDB files."""

import re
import shutil
import warnings

import numpy as np
import pytest
import scipy.io
import wfdb

from sklearn_crocs.datasets import InvalidRecordError, load_ludb, load_wfdb
from sklearn_crocs.datasets._wfdb import read_wfdb_record

from .conftest import call_with_warnings, write_wfdb

GEORGIA = ["E00271", "E01137", "E03823"]


def _mat_mv(cinc_dir, name):
    """The .mat matrix 'val' read with scipy, in mV (gain 1000/mV, baseline 0)."""
    return scipy.io.loadmat(str(cinc_dir / f"{name}.mat"))["val"] / 1000.0


def _quiet_load(*args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        return load_wfdb(*args, **kwargs)


def test_malformed_georgia_header_is_repaired(cinc_dir):
    # wfdb itself rejects this real header.
    with pytest.raises(ValueError, match="record line"):
        wfdb.rdheader(str(cinc_dir / "E00271"))
    raw = read_wfdb_record(cinc_dir / "E00271.hea")
    assert raw.info["repaired"] is True
    assert raw.fs == 500
    assert raw.lead_names[:4] == ["I", "II", "III", "aVR"]
    assert raw.info["comments"][:3] == ["Age: 83", "Sex: Female", "Dx: 59118001"]
    np.testing.assert_allclose(raw.signal, _mat_mv(cinc_dir, "E00271"))
    # The original file is left as it was.
    assert (cinc_dir / "E00271.hea").read_text().startswith("E00271.mat 12 500")


def test_malformed_header_error_and_skip(cinc_dir):
    with pytest.raises(InvalidRecordError, match=r"E00271\.hea: malformed WFDB header"):
        read_wfdb_record(cinc_dir / "E00271", repair_headers=False)
    with pytest.raises(InvalidRecordError, match=r"E00271\.hea"):
        load_wfdb(cinc_dir, repair_headers=False, signal_length=5000)
    bunch, messages = call_with_warnings(
        load_wfdb, cinc_dir, repair_headers=False, signal_length=5000, on_error="skip"
    )
    assert len(messages) == 1
    assert re.match(
        r"Skipped 3 of 20 records .*E00271\.hea: malformed WFDB header.*\(and 2 more\)",
        messages[0],
    )
    assert bunch.data.shape == (17, 12, 5000)
    assert sorted(bunch.excluded["record"]) == GEORGIA
    assert set(bunch.excluded["kind"]) == {"skipped"}
    assert not set(GEORGIA) & set(bunch.record_names)


def test_repairs_are_reported(cinc_dir):
    with pytest.warns(UserWarning, match=r"Repaired 3 WFDB header\(s\).*E00271"):
        bunch = load_wfdb(cinc_dir, signal_length=5000)
    assert bunch.data.shape == (20, 12, 5000)
    assert bunch.excluded.empty


def test_load_wfdb_cinc_values_and_attributes(cinc_dir):
    bunch = _quiet_load(
        cinc_dir,
        attributes={"age": "Age", "sex": "sex", "dx": "Dx", "n": lambda c: len(c)},
        signal_length=5000,
    )
    assert bunch.fs == 500
    assert bunch.lead_names == [
        "I", "II", "III", "aVR", "aVL", "aVF", "V1", "V2", "V3", "V4", "V5", "V6"
    ]  # fmt: skip
    names = bunch.record_names.tolist()
    assert names == sorted(p.stem for p in cinc_dir.glob("*.hea"))
    np.testing.assert_array_equal(bunch.groups, bunch.record_names)
    assert bunch.filenames[0].endswith("A0689.hea")
    for name in ["HR03961", "JS09740", "E01137", "A1041"]:
        i = names.index(name)
        expected = _mat_mv(cinc_dir, name)[:, :5000]
        np.testing.assert_allclose(bunch.data[i], expected, rtol=1e-6, atol=1e-9)
    row = bunch.attributes.iloc[names.index("JS05457")]
    assert row.to_dict() == {"age": 10.0, "sex": "M", "dx": "427084000", "n": 6}
    # Default: every "key: value" comment becomes a string column.
    default = _quiet_load(cinc_dir, signal_length=5000).attributes
    assert {"Age", "Sex", "Dx", "Rx", "Hx"} <= set(default.columns)
    # Callable for the whole row and a comment key as patient id.
    custom = _quiet_load(
        cinc_dir,
        attributes=lambda c: {"first": c[0]},
        groups="Sex",
        signal_length=5000,
    )
    assert custom.attributes["first"].iloc[0] == "Age: 80"
    assert set(custom.groups) == {"Male", "Female"}


def test_lengths_variable_crop_and_equal(cinc_dir):
    with pytest.raises(ValueError, match=r"2 different lengths: 19 of 5000 .*1 of 8500 samples \(A1041\)"):
        _quiet_load(cinc_dir)
    variable = _quiet_load(cinc_dir, signal_length="variable")
    assert isinstance(variable.data, list)
    lengths = {n: x.shape[1] for n, x in zip(variable.record_names, variable.data)}
    assert lengths["A1041"] == 8500 and lengths["A0689"] == 5000
    with pytest.raises(InvalidRecordError, match="fewer than signal_length=6000"):
        _quiet_load(cinc_dir, signal_length=6000)
    cropped = _quiet_load(cinc_dir, signal_length=4000)
    assert cropped.data.shape == (20, 12, 4000)
    i = cropped.record_names.tolist().index("A1041")
    np.testing.assert_allclose(cropped.data[i], variable.data[i][:, :4000])
    one = _quiet_load(cinc_dir, signal_length=6000, on_error="skip")
    assert one.record_names.tolist() == ["A1041"]
    assert one.data.shape == (1, 12, 6000)


def test_leads_subset_and_resampling_on_ludb(ludb_dir):
    bunch = load_wfdb(ludb_dir, leads=["ii", "V1"], target_fs=250)
    ludb = load_ludb()
    present = np.isin(ludb.record_names, bunch.record_names)
    assert bunch.lead_names == ["II", "V1"]
    assert bunch.data.shape == (present.sum(), 2, 2500) == (12, 2, 2500)
    assert bunch.fs == 250
    # Records come in natural order ("3" before "11"), like load_ludb's.
    np.testing.assert_array_equal(bunch.record_names, ludb.record_names[present])
    full = load_wfdb(ludb_dir)
    np.testing.assert_array_equal(full.data, ludb.data[present])
    assert full.attributes["Rhythm"].iloc[0] == "Sinus rhythm."
    assert full.attributes["age"].iloc[0] == 53.0


def _ludb_copy(tmp_path, ludb_dir, n=4):
    """Copy the first ``n`` LUDB records into a folder of this test."""
    folder = tmp_path / "records"
    folder.mkdir()
    present = sorted((p.stem for p in ludb_dir.glob("*.hea")), key=int)[:n]
    for name in present:
        for ext in (".hea", ".dat"):
            shutil.copyfile(ludb_dir / f"{name}{ext}", folder / f"{name}{ext}")
    return folder, present


def test_missing_signal_file(tmp_path, cinc_dir):
    folder = tmp_path / "cinc"
    shutil.copytree(cinc_dir, folder)
    (folder / "JS01560.mat").unlink()
    (folder / "E01137.mat").unlink()  # missing behind a repaired header too
    with pytest.raises(
        InvalidRecordError, match=r"E01137\.hea: signal file .*E01137\.mat not found"
    ):
        _quiet_load(folder, signal_length=5000)
    bunch, messages = call_with_warnings(load_wfdb, folder, signal_length=5000, on_error="skip")
    assert [m[:16] for m in messages] == ["Skipped 2 of 20 ", "Repaired 2 WFDB "]
    assert sorted(bunch.excluded["record"]) == ["E01137", "JS01560"]
    assert "JS01560.mat not found" in " ".join(bunch.excluded["reason"])
    # Reading a single record reports the same.
    (folder / "HR03961.mat").unlink()
    with pytest.raises(InvalidRecordError, match=r"HR03961\.hea: .*HR03961\.mat not found"):
        read_wfdb_record(folder / "HR03961")


def test_missing_dat_file(tmp_path, ludb_dir):
    folder, names = _ludb_copy(tmp_path, ludb_dir)
    (folder / f"{names[1]}.dat").unlink()
    with pytest.raises(
        InvalidRecordError, match=rf"{names[1]}\.hea: signal file .*{names[1]}\.dat not found"
    ):
        load_wfdb(folder)
    with pytest.raises(InvalidRecordError, match="WFDB header file not found"):
        read_wfdb_record(folder / "nonexistent")


def test_record_with_nan_samples(tmp_path, cinc_dir):
    record = wfdb.rdrecord(str(cinc_dir / "HR07968"), physical=False)
    digital = record.d_signal.copy()
    digital[100:110, 3] = -32768  # WFDB's "no sample" value in format 16
    folder = tmp_path / "nan"
    folder.mkdir()
    write_wfdb(folder, "HR07968", digital, record.sig_name, 500)
    shutil.copyfile(cinc_dir / "HR08040.hea", folder / "HR08040.hea")
    shutil.copyfile(cinc_dir / "HR08040.mat", folder / "HR08040.mat")
    with pytest.raises(InvalidRecordError, match=r"HR07968\.hea: 10 samples are NaN"):
        load_wfdb(folder)
    with pytest.warns(UserWarning, match="Skipped 1 of 2"):
        bunch = load_wfdb(folder, on_error="skip")
    assert bunch.record_names.tolist() == ["HR08040"]


def test_unexpected_lead_names(tmp_path, ludb_dir):
    folder, names = _ludb_copy(tmp_path, ludb_dir)
    header = folder / f"{names[2]}.hea"
    header.write_text(header.read_text().replace(" v6\n", " MLII\n"))
    with pytest.raises(
        InvalidRecordError, match=rf"{names[2]}\.hea: unexpected lead names .*'MLII'"
    ):
        load_wfdb(folder)
    with pytest.warns(UserWarning, match="Skipped 1 of 4"):
        bunch = load_wfdb(folder, on_error="skip")
    assert bunch.data.shape == (3, 12, 5000)
    # A requested lead that a record lacks.
    with pytest.raises(InvalidRecordError, match=r"does not have the requested lead\(s\) \['V6'\]"):
        load_wfdb(folder, leads=["I", "V6"])
    only, messages = call_with_warnings(load_wfdb, folder, leads=["I", "MLII"], on_error="skip")
    assert only.data.shape == (1, 2, 5000)
    assert messages[0].startswith("Skipped 3 of 4 records")


def test_different_sampling_rate(tmp_path, ludb_dir):
    folder, names = _ludb_copy(tmp_path, ludb_dir)
    header = folder / f"{names[3]}.hea"
    lines = header.read_text().splitlines(keepends=True)
    lines[0] = lines[0].replace(" 500 5000", " 250 5000")
    header.write_text("".join(lines))
    with pytest.raises(
        InvalidRecordError, match=rf"{names[3]}\.hea: sampling rate 250 Hz differs from the 500 Hz"
    ):
        load_wfdb(folder)
    with pytest.warns(UserWarning, match="Skipped 1 of 4"):
        assert load_wfdb(folder, on_error="skip").data.shape == (3, 12, 5000)
    # With target_fs every record is brought to one rate (the relabelled
    # record now lasts 20 s, so its length differs).
    resampled = load_wfdb(folder, target_fs=250, signal_length="variable")
    assert resampled.fs == 250
    assert [x.shape for x in resampled.data] == [(12, 2500)] * 3 + [(12, 5000)]


def test_microvolt_units_are_converted(tmp_path, cinc_dir):
    record = wfdb.rdrecord(str(cinc_dir / "JS01048"), physical=False)
    folder = tmp_path / "uv"
    folder.mkdir()
    write_wfdb(folder, "JS01048", record.d_signal, record.sig_name, 500, gain=1.0)
    header = folder / "JS01048.hea"
    header.write_text(header.read_text().replace("/mV", "/uV"))
    raw = read_wfdb_record(folder / "JS01048")
    np.testing.assert_allclose(raw.signal, _mat_mv(cinc_dir, "JS01048"))
    header.write_text(header.read_text().replace("/uV", "/mmHg"))
    with pytest.raises(InvalidRecordError, match="unsupported physical unit 'mmHg'"):
        read_wfdb_record(folder / "JS01048")


def test_truncated_signal_file(tmp_path, ludb_dir):
    folder, names = _ludb_copy(tmp_path, ludb_dir)
    dat = folder / f"{names[0]}.dat"
    dat.write_bytes(dat.read_bytes()[:1000])
    with pytest.raises(InvalidRecordError, match=rf"{names[0]}\.hea"):
        load_wfdb(folder)


def test_argument_errors(tmp_path, ludb_dir):
    with pytest.raises(ValueError, match="on_error must be 'raise'"):
        load_wfdb(ludb_dir, on_error="ignore")
    with pytest.raises(ValueError, match="signal_length must be"):
        load_wfdb(ludb_dir, signal_length="longest")
    with pytest.raises(ValueError, match="target_fs must be a number of Hz from 1"):
        load_wfdb(ludb_dir, target_fs=-5)
    with pytest.raises(TypeError, match="attributes must be None, a mapping"):
        load_wfdb(ludb_dir, attributes=3)
    with pytest.raises(TypeError, match=r"attributes\['age'\] must be"):
        load_wfdb(ludb_dir, attributes={"age": 3})
    with pytest.raises(ValueError, match="No WFDB records"):
        load_wfdb(tmp_path)
    with pytest.raises(ValueError, match="empty list"):
        load_wfdb([])


def test_list_of_records(cinc_dir):
    bunch = load_wfdb([cinc_dir / "JS01048", str(cinc_dir / "HR09008.hea")])
    assert bunch.record_names.tolist() == ["JS01048", "HR09008"]
    np.testing.assert_allclose(bunch.data[1], _mat_mv(cinc_dir, "HR09008"), rtol=1e-6)


def test_sex_and_age_read_as_every_loader_and_the_cli_read_them(tmp_path, cinc_dir):
    # One normaliser: CinC's "Female"/"63" compare with LUDB's and the CLI's "F"/63.0.
    rng = np.random.default_rng(0)
    for name, sex, age in [("r1", "Female", "63"), ("r2", "male", ">89"), ("r3", "?", "")]:
        wfdb.wrsamp(name, fs=500, units=["mV"], sig_name=["I"], fmt=["16"],
                    p_signal=rng.normal(size=(1000, 1)), comments=[f"Sex: {sex}", f"Age: {age}"],
                    write_dir=str(tmp_path))  # fmt: skip
    for attributes in (None, {"sex": "Sex", "age": "Age"}):
        frame = load_wfdb(tmp_path, attributes=attributes).attributes
        frame.columns = frame.columns.str.lower()
        assert frame["sex"].iloc[:2].tolist() == ["F", "M"] and np.isnan(frame["sex"].iloc[2])
        assert frame["age"].iloc[:2].tolist() == [63.0, 90.0] and np.isnan(frame["age"].iloc[2])
    ludb = load_ludb().attributes
    assert set(ludb["sex"]) == {"F", "M"} and ludb["age"].dtype == np.float64
    cinc = _quiet_load(cinc_dir, attributes={"sex": "Sex", "age": "Age"}, signal_length=5000)
    assert set(cinc.attributes["sex"]) <= {"F", "M"} and cinc.attributes["age"].dtype == np.float64
