"""Inputs that cost memory or time out of proportion to their size (issue 57, items 2-4
and 8): tiny declared rates, .npz inflation, special files and oversized files read by
the command line, and class maps that give one code two classes."""

import json
import os
import shutil
import threading
import types

import numpy as np
import pandas as pd
import pytest
import wfdb
from conftest import make_synthetic_ecgs
from test_cli import error_line, run
from test_model_consistency import fit_cli_model
from test_rates_and_amplitudes import fit_100hz_model

from sklearn_crocs import CROCSClusterer
from sklearn_crocs.cli._common import CommandError
from sklearn_crocs.cli._records import record_attributes
from sklearn_crocs.datasets import InvalidRecordError, load_wfdb
from sklearn_crocs.datasets._class_maps import read_class_map
from sklearn_crocs.datasets._wfdb import read_wfdb_record
from sklearn_crocs.preprocessing import SignalConditioner, resample_signals

FLOOR = "below the 50 Hz"


@pytest.fixture(scope="module")
def cli_model(tmp_path_factory):
    return fit_cli_model(tmp_path_factory.mktemp("cli"))


@pytest.fixture(scope="module")
def model():
    return fit_100hz_model()


def _two_hz_record(folder, name="slow", n_samples=40):
    """A WFDB record of leads I and II whose header declares 2 Hz."""
    signal = np.random.RandomState(0).randn(n_samples, 2)
    wfdb.wrsamp(
        name, fs=2, units=["mV", "mV"], sig_name=["I", "II"], p_signal=signal,
        fmt=["16", "16"], write_dir=str(folder),
    )  # fmt: skip
    return folder / name


def _sparse(path, size):
    """A file of ``size`` bytes that takes no disk space (reads as zeros)."""
    with open(path, "wb") as fh:
        fh.truncate(size)
    return path


# ------------------------------------------- item 2: resampling from a tiny declared rate
@pytest.mark.bad_input("Resampling", "a declared rate of 2 Hz, brought up 50x", "ValueError")
def test_resampling_from_below_an_ecg_rate_is_refused():
    with pytest.raises(ValueError, match=f"2 Hz, {FLOOR}"):
        resample_signals(np.zeros((1, 12, 40)), 2, 100)
    with pytest.raises(ValueError, match=f"2 Hz, {FLOOR}"):
        SignalConditioner(sampling_rate=2, target_rate=100).fit_transform(np.zeros((1, 1, 40)))
    # Without resampling a rate is only a number: nothing grows.
    SignalConditioner(sampling_rate=4).fit_transform(np.random.RandomState(0).randn(2, 1, 40))


@pytest.mark.bad_input("Resampling", "60 Hz brought up 100x", "ValueError")
def test_resampling_is_bounded_by_the_size_it_produces():
    with pytest.raises(ValueError, match=r"100 times as many samples.*at most 20"):
        resample_signals(np.zeros((1, 1000)), 60, 6000)
    assert resample_signals(np.zeros((1, 1000)), 50, 1000).shape == (1, 20000)


@pytest.mark.bad_input("Estimator", "sampling_rate=2 at fit, predict or transform", "ValueError")
def test_estimators_refuse_a_tiny_rate(model):
    X = np.zeros((2, 1, 4), dtype=np.float32)  # 2 s at 2 Hz: 200 samples at 100 Hz
    for method in (model.predict, model.transform):
        with pytest.raises(ValueError, match=FLOOR):
            method(X, sampling_rate=2)
    X, y, _ = make_synthetic_ecgs(n_patients=12, frames_per_patient=1, length=8)
    with pytest.raises(ValueError, match=FLOOR):
        CROCSClusterer(sampling_rate=2, working_rate=100, max_epochs=1).fit(X, y)


@pytest.mark.bad_input(
    "WFDB records", "a header declaring 2 Hz, with target_fs", "InvalidRecordError"
)
def test_load_wfdb_refuses_to_upsample_a_tiny_rate(tmp_path):
    _two_hz_record(tmp_path)
    with pytest.raises(InvalidRecordError, match=rf"slow\.hea: .*{FLOOR}"):
        load_wfdb(tmp_path, target_fs=100)


