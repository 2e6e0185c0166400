"""CROCSClusterer's guards: memory budget, failed training, unusable device."""

import threading
import tracemalloc
import warnings

import numpy as np
import pandas as pd
import pytest
import torch
from conftest import make_synthetic_ecgs
from sklearn.exceptions import ConvergenceWarning
from sklearn.pipeline import make_pipeline

import sklearn_crocs
import sklearn_crocs._guards as guards
from sklearn_crocs import CROCSClusterer
from sklearn_crocs.preprocessing import FrameNormalizer

FAST = {"embedding_dim": 8, "max_epochs": 1, "validation_fraction": None, "random_state": 0}


def _combinations_data(dims, n_samples=200, length=400):
    rng = np.random.RandomState(0)
    y = pd.DataFrame(
        {f"a{i}": (np.arange(n_samples) // (i + 1)) % d for i, d in enumerate(dims)}
    )
    return rng.randn(n_samples, length).astype(np.float32), y


# ------------------------------------------------------------------- memory
@pytest.mark.bad_input("Fit", "fit needing more memory than memory_budget", "ValueError")
def test_ten_thousand_combinations_refused_before_allocating(monkeypatch):
    # Reproduction 5: 10,000 attribute combinations took about 6 GB for one
    # epoch. The default budget is half the available memory; the refusal
    # comes before any table is built.
    X, y = _combinations_data((100, 100))
    monkeypatch.setattr(guards, "available_memory", lambda: 4 * 10**9)
    tracemalloc.start()
    try:
        with pytest.raises(
            ValueError,
            match=r"needs about 4\.\d GB .* more than memory_budget='auto' \(2 GB\).*"
            r"y: 10000 attribute combinations \(100 x 100 values of \['a0', 'a1'\]\)",
        ):
            CROCSClusterer(**FAST).fit(X, y)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 50 * 2**20
    with (
        pytest.raises(ValueError, match=r"more than memory_budget=1000000000 \(1 GB\)"),
        sklearn_crocs.config_context(memory_budget=10**9),
    ):
        CROCSClusterer(**FAST).fit(X, y)


@pytest.mark.bad_input("Fit", "fit needing more memory than memory_budget", "ValueError")
@pytest.mark.parametrize(
    ("dims", "params", "budget", "cause"),
    [
        ((2, 2), {"batch_size": 256}, 10**6, r"batch_size=256: one training step on ECGs of 1 lead\(s\) x 2500"),
        ((2, 50, 50), {"embedding_dim": 256}, 10**9, "embedding_dim=256 times the same-class pairs"),
    ],
    ids=["batch", "embedding-dim"],
)  # fmt: skip
def test_memory_refusal_names_the_parameter(dims, params, budget, cause):
    X, y = _combinations_data(dims, length=2500)
    with pytest.raises(ValueError, match=cause), sklearn_crocs.config_context(memory_budget=budget):
        CROCSClusterer(**{**FAST, **params}).fit(X, y)


def test_memory_estimate_is_conservative():
    # Measured (ru_maxrss) for the fit of the first test without a budget:
    # 3.6 GB; the estimate must not be below it.
    parts = guards.fit_memory(
        dims=(100, 100), class_index=0, embedding_dim=8, batch_size=256, activation_size=400
    )
    assert sum(parts.values()) > 3.6e9
    assert max(parts, key=parts.get) == "weight table"


def test_memory_budget_setting():
    X, y = _combinations_data((2, 2), n_samples=40)
    for bad in (0, -5, 1.5, "half", True):
        with (
            pytest.raises(ValueError, match="memory_budget must be 'auto', a positive int"),
            sklearn_crocs.config_context(memory_budget=bad),
        ):
            pass
        with pytest.raises(ValueError, match="memory_budget must be"):
            sklearn_crocs.set_config(memory_budget=bad)
    assert sklearn_crocs.get_config() == {"memory_budget": "auto"}
    # The fit reads the setting of its context, which comes back after it.
    with sklearn_crocs.config_context(memory_budget=10**3):
        with pytest.raises(ValueError, match=r"more than memory_budget=1000 \("):
            CROCSClusterer(**FAST).fit(X, y)
        with sklearn_crocs.config_context(memory_budget=None):  # the check off
            assert CROCSClusterer(**FAST).fit(X, y).n_iter_ == 1
        assert sklearn_crocs.get_config()["memory_budget"] == 10**3
    assert sklearn_crocs.get_config()["memory_budget"] == "auto"
    CROCSClusterer(**FAST).fit(X, y)
    with pytest.raises(TypeError, match="memory_budget"):
        CROCSClusterer(memory_budget=None)  # no longer a parameter


def test_memory_budget_set_config_and_threads():
    seen = {}
    try:
        sklearn_crocs.set_config(memory_budget=10**3)
        assert sklearn_crocs.get_config()["memory_budget"] == 10**3
        # Each thread has its own settings: another one sees the initial value.
        thread = threading.Thread(
            target=lambda: seen.update(other=sklearn_crocs.get_config()["memory_budget"])
        )
        thread.start()
        thread.join()
        sklearn_crocs.set_config()  # left out: the value stays
        assert sklearn_crocs.get_config()["memory_budget"] == 10**3
        sklearn_crocs.set_config(memory_budget=None)  # None: no check, as in the context
        assert sklearn_crocs.get_config()["memory_budget"] is None
    finally:
        sklearn_crocs.set_config(memory_budget="auto")
    assert seen["other"] == "auto"


# ------------------------------------------------------------ failed training
@pytest.fixture(scope="module")
def ecgs():
    X, y, _ = make_synthetic_ecgs(n_patients=12, frames_per_patient=2, length=2500)
    return X, y


@pytest.mark.bad_input("Fit", "input scaled by 1e18 (embeddings collapse)", "ConvergenceWarning")
@pytest.mark.parametrize("ensemble_size", [1, 2])
def test_collapsed_embeddings_warn(ecgs, ensemble_size):
    # Reproduction 5: finite float32 input scaled by 1e18 made every
    # embedding the same vector, without a word.
    X, y = ecgs
    X = X.astype(np.float64) * 1e18
    # The paper's CNN collapses; the ResNet's batch norm right after its
    # first convolution rescales such input.
    with pytest.warns(ConvergenceWarning, match=r"All 24 training ECGs have the same embedding.*far from unit scale \(the largest absolute value here is \d\.\d+e\+18\).*FrameNormalizer"):
        model = CROCSClusterer(**FAST, encoder="cnn", ensemble_size=ensemble_size).fit(X, y)
    # The first net collapsed (in an ensemble, the others' columns need not have).
    assert np.ptp(model.transform(X)[:, : FAST["embedding_dim"]], axis=0).max() == 0
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        make_pipeline(FrameNormalizer(), CROCSClusterer(**FAST, encoder="cnn")).fit(X, y)


@pytest.mark.bad_input("Fit", "tau_s so small that the loss explodes", "ConvergenceWarning")
def test_exploding_loss_warns(ecgs):
    # Reproduction 5: tau_s=1e-30 trained with a loss of 6e29, silently.
    X, y = ecgs
    with pytest.warns(ConvergenceWarning, match=r"contrastive loss reached \d.*e\+\d\d.*tau_s around 0\.1"):
        CROCSClusterer(**FAST, tau_s=1e-30).fit(X, y)


@pytest.mark.bad_input("Fit", "training loss becomes NaN or infinite", "ConvergenceWarning")
def test_non_finite_loss_warns(ecgs):
    X, y = ecgs
    with pytest.warns(ConvergenceWarning, match=r"training loss became nan in epoch \d+: training diverged"):
        CROCSClusterer(**{**FAST, "max_epochs": 3}, lr=1e30).fit(X, y)


# --------------------------------------------------------------------- device
@pytest.mark.bad_input("Fit", "device torch cannot use", "ValueError")
@pytest.mark.parametrize(
    ("device", "match"),
    [
        ("cuda", r"device='cuda' cannot be used: torch\.cuda\.is_available\(\) is False"),
        ("cuda:1", r"device='cuda:1' cannot be used: torch\.cuda\.is_available\(\) is False"),
        ("meta", "device='meta' cannot be used"),
        ("gpu", "device='gpu' cannot be used: it is not a torch device"),
    ],
)
def test_unusable_device_is_a_clear_error(ecgs, monkeypatch, device, match):
    # Reproduction 5: device="cuda" without CUDA failed in fit with torch's
    # bare AssertionError.
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    X, y = ecgs
    with pytest.raises(ValueError, match=match + r".*Pass device='cpu'"):
        CROCSClusterer(**FAST, device=device).fit(X, y)


# -------------------------------------------------- non-finite embeddings
def _overflowing(model):
    """``model`` with its first convolution scaled so that a sharp spike overflows float32."""
    for net in model.nets_:
        conv = next(m for m in net.module_.modules() if isinstance(m, torch.nn.Conv1d))
        with torch.no_grad():
            conv.weight.mul_(1e34)
    return model


@pytest.fixture(scope="module")
def spiky():
    """A model that embeds ordinary ECGs finitely and rows 1 and 3 (one spike each) as NaN."""
    rng = np.random.RandomState(0)
    X, y = rng.randn(40, 400).astype(np.float32), np.repeat(["A", "B"], 20)
    model = _overflowing(CROCSClusterer(**FAST).fit(X, y))
    X_new = rng.randn(6, 400).astype(np.float32)
    X_new[[1, 3], 200] = 1e5
    return model, X, X_new


ROWS_1_3 = r"row\(s\) 1, 3 \(2 of 6 ECGs\) are not finite"


@pytest.mark.bad_input("Predict", "a model whose weights overflow on a spike", "ValueError")
@pytest.mark.parametrize("method", ["transform", "predict", "predict_proba"])
def test_non_finite_embeddings_are_an_error_naming_the_rows(spiky, method):
    model, _, X_new = spiky
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # the spike's scale warning
        assert np.isfinite(model.transform(X_new[[0, 2, 4, 5]])).all()
        with pytest.raises(ValueError, match=ROWS_1_3):
            getattr(model, method)(X_new)


def test_non_finite_embeddings_in_retrieval_name_the_database_rows(spiky):
    from sklearn_crocs import PrototypeRetriever

    model, X, X_new = spiky
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        # Rows 41 and 43 of the database, embedded 4 at a time.
        with pytest.raises(ValueError, match=r"row\(s\) 41, 43 \(2 of 46 ECGs\)"):
            PrototypeRetriever(model, batch_size=4).fit(np.concatenate([X, X_new]))
        retriever = PrototypeRetriever(
            model, n_neighbors=2, batch_size=4, longer_signals="average"
        ).fit(X)
        with pytest.raises(ValueError, match=ROWS_1_3):
            retriever.kneighbors(X_new)
        # Records of two lengths: the rows are still those of the caller's list.
        records = [X_new[i] if i % 2 else np.tile(X_new[i], 2) for i in range(6)]
        with pytest.raises(ValueError, match=ROWS_1_3):
            retriever.kneighbors(records)


def test_check_finite_embeddings_maps_rows():
    embeddings = np.ones((5, 3), dtype=np.float32)
    guards.check_finite_embeddings(embeddings)
    embeddings[[0, 4], 1] = [np.nan, np.inf]
    with pytest.raises(guards.NonFiniteEmbeddingError, match=r"row\(s\) 0, 4 \(2 of 5"):
        guards.check_finite_embeddings(embeddings)
    with pytest.raises(ValueError, match=r"row\(s\) 10, 14 \(2 of 20") as caught:
        guards.check_finite_embeddings(embeddings, rows=np.arange(10, 15), n_rows=20)
    assert caught.value.at(np.arange(100, 120), 200).rows.tolist() == [110, 114]


@pytest.mark.bad_input("CLI predict", "a model whose weights overflow on a spike", "exit 1")
def test_cli_names_the_records_whose_embeddings_are_not_finite(tmp_path, monkeypatch):
    import contextlib
    import io

    from sklearn_crocs.cli import main

    def run(*argv):
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            status = main([str(arg) for arg in argv])
        return status, out.getvalue(), err.getvalue()

    rng = np.random.RandomState(0)
    names = np.array([f"r{i}" for i in range(12)])
    np.savez(tmp_path / "train.npz", X=rng.randn(12, 1, 1000), record_ids=names)
    pd.DataFrame({"record": names, "rhythm": ["A", "B"] * 6}).to_csv(
        tmp_path / "labels.csv", index=False
    )
    status, _, err = run(
        "fit", tmp_path / "train.npz", "--sampling-rate", 100, "--labels", tmp_path / "labels.csv",
        "--attributes", "rhythm", "--model", tmp_path / "model", "--working-rate", 100,
        "--encoder", "cnn", "--embedding-dim", 8, "--max-epochs", 1, "--quiet",
    )  # fmt: skip
    assert status == 0, err
    new = rng.randn(4, 1, 1000)
    new[2, 0, 500] = 1e5
    np.savez(tmp_path / "new.npz", X=new, record_ids=np.array(["n0", "n1", "spiky", "n3"]))
    # The CLI normalises each record, which tames the spike: the loaded model's
    # net outputs NaN instead for any frame that still holds one.
    def nan_on_spikes(module, inputs, output):
        spiky = inputs[0].abs().amax(dim=(1, 2)) > 20
        return torch.where(spiky[:, None], torch.nan, output)

    def load(cls, *args, **kwargs):
        model = original(*args, **kwargs)
        model.nets_[0].module_.register_forward_hook(nan_on_spikes)
        return model

    original = CROCSClusterer.load
    monkeypatch.setattr(CROCSClusterer, "load", classmethod(load))
    status, _, err = run(
        "predict", tmp_path / "new.npz", "--sampling-rate", 100, "--model", tmp_path / "model",
        "--out", tmp_path / "p.csv",
    )  # fmt: skip
    assert status == 1
    assert "record(s) spiky as NaN or infinity (not finite)" in err
    assert not (tmp_path / "p.csv").exists()
