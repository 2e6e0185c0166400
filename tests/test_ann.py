"""FAISS search: against exact search, its fallbacks, its parameters, the retriever around it."""

import sys
import warnings

import numpy as np
import pytest
from sklearn.frozen import FrozenEstimator

from sklearn_crocs import CROCSClusterer, PrototypeRetriever
from sklearn_crocs._ann import FaissIndex, resolve_params
from sklearn_crocs._search import top_k

faiss = pytest.importorskip("faiss")


def _unit_rows(n, dim, seed):
    rows = np.random.RandomState(seed).randn(n, dim).astype(np.float32)
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


@pytest.fixture(scope="module")
def embeddings():
    return _unit_rows(3000, 16, 0)


@pytest.mark.parametrize(
    ("kind", "params"),
    [
        # Probing every cell (or a wide graph search) is an exact search.
        ("ivf_flat", {"nlist": 20, "nprobe": 20}),
        ("hnsw", {"ef_search": 3000}),
    ],
)
def test_exhaustive_settings_find_the_exact_neighbours(embeddings, kind, params):
    queries = _unit_rows(7, 16, 1)
    index = FaissIndex(embeddings, kind, params)
    distances, indices = index.search(queries, embeddings, 10)
    exact_distances, exact_indices = top_k(queries, embeddings, 10)
    np.testing.assert_array_equal(indices, exact_indices)
    np.testing.assert_allclose(distances, exact_distances, rtol=1e-12)


def test_compressed_index_returns_exact_distances_of_what_it_finds(embeddings):
    queries = _unit_rows(5, 16, 2)
    with pytest.warns(UserWarning, match="on 3,000 embeddings"):  # a small database
        index = FaissIndex(embeddings, "ivf_pq", {"nlist": 8, "m": 4, "nbits": 6})
    assert index.description == "IVF8,PQ4x6"
    distances, indices = index.search(queries, embeddings, 10)
    direct = np.linalg.norm(
        embeddings[indices].astype(np.float64) - queries[:, None, :].astype(np.float64), axis=2
    )
    np.testing.assert_allclose(distances, direct, rtol=1e-12)
    assert (np.diff(distances, axis=1) >= 0).all()


def test_product_quantiser_on_a_small_database_warns(monkeypatch):
    # FAISS's rule of thumb: 39 training points per centroid, so 39 * 2**8 =
    # 9,984 embeddings for the product quantiser's 8-bit codes. The warning
    # comes before the index is built; the builds (seconds here) are cut short.
    class Built(Exception):
        pass

    def build(*args):
        raise Built

    monkeypatch.setattr(faiss, "index_factory", build)

    def warnings_of(n, kind, params=None):
        with warnings.catch_warnings(record=True) as record:
            warnings.simplefilter("always")
            with pytest.raises(Built):
                FaissIndex(_unit_rows(n, 8, 0), kind, params)
        return record

    record = warnings_of(9983, "ivf_pq")
    assert len(record) == 1 and record[0].category is UserWarning
    assert "on 9,983 embeddings" in str(record[0].message)
    assert "9,984 for the product quantiser's usual 8-bit codes" in str(record[0].message)
    assert "nbits=7 here" in str(record[0].message)
    assert record[0].filename == __file__  # points at the caller, not the package
    # Too few training points per centroid for the codes asked for.
    assert "nbits=8 here" in str(warnings_of(9983, "ivf_pq", {"nbits": 8})[0].message)
    assert warnings_of(9984, "ivf_pq") == []
    assert warnings_of(9983, "ivf_flat") == []


def test_too_few_candidates_are_marked_and_the_retriever_searches_them_exactly(embeddings):
    # One probed cell of 100 holds about 30 rows: not enough for k = 60.
    queries = _unit_rows(4, 16, 3)
    index = FaissIndex(embeddings, "ivf_flat", {"nlist": 100, "nprobe": 1})
    distances, indices = index.search(queries, embeddings, 60)
    short = indices < 0
    assert short.any() and np.isinf(distances[short]).all()


def test_default_parameters_follow_the_data():
    assert resolve_params("ivf_flat", None, 10_000, 128) == {"nlist": 256, "nprobe": 16}
    # Few rows: fewer cells, so that each has FAISS's 39 training points.
    assert resolve_params("ivf_flat", None, 390, 128)["nlist"] == 10
    pq = resolve_params("ivf_pq", None, 1_000_000, 128)
    assert pq == {"nlist": 4000, "nprobe": 16, "m": 32, "nbits": 8}
    assert resolve_params("ivf_pq", None, 1000, 12)["m"] == 3
    assert resolve_params("hnsw", {"M": 16}, 10, 8) == {"M": 16, "ef_construction": 40,
                                                        "ef_search": 64}  # fmt: skip


@pytest.mark.parametrize(
    ("kind", "params", "message"),
    [
        ("hnsw", {"nprobe": 4}, r"\['nprobe'\] are not parameters of index='hnsw'"),
        ("ivf_pq", {"m": 5}, "m=5 must divide the dimension 16"),
        ("ivf_flat", {"nlist": 0}, "nlist must be a positive int"),
        ("ivf_flat", {"nprobe": 2.5}, "nprobe must be a positive int"),
        ("ivf_pq", {"nlist": 2000, "m": 4}, "nlist=2000 cells need at least as many"),
    ],
)
def test_invalid_index_params(kind, params, message):
    with pytest.raises(ValueError, match=message):
        resolve_params(kind, params, 1000, 16)


