"""evaluate_prototypes: the clustering and retrieval tables of CP and TP CROCS."""

import io

import numpy as np
import pandas as pd
import pytest
from sklearn.frozen import FrozenEstimator

from sklearn_crocs import CROCSClusterer, PrototypeRetriever
from sklearn_crocs.metrics import (
    chance_precision_at_k,
    clustering_report,
    evaluate_prototypes,
    make_precision_at_k_scorer,
    matchable_queries,
    precision_at_k,
    retrieval_report,
)


@pytest.fixture(scope="module")
def split(synthetic):
    X, y, groups = synthetic
    train = groups < 18
    model = CROCSClusterer(
        embedding_dim=16, max_epochs=4, lr=3e-3, validation_fraction=None, random_state=0
    ).fit(X[train], y[train])
    return model, X[~train], y[~train].reset_index(drop=True)


def test_tables_match_the_retriever_and_the_reports(split):
    model, X, y = split
    out = io.StringIO()
    result = evaluate_prototypes(model, X, y, file=out)
    neighbors, predictions = {}, {}
    for method, kind in (("CP CROCS", "learned"), ("TP CROCS", "mean")):
        retriever = PrototypeRetriever(FrozenEstimator(model), prototypes=kind).fit(X)
        indices = retriever.query(return_distance=False)
        neighbors[method] = (retriever.query_attributes_, indices)
        np.testing.assert_array_equal(result.neighbors[method][1], indices)
        prototypes, attributes = model.get_prototypes(kind)
        nearest = np.argmax(model.transform(X) @ prototypes.T, axis=1)
        predictions[method] = pd.DataFrame(attributes[nearest], columns=list(y.columns))
        for m, label in ((1, ">=1"), (2, ">=2"), (3, "=3")):
            expected = int(matchable_queries(y, retriever.query_attributes_, min_matches=m).sum())
            assert result.retrieval_queries.loc[method, label] == expected
        assert result.retrieval_queries.loc[method, "total"] == len(retriever.prototypes_)
    # Baselines: each attribute's most frequent training value, and random retrieval.
    train_counts = pd.Series(model.prototype_counts_)
    modes = [
        train_counts.groupby(model.get_prototypes()[1][:, i]).sum().idxmax()
        for i in range(y.shape[1])
    ]
    predictions["Majority"] = pd.DataFrame([modes] * len(y), columns=list(y.columns))
    pd.testing.assert_frame_equal(result.clustering, clustering_report(y, predictions))
    assert (result.clustering.loc["Majority", (slice(None), "AMI")] == 0).all()
    methods = ["CP CROCS", "TP CROCS"]
    pd.testing.assert_frame_equal(result.retrieval.loc[methods], retrieval_report(y, neighbors))
    assert result.retrieval.index.tolist() == [*methods, "Random"]
    queries = neighbors["CP CROCS"][0]
    for (k, label), value in result.retrieval.loc["Random"].items():
        m = 3 if label == "=3" else int(label[2:])
        assert value == round(100 * chance_precision_at_k(y, queries, k=k, min_matches=m), 1)
    assert result.retrieval.columns.tolist() == [
        (k, m) for k in (1, 5, 10) for m in (">=1", ">=2", "=3")
    ]
    text = out.getvalue()
    assert "Clustering of 18 held-out ECGs (%):" in text
    assert "Retrieval of the K nearest of 18 held-out ECGs per prototype, P@K (%):" in text
    assert "# matches" in text
    assert (
        "Queries that at least one held-out ECG matches on that many attributes (the others count as misses):"
        in text
    )
    assert text.count("CP CROCS") == 3
    assert text.count("Majority") == 1
    assert text.count("Random") == 1


def test_options_and_pipeline(split):
    model, X, y = split
    result = evaluate_prototypes(
        model, X, y, k=(2, 1), no_match="zero", percent=False, decimals=None
    )
    assert result.retrieval.columns.get_level_values(0).unique().tolist() == [1, 2]
    queries = result.retrieval_queries
    assert queries["total"].tolist() == [12, 10]  # 2 combinations lack training ECGs
    assert (queries.drop(columns="total").to_numpy() <= queries[["total"]].to_numpy()).all()
    assert queries.loc["CP CROCS", "=3"] < 12  # some prototypes cannot be matched exactly
    assert result.retrieval.to_numpy().max() <= 1
    # A fitted model behind FrozenEstimator gives the same tables.
    frozen = evaluate_prototypes(
        FrozenEstimator(model),
        X,
        y.to_numpy(),
        k=(2, 1),
        no_match="zero",
        percent=False,
        decimals=None,
    )
    np.testing.assert_array_equal(frozen.retrieval.to_numpy(), result.retrieval.to_numpy())
    assert frozen.clustering.columns.get_level_values(0)[0] == "rhythm"  # fitted names


def test_too_few_ecgs_for_k(split):
    model, X, y = split
    with pytest.raises(ValueError, match=r"k=10 exceeds the 5 held-out ECG\(s\)"):
        evaluate_prototypes(model, X[:5], y[:5])
    assert evaluate_prototypes(model, X[:5], y[:5], k=5).retrieval.shape == (3, 3)
    plain = evaluate_prototypes(model, X[:5], y[:5], k=5, baselines=False)
    assert plain.retrieval.index.tolist() == plain.clustering.index.tolist() == ["CP CROCS", "TP CROCS"]


def test_neighbours_are_exact_for_zero_and_non_unit_embeddings(split, monkeypatch):
    """Evaluation and the P@K scorer search the embeddings as they are (an encoder
    ending in a ReLU can output zeros), not assuming unit vectors."""
    model, X, y = split
    rng = np.random.RandomState(0)
    embeddings = rng.randn(len(X), model.prototypes_.shape[1]).astype(np.float32)
    embeddings *= rng.uniform(0.1, 3.0, (len(X), 1)).astype(np.float32)
    embeddings[::4] = 0
    monkeypatch.setattr(model, "transform", lambda X: embeddings)
    result = evaluate_prototypes(model, X, y, k=5)
    for method, kind in (("CP CROCS", "learned"), ("TP CROCS", "mean")):
        prototypes, attributes = model.get_prototypes(kind)
        distances = ((prototypes[:, None, :] - embeddings[None]) ** 2).sum(-1)
        expected = np.argsort(distances, axis=1, kind="stable")[:, :5]
        np.testing.assert_array_equal(result.neighbors[method][1], expected)
        queries = pd.DataFrame(attributes, columns=list(y.columns))
        scorer = make_precision_at_k_scorer(k=5, min_matches=1, prototypes=kind)
        assert scorer(model, X, y) == precision_at_k(y, expected, queries, min_matches=1)
