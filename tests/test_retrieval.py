"""PrototypeRetriever: attribute and signal queries against brute force, ties, bad input."""

import joblib
import numpy as np
import pandas as pd
import pytest
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

from sklearn_crocs import CROCSClusterer, PrototypeRetriever

FAST = {"embedding_dim": 16, "max_epochs": 3, "lr": 3e-3, "batch_size": 32}


def _model(**params):
    return CROCSClusterer(**{**FAST, "validation_fraction": None, "random_state": 0, **params})


@pytest.fixture(scope="module")
def model(synthetic):
    X, y, groups = synthetic
    return _model().fit(X, y, groups=groups)


@pytest.fixture(scope="module")
def rated_model(synthetic):
    """Fitted with its rate: a longer ECG can only be a longer recording."""
    X, y, groups = synthetic
    return _model(sampling_rate=100).fit(X, y, groups=groups)


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
    np.testing.assert_array_equal(
        retriever.query_attributes_.to_numpy(), model.prototype_attributes_
    )
    assert retriever.attribute_names_ == ["rhythm", "sex", "age_group"]
    assert list(retriever.query_attributes_.columns) == retriever.attribute_names_
    # The array of the same values is deprecated: one table names the queries.
    with pytest.warns(FutureWarning, match="use query_attributes_"):
        array = retriever.prototype_attributes_
    np.testing.assert_array_equal(array, retriever.query_attributes_.to_numpy())
    assert retriever.n_features_in_ == 600


# ---------------------------------------------------------------- query kinds
def test_prototype_queries_match_brute_force_and_sklearn(retriever):
    distances, indices = retriever.query()
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
    np.testing.assert_array_equal(retriever.query(return_distance=False), indices)


def test_n_neighbors_argument_overrides_the_parameter(retriever):
    distances, indices = retriever.query(n_neighbors=60)  # the whole database
    assert indices.shape == (12, 60)
    assert all(sorted(row) == list(range(60)) for row in indices)
    np.testing.assert_array_equal(indices[:, :5], retriever.query()[1])


@pytest.mark.parametrize(
    ("queries", "rows"),
    [
        ({"sex": "M", "rhythm": "SB", "age_group": "<60"}, [6]),
        ({"rhythm": ["SB", "AFIB"], "sex": ["M", "F"], "age_group": ["<60", "<60"]}, [6, 0]),
        ({"rhythm": ["SB", "SR"], "sex": "F", "age_group": "<60"}, [4, 8]),
        ([{"rhythm": "SR", "sex": "M", "age_group": ">=60"}], [11]),
        (pd.DataFrame({"age_group": [">=60"], "rhythm": ["SB"], "sex": ["F"]}), [5]),
        (pd.Series({"rhythm": "SB", "sex": "F", "age_group": ">=60"}), [5]),
    ],
    ids=["dict", "dict-of-lists", "dict-broadcast", "dicts", "frame", "series"],
)
def test_attribute_queries_are_their_prototypes(retriever, queries, rows):
    expected = _brute_force(retriever.prototypes_[rows], retriever.embeddings_, 5)
    _assert_same_neighbors(retriever.query(queries), expected)
    full = retriever.query()
    np.testing.assert_array_equal(retriever.query(queries)[1], full[1][rows])
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


def test_kneighbors_without_x_finds_the_neighbours_of_the_database_as_sklearn(retriever):
    # As NearestNeighbors.kneighbors(): each indexed ECG's neighbours, itself left out.
    distances, indices = retriever.kneighbors(n_neighbors=4)
    assert indices.shape == (60, 4)
    nn = NearestNeighbors(n_neighbors=4).fit(retriever.embeddings_.astype(np.float64))
    expected = nn.kneighbors()
    np.testing.assert_array_equal(indices, expected[1])
    np.testing.assert_allclose(distances, expected[0], atol=1e-6)
    with pytest.raises(ValueError, match="Expected n_neighbors < n_samples_fit"):
        retriever.kneighbors(n_neighbors=60)


