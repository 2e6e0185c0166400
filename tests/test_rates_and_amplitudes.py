"""Rates, band edges and amplitudes: one check each, the same clear message everywhere
(issue 45, items 6-8), and a bad record in a folder skipped with its name."""

import re
import shutil

import numpy as np
import pytest
from conftest import make_synthetic_ecgs
from test_cli import error_line, run
from test_common import FAST_CNN
from test_model_file_trust import _document, _forge

from sklearn_crocs import CROCSClusterer, InvalidModelFileError
from sklearn_crocs.preprocessing import SignalConditioner, resample_signals

RATE_MESSAGE = "must be a number of Hz from 1 to 100000"


def fit_100hz_model():
    """A small CROCSClusterer fitted on synthetic 2-s frames declared at 100 Hz."""
    X, y, _ = make_synthetic_ecgs(n_patients=12, frames_per_patient=2, length=200, seed=1)
    return CROCSClusterer(
        encoder="cnn", encoder_params=FAST_CNN, embedding_dim=8, max_epochs=1,
        validation_fraction=None, sampling_rate=100, working_rate=100, random_state=0,
    ).fit(X, y)  # fmt: skip


@pytest.fixture(scope="module")
def model():
    return fit_100hz_model()


# ------------------------------------------------ item 6: absurd rates
@pytest.mark.bad_input("Inference", "sampling_rate= absurd, NaN, text or an array", "ValueError")
@pytest.mark.parametrize(
    "rate", [0, 1e-9, float("nan"), float("inf"), 1e308, "100", np.array([100, 200]), True]
)
def test_absurd_sampling_rate_is_one_clear_error(model, rate):
    X = np.zeros((2, 1, 200), dtype=np.float32)
    for method in (model.predict, model.transform, model.predict_proba):
        with pytest.raises(ValueError, match=f"^sampling_rate {RATE_MESSAGE}; got "):
            method(X, sampling_rate=rate)


@pytest.mark.bad_input("Resampling", "rates far below 1 Hz", "ValueError")
@pytest.mark.parametrize(("orig", "target"), [(1e-9, 100), (100, 1e-9), (1e-300, 1e-300)])
def test_resampling_tiny_rates_is_a_clear_error(orig, target):
    with pytest.raises(ValueError, match=RATE_MESSAGE):
        resample_signals(np.zeros((1, 100)), orig, target)


@pytest.mark.bad_input("Estimator", "sampling_rate or working_rate below 1 Hz", "ValueError")
@pytest.mark.parametrize(
    "params", [{"sampling_rate": 1e-9}, {"sampling_rate": 500, "working_rate": 1e-9}]
)
def test_tiny_rate_parameters_are_refused(params):
    X, y, _ = make_synthetic_ecgs(n_patients=12, frames_per_patient=1, length=200)
    with pytest.raises(ValueError, match="rate' parameter of CROCSClusterer must be a float"):
        CROCSClusterer(**params).fit(X, y)


# ------------------------------------------------ item 7: band edges
BANDS = {
    (0.5, float("nan")): "bandpass must be",  # was silently a high-pass
    (float("nan"), float("nan")): "bandpass must be",  # was an argmin of an empty sequence
    (1e-9, 40.0): "bandpass must be",  # was LinAlgError: Singular matrix
    (0.5, float("inf")): "bandpass must be",
    (60.0, None): "not below half the rate the filter runs at",  # was scipy's message
}


@pytest.mark.bad_input("Conditioning", "band edge NaN, near 0 or above Nyquist", "ValueError")
@pytest.mark.parametrize("bandpass", list(BANDS), ids=str)
def test_band_edges_are_checked_once(bandpass):
    X = np.random.RandomState(0).randn(2, 1, 1000)
    conditioner = SignalConditioner(sampling_rate=500, target_rate=100, bandpass=bandpass)
    with pytest.raises(ValueError, match=re.escape(BANDS[bandpass])):
        conditioner.fit_transform(X)


