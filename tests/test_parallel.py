"""sklearn_crocs.parallel, and searches through joblib's dask backend, on a local dask cluster."""

import sys

import numpy as np
import pytest
from sklearn.exceptions import NotFittedError
from sklearn.model_selection import GridSearchCV

from sklearn_crocs import CROCSClusterer
from sklearn_crocs.metrics import make_ami_scorer
from sklearn_crocs.parallel import map_blocks

da = pytest.importorskip("dask.array")

pytestmark = pytest.mark.xdist_group("dask")  # one worker builds the cluster once


def _data(n=48, length=400, seed=0):
    rng = np.random.RandomState(seed)
    y = np.column_stack([rng.randint(0, 2, n), rng.randint(0, 2, n)])
    X = rng.randn(n, 1, length).astype(np.float32) + 2 * y[:, :1, None]
    return X, y


def _model(**params):
    params = {"encoder": "cnn", "embedding_dim": 8, "max_epochs": 2, "random_state": 0, **params}
    return CROCSClusterer(**params)


@pytest.fixture(scope="module")
def fitted():
    X, y = _data()
    return _model().fit(X, y), X


@pytest.fixture(scope="module")
def client():
    distributed = pytest.importorskip("distributed")
    torch = pytest.importorskip("torch")
    cluster = distributed.LocalCluster(
        n_workers=2,
        threads_per_worker=1,
        processes=True,
        host="127.0.0.1",
        dashboard_address=None,
    )
    with distributed.Client(cluster) as client:
        # The application's choice, not the library's: one torch thread per worker.
        client.run(torch.set_num_threads, 1)
        yield client
    cluster.close()


@pytest.mark.parametrize("method", ["transform", "predict_proba"])
def test_blocks_give_what_the_estimator_gives(fitted, method):
    model, X = fitted
    # Chunks along time are merged: each block holds whole ECGs.
    result = map_blocks(model, da.from_array(X, chunks=(10, 1, 100)), method=method)
    width = model.prototypes_.shape[1] if method == "transform" else len(model.prototypes_)
    assert result.shape == (48, width) and result.dtype == np.float32
    assert result.chunks[0] == (10, 10, 10, 10, 8)
    np.testing.assert_allclose(result.compute(), getattr(model, method)(X), atol=1e-6)


def test_two_dimensional_input(fitted):
    model, X = fitted
    result = map_blocks(model, da.from_array(X[:, 0], chunks=16))
    np.testing.assert_allclose(result.compute(), model.transform(X), atol=1e-6)


def test_clear_errors(fitted):
    model, X = fitted
    with pytest.raises(TypeError, match="dask array"):
        map_blocks(model, X)
    with pytest.raises(ValueError, match="method"):
        map_blocks(model, da.from_array(X), method="predict")
    with pytest.raises(ValueError, match="dimensions"):
        map_blocks(model, da.from_array(X[..., None]))
    with pytest.raises(NotFittedError):
        map_blocks(_model(), da.from_array(X))


def test_missing_dask_names_the_extra(fitted, monkeypatch):
    monkeypatch.setitem(sys.modules, "dask.array", None)
    with pytest.raises(ImportError, match=r"sklearn-crocs\[dask\]"):
        map_blocks(fitted[0], None)


def test_blocks_run_on_the_workers_of_a_cluster(fitted, client):
    model, X = fitted
    result = map_blocks(model, da.from_array(X, chunks=12))
    np.testing.assert_allclose(client.compute(result).result(), model.transform(X), atol=1e-6)


@pytest.fixture
def one_torch_thread():
    torch = pytest.importorskip("torch")
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as the workers: sums in the same order
    yield
    torch.set_num_threads(threads)


def test_grid_search_through_joblib_dask_backend(client, one_torch_thread):
    import joblib

    X, y = _data(n=64)
    search = GridSearchCV(
        _model(max_epochs=1), {"tau_w": [0.5, 1.0]}, scoring=make_ami_scorer(), cv=2
    )
    expected = search.fit(X, y).cv_results_["mean_test_score"]
    with joblib.parallel_config(backend="dask"):
        search.set_params(n_jobs=-1).fit(X, y)
    np.testing.assert_allclose(search.cv_results_["mean_test_score"], expected, atol=1e-6)


def test_non_finite_embeddings_name_rows_of_the_whole_array():
    import torch

    X, y = _data(n=20)
    model = _model().fit(X, y)
    conv = next(m for m in model.nets_[0].module_.modules() if isinstance(m, torch.nn.Conv1d))
    with torch.no_grad():
        conv.weight.mul_(1e34)  # a faulty model: a spike overflows its first layer
    X = X.copy()
    X[13, 0, 100] = 1e5
    with pytest.raises(ValueError, match=r"row\(s\) 13 \(1 of 20 ECGs\) are not finite"):
        map_blocks(model, da.from_array(X, chunks=8)).compute(scheduler="synchronous")