def test_kneighbors_without_x_leaves_out_the_ecg_not_its_duplicates(model, database):
    X_db, _ = database
    retriever = PrototypeRetriever(model).fit(np.concatenate([X_db[:10], X_db[:10]]))
    distances, indices = retriever.kneighbors(n_neighbors=1)
    np.testing.assert_array_equal(indices.ravel(), np.r_[10:20, 0:10])  # each one's twin
    np.testing.assert_array_equal(distances, 0)
    # Three copies: the first two neighbours of each are the other copies.
    tripled = PrototypeRetriever(model).fit(np.concatenate([X_db[:5]] * 3))
    indices = tripled.kneighbors(n_neighbors=2, return_distance=False)
    expected = [sorted({i % 5, i % 5 + 5, i % 5 + 10} - {i}) for i in range(15)]
    np.testing.assert_array_equal(indices, expected)
    # One neighbour: the third copy is beyond the two tied rows searched, so the
    # last of them is dropped rather than a copy.
    indices = tripled.kneighbors(n_neighbors=1, return_distance=False)
    np.testing.assert_array_equal(indices.ravel(), [row[0] for row in expected])


def test_mean_query_uses_tp_crocs_prototypes(model, database):
    X_db, _ = database
    retriever = PrototypeRetriever(model, prototypes="mean", n_neighbors=3).fit(X_db)
    prototypes, attributes = model.get_prototypes("mean")
    np.testing.assert_array_equal(retriever.prototypes_, prototypes)
    np.testing.assert_array_equal(retriever.query_attributes_.to_numpy(), attributes)
    _assert_same_neighbors(retriever.query(), _brute_force(prototypes, retriever.embeddings_, 3))
    row = [tuple(a) for a in attributes].index(("SB", "M", ">=60"))
    _assert_same_neighbors(
        retriever.query({"rhythm": "SB", "sex": "M", "age_group": ">=60"}),
        _brute_force(prototypes[[row]], retriever.embeddings_, 3),
    )


def test_mean_query_of_a_combination_without_training_ecg(synthetic, database):
    X, y, _ = synthetic
    keep = ~((y["rhythm"] == "SR") & (y["sex"] == "F") & (y["age_group"] == "<60")).to_numpy()
    with pytest.warns(UserWarning, match="have no training ECG"):
        model = _model(max_epochs=1, prototypes="mean").fit(X[keep], y[keep])
    X_db, _ = database
    mean = PrototypeRetriever(model, prototypes="mean", n_neighbors=2).fit(X_db)
    query = {"rhythm": "SR", "sex": "F", "age_group": "<60"}
    assert len(mean.prototypes_) == 11
    assert ("SR", "F", "<60") not in [tuple(r) for r in mean.query_attributes_.to_numpy()]
    with pytest.raises(
        ValueError,
        match=r"No training ECG has the attribute combination\(s\) \('SR', 'F', '<60'\).*prototypes='learned'",
    ):
        mean.query(query)
    learned = PrototypeRetriever(model, prototypes="learned", n_neighbors=2).fit(X_db)
    assert learned.query(query)[1].shape == (1, 2)
    assert len(learned.prototypes_) == 12


def test_numeric_attributes_are_queried_by_name(synthetic, database):
    X, y, _ = synthetic
    codes = np.column_stack([pd.factorize(y[c], sort=True)[0] for c in y.columns])
    model = _model(max_epochs=1).fit(X, codes)
    retriever = PrototypeRetriever(model, n_neighbors=4).fit(database[0])
    row = [tuple(r) for r in retriever.query_attributes_.to_numpy()].index((2, 0, 1))
    query = {"attribute_0": 2, "attribute_1": 0, "attribute_2": 1}
    np.testing.assert_array_equal(retriever.query(query)[1], retriever.query()[1][[row]])
    frame = pd.DataFrame({"attribute_0": [2], "attribute_1": [0], "attribute_2": [1]})
    np.testing.assert_array_equal(retriever.query(frame)[1], retriever.query()[1][[row]])
    with pytest.raises(
        ValueError, match=r"Attribute 'attribute_0' has values \[7\].*known values: \[0, 1, 2\]"
    ):
        retriever.query({**query, "attribute_0": 7})
    # Numeric attributes given to kneighbors are not taken for signals.
    with pytest.raises(TypeError, match=r"kneighbors takes ECG signals.*query\(\)"):
        retriever.kneighbors(frame)


# ----------------------------------------------------------------------- ties
def test_duplicated_ecgs_tie_and_come_in_index_order(model, database):
    X_db, _ = database
    doubled = np.concatenate([X_db[:10], X_db[:10]])
    retriever = PrototypeRetriever(model, n_neighbors=20).fit(doubled)
    np.testing.assert_array_equal(retriever.embeddings_[:10], retriever.embeddings_[10:])
    distances, indices = retriever.query()
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
    _assert_same_neighbors(frozen.query(), _brute_force(frozen.prototypes_, frozen.embeddings_, 4))
    np.testing.assert_allclose(frozen.embeddings_, crocs.transform(-X_db), rtol=1e-5, atol=1e-6)
    _assert_same_neighbors(frozen.kneighbors(X_db[:3]), (expected[0][:3], expected[1][:3]))