@pytest.mark.bad_input(
    "Model file", "conditioning band edges NaN or above Nyquist", "InvalidModelFileError"
)
@pytest.mark.parametrize("bandpass", [(0.5, float("nan")), (60.0, None)], ids=str)
def test_model_file_band_edges_are_checked_at_load(tmp_path, bandpass):
    X, y, _ = make_synthetic_ecgs(n_patients=12, frames_per_patient=1, length=1000)
    model = CROCSClusterer(
        encoder="cnn", encoder_params=FAST_CNN, embedding_dim=8, max_epochs=1,
        validation_fraction=None, sampling_rate=500, working_rate=100,
        conditioning=SignalConditioner(), random_state=0,
    ).fit(X, y)  # fmt: skip
    path = tmp_path / "model.safetensors"
    model.save(path)
    params = _document(path)["params"]
    params["conditioning"]["SignalConditioner"]["dict"]["bandpass"] = {"tuple": list(bandpass)}
    _forge(path, document={"params": params})
    with pytest.raises(InvalidModelFileError, match="bandpass"):
        CROCSClusterer.load(path)


# ------------------------------------------------ item 8: amplitudes
@pytest.mark.bad_input("Conditioning", "amplitudes of 1e300 (a wrong gain)", "ValueError")
def test_huge_amplitudes_are_refused_by_the_conditioner():
    X = np.random.RandomState(0).randn(2, 1, 1000) * 1e300
    with pytest.raises(ValueError, match=r"values up to [0-9.]+e\+300, beyond the 1e\+09"):
        SignalConditioner(sampling_rate=500).fit_transform(X)


# ---------------------------------- items 6 and 8: one bad record in a folder
@pytest.fixture
def folder_with_bad_records(shared_data, tmp_path):
    """The LUDB subset plus a copy of one record with fs 1e-7 and one with gain 1e-300."""
    folder = tmp_path / "records"
    shutil.copytree(shared_data / "ludb-subset", folder)
    header = (folder / "11.hea").read_text()
    for name, text in {
        "slow": header.replace("11 12 500 5000", "slow 12 0.0000001 5000", 1),
        "loud": header.replace("11 12 500 5000", "loud 12 500 5000", 1).replace(
            "929(-2)/mV", "1e-300(-2)/mV", 1
        ),
    }.items():
        shutil.copy(folder / "11.dat", folder / f"{name}.dat")
        (folder / f"{name}.hea").write_text(text.replace("11.dat", f"{name}.dat"))
    return folder


@pytest.fixture(scope="module")
def ludb_model(shared_data, tmp_path_factory):
    model = tmp_path_factory.mktemp("ludb") / "model"
    argv = ["fit", shared_data / "ludb-subset", "--attributes", "sex", "--model", model]
    argv += ["--working-rate", 100, "--encoder", "cnn", "--embedding-dim", "8"]
    argv += ["--max-epochs", "1", "--random-state", "0", "--quiet"]
    status, _, err = run(*argv)
    assert status == 0, err
    return model


@pytest.mark.bad_input(
    "Command line", "one record with fs 1e-7 or an ADC gain of 1e-300", "(record skipped)"
)
def test_a_record_with_an_absurd_rate_or_gain_is_skipped_by_name(
    folder_with_bad_records, ludb_model, tmp_path
):
    out = tmp_path / "out.csv"
    argv = ["predict", folder_with_bad_records, "--model", ludb_model, "--out", out]
    status, _, err = run(*argv)
    assert status == 0, err
    assert re.search(r"skipped record slow: .*sampling frequency.*from 1 to 100000", err), err
    assert re.search(r"skipped record loud: .*values up to .*beyond the 1e\+09", err), err
    assert "slow" not in out.read_text() and "loud" not in out.read_text()
    status, _, err = run(*argv, "--force", "--strict")
    assert status == 1
    line = error_line(err)
    assert "loud" in line or "slow" in line, line
