"""Readers bounded before decoding, and links where the package trusts its own files
(issue 45, item 14)."""

import os

import numpy as np
import pytest

from sklearn_crocs.datasets import InvalidRecordError, load_wfdb
from sklearn_crocs.datasets._edf import read_edf_record
from sklearn_crocs.datasets._wfdb import read_wfdb_record


@pytest.mark.bad_input(
    "Read", "FLAC signal file announcing 64x more than its bytes", "InvalidRecordError"
)
def test_flac_samples_are_bounded_by_the_file_size(tmp_path):
    wfdb = pytest.importorskip("wfdb")
    pytest.importorskip("soundfile")
    # A flat line compresses to almost nothing: 4 MB of samples in a few kB.
    signal = np.zeros((2_000_000, 1))
    wfdb.wrsamp("flat", fs=500, units=["mV"], sig_name=["II"], p_signal=signal, fmt=["516"],
                adc_gain=[200.0], baseline=[0], write_dir=str(tmp_path))  # fmt: skip
    size = (tmp_path / "flat.dat").stat().st_size
    assert size * 64 < 4_000_000
    with pytest.raises(InvalidRecordError, match="FLAC signal file flat.dat has .* more than 64"):
        read_wfdb_record(tmp_path / "flat")


@pytest.mark.bad_input("Read", "signal cache file replaced by a link", "(rebuilt)")
def test_the_signal_cache_is_never_read_through_a_link(ludb_dir, tmp_path):
    cache = tmp_path / "cache"
    genuine = load_wfdb(ludb_dir, cache_dir=cache).data.copy()
    (npy,) = cache.glob("*.npy")
    forged = tmp_path / "elsewhere.npy"
    np.save(forged, np.full(genuine.shape, 7.0, dtype=np.float32))
    npy.unlink()
    npy.symlink_to(forged)
    again = load_wfdb(ludb_dir, cache_dir=cache).data
    assert np.array_equal(again, genuine)
    assert not npy.is_symlink()  # rebuilt in place of the link
    assert np.load(forged).max() == 7.0  # the link's target left alone


@pytest.mark.bad_input("Read", "EDF path that is a FIFO", "InvalidRecordError")
def test_an_edf_fifo_is_refused_not_read(tmp_path):
    pytest.importorskip("edfio")
    path = tmp_path / "x.edf"
    os.mkfifo(path)
    with pytest.raises(InvalidRecordError, match="EDF file .* is not a regular file"):
        read_edf_record(path)