def test_batched_embedding_with_progress_and_memmap(model, database, tmp_path, capsys):
    X_db, _ = database
    np.save(tmp_path / "db.npy", X_db)
    memmap = np.load(tmp_path / "db.npy", mmap_mode="r")
    retriever = PrototypeRetriever(model, batch_size=7, verbose=1).fit(memmap)
    captured = capsys.readouterr()
    assert captured.out == ""
    # A tqdm bar on stderr, from none to all 60 ECGs (batches of 7).
    assert "Embedding:" in captured.err
    assert " 0/60 " in captured.err and " 60/60 " in captured.err
    np.testing.assert_allclose(retriever.embeddings_, model.transform(X_db), rtol=1e-5, atol=1e-6)
    PrototypeRetriever(model, batch_size=7, verbose=0).fit(memmap)
    assert capsys.readouterr() == ("", "")


def test_embeddings_on_disk_search_as_in_memory(retriever, model, database, tmp_path):
    X_db, _ = database
    path = tmp_path / "embeddings.npy"
    on_disk = clone(retriever).set_params(embeddings_path=path).fit(X_db)
    assert isinstance(on_disk.embeddings_, np.memmap) and not on_disk.embeddings_.flags.writeable
    np.testing.assert_array_equal(np.load(path), retriever.embeddings_)
    for search, queries in [("query", None), ("query", {"sex": "F"}), ("kneighbors", X_db[:3])]:
        got = getattr(on_disk, search)(queries)
        want = getattr(retriever, search)(queries)
        np.testing.assert_array_equal(got[0], want[0])
        np.testing.assert_array_equal(got[1], want[1])
    # A saved retriever keeps neither the embeddings nor their path: where a
    # fit writes is the caller's choice, never a file's.
    on_disk.save(tmp_path / "retriever.safetensors")
    loaded = PrototypeRetriever.load(tmp_path / "retriever.safetensors")
    assert loaded.embeddings_path is None


def test_joblib_round_trip(retriever, database, tmp_path):
    X_db, _ = database
    joblib.dump(retriever, tmp_path / "retriever.joblib")
    loaded = joblib.load(tmp_path / "retriever.joblib")
    query = {"rhythm": "SB", "sex": "F", "age_group": "<60"}
    for search, queries in [("query", None), ("query", query), ("kneighbors", X_db[:3])]:
        expected = getattr(retriever, search)(queries)
        result = getattr(loaded, search)(queries)
        np.testing.assert_array_equal(result[1], expected[1])
        np.testing.assert_allclose(result[0], expected[0], rtol=1e-6)
    pd.testing.assert_frame_equal(loaded.query_attributes_, retriever.query_attributes_)


def test_clone_and_params(retriever):
    params = retriever.get_params()
    assert params["n_neighbors"] == 5
    assert params["prototypes"] == "learned"
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
    with pytest.raises(NotFittedError):
        PrototypeRetriever(_model()).query()


def test_estimator_without_prototypes(database):
    X_db, _ = database
    with pytest.raises(TypeError, match="must be a CROCSClusterer.*got PCA"):
        PrototypeRetriever(PCA()).fit(X_db[:, 0, :], np.zeros(len(X_db)))


def test_bad_parameters(model, database):
    X_db, _ = database
    with pytest.raises(InvalidParameterError, match="n_neighbors"):
        PrototypeRetriever(model, n_neighbors=0).fit(X_db)
    with pytest.raises(InvalidParameterError, match="prototypes"):
        PrototypeRetriever(model, prototypes="median").fit(X_db)
    with pytest.raises(TypeError, match="positional"):
        PrototypeRetriever(model, 5)  # every parameter but the estimator is keyword-only


def test_bad_n_neighbors(retriever):
    with pytest.raises(
        ValueError,
        match="Expected n_neighbors <= n_samples_fit, but n_neighbors = 61, n_samples_fit = 60",
    ):
        retriever.query(n_neighbors=61)
    with pytest.raises(ValueError, match="Expected n_neighbors > 0. Got 0"):
        retriever.query(n_neighbors=0)
    with pytest.raises(ValueError, match="Expected n_neighbors > 0. Got 0"):
        retriever.kneighbors(n_neighbors=0)
    with pytest.raises(TypeError, match="n_neighbors must be an integer"):
        retriever.kneighbors(n_neighbors=2.5)


