"""PrototypeRetriever: every query kind against brute force, exact top-k with ties, bad input."""

import warnings

import joblib
import numpy as np
import pandas as pd
import pytest
import torch
from conftest import make_synthetic_ecgs
from sklearn.base import clone
from sklearn.decomposition import PCA
from sklearn.exceptions import NotFittedError
from sklearn.frozen import FrozenEstimator
from sklearn.neighbors import NearestNeighbors
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import FunctionTransformer
from sklearn.utils._param_validation import InvalidParameterError
from sklearn.utils.estimator_checks import parametrize_with_checks

from sklearn_crocs import CROCSClusterer, PrototypeRetriever, _retrieval
from sklearn_crocs._retrieval import _block_top_k, _BlockFilter, _filter_chain, _int8_works, _top_k

FAST = {"embedding_dim": 16, "max_epochs": 3, "lr": 3e-3, "batch_size": 32}
NO_INT8 = pytest.mark.skipif(not _int8_works(), reason="no CPU int8 product in torch")


def _model(**params):
    return CROCSClusterer(**{**FAST, "validation_fraction": None, "random_state": 0, **params})


@pytest.fixture(params=["float32", "bfloat16", pytest.param("int8", marks=NO_INT8)])
def precision(request, monkeypatch):
    """Each filter precision, whether or not this CPU multiplies it natively.

    int8 filters from the first block on, as in a search past ``_INT8_FROM``
    blocks, so that small test databases go through it too.
    """
    monkeypatch.setattr(_retrieval, "_INT8_FROM", 0)
    return request.param


@pytest.fixture(scope="module")
def model(synthetic):
    X, y, groups = synthetic
    return _model().fit(X, y, groups=groups)


@pytest.fixture(scope="module")
def database():
    """Unlabelled ECGs of other patients (another seed of the same generator)."""
    X, y, _ = make_synthetic_ecgs(n_patients=30, frames_per_patient=2, seed=1)
    return X, y


@pytest.fixture(scope="module")
def retriever(model, database):
    return PrototypeRetriever(FrozenEstimator(model), n_neighbors=5).fit(database[0])


def _brute_force(queries, embeddings, k):
    """Reference: full float64 distance matrix, sorted by (distance, index)."""
    queries = np.asarray(queries, dtype=np.float64)
    embeddings = np.asarray(embeddings, dtype=np.float64)
    distances = np.linalg.norm(queries[:, None, :] - embeddings[None, :, :], axis=2)
    index = np.broadcast_to(np.arange(len(embeddings)), distances.shape)
    order = np.lexsort((index, distances), axis=1)[:, :k]
    return np.take_along_axis(distances, order, 1), order


def _assert_same_neighbors(result, reference):
    distances, indices = result
    expected_distances, expected_indices = reference
    assert distances.shape == indices.shape == expected_indices.shape
    np.testing.assert_allclose(distances, expected_distances, atol=1e-5)
    np.testing.assert_array_equal(indices, expected_indices)