@pytest.mark.bad_input("Command line", "a WFDB record at 2 Hz, an array at 2 Hz", "(refused)")
def test_command_line_refuses_a_tiny_rate(cli_model, tmp_path):
    _two_hz_record(tmp_path)
    argv = ["--model", cli_model / "model", "--out", tmp_path / "out.csv", "--quiet", "--strict"]
    status, _, err = run("predict", tmp_path, *argv)
    assert status == 1
    assert FLOOR in error_line(err)
    np.save(tmp_path / "slow.npy", np.zeros((2, 2, 40)))
    status, _, err = run("predict", tmp_path / "slow.npy", "--sampling-rate", 2, *argv)
    assert status == 1
    assert FLOOR in error_line(err)


# ------------------------------------------------------------ item 3: .npz inflation
@pytest.mark.bad_input(".npz input", "X of zeros, 1000x its compressed size", "(refused)")
def test_npz_member_bounded_by_its_compressed_size(cli_model, tmp_path):
    path = tmp_path / "zeros.npz"
    np.savez_compressed(path, X=np.zeros((4, 2, 50_000)))
    assert path.stat().st_size < 50_000  # 3.2 MB of zeros
    argv = ["predict", path, "--sampling-rate", 500, "--model", cli_model / "model"]
    status, _, err = run(*argv, "--out", tmp_path / "out.csv", "--quiet")
    assert status == 1
    assert "more than 64 times" in error_line(err)


# --------------------------------------- item 4: special and oversized files
def _feed_fifo(path, text):
    """Write ``text`` into the FIFO ``path`` once a reader opens it (for up to 10 s)."""

    def feed():
        for _ in range(1000):
            try:
                fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
            except OSError:  # no reader yet
                threading.Event().wait(0.01)
                continue
            try:
                os.write(fd, text.encode())
            except OSError:
                pass
            finally:
                os.close(fd)
            return

    threading.Thread(target=feed, daemon=True).start()


def _labels_call(labels):
    args = types.SimpleNamespace(labels=labels, record_column=None)
    records = types.SimpleNamespace(all_names=["a", "b"], names=np.array(["a", "b"]))
    source = types.SimpleNamespace(in_order=True, description="two records")
    return lambda: record_attributes(args, records, source, ["sex"])


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs")
@pytest.mark.bad_input("Command line", "--labels a FIFO or a link to /dev/zero", "CommandError")
@pytest.mark.parametrize("kind", ["fifo", "dev-zero"])
def test_labels_must_be_a_regular_file(tmp_path, kind):
    path = tmp_path / "labels.csv"
    if kind == "fifo":
        os.mkfifo(path)
        _feed_fifo(path, "sex\nM\nF\n")
    else:
        if not os.path.exists("/dev/zero"):
            pytest.skip("no /dev/zero")
        path.symlink_to("/dev/zero")
    with pytest.raises(CommandError, match="labels.csv is not a regular file"):
        _labels_call(path)()


@pytest.mark.bad_input("Command line", "--labels, --class-map of 65 MB", "(refused)")
def test_labels_and_class_maps_have_a_size_limit(tmp_path):
    path = _sparse(tmp_path / "labels.csv", 65 << 20)
    with pytest.raises(CommandError, match=r"labels.csv has 68157440 bytes, more than the"):
        _labels_call(path)()
    with pytest.raises(ValueError, match=r"map.csv has 68157440 bytes, more than the"):
        read_class_map(_sparse(tmp_path / "map.csv", 65 << 20))
    if os.path.exists("/dev/zero"):
        (tmp_path / "zero.json").symlink_to("/dev/zero")
        with pytest.raises(ValueError, match="zero.json is not a regular file"):
            read_class_map(tmp_path / "zero.json")


