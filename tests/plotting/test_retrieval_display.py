"""RetrievalDisplay: distances by class, and the nearest ECGs framed by class agreement."""

import matplotlib.pyplot as plt
import numpy as np
import pytest
from matplotlib.colors import to_rgba
from sklearn.frozen import FrozenEstimator

from sklearn_crocs import PrototypeRetriever
from sklearn_crocs.plotting import RetrievalDisplay


@pytest.fixture(scope="module")
def retriever(model, data):
    X, _, _ = data
    return PrototypeRetriever(FrozenEstimator(model)).fit(X)


def brute_force(model, X, query_row):
    """Distances of every ECG to the learned prototype ``query_row``, and their order."""
    prototypes, _ = model.get_prototypes("learned")
    embeddings = model.transform(X)
    distances = np.linalg.norm(embeddings - prototypes[query_row], axis=1)
    return distances, np.argsort(distances, kind="stable")


def test_borders_match_the_class_agreement(model, retriever, data):
    X, y, _ = data
    query = 5
    display = RetrievalDisplay.from_estimator(retriever, X, y, query=query, n_neighbors=6)
    query_class = model.get_prototypes("learned")[1][query, 0]
    _, order = brute_force(model, X, query)
    np.testing.assert_array_equal(display.neighbors, order[:6])

    expected = y["rhythm"].to_numpy()[display.neighbors] == query_class
    np.testing.assert_array_equal(display.matches_, expected)
    assert len(display.trace_axes_) == 6
    for axis, match, color in zip(display.trace_axes_, expected, display.border_colors_):
        wanted = "tab:green" if match else "tab:red"
        assert color == wanted
        for spine in axis.spines.values():
            assert spine.get_visible()
            assert to_rgba(spine.get_edgecolor()) == to_rgba(wanted)
            assert spine.get_linewidth() == 2.5


def test_both_border_colours_occur(model, retriever, data):
    """With enough neighbours some match the query's class and some do not."""
    X, y, _ = data
    display = RetrievalDisplay.from_estimator(retriever, X, y, query=0, n_neighbors=len(X))
    assert {"tab:green", "tab:red"} == set(display.border_colors_)
    query_class = model.get_prototypes("learned")[1][0, 0]
    assert display.matches_.sum() == (y["rhythm"] == query_class).sum()


def test_traces_are_the_retrieved_signals_of_the_chosen_lead(retriever, data):
    X, y, _ = data
    display = RetrievalDisplay.from_estimator(
        retriever, X, y, query=2, n_neighbors=4, lead=1, sampling_rate=100
    )
    assert len(display.trace_lines_) == 4
    for line, row in zip(display.trace_lines_, display.neighbors):
        np.testing.assert_allclose(line.get_ydata(), X[row, 1])
        np.testing.assert_allclose(line.get_xdata(), np.arange(X.shape[-1]) / 100)
    assert display.trace_axes_[-1].get_xlabel() == "time (s)"


def test_histogram_counts_every_ecg_by_class(model, retriever, data):
    X, y, _ = data
    display = RetrievalDisplay.from_estimator(retriever, X, y, query=1, n_neighbors=3, bins=12)
    assert list(display.histograms_) == list(model.categories_[0])
    for rhythm, counts in display.histogram_counts_.items():
        in_class = display.distances[(y["rhythm"] == rhythm).to_numpy()]
        np.testing.assert_array_equal(counts, np.histogram(in_class, bins=display.bin_edges_)[0])
        assert counts.sum() == len(in_class)
        # One filled step polygon per class, whose top follows the counts.
        (polygon,) = display.histograms_[rhythm]
        assert polygon.get_xy()[:, 1].max() == counts.max()
    distances, order = brute_force(model, X, 1)
    np.testing.assert_allclose(display.distances, distances, atol=1e-5)
    # The dashed line marks the distance of the last retrieved ECG.
    (line,) = [ln for ln in display.ax_.get_lines() if ln.get_linestyle() == "--"]
    assert line.get_xdata()[0] == pytest.approx(distances[order[2]], abs=1e-5)


def test_query_by_position_tuple_or_dict_is_the_same(model, retriever, data):
    X, y, _ = data
    attributes = model.get_prototypes("learned")[1]
    row = 7
    combination = tuple(attributes[row])
    by_row = RetrievalDisplay.from_estimator(retriever, X, y, query=row)
    by_tuple = RetrievalDisplay.from_estimator(retriever, X, y, query=combination)
    by_dict = RetrievalDisplay.from_estimator(
        retriever, X, y, query=dict(zip(model.attribute_names_, combination))
    )
    for other in (by_tuple, by_dict):
        np.testing.assert_array_equal(other.neighbors, by_row.neighbors)
        np.testing.assert_allclose(other.distances, by_row.distances)
        assert list(other.query_attributes) == list(combination)


def test_from_a_fitted_clusterer_and_mean_queries(model, data):
    X, y, _ = data
    display = RetrievalDisplay.from_estimator(
        model, X, y, query=0, prototypes="mean", n_neighbors=2
    )
    prototypes, _ = model.get_prototypes("mean")
    distances = np.linalg.norm(model.transform(X) - prototypes[0], axis=1)
    np.testing.assert_allclose(display.distances, distances, atol=1e-5)


def test_without_labels_borders_are_grey(retriever, data):
    X, _, _ = data
    display = RetrievalDisplay.from_estimator(retriever, X, query=0, n_neighbors=3)
    assert display.matches_ is None
    assert display.border_colors_ == ["0.5"] * 3
    assert list(display.histograms_) == [None]


def test_draws_into_the_area_of_a_given_axes(retriever, data):
    X, y, _ = data
    fig, (left, right) = plt.subplots(1, 2)
    display = RetrievalDisplay.from_estimator(retriever, X, y, ax=right, n_neighbors=4, n_cols=2)
    assert display.figure_ is fig
    assert left in fig.axes and right not in fig.axes
    # 1 histogram + 4 traces replace the given axes.
    assert len(fig.axes) == 1 + 1 + 4


def test_bad_arguments(retriever, data):
    X, y, _ = data
    with pytest.raises(ValueError, match="out of range"):
        RetrievalDisplay.from_estimator(retriever, X, y, query=999)
    with pytest.raises(ValueError, match="lead=5"):
        RetrievalDisplay.from_estimator(retriever, X, y, lead=5)
    with pytest.raises(ValueError, match="indexed"):
        RetrievalDisplay.from_estimator(retriever, X[:10], y[:10])
    with pytest.raises(TypeError, match="query must be"):
        RetrievalDisplay.from_estimator(retriever, X, y, query="SR")
    with pytest.raises(ValueError, match="n_neighbors"):
        RetrievalDisplay.from_estimator(retriever, X, y, n_neighbors=0)
