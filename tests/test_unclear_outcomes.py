"""Outcomes that were unclear, each now one clear line (issue 45, item 13)."""

import math

import numpy as np
import pandas as pd
import pytest
from conftest import make_synthetic_ecgs
from sklearn.frozen import FrozenEstimator
from test_cli import error_line, run
from test_common import FAST_CNN

from sklearn_crocs import CROCSClusterer, PrototypeRetriever
from sklearn_crocs.datasets import InvalidRecordError
from sklearn_crocs.datasets._base import parse_age
from sklearn_crocs.datasets._edf import read_edf_record
from sklearn_crocs.datasets._wfdb import read_wfdb_record
from sklearn_crocs.preprocessing import SignalConditioner


@pytest.mark.bad_input("Read", "multi-segment WFDB record", "InvalidRecordError")
def test_multi_segment_record_is_named_as_such(tmp_path):
    wfdb = pytest.importorskip("wfdb")
    signal = np.sin(np.linspace(0, 20, 1000))[:, np.newaxis]
    for name in ("seg1", "seg2"):
        wfdb.wrsamp(
            name, fs=500, units=["mV"], sig_name=["II"], p_signal=signal, fmt=["16"],
            write_dir=str(tmp_path),
        )  # fmt: skip
    (tmp_path / "multi.hea").write_text("multi/2 1 500 2000\nseg1 1000\nseg2 1000\n")
    with pytest.raises(InvalidRecordError, match=r"multi\.hea: a multi-segment record \(2 seg"):
        read_wfdb_record(tmp_path / "multi")


@pytest.mark.bad_input("Read", "EDF whose record duration is NaN", "InvalidRecordError")
def test_edf_with_nan_duration_names_the_rate(tmp_path):
    edfio = pytest.importorskip("edfio")
    path = tmp_path / "x.edf"
    signal = edfio.EdfSignal(np.sin(np.linspace(0, 20, 5000)), 500, label="ECG II",
                             physical_dimension="mV", physical_range=(-2, 2))  # fmt: skip
    edfio.Edf([signal]).write(path)
    data = bytearray(path.read_bytes())
    data[244:252] = b"nan     "  # the duration of a data record, in seconds
    path.write_bytes(bytes(data))
    with pytest.raises(InvalidRecordError, match="its sampling rate must be a number of Hz"):
        read_edf_record(path)


@pytest.mark.bad_input("Estimator", "ECGs of 1 sample", "ValueError")
def test_one_sample_is_not_told_to_swap_axes():
    X, y, _ = make_synthetic_ecgs(n_patients=12, frames_per_patient=1, n_leads=12, length=1)
    with pytest.raises(ValueError, match="1 sample\\(s\\) per lead, no ECG") as info:
        CROCSClusterer().fit(X, y)
    assert "swapaxes" not in str(info.value)
    with pytest.raises(ValueError, match="0 sample\\(s\\) per lead, no ECG"):
        SignalConditioner(sampling_rate=500).fit_transform(np.zeros((2, 3, 0)))


@pytest.mark.bad_input("Read", "'Age: inf' or a negative age in a header", "(unknown age)")
@pytest.mark.parametrize("value", ["inf", "-inf", float("inf"), "-1", ">inf"])
def test_impossible_ages_are_unknown(value):
    assert math.isnan(parse_age(value))


@pytest.mark.bad_input("Retrieval", "query DataFrame with duplicate columns", "ValueError")
def test_query_with_duplicate_columns_is_a_clear_error():
    X, y, _ = make_synthetic_ecgs(n_patients=12, frames_per_patient=1, length=200)
    model = CROCSClusterer(
        encoder="cnn", encoder_params=FAST_CNN, embedding_dim=8, max_epochs=1,
        validation_fraction=None, random_state=0,
    ).fit(X, y)  # fmt: skip
    retriever = PrototypeRetriever(FrozenEstimator(model), n_neighbors=2).fit(X)
    queries = pd.DataFrame([["SR", "AFIB"]], columns=["rhythm", "rhythm"])
    with pytest.raises(ValueError, match=r"\['rhythm'\] more than once"):
        retriever.query(queries)


@pytest.mark.bad_input("Command line", "one labelled record left", "CommandError")
def test_one_labelled_record_is_a_clear_error(tmp_path):
    from sklearn_crocs.datasets import load_ludb

    ludb = load_ludb()
    np.savez(tmp_path / "x.npz", X=ludb.data[:, :2])
    pd.DataFrame({"group": ["A"] + [""] * 101}).to_csv(tmp_path / "labels.csv", index=False)
    argv = ["fit", tmp_path / "x.npz", "--sampling-rate", 500, "--labels", tmp_path / "labels.csv"]
    status, _, err = run(*argv, "--attributes", "group", "--model", tmp_path / "m", "--quiet")
    assert status == 1
    assert "only 1 record has a known 'group'; fit needs at least 2" in error_line(err)