def test_bad_attribute_queries(retriever):
    with pytest.raises(
        ValueError,
        match=r"Attribute 'sex' has values \['X'\] that were not seen in fit; known values: \['F', 'M'\]",
    ):
        retriever.query({"rhythm": "SR", "sex": "X", "age_group": "<60"})
    with pytest.raises(ValueError, match=r"name attributes \['age'\] that are not among"):
        retriever.query({"rhythm": "SR", "sex": "F", "age": "<60"})
    with pytest.raises(ValueError, match=r"Attribute queries \[1\] specify no attribute"):
        retriever.query([{"sex": "F"}, {"sex": None}])
    with pytest.raises(ValueError, match=r"Attribute queries \[0\] specify no attribute"):
        retriever.query({"rhythm": None})
    with pytest.raises(ValueError, match="holds no attribute combination"):
        retriever.query(pd.DataFrame(columns=["rhythm", "sex", "age_group"]))


@pytest.mark.parametrize(
    "queries",
    [
        ("SR", "F", "<60"),
        [("SR", "F", "<60")],
        np.array([["SR", "F", "<60"]]),
        ["SR", "F", "<60"],
        np.ones((1, 600)),
    ],
    ids=["tuple", "tuples", "string-array", "strings", "signals"],
)
def test_query_takes_attributes_by_name_only(retriever, queries):
    # Combinations told apart by type and order are gone: name the attributes.
    with pytest.raises(TypeError, match=r"attributes must be a dict keyed by attribute name"):
        retriever.query(queries)


@pytest.mark.parametrize(
    "queries",
    [
        {"sex": "F"},
        [{"sex": "F"}],
        pd.DataFrame({"sex": ["F"]}),
        pd.Series({"sex": "F"}),
        ("SR", "F", "<60"),
        [("SR", "F", "<60")],
        np.array([["SR", "F", "<60"]]),
        ["SR", "F", "<60"],
    ],
    ids=["dict", "dicts", "frame", "series", "tuple", "tuples", "string-array", "strings"],
)
def test_kneighbors_refuses_attribute_queries_naming_query(retriever, queries):
    with pytest.raises(TypeError, match=r"kneighbors takes ECG signals.*query\(\{'sex': 'F'\}\)"):
        retriever.kneighbors(queries)


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


def test_search_norms_computed_once_and_a_constant_for_unit_rows():
    rng = np.random.default_rng(0)
    unit = rng.standard_normal((50, 8)).astype(np.float32)
    unit /= np.linalg.norm(unit, axis=1, keepdims=True)
    retriever = PrototypeRetriever(None)
    retriever._set_embeddings(unit)
    assert isinstance(retriever._half_sq_norms, float)  # products alone rank unit rows
    with_zero = unit.copy()
    with_zero[3] = 0.0  # an all-zero embedding: its norm matters
    retriever._set_embeddings(with_zero)
    assert retriever._half_sq_norms.shape == (50,)


# ------------------------------------------------------------- partial queries
def _partial_brute_force(prototypes, embeddings, k, how):
    """Reference for one partial query by the rows ``prototypes`` of its matching combinations."""
    prototypes = np.asarray(prototypes, dtype=np.float64)
    embeddings = np.asarray(embeddings, dtype=np.float64)
    if how == "mean":
        mean = prototypes.mean(axis=0)
        return _brute_force((mean / np.linalg.norm(mean))[None], embeddings, k)
    distances = np.linalg.norm(prototypes[:, None] - embeddings[None], axis=2).min(axis=0)
    order = np.lexsort((np.arange(len(embeddings)), distances))[:k]
    return distances[order][None], order[None]


