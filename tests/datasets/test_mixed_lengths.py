"""Folders of records of different lengths, as PhysioNet/CinC folders are."""

import warnings

import numpy as np
import pytest

from sklearn_crocs.datasets import load_chapman, load_ptbxl, load_wfdb

from .conftest import cinc_digital, write_wfdb

CHAPMAN = ["JS01048", "JS01560", "JS02990", "JS03291"]


@pytest.fixture
def mixed_dir(tmp_path, cinc_dir):
    """Chapman records whose first is 12 s long (6000 samples), the others 10 s or 20 s."""
    lengths = {"JS01048": 6000, "JS01560": 5000, "JS02990": 5000, "JS03291": 10000}
    for name, n in lengths.items():
        digital, record = cinc_digital(cinc_dir, name)
        digital = np.resize(digital.T, (digital.shape[1], n)).T  # repeated to length n
        write_wfdb(tmp_path, name, digital, record.sig_name, 500, comments=record.comments)
    return tmp_path


def _quiet(func, *args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return func(*args, **kwargs)


@pytest.mark.parametrize("loader", [load_wfdb, load_chapman])
@pytest.mark.parametrize("on_error", ["raise", "skip"])
def test_equal_lengths_refused_with_every_length_counted(mixed_dir, loader, on_error):
    # A length other than the first record's is no defect: on_error="skip"
    # does not keep the first record alone and drop the others.
    with pytest.raises(
        ValueError,
        match=r"3 different lengths: 2 of 5000 samples \(JS01560, JS02990\); 1 of 6000 "
        r"samples \(JS01048\); 1 of 10000 samples \(JS03291\)\. Pass signal_length='variable'",
    ):
        _quiet(loader, mixed_dir, on_error=on_error)


@pytest.mark.parametrize("loader", [load_wfdb, load_chapman])
def test_variable_lengths_keep_every_record(mixed_dir, loader):
    bunch = _quiet(loader, mixed_dir, signal_length="variable", on_error="skip")
    assert isinstance(bunch.data, list)
    assert [x.shape[1] for x in bunch.data] == [6000, 5000, 5000, 10000]
    assert bunch.excluded.empty
    cropped = _quiet(loader, mixed_dir, signal_length=5000)
    assert cropped.data.shape == (4, 12, 5000)
    np.testing.assert_array_equal(cropped.data[3], bunch.data[3][:, :5000])


def test_load_ptbxl_signal_length(ptbxl_dir, tmp_path):
    full = load_ptbxl(ptbxl_dir, single_label=False)
    cropped = load_ptbxl(ptbxl_dir, single_label=False, signal_length=3000)
    np.testing.assert_array_equal(cropped.data, full.data[:, :, :3000])
    variable = load_ptbxl(ptbxl_dir, single_label=False, signal_length="variable")
    assert isinstance(variable.data, list) and len(variable.data) == len(full.data)
    np.testing.assert_array_equal(variable.data[0], full.data[0])


def test_mixed_cinc_folder_through_the_documented_raw_path(mixed_dir):
    """The user guide's raw path, unchanged, on a folder of 10-, 12- and 20-s records."""
    from sklearn_crocs.preprocessing import SignalConditioner, make_frames

    data = _quiet(load_wfdb, mixed_dir, attributes={"age": "Age", "sex": "Sex"},
                  signal_length="variable")
    conditioner = SignalConditioner(sampling_rate=data.fs, target_rate=100)
    records = conditioner.fit_transform(data.data)
    assert [r.shape[-1] for r in records] == [1200, 1000, 1000, 2000]
    # Each record is conditioned whole, as on its own.
    np.testing.assert_allclose(records[3], conditioner.transform(data.data[3][None])[0])
    X, y, groups = make_frames(records, 500, attributes=data.attributes,
                               groups=data.record_names)
    assert X.shape == (2 + 2 + 2 + 4, 12, 500)
    assert groups.tolist().count("JS03291") == 4
