"""One WFDB record as RECORDS (issue 58, item 3) and per-record rates in Python (item 10)."""

import numpy as np
import pandas as pd
import pytest
import wfdb
from test_cli import error_line, run
from test_model_consistency import fit_cli_model

from sklearn_crocs.datasets import load_ludb, load_wfdb
from sklearn_crocs.preprocessing import SignalConditioner, resample_signals


@pytest.fixture(scope="module")
def cli_model(tmp_path_factory):
    return fit_cli_model(tmp_path_factory.mktemp("cli")) / "model"


# ------------------------------------------------------- item 3: one record
@pytest.mark.parametrize("suffix", [".hea", ""])
def test_predict_one_wfdb_record(shared_data, cli_model, tmp_path, suffix):
    record = shared_data / "ludb-subset" / f"3{suffix}"
    out_csv = tmp_path / "p.csv"
    status, _, err = run("predict", record, "--model", cli_model, "--out", out_csv, "--quiet")
    assert status == 0, err
    assert pd.read_csv(out_csv)["record"].astype(str).unique().tolist() == ["3"]


def test_search_one_example_record(shared_data, cli_model, tmp_path):
    folder = shared_data / "ludb-subset"
    out_csv = tmp_path / "hits.csv"
    argv = ["search", folder, "--model", cli_model, "--example", folder / "3.hea"]
    status, _, err = run(*argv, "--k", 3, "--out", out_csv, "--quiet")
    assert status == 0, err
    table = pd.read_csv(out_csv)
    assert table["query"].unique().tolist() == ["example=3"]
    assert table["record"].astype(str).iloc[0] == "3"  # the record finds itself first


def test_missing_record_name_is_refused(shared_data, cli_model, tmp_path):
    argv = ["predict", shared_data / "ludb-subset" / "4", "--model", cli_model]
    status, _, err = run(*argv, "--out", tmp_path / "p.csv")
    assert status != 0
    assert "does not exist" in error_line(err) and "WFDB record" in error_line(err)


# -------------------------------------------------- item 10: per-record rates
@pytest.fixture(scope="module")
def mixed_folder(tmp_path_factory):
    """Three LUDB records written at 500, 250 and 500 Hz (2 leads, 4 s)."""
    folder = tmp_path_factory.mktemp("mixed")
    ludb = load_ludb()
    signals = []
    for i, fs in enumerate([500, 250, 500]):
        signal = ludb.data[i, :2, :2000].astype(np.float64)
        if fs != 500:
            signal = resample_signals(signal, 500, fs)
        wfdb.wrsamp(f"r{i}", fs=fs, units=["mV", "mV"], sig_name=["I", "II"],
                    p_signal=signal.T, fmt=["16", "16"], adc_gain=[1000, 1000],
                    baseline=[0, 0], write_dir=str(folder))  # fmt: skip
        signals.append(signal)
    return folder


def test_load_wfdb_keeps_each_rate(mixed_folder):
    bunch = load_wfdb(mixed_folder, signal_length="variable")
    assert bunch.sampling_rates.tolist() == [500, 250, 500]
    assert [x.shape[-1] for x in bunch.data] == [2000, 1000, 2000]
    assert bunch.fs is None  # no one rate


def test_load_wfdb_sampling_rates_of_one_rate(mixed_folder):
    bunch = load_wfdb(mixed_folder, target_fs=100)
    assert bunch.sampling_rates.tolist() == [100, 100, 100] and bunch.fs == 100


def test_conditioner_per_record_rates(mixed_folder):
    bunch = load_wfdb(mixed_folder, signal_length="variable")
    conditioner = SignalConditioner(target_rate=100)
    out = conditioner.fit_transform(bunch.data, sampling_rates=bunch.sampling_rates)
    for x, fs, got in zip(bunch.data, bunch.sampling_rates, out):
        alone = SignalConditioner(sampling_rate=fs, target_rate=100).fit_transform(x[None])[0]
        np.testing.assert_array_equal(got, alone)
    assert conditioner.transform(bunch.data, sampling_rates=bunch.sampling_rates)[1].shape == (
        2,
        400,
    )


def test_conditioner_per_record_rates_need_target_rate(mixed_folder):
    bunch = load_wfdb(mixed_folder, signal_length="variable")
    with pytest.raises(ValueError, match="target_rate"):
        SignalConditioner().fit_transform(bunch.data, sampling_rates=bunch.sampling_rates)
    with pytest.raises(ValueError, match="one rate per record"):
        SignalConditioner(target_rate=100).fit_transform(bunch.data, sampling_rates=[500, 250])