@pytest.mark.parametrize("how", ["min", "mean"])
@pytest.mark.parametrize(
    ("queries", "rows"),
    [
        ({"sex": "F"}, [[0, 1, 4, 5, 8, 9]]),
        (pd.DataFrame({"rhythm": ["SR"], "age_group": [">=60"]}), [[9, 11]]),
        ({"rhythm": "SB", "sex": None, "age_group": "<60"}, [[4, 6]]),
        ([{"sex": "M", "age_group": "<60"}, {"rhythm": "AFIB"}], [[2, 6, 10], [0, 1, 2, 3]]),
        ({"rhythm": ["SR", "SB"]}, [[8, 9, 10, 11], [4, 5, 6, 7]]),
    ],
    ids=["dict", "frame", "dict-with-None", "dicts", "dict-of-lists"],
)
def test_partial_queries_match_brute_force(model, database, how, queries, rows):
    retriever = PrototypeRetriever(FrozenEstimator(model), partial=how, n_neighbors=7)
    retriever.fit(database[0])
    distances, indices = retriever.query(queries)
    assert distances.shape == indices.shape == (len(rows), 7)
    for q, matching in enumerate(rows):
        expected = _partial_brute_force(
            retriever.prototypes_[matching], retriever.embeddings_, 7, how
        )
        _assert_same_neighbors((distances[q : q + 1], indices[q : q + 1]), expected)


def test_partial_setting_leaves_full_queries_alone(model, database):
    full = pd.DataFrame([("SR", "F", "<60"), ("AFIB", "M", ">=60")], columns=model.attribute_names_)
    results = [
        PrototypeRetriever(FrozenEstimator(model), partial=how).fit(database[0]).query(full)
        for how in ("min", "mean")
    ]
    np.testing.assert_array_equal(results[0][0], results[1][0])
    np.testing.assert_array_equal(results[0][1], results[1][1])


def test_partial_queries_with_mean_prototypes_use_those_that_exist(synthetic, database):
    X, y, _ = synthetic
    keep = ~((y["rhythm"] == "SR") & (y["sex"] == "F")).to_numpy()
    with pytest.warns(UserWarning, match="have no training ECG"):
        model = _model(max_epochs=1, prototypes="mean").fit(X[keep], y[keep])
    retriever = PrototypeRetriever(model, prototypes="mean", partial="mean", n_neighbors=3)
    retriever.fit(database[0])
    matching = (retriever.query_attributes_["sex"] == "F").to_numpy().nonzero()[0]
    assert len(matching) == 4  # AFIB and SB, two age groups each
    _assert_same_neighbors(
        retriever.query({"sex": "F"}),
        _partial_brute_force(retriever.prototypes_[matching], retriever.embeddings_, 3, "mean"),
    )
    with pytest.raises(ValueError, match=r"\('SR', 'F', None\) of .*None: any value"):
        retriever.query({"rhythm": "SR", "sex": "F"})


# ------------------------------------------------------------ sampling rates
def test_retriever_indexes_and_queries_signals_of_another_rate():
    from test_clusterer import _model, _sines

    from sklearn_crocs.preprocessing import resample_signals

    X, y = _sines(500)
    model = _model(encoder="resnet", sampling_rate=500).fit(X, y)
    X_250 = resample_signals(X, 500, 250)
    at_500 = PrototypeRetriever(FrozenEstimator(model), n_neighbors=5).fit(X)
    at_250 = PrototypeRetriever(FrozenEstimator(model), n_neighbors=5).fit(X_250, sampling_rate=250)
    np.testing.assert_allclose(at_250.embeddings_, at_500.embeddings_, atol=0.05)
    distances, _ = at_250.kneighbors(X_250[:3], sampling_rate=250)
    assert distances[:, 0].max() < 1e-3  # each query finds itself (or its twin)
    with pytest.raises(ValueError, match=r"1250 samples per lead, 2.5 s at 500 Hz"):
        at_250.kneighbors(X_250[:3])  # undeclared: taken at the model's 500 Hz
    with pytest.raises(ValueError, match=r"1 s at 500 Hz.*frames of 5 s"):
        at_500.kneighbors(X[:2, :, :500])
    with pytest.raises(
        ValueError, match=r"with y, X trains a clone.*CROCSClusterer\(sampling_rate"
    ):
        PrototypeRetriever(model).fit(X, y, sampling_rate=500)


# ---------------------------------------------------------------- whole records
def _records(database):
    """Whole records of two lengths, both longer than the 600-sample frames: a list."""
    X_db, _ = database
    doubles = [np.concatenate([X_db[i], X_db[i + 1]], axis=-1) for i in range(0, 20, 2)]
    longer = [np.concatenate([X_db[i], X_db[i + 1][..., :300]], axis=-1) for i in range(20, 40, 2)]
    return [record for pair in zip(doubles, longer) for record in pair]  # 1200, 900, 1200, ...