@pytest.mark.bad_input("Command line", "settings.json of 65 MB", "(refused)")
def test_settings_have_a_size_limit(cli_model, tmp_path):
    model = tmp_path / "model"
    shutil.copytree(cli_model / "model", model)
    _sparse(model / "settings.json", 65 << 20)
    argv = ["predict", cli_model / "two.npz", "--sampling-rate", 500, "--model", model]
    status, _, err = run(*argv, "--out", tmp_path / "out.csv", "--quiet")
    assert status == 1
    assert "settings.json has 68157440 bytes, more than the" in error_line(err)


@pytest.mark.bad_input("Model file", "a 17 GiB file, a link to /dev/zero", "ValueError")
def test_model_files_are_regular_and_bounded(tmp_path):
    path = _sparse(tmp_path / "big.safetensors", 17 << 30)
    with pytest.raises(ValueError, match=r"big.safetensors has 18253611008 bytes, more than"):
        CROCSClusterer.load(path)
    if os.path.exists("/dev/zero"):
        (tmp_path / "zero.safetensors").symlink_to("/dev/zero")
        with pytest.raises(ValueError, match="zero.safetensors is not a regular file"):
            CROCSClusterer.load(tmp_path / "zero.safetensors")


@pytest.mark.bad_input("WFDB records", "a 5 GiB signal file", "InvalidRecordError")
def test_record_files_have_a_size_limit(tmp_path):
    base = _two_hz_record(tmp_path, "big")
    with open(base.with_suffix(".dat"), "r+b") as fh:
        fh.truncate(5 << 30)  # the header's 40 samples, then zeros no one reads
    with pytest.raises(InvalidRecordError, match=r"big.dat has 5368709120 bytes, more than"):
        read_wfdb_record(base)


# ------------------------------------------------------- item 8: class-map conflicts
@pytest.mark.bad_input("Class map", "a code mapped to two classes (CSV, JSON)", "ValueError")
def test_a_code_with_two_classes_is_refused(tmp_path):
    path = tmp_path / "map.csv"
    path.write_text("code,class\nIMI,MI\nNORM,NORM\nimi ,NORM\n")
    with pytest.raises(ValueError, match=r"'IMI' on lines 2 \(MI\), 4 \(NORM\)"):
        read_class_map(path)
    path.write_text("code,class\nIMI,MI\nIMI,MI\n")  # the same class twice: fine
    assert read_class_map(path) == {"IMI": "MI"}
    path = tmp_path / "map.json"
    path.write_text('{"IMI": "MI", "IMI": "NORM"}')
    with pytest.raises(ValueError, match=r"'IMI'.*'MI' and 'NORM'"):
        read_class_map(path)


@pytest.mark.bad_input("Class map", "a JSON class map with a null class", "ValueError")
def test_a_null_class_is_refused(tmp_path):
    path = tmp_path / "map.json"
    path.write_text(json.dumps({"IMI": "MI", "NORM": None}))
    with pytest.raises(ValueError, match=r"no class for 'NORM'"):
        read_class_map(path)
    with pytest.raises(ValueError, match=r"no class for 'NORM'"):
        read_class_map({"IMI": "MI", "NORM": None})
    assert pd.isna(read_class_map({"IMI": "MI"}).get("NORM"))


def test_resampling_is_bounded_by_the_memory_budget():
    import sklearn_crocs
    from sklearn_crocs.preprocessing import resample_signals

    X = np.zeros((4, 1000), dtype=np.float32)
    assert resample_signals(X, 100, 200).shape == (4, 2000)
    with sklearn_crocs.config_context(memory_budget=10_000):
        with pytest.raises(ValueError, match=r"needs about .* more than memory_budget"):
            resample_signals(X, 100, 200)
        with sklearn_crocs.config_context(memory_budget=None):
            assert resample_signals(X, 100, 200).shape == (4, 2000)


@pytest.mark.parametrize("value", [[], {}, ["MI"], True])
def test_a_json_class_that_is_not_a_name_is_refused(tmp_path, value):
    from sklearn_crocs.datasets._class_maps import read_class_map

    path = tmp_path / "map.json"
    path.write_text(json.dumps({"164889003": "AF", "427084000": value}))
    with pytest.raises(ValueError, match="'427084000' the class .* which is not a name"):
        read_class_map(path)