def test_missing_faiss_names_the_extra(embeddings, monkeypatch):
    monkeypatch.setitem(sys.modules, "faiss", None)  # import faiss raises ImportError
    with pytest.raises(ImportError, match=r"pip install 'sklearn-crocs\[faiss\]'"):
        FaissIndex(embeddings, "hnsw")


# ------------------------------------------------------------- the retriever
@pytest.fixture(scope="module")
def fitted(synthetic):
    X, y, groups = synthetic
    model = CROCSClusterer(embedding_dim=16, max_epochs=3, lr=3e-3, batch_size=32,
                           random_state=0).fit(X, y, groups=groups)  # fmt: skip
    return FrozenEstimator(model), X


@pytest.mark.parametrize("kind", ["ivf_flat", "ivf_pq", "hnsw"])
def test_retriever_with_an_index_agrees_with_exact_search(fitted, kind, capsys):
    model, X = fitted
    exact = PrototypeRetriever(model, n_neighbors=5).fit(X)
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        approximate = PrototypeRetriever(model, n_neighbors=5, index=kind, verbose=1).fit(X)
    # Only the product quantiser needs more embeddings than these 72.
    assert [str(w.message)[:25] for w in record] == (
        ["index='ivf_pq' on 72 embe"] if kind == "ivf_pq" else []
    )
    assert "Built the FAISS index" in capsys.readouterr().out
    assert exact.recall() == 1.0
    recall = approximate.recall()
    distances, indices = approximate.query()
    assert indices.shape == (len(approximate.prototypes_), 5) and (indices >= 0).all()
    # Rows found by both get the same (exact) distance.
    exact_distances, exact_indices = exact.query()
    for d, i, ed, ei in zip(distances, indices, exact_distances, exact_indices):
        common, here, there = np.intersect1d(i, ei, return_indices=True)
        np.testing.assert_allclose(d[here], ed[there], rtol=1e-12)
    found = np.mean([len(np.intersect1d(i, ei)) / 5 for i, ei in zip(indices, exact_indices)])
    assert recall == pytest.approx(found)
    # Every query kind goes through the index.
    assert approximate.query({"sex": "F"}, return_distance=False).shape == (1, 5)
    by_example = approximate.kneighbors(X[:2], n_neighbors=1, return_distance=False)
    if kind != "ivf_pq":  # compressed codes may not tell an ECG from its neighbours
        assert by_example.ravel().tolist() == [0, 1]
    assert 0 <= approximate.recall({"sex": "F"}, n_neighbors=3) <= 1
    assert 0 <= approximate.recall(X=X[:4], n_neighbors=3) <= 1
    assert exact.recall(X=X[:4], n_neighbors=3) == 1.0
    with pytest.raises(ValueError, match="not both"):
        exact.recall({"sex": "F"}, X=X[:4])


def test_an_index_over_embeddings_on_disk_is_the_one_in_memory(fitted, tmp_path):
    # Trained on the same sampled rows and filled block by block from the memory map.
    model, X = fitted
    params = {"n_neighbors": 5, "index": "ivf_flat", "index_params": {"nlist": 4, "nprobe": 1}}
    in_memory = PrototypeRetriever(model, **params).fit(X)
    on_disk = PrototypeRetriever(model, embeddings_path=tmp_path / "e.npy", **params).fit(X)
    assert isinstance(on_disk.embeddings_, np.memmap)
    for got, want in zip(on_disk.query(), in_memory.query()):
        np.testing.assert_array_equal(got, want)


def test_short_probes_fall_back_to_exact_search(fitted):
    model, X = fitted
    params = {"nlist": 4, "nprobe": 1}
    retriever = PrototypeRetriever(model, index="ivf_flat", index_params=params).fit(X)
    k = len(X) - 1  # more rows than any one cell holds
    distances, indices = retriever.query(n_neighbors=k)
    exact = PrototypeRetriever(model).fit(X).query(n_neighbors=k)
    np.testing.assert_array_equal(indices, exact[1])
    np.testing.assert_allclose(distances, exact[0], rtol=1e-12)


def test_saved_retriever_rebuilds_its_index(fitted, tmp_path):
    model, X = fitted
    # An IVF index, whose build is deterministic (an HNSW graph built on
    # several threads is not).
    params = {"nlist": 4, "m": 4}
    with pytest.warns(UserWarning, match="ivf_pq' on 72 embeddings"):
        retriever = PrototypeRetriever(model, index="ivf_pq", index_params=params).fit(X)
    path = tmp_path / "retriever.safetensors"
    retriever.save(path, include_embeddings=True)
    with pytest.warns(UserWarning, match="ivf_pq' on 72 embeddings"):  # the same index again
        loaded = PrototypeRetriever.load(path)
    assert loaded.index == "ivf_pq" and loaded.index_params == params
    assert loaded._faiss.description == retriever._faiss.description
    np.testing.assert_array_equal(loaded.query()[1], retriever.query()[1])


def test_bad_index_params_are_reported_at_fit(fitted):
    model, X = fitted
    with pytest.raises(ValueError, match="are not parameters of index='ivf_flat'"):
        PrototypeRetriever(model, index="ivf_flat", index_params={"M": 8}).fit(X)