def _unit_mean(*parts):
    mean = sum(parts) / len(parts)
    return mean / np.linalg.norm(mean, axis=1, keepdims=True)


def test_records_longer_than_the_frames_are_retrieved_one_row_each(rated_model, database):
    # The model refuses longer signals (longer_signals="error"); the retriever
    # (longer_signals="auto", the model knowing its rate) embeds each record as the
    # mean of its frames, one row each.
    records = _records(database)
    assert rated_model.longer_signals == "error"
    retriever = PrototypeRetriever(FrozenEstimator(rated_model), n_neighbors=len(records)).fit(records)
    assert retriever.n_samples_fit_ == len(records) == 20
    _, indices = retriever.query()
    for row in indices:  # every record once, by its position in the list
        assert sorted(row.tolist()) == list(range(len(records)))
    # Each record, the normalised mean of frames of the training length from start to end.
    for i, starts in ((0, (0, 600)), (1, (0, 300))):
        frames = [rated_model.transform(records[i][None, :, s : s + 600]) for s in starts]
        np.testing.assert_allclose(retriever.embeddings_[i], _unit_mean(*frames)[0], atol=1e-5)


def test_retrieving_records_leaves_the_estimator_unchanged(rated_model, database):
    records = _records(database)
    params = rated_model.get_params()
    frozen = FrozenEstimator(rated_model)
    retriever = PrototypeRetriever(frozen, n_neighbors=3).fit(records)
    retriever.kneighbors(records[:2])
    assert retriever.estimator_ is frozen and frozen.estimator is rated_model
    assert rated_model.get_params() == params and rated_model.longer_signals == "error"
    with pytest.raises(ValueError, match='longer_signals="average"'):
        rated_model.transform(records[:1])  # the model itself still refuses records


def test_kneighbors_takes_whole_records(rated_model, database):
    records = _records(database)
    retriever = PrototypeRetriever(rated_model, n_neighbors=3).fit(records)
    # A ragged list of two records, and an array of one length: each finds itself.
    assert retriever.kneighbors(records[:2], n_neighbors=1)[1].ravel().tolist() == [0, 1]
    same_length = np.stack(records[0::2][:3])
    assert retriever.kneighbors(same_length, n_neighbors=1)[1].ravel().tolist() == [0, 2, 4]
    distances, _ = retriever.kneighbors(records[1][None], n_neighbors=1)
    assert distances[0, 0] < 1e-3


def test_records_through_a_pipeline_ending_in_crocs(rated_model, database):
    records = _records(database)
    negative = FunctionTransformer(np.negative).fit(database[0])
    pipeline = make_pipeline(negative, rated_model)
    retriever = PrototypeRetriever(FrozenEstimator(pipeline), n_neighbors=2).fit(records)
    assert retriever.n_samples_fit_ == len(records)
    frames = [rated_model.transform(-records[0][None, :, s : s + 600]) for s in (0, 600)]
    np.testing.assert_allclose(retriever.embeddings_[0], _unit_mean(*frames)[0], atol=1e-5)
    assert retriever.kneighbors(records[:2], n_neighbors=1)[1].ravel().tolist() == [0, 1]
    assert pipeline[-1].longer_signals == "error"


def test_longer_signals_error_refuses_records_as_the_model_does(model, database):
    records = _records(database)
    strict = PrototypeRetriever(FrozenEstimator(model), longer_signals="error")
    with pytest.raises(ValueError, match=r"1200 samples.*longer_signals=\"average\""):
        strict.fit(records)
    X_db, _ = database
    strict.fit(X_db)  # frames of the training length are taken either way
    with pytest.raises(ValueError, match=r"1200 samples.*longer_signals=\"average\""):
        strict.kneighbors(records[:1])
    with pytest.raises(InvalidParameterError, match="longer_signals"):
        PrototypeRetriever(model, longer_signals="mean").fit(X_db)


def test_auto_averages_only_for_a_model_that_knows_its_rate(model, database):
    """Without a rate, 1200 samples may be 600 at twice the rate: "auto" refuses them, as
    the model does; "average" is the user saying that they are longer recordings."""
    records = _records(database)
    with pytest.raises(ValueError, match=r"1200 samples.*without sampling_rate"):
        PrototypeRetriever(FrozenEstimator(model)).fit(records)
    averaged = PrototypeRetriever(FrozenEstimator(model), longer_signals="average").fit(records)
    assert averaged.n_samples_fit_ == len(records)
