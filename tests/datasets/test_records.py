"""The .npy memmap cache of decoded signals (shared by every loader)."""

import os
import shutil

import numpy as np
import pytest

import sklearn_crocs.datasets._wfdb as wfdb_module
from sklearn_crocs.datasets import InvalidRecordError, load_wfdb


@pytest.fixture
def records(tmp_path, cinc_dir):
    """Six real PTB-XL records (CinC format) in a folder of this test."""
    folder = tmp_path / "records"
    folder.mkdir()
    for path in sorted(cinc_dir.glob("HR*")):
        shutil.copyfile(path, folder / path.name)
    return folder


def _forbid_reading(monkeypatch):
    def fail(*args, **kwargs):
        raise AssertionError("a record was decoded although the cache is valid")

    monkeypatch.setattr(wfdb_module, "read_wfdb_record", fail)


def test_second_load_comes_from_the_memmap(records, tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    first = load_wfdb(records, attributes={"dx": "Dx"}, cache_dir=cache)
    npy = list(cache.glob("*.npy"))
    assert len(npy) == 1 and len(list(cache.glob("*.json"))) == 1
    assert not list(cache.glob(".*"))  # no temporary files left behind
    assert isinstance(first.data, np.memmap)
    _forbid_reading(monkeypatch)
    second = load_wfdb(records, attributes={"dx": "Dx"}, cache_dir=cache)
    assert isinstance(second.data, np.memmap)
    assert not second.data.flags.writeable
    np.testing.assert_array_equal(second.data, first.data)
    assert second.attributes.equals(first.attributes)
    np.testing.assert_array_equal(second.record_names, first.record_names)
    # Equal to a load without cache.
    monkeypatch.undo()
    np.testing.assert_array_equal(load_wfdb(records).data, second.data)


def test_other_arguments_or_changed_files_miss_the_cache(records, tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    load_wfdb(records, cache_dir=cache)
    load_wfdb(records, leads=["II"], cache_dir=cache)
    assert len(list(cache.glob("*.npy"))) == 2
    # A changed source file is never served from the old cache.
    header = records / "HR07911.hea"
    os.utime(header, ns=(0, header.stat().st_mtime_ns + 10**9))
    calls = []
    original = wfdb_module.read_wfdb_record

    def counting(*args, **kwargs):
        calls.append(args[0])
        return original(*args, **kwargs)

    monkeypatch.setattr(wfdb_module, "read_wfdb_record", counting)
    load_wfdb(records, cache_dir=cache)
    assert len(calls) == 6


def test_skipped_records_are_remembered(records, tmp_path, monkeypatch):
    (records / "HR08040.mat").unlink()
    cache = tmp_path / "cache"
    with pytest.warns(UserWarning, match="Skipped 1 of 6"):
        first = load_wfdb(records, on_error="skip", cache_dir=cache)
    assert first.data.shape == (5, 12, 5000)
    _forbid_reading(monkeypatch)
    with pytest.warns(UserWarning, match=r"Skipped 1 of 6.*HR08040\.mat not found"):
        second = load_wfdb(records, on_error="skip", cache_dir=cache)
    np.testing.assert_array_equal(second.data, first.data)
    assert second.excluded["record"].tolist() == ["HR08040"]
    assert "HR08040" not in second.record_names


def test_no_half_written_cache_after_an_error(records, tmp_path):
    (records / "HR08883.mat").unlink()  # fifth of six records
    cache = tmp_path / "cache"
    with pytest.raises(InvalidRecordError, match="HR08883"):
        load_wfdb(records, cache_dir=cache)
    assert list(cache.iterdir()) == []


def test_unreadable_cache_index_is_rebuilt(records, tmp_path):
    cache = tmp_path / "cache"
    first = load_wfdb(records, cache_dir=cache)
    index = next(cache.glob("*.json"))
    index.write_text("{not json")
    again = load_wfdb(records, cache_dir=cache)
    np.testing.assert_array_equal(again.data, first.data)
    assert index.read_text().startswith("{")


def test_variable_length_cannot_be_cached(records, tmp_path):
    with pytest.raises(ValueError, match="cache_dir needs records of one common length"):
        load_wfdb(records, signal_length="variable", cache_dir=tmp_path)