# ---------------------------------------------------------------- fitted state
def test_fitted_attributes(retriever, model, database):
    X_db, _ = database
    assert retriever.estimator_ is retriever.estimator  # fit(X) keeps the estimator as is
    assert retriever.n_samples_fit_ == len(X_db)
    assert retriever.embeddings_.dtype == np.float32
    np.testing.assert_allclose(retriever.embeddings_, model.transform(X_db), rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(retriever.prototypes_, model.get_prototypes("learned")[0])
    np.testing.assert_array_equal(retriever.prototype_attributes_, model.prototype_attributes_)
    assert retriever.attribute_names_ == ["rhythm", "sex", "age_group"]
    assert list(retriever.query_attributes_.columns) == retriever.attribute_names_
    np.testing.assert_array_equal(
        retriever.query_attributes_.to_numpy(), retriever.prototype_attributes_
    )
    assert retriever.n_features_in_ == 600


# ---------------------------------------------------------------- query kinds
def test_prototype_queries_match_brute_force_and_sklearn(retriever):
    distances, indices = retriever.kneighbors()
    assert distances.shape == indices.shape == (12, 5)
    assert distances.dtype == np.float64
    assert np.all(np.diff(distances, axis=1) >= 0)
    _assert_same_neighbors(
        (distances, indices), _brute_force(retriever.prototypes_, retriever.embeddings_, 5)
    )
    nn = NearestNeighbors(n_neighbors=5, algorithm="brute").fit(retriever.embeddings_)
    sk_distances, sk_indices = nn.kneighbors(retriever.prototypes_)
    np.testing.assert_allclose(distances, sk_distances, atol=1e-5)
    np.testing.assert_array_equal(indices, sk_indices)
    np.testing.assert_array_equal(retriever.kneighbors(return_distance=False), indices)


def test_n_neighbors_argument_overrides_the_parameter(retriever):
    distances, indices = retriever.kneighbors(n_neighbors=60)  # the whole database
    assert indices.shape == (12, 60)
    assert all(sorted(row) == list(range(60)) for row in indices)
    np.testing.assert_array_equal(indices[:, :5], retriever.kneighbors()[1])


@pytest.mark.parametrize(
    ("queries", "rows"),
    [
        (("SR", "F", "<60"), [8]),
        ([("SR", "F", "<60"), ("AFIB", "M", ">=60")], [8, 3]),
        ({"sex": "M", "rhythm": "SB", "age_group": "<60"}, [6]),
        ({"rhythm": ["SB", "AFIB"], "sex": ["M", "F"], "age_group": ["<60", "<60"]}, [6, 0]),
        ([{"rhythm": "SR", "sex": "M", "age_group": ">=60"}], [11]),
        (pd.DataFrame({"age_group": [">=60"], "rhythm": ["SB"], "sex": ["F"]}), [5]),
        (pd.Series({"rhythm": "SB", "sex": "F", "age_group": ">=60"}), [5]),
        (np.array([["SR", "M", "<60"], ["SB", "F", ">=60"]]), [10, 5]),
        (["SR", "M", "<60"], [10]),
    ],
    ids=["tuple", "tuples", "dict", "dict-of-lists", "dicts", "frame", "series", "array", "list"],
)
def test_attribute_queries_are_their_prototypes(retriever, queries, rows):
    expected = _brute_force(retriever.prototypes_[rows], retriever.embeddings_, 5)
    _assert_same_neighbors(retriever.kneighbors(queries), expected)
    full = retriever.kneighbors()
    np.testing.assert_array_equal(retriever.kneighbors(queries)[1], full[1][rows])
    named = retriever.query_attributes_.iloc[rows]
    assert named.shape == (len(rows), 3)


def test_query_by_example_matches_brute_force(retriever, model, database, synthetic):
    X, _, _ = synthetic
    queries = X[:7]
    expected = _brute_force(model.transform(queries), retriever.embeddings_, 5)
    _assert_same_neighbors(retriever.kneighbors(queries), expected)
    # A 2-D array of one lead, and an ECG of the database finds itself first.
    X_db, _ = database
    distances, indices = retriever.kneighbors(X_db[[4, 9], 0, :], n_neighbors=1)
    np.testing.assert_array_equal(indices.ravel(), [4, 9])
    np.testing.assert_allclose(distances, 0, atol=1e-6)


def test_mean_query_uses_tp_crocs_prototypes(model, database):
    X_db, _ = database
    retriever = PrototypeRetriever(model, query="mean", n_neighbors=3).fit(X_db)
    prototypes, attributes = model.get_prototypes("mean")
    np.testing.assert_array_equal(retriever.prototypes_, prototypes)
    np.testing.assert_array_equal(retriever.prototype_attributes_, attributes)
    _assert_same_neighbors(
        retriever.kneighbors(), _brute_force(prototypes, retriever.embeddings_, 3)
    )
    row = [tuple(a) for a in attributes].index(("SB", "M", ">=60"))
    _assert_same_neighbors(
        retriever.kneighbors(("SB", "M", ">=60")),
        _brute_force(prototypes[[row]], retriever.embeddings_, 3),
    )


def test_mean_query_of_a_combination_without_training_ecg(synthetic, database):
    X, y, _ = synthetic
    keep = ~((y["rhythm"] == "SR") & (y["sex"] == "F") & (y["age_group"] == "<60")).to_numpy()
    with pytest.warns(UserWarning, match="have no training ECG"):
        model = _model(max_epochs=1, prototypes="mean").fit(X[keep], y[keep])
    X_db, _ = database
    mean = PrototypeRetriever(model, query="mean", n_neighbors=2).fit(X_db)
    assert len(mean.prototypes_) == 11
    assert ("SR", "F", "<60") not in [tuple(r) for r in mean.prototype_attributes_]
    with pytest.raises(
        ValueError,
        match=r"No training ECG has the attribute combination\(s\) \('SR', 'F', '<60'\).*query='learned'",
    ):
        mean.kneighbors(("SR", "F", "<60"))
    learned = PrototypeRetriever(model, query="learned", n_neighbors=2).fit(X_db)
    assert learned.kneighbors(("SR", "F", "<60"))[1].shape == (1, 2)
    assert len(learned.prototypes_) == 12


def test_numeric_attributes_are_queried_with_tuples(synthetic, database):
    X, y, _ = synthetic
    codes = np.column_stack([pd.factorize(y[c], sort=True)[0] for c in y.columns])
    model = _model(max_epochs=1).fit(X, codes)
    retriever = PrototypeRetriever(model, n_neighbors=4).fit(database[0])
    row = [tuple(r) for r in retriever.prototype_attributes_].index((2, 0, 1))
    np.testing.assert_array_equal(
        retriever.kneighbors((2, 0, 1))[1], retriever.kneighbors()[1][[row]]
    )
    frame = pd.DataFrame({"attribute_0": [2], "attribute_1": [0], "attribute_2": [1]})
    np.testing.assert_array_equal(retriever.kneighbors(frame)[1], retriever.kneighbors()[1][[row]])
    with pytest.raises(
        ValueError, match=r"Attribute 'attribute_0' has values \[7\].*known values: \[0, 1, 2\]"
    ):
        retriever.kneighbors((7, 0, 1))


# -------------------------------------------------------------- exact top-k
def _exact_vectors():
    """Exactly unit vectors whose dot products are exact multiples of 1/4: many ties."""
    base = np.array(
        [
            [1, 0, 0, 0],
            [0, 1, 0, 0],
            [0, 0, 0, -1],
            [0.5, 0.5, 0.5, 0.5],
            [0.5, -0.5, 0.5, -0.5],
            [-0.5, 0.5, 0.5, 0.5],
        ],
        dtype=np.float32,
    )
    rng = np.random.RandomState(0)
    database = base[rng.randint(len(base), size=57)]
    queries = np.vstack([base, [[0, 0, 1, 0], [-1, 0, 0, 0]]]).astype(np.float32)
    return queries, database


@pytest.mark.parametrize("max_sparse", [0, 512], ids=["partition", "threshold"])
@pytest.mark.parametrize("k", [1, 3, 10, 57])
@pytest.mark.parametrize("block_size", [1, 4, 13, 57, None])
def test_top_k_with_ties_is_exact_and_block_independent(
    k, block_size, max_sparse, precision, monkeypatch
):
    # Both ways of merging a block's candidates: a partition per query, or
    # all the rows that beat the k-th best so far; both filter precisions.
    monkeypatch.setattr("sklearn_crocs._retrieval._MAX_SPARSE", max_sparse)
    queries, database = _exact_vectors()
    result = _top_k(queries, database, k, block_size=block_size, precisions=[precision])
    reference = _brute_force(queries, database, k)
    np.testing.assert_array_equal(result[1], reference[1])  # ties -> lower index
    np.testing.assert_array_equal(result[0], reference[0])
    # scikit-learn finds the same distances; among equal distances its order is unspecified.
    nn = NearestNeighbors(n_neighbors=k, algorithm="brute").fit(database)
    sk_distances, sk_indices = nn.kneighbors(queries)
    np.testing.assert_allclose(sk_distances, reference[0], atol=1e-6)
    for row, sk_row, d in zip(result[1], sk_indices, reference[0]):
        complete = d < d[-1] - 1e-6  # groups of ties cut by k may differ
        assert set(row[complete]) == set(sk_row[complete])


@pytest.mark.parametrize("max_sparse", [0, 512], ids=["partition", "threshold"])
@pytest.mark.parametrize("block_size", [1, 7, 100, 4096])
def test_top_k_random_chunked_equals_unchunked_equals_sklearn(
    block_size, max_sparse, precision, monkeypatch
):
    monkeypatch.setattr("sklearn_crocs._retrieval._MAX_SPARSE", max_sparse)
    rng = np.random.RandomState(1)
    database = rng.randn(500, 16).astype(np.float32)
    database /= np.linalg.norm(database, axis=1, keepdims=True)
    queries = rng.randn(9, 16).astype(np.float32)
    queries /= np.linalg.norm(queries, axis=1, keepdims=True)
    chunked = _top_k(queries, database, 10, block_size=block_size, precisions=[precision])
    unchunked = _top_k(queries, database, 10, block_size=len(database), precisions=["float32"])
    np.testing.assert_array_equal(chunked[1], unchunked[1])
    np.testing.assert_allclose(chunked[0], unchunked[0], rtol=1e-12)
    _assert_same_neighbors(chunked, _brute_force(queries, database, 10))
    sk_distances, sk_indices = NearestNeighbors(n_neighbors=10).fit(database).kneighbors(queries)
    np.testing.assert_array_equal(chunked[1], sk_indices)
    np.testing.assert_allclose(chunked[0], sk_distances, atol=1e-6)


@pytest.mark.parametrize("ordered", [False, True], ids=["random", "improving"])
def test_top_k_default_blocks_on_a_larger_database(ordered, precision):
    rng = np.random.RandomState(3)
    database = rng.randn(20_000, 8).astype(np.float32)
    database /= np.linalg.norm(database, axis=1, keepdims=True)
    queries = database[:5] + 0.1 * rng.randn(5, 8).astype(np.float32)
    queries /= np.linalg.norm(queries, axis=1, keepdims=True)
    if ordered:  # every block beats the previous ones: no cheap threshold
        database = database[np.argsort(database @ queries[0])]
    result = _top_k(queries, database, 10, precisions=[precision])
    np.testing.assert_array_equal(result[1], _top_k(queries, database, 10, block_size=20_000)[1])
    _assert_same_neighbors(result, _brute_force(queries, database, 10))


def test_top_k_reads_a_memmap_block_by_block(tmp_path, precision):
    rng = np.random.RandomState(2)
    database = rng.randn(300, 8).astype(np.float32)
    database /= np.linalg.norm(database, axis=1, keepdims=True)
    np.save(tmp_path / "emb.npy", database)
    memmap = np.load(tmp_path / "emb.npy", mmap_mode="r")
    queries = database[[5, 17, 250]]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # e.g. torch's warning on read-only arrays
        distances, indices = _top_k(queries, memmap, 4, block_size=64, precisions=[precision])
    np.testing.assert_array_equal(indices[:, 0], [5, 17, 250])
    np.testing.assert_array_equal(distances[:, 0], 0.0)  # exact, not sqrt(2 - 2 cos)
    _assert_same_neighbors((distances, indices), _brute_force(queries, database, 4))


def _unit_rows(rng, n, d, dtype=np.float32):
    x = rng.standard_normal((n, d)).astype(dtype)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def test_block_filter_scores_stay_within_the_proven_bound(precision):
    rng = np.random.default_rng(0)
    queries, block = _unit_rows(rng, 7, 128), _unit_rows(rng, 3000, 128)
    block[:7] = queries  # similarities of exactly 1, the largest possible error
    block[7:14] = -queries
    filt = _BlockFilter(queries, len(block), precision=precision)
    exact = queries.astype(np.float64) @ block.T.astype(np.float64)
    error = np.abs(filt.scores(block).double().numpy() - exact)
    bound = filt.score_bound()[:, None]
    assert np.all(error <= bound)
    # The bound is not loose by orders of magnitude: it is what the format allows.
    assert error.max() > {"float32": 1e-4, "bfloat16": 0.05, "int8": 0.05}[precision] * bound.max()


def test_block_filter_keeps_every_row_at_or_above_a_threshold(precision):
    # Thresholds equal to exact similarities of chosen rows: those rows, and
    # every row above them, must pass for any threshold, however it rounds.
    rng = np.random.default_rng(1)
    queries, block = _unit_rows(rng, 9, 128), _unit_rows(rng, 2000, 128)
    exact = queries.astype(np.float64) @ block.T.astype(np.float64)
    filt = _BlockFilter(queries, len(block), precision=precision)
    for column in rng.choice(len(block), 40, replace=False):
        thresholds = exact[:, column]
        passing = filt.passing(block, thresholds)
        must = np.flatnonzero((exact >= thresholds[:, None]).any(axis=0))
        assert np.isin(must, passing).all()
        assert column in passing
        assert np.all(np.diff(passing) > 0)
        # Per (row, query) pair: every pair at or above its query's threshold is marked.
        rows, pairs = filt.passing(block, thresholds, pairs=True)
        np.testing.assert_array_equal(rows, passing)
        assert pairs.shape == (len(rows), len(queries)) and pairs.dtype == bool
        assert pairs.any(axis=1).all()
        reaching = exact[:, rows].T >= thresholds
        assert np.all(pairs[reaching])
    # A threshold above every similarity lets (almost) nothing through, and
    # -inf (nothing known yet) lets everything through.
    assert filt.passing(block, np.full(len(queries), 1.5)).size == 0
    np.testing.assert_array_equal(
        filt.passing(block, np.full(len(queries), -np.inf)), np.arange(len(block))
    )


def test_block_filter_first_pass_thresholds_hold_and_keep_every_row_reaching_them(precision):
    # The first block sets thresholds from its own scores, and its rows are
    # filtered with the same scores: the k-th nearest must be at least as
    # near as the threshold says, and every (row, query) pair at or above it kept.
    rng = np.random.default_rng(8)
    queries, block = _unit_rows(rng, 6, 128), _unit_rows(rng, 3000, 128)
    block[:6] = queries  # similarities of exactly 1
    exact = queries.astype(np.float64) @ block.T.astype(np.float64)
    filt = _BlockFilter(queries, len(block), precision=precision)
    thresholds, rows, pairs = filt.first_pass(block, 10)
    assert np.all(thresholds <= np.sort(exact, axis=1)[:, -10])
    reaching = exact >= thresholds[:, None]
    assert pairs.shape == (len(rows), len(queries)) and pairs.any(axis=1).all()
    assert np.all(np.diff(rows) > 0)
    assert np.isin(np.flatnonzero(reaching.any(axis=0)), rows).all()
    assert np.all(pairs[reaching[:, rows].T])
    assert rows.size < len(block) / 2  # a filter (int8 the coarsest), not everything


def test_search_buffers_are_reused_within_a_thread_only():
    # The filter's buffers outlive a search (no pages faulted in again for the
    # next one) but are never shared between threads; large ones are not kept.
    import threading

    from sklearn_crocs import _retrieval

    first = _retrieval._workspace("test", (4, 8), torch.float32)
    again = _retrieval._workspace("test", (2, 8), torch.float32)
    assert again.data_ptr() == first.data_ptr()
    other_dtype = _retrieval._workspace("test", (4, 8), torch.bfloat16)
    assert other_dtype.data_ptr() != first.data_ptr()
    seen = []
    thread = threading.Thread(
        target=lambda: seen.append(_retrieval._workspace("test", (4, 8), torch.float32))
    )
    thread.start()
    thread.join()
    assert seen[0].data_ptr() != first.data_ptr()
    huge = (_retrieval._WORKSPACE_BYTES // 4 + 1,)
    assert (
        _retrieval._workspace("huge", huge, torch.float32).data_ptr()
        != _retrieval._workspace("huge", huge, torch.float32).data_ptr()
    )


def test_consecutive_searches_share_buffers_and_stay_exact():
    rng = np.random.default_rng(5)
    database = _unit_rows(rng, 3000, 32)
    for n_queries in (7, 3, 7):
        queries = _unit_rows(rng, n_queries, 32)
        result = _top_k(queries, database, 5, block_size=700)
        _assert_same_neighbors(result, _brute_force(queries, database, 5))


def _record_verdicts(monkeypatch):
    """The precision of each filter verdict on a block, in order."""
    calls = []
    for method in ("first_pass", "passing"):  # the first block's, the others'
        original = getattr(_BlockFilter, method)

        def record(self, *args, _original=original, **kwargs):
            calls.append(self.precision)
            return _original(self, *args, **kwargs)

        monkeypatch.setattr(_BlockFilter, method, record)
    return calls


@pytest.mark.parametrize("layout", ["duplicates", "tight clusters"])
@pytest.mark.parametrize("chain", [["bfloat16"], ["bfloat16", "int8"]], ids=["bfloat16", "int8"])
def test_top_k_filters_again_more_precisely_where_a_precision_is_too_coarse(
    layout, chain, monkeypatch
):
    # Rows closer together than int8 or bfloat16 can tell apart: such a filter
    # keeps whole blocks, so they are filtered again in the next precision
    # and, once that persists, the search goes on in float32. The result
    # stays exact.
    if "int8" in chain and not _int8_works():
        pytest.skip("no CPU int8 product in torch")
    monkeypatch.setattr(_retrieval, "_INT8_FROM", 0)
    rng = np.random.default_rng(2)
    centres = _unit_rows(rng, 4, 32)
    labels = rng.integers(0, 4, 6000)
    if layout == "duplicates":
        database = centres[labels]
    else:
        database = centres[labels] + 1e-3 * rng.standard_normal((6000, 32)).astype(np.float32)
        database /= np.linalg.norm(database, axis=1, keepdims=True)
    queries = np.vstack([centres, _unit_rows(rng, 3, 32)])
    calls = _record_verdicts(monkeypatch)
    result = _top_k(queries, database, 10, block_size=500, precisions=chain)
    _assert_same_neighbors(result, _brute_force(queries, database, 10))
    coarse = _filter_chain(chain)[:-1]  # fastest first
    first_block = coarse + ["float32"]
    assert calls[: len(first_block)] == first_block  # every precision, in order
    assert calls[-2:] == ["float32", "float32"]  # float32 only, at the end
    for precision in coarse:
        assert calls.count(precision) == 3  # _REFILTER_LIMIT blocks in a row


def test_filter_chain_runs_from_the_fastest_precision_to_float32():
    assert _filter_chain(["int8"]) == ["int8", "float32"]
    assert _filter_chain(["bfloat16", "int8"]) == ["int8", "bfloat16", "float32"]
    assert _filter_chain(["float32"]) == ["float32"]
    native = _filter_chain()
    assert native[-1] == "float32" and native == _filter_chain(native)
    with pytest.raises(ValueError, match="Unknown filter precisions"):
        _filter_chain(["float16"])


def test_search_without_native_int8_or_bfloat16_filters_in_float32(monkeypatch):
    # A CPU (or torch) without them: the default chain is float32 alone.
    monkeypatch.setattr(_retrieval, "_int8_is_fast", lambda: False)
    monkeypatch.setattr(_retrieval, "_bfloat16_is_fast", lambda: False)
    assert _filter_chain() == ["float32"]
    calls = _record_verdicts(monkeypatch)
    rng = np.random.default_rng(9)
    database, queries = _unit_rows(rng, 3000, 64), _unit_rows(rng, 4, 64)
    result = _top_k(queries, database, 5, block_size=300)
    _assert_same_neighbors(result, _brute_force(queries, database, 5))
    assert set(calls) == {"float32"}


@NO_INT8
def test_int8_filters_blocks_once_thresholds_have_tightened(monkeypatch):
    # int8 keeps many rows while thresholds are loose: the first _INT8_FROM
    # blocks go through bfloat16; the first block's scores too.
    rng = np.random.default_rng(7)
    database, queries = _unit_rows(rng, 5000, 128), _unit_rows(rng, 5, 128)
    calls = _record_verdicts(monkeypatch)
    result = _top_k(queries, database, 3, block_size=250, precisions=["int8", "bfloat16"])
    _assert_same_neighbors(result, _brute_force(queries, database, 3))
    skipped = _retrieval._INT8_FROM
    assert calls == ["bfloat16"] * skipped + ["int8"] * (20 - skipped)


@NO_INT8
def test_int8_filter_rounds_every_value_to_the_nearest_integer_without_wrapping():
    # Scaling and rounding in one float32 addition: values as large as
    # max_abs map to +-127 (not wrapped round to -128), all others within
    # 1/2 (and float32 rounding) of the scaled value.
    rng = np.random.default_rng(6)
    block = _unit_rows(rng, 500, 128)
    max_abs = float(np.abs(block).max())
    block[0, :4] = [max_abs, -max_abs, 0.0, -0.0]
    filt = _BlockFilter(block[:3], len(block), precision="int8", max_abs=max_abs)
    filt._product(block)
    rounded = filt.block[: len(block)].numpy().astype(np.float64)
    scaled = block.astype(np.float64) * filt.row_scale
    assert np.abs(rounded - scaled).max() <= 0.5 + 2**-10
    np.testing.assert_array_equal(rounded[0, :4], [127, -127, 0, 0])
    # The filter's integer product is exact: that of the rounded values.
    product = filt.queries.numpy().astype(np.int64) @ rounded.astype(np.int64).T
    np.testing.assert_array_equal(filt._product(block).numpy(), product)


def test_top_k_is_exact_for_rows_that_are_not_unit_vectors(precision):
    # An encoder may output zeros, which stay zero when normalised: with the
    # database's squared-norm range the search stays exact.
    rng = np.random.default_rng(4)
    database = _unit_rows(rng, 3000, 64)
    database[::7] = 0.0  # at distance 1 of every query, nearer than most rows
    database[3::11] *= 0.5
    queries = _unit_rows(rng, 6, 64)
    sq_norms = np.einsum("ij,ij->i", database, database, dtype=np.float64)
    result = _top_k(
        queries,
        database,
        25,
        block_size=256,
        precisions=[precision],
        sq_norm_range=(sq_norms.min(), sq_norms.max()),
    )
    reference = _brute_force(queries, database, 25)
    _assert_same_neighbors(result, reference)
    assert np.isin(np.flatnonzero(sq_norms == 0), reference[1]).any()  # zeros do come up


def test_block_top_k_keeps_lowest_columns_among_ties():
    similarities = np.array([[0.5, 0.9, 0.5, 0.5, 0.1], [0.2, 0.2, 0.2, 0.2, 0.2]], np.float32)
    np.testing.assert_array_equal(_block_top_k(similarities, 2), [[0, 1], [0, 1]])
    np.testing.assert_array_equal(_block_top_k(similarities, 3), [[0, 1, 2], [0, 1, 2]])


def test_value_ranges_read_a_memmap_in_blocks(tmp_path, monkeypatch):
    monkeypatch.setattr(_retrieval, "_BLOCK_ROWS", 100)
    rng = np.random.default_rng(5)
    vectors = rng.standard_normal((1050, 16)).astype(np.float32)
    vectors[1049] = 0.0  # the smallest, in the last, partial block
    vectors[3] *= 10.0  # the largest, in the first
    vectors[700, 5] = -50.0  # the largest value
    np.save(tmp_path / "e.npy", vectors)
    memmap = np.load(tmp_path / "e.npy", mmap_mode="r")
    sq_norms = np.einsum("ij,ij->i", vectors, vectors, dtype=np.float64)
    assert _retrieval._value_ranges(memmap) == ((0.0, sq_norms.max()), 50.0)


def test_fit_records_the_value_ranges_of_the_database(retriever):
    low, high = retriever._sq_norm_range
    sq_norms = np.einsum("ij,ij->i", retriever.embeddings_, retriever.embeddings_, dtype=np.float64)
    assert (low, high) == (sq_norms.min(), sq_norms.max())
    assert 1 - 1e-5 < low <= high < 1 + 1e-5
    assert retriever._max_abs == np.abs(retriever.embeddings_).max()


def test_duplicated_ecgs_tie_and_come_in_index_order(model, database):
    X_db, _ = database
    doubled = np.concatenate([X_db[:10], X_db[:10]])
    retriever = PrototypeRetriever(model, n_neighbors=20).fit(doubled)
    np.testing.assert_array_equal(retriever.embeddings_[:10], retriever.embeddings_[10:])
    distances, indices = retriever.kneighbors()
    for row, d in zip(indices, distances):
        np.testing.assert_array_equal(d[0::2], d[1::2])  # pairs of equal distances
        np.testing.assert_array_equal(row[1::2], row[0::2] + 10)  # lower index first


# ----------------------------------------------------------- fit and database
def test_fit_with_y_fits_a_clone_and_passes_groups(synthetic):
    X, y, groups = synthetic
    estimator = _model(max_epochs=2, validation_fraction=0.25)
    retriever = PrototypeRetriever(estimator, n_neighbors=3).fit(X, y, groups=groups)
    assert not hasattr(estimator, "net_")  # the given estimator is left unfitted
    reference = clone(estimator).fit(X, y, groups=groups)
    np.testing.assert_array_equal(retriever.estimator_.prototypes_, reference.prototypes_)
    np.testing.assert_allclose(retriever.embeddings_, reference.transform(X), rtol=1e-5, atol=1e-6)
    # Without groups the validation split is by ECG, which gives another model.
    other = PrototypeRetriever(estimator, n_neighbors=3).fit(X, y)
    assert not np.array_equal(other.estimator_.prototypes_, reference.prototypes_)


def test_pipeline_ending_in_crocs(synthetic, database):
    X, y, groups = synthetic
    pipeline = make_pipeline(
        FunctionTransformer(np.negative), _model(max_epochs=2, validation_fraction=0.25)
    )
    retriever = PrototypeRetriever(pipeline, n_neighbors=4).fit(X, y, groups=groups)
    crocs = retriever.estimator_[-1]
    np.testing.assert_array_equal(retriever.prototypes_, crocs.get_prototypes("learned")[0])
    X_db, _ = database
    frozen = PrototypeRetriever(FrozenEstimator(retriever.estimator_), n_neighbors=4).fit(X_db)
    expected = _brute_force(crocs.transform(-X_db), frozen.embeddings_, 4)
    _assert_same_neighbors(
        frozen.kneighbors(), _brute_force(frozen.prototypes_, frozen.embeddings_, 4)
    )
    np.testing.assert_allclose(frozen.embeddings_, crocs.transform(-X_db), rtol=1e-5, atol=1e-6)
    _assert_same_neighbors(frozen.kneighbors(X_db[:3]), (expected[0][:3], expected[1][:3]))


def test_batched_embedding_with_progress_and_memmap(model, database, tmp_path, capsys):
    X_db, _ = database
    np.save(tmp_path / "db.npy", X_db)
    memmap = np.load(tmp_path / "db.npy", mmap_mode="r")
    retriever = PrototypeRetriever(model, batch_size=7, verbose=1).fit(memmap)
    out = capsys.readouterr().out
    lines = out.strip().splitlines()
    assert lines[0].startswith("Embedded 7/60 ECGs")
    assert lines[-1].startswith("Embedded 60/60 ECGs")
    assert len(lines) == 9  # every batch: 9 batches, fewer than 10 reports
    np.testing.assert_allclose(retriever.embeddings_, model.transform(X_db), rtol=1e-5, atol=1e-6)
    PrototypeRetriever(model, batch_size=7, verbose=0).fit(memmap)
    assert capsys.readouterr().out == ""
    PrototypeRetriever(model, batch_size=2, verbose=1).fit(memmap)
    assert len(capsys.readouterr().out.strip().splitlines()) == 10  # 30 batches, every third


def test_joblib_round_trip(retriever, database, tmp_path):
    X_db, _ = database
    joblib.dump(retriever, tmp_path / "retriever.joblib")
    loaded = joblib.load(tmp_path / "retriever.joblib")
    for queries in (None, ("SB", "F", "<60"), X_db[:3]):
        expected = retriever.kneighbors(queries)
        result = loaded.kneighbors(queries)
        np.testing.assert_array_equal(result[1], expected[1])
        np.testing.assert_allclose(result[0], expected[0], rtol=1e-6)
    pd.testing.assert_frame_equal(loaded.query_attributes_, retriever.query_attributes_)


def test_clone_and_params(retriever):
    params = retriever.get_params()
    assert params["n_neighbors"] == 5
    assert params["query"] == "learned"
    fresh = clone(retriever)
    assert not hasattr(fresh, "embeddings_")
    assert fresh.estimator is retriever.estimator  # FrozenEstimator clones to itself


# ------------------------------------------------------------------ bad input
def test_unfitted_estimator_without_y(database):
    X_db, _ = database
    message = r"fit\(X\) without y indexes X with an already fitted estimator.*pass y"
    with pytest.raises(NotFittedError, match=message):
        PrototypeRetriever(_model()).fit(X_db)
    with pytest.raises(NotFittedError, match=message):
        PrototypeRetriever(FrozenEstimator(_model())).fit(X_db)
    with pytest.raises(NotFittedError):
        PrototypeRetriever(_model()).kneighbors()


def test_estimator_without_prototypes(database):
    X_db, _ = database
    with pytest.raises(TypeError, match="must be a CROCSClusterer.*got PCA"):
        PrototypeRetriever(PCA()).fit(X_db[:, 0, :], np.zeros(len(X_db)))


def test_bad_parameters(model, database):
    X_db, _ = database
    with pytest.raises(InvalidParameterError, match="n_neighbors"):
        PrototypeRetriever(model, n_neighbors=0).fit(X_db)
    with pytest.raises(InvalidParameterError, match="query"):
        PrototypeRetriever(model, query="median").fit(X_db)


def test_bad_n_neighbors(retriever):
    with pytest.raises(
        ValueError,
        match="Expected n_neighbors <= n_samples_fit, but n_neighbors = 61, n_samples_fit = 60, n_samples = 12",
    ):
        retriever.kneighbors(n_neighbors=61)
    with pytest.raises(ValueError, match="Expected n_neighbors > 0. Got 0"):
        retriever.kneighbors(n_neighbors=0)
    with pytest.raises(TypeError, match="n_neighbors must be an integer"):
        retriever.kneighbors(n_neighbors=2.5)


def test_bad_attribute_queries(retriever):
    with pytest.raises(
        ValueError,
        match=r"Attribute 'sex' has values \['X'\] that were not seen in fit; known values: \['F', 'M'\]",
    ):
        retriever.kneighbors(("SR", "X", "<60"))
    with pytest.raises(
        ValueError,
        match=r"must give 3 value\(s\), one per attribute of \['rhythm', 'sex', 'age_group'\]",
    ):
        retriever.kneighbors(("SR", "F"))
    with pytest.raises(ValueError, match=r"missing \['age_group'\], unknown \['age'\]"):
        retriever.kneighbors({"rhythm": "SR", "sex": "F", "age": "<60"})
    with pytest.raises(ValueError, match=r"missing \['age_group'\], unknown \[\]"):
        retriever.kneighbors(pd.DataFrame({"rhythm": ["SR"], "sex": ["F"]}))
    with pytest.raises(ValueError, match="holds no attribute combination"):
        retriever.kneighbors(pd.DataFrame(columns=["rhythm", "sex", "age_group"]))
    with pytest.raises(ValueError, match="numeric ECG signals; got an array of dtype complex"):
        retriever.kneighbors(np.ones((2, 600), dtype=complex))


def test_bad_signal_queries(retriever, database):
    X_db, _ = database
    with pytest.raises(ValueError, match=r"must have shape \(n_samples, n_timepoints\).*X\[None\]"):
        retriever.kneighbors(X_db[0, 0])
    with pytest.raises(
        ValueError,
        match=r"X has 1 lead\(s\) of 300 samples, but CROCSClusterer was fitted on 1 lead\(s\) of 600",
    ):
        retriever.kneighbors(X_db[:2, :, :300])
    with pytest.raises(ValueError, match="NaN"):
        retriever.kneighbors(np.full((1, 600), np.nan))
    with pytest.raises(ValueError, match="holds no ECG"):
        retriever.kneighbors(np.empty((0, 600)))


def test_bad_database(model):
    with pytest.raises(ValueError, match="X holds no ECG"):
        PrototypeRetriever(model).fit(np.empty((0, 1, 600)))
    with pytest.raises(ValueError, match=r"X must have shape"):
        PrototypeRetriever(model).fit(np.zeros(600))


# -------------------------------------------------------- scikit-learn checks
FAST_CNN = {"channels": (4,), "kernel_size": 1, "stride": 1, "pool_size": 1}


@parametrize_with_checks(
    [
        PrototypeRetriever(
            CROCSClusterer(
                encoder="cnn",
                encoder_params=FAST_CNN,
                embedding_dim=8,
                max_epochs=2,
                lr=1e-2,
                validation_fraction=None,
                random_state=0,
            ),
            n_neighbors=2,
        )
    ]
)
def test_sklearn_compatible_estimator(estimator, check):
    check(estimator)
