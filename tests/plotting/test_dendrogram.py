"""PrototypeDendrogramDisplay: the leaves are the prototypes, the heat map their features."""

import matplotlib.pyplot as plt
import numpy as np
import pytest
from matplotlib.colors import to_rgba
from scipy.cluster.hierarchy import leaves_list, linkage

from sklearn_crocs.plotting import PrototypeDendrogramDisplay
from sklearn_crocs.plotting._base import class_colors


def test_leaves_are_the_prototypes(model):
    display = PrototypeDendrogramDisplay.from_estimator(model)
    prototypes, attributes = model.get_prototypes()
    n_prototypes, n_features = prototypes.shape
    assert n_prototypes == 3 * 2 * 2
    # One leaf per prototype, in scipy's leaf order, each prototype once.
    assert len(display.row_dendrogram_["leaves"]) == n_prototypes
    assert sorted(display.row_order_) == list(range(n_prototypes))
    np.testing.assert_array_equal(
        display.row_order_, leaves_list(linkage(prototypes, method="average"))
    )
    np.testing.assert_allclose(display.row_linkage_, linkage(prototypes, method="average"))
    # Features: clustered as observations over the prototypes.
    assert sorted(display.col_order_) == list(range(n_features))
    np.testing.assert_array_equal(
        display.col_order_, leaves_list(linkage(prototypes.T, method="average"))
    )
    # The heat map is the prototype matrix, rows and columns reordered.
    np.testing.assert_allclose(
        display.image_.get_array(), prototypes[display.row_order_][:, display.col_order_]
    )


def test_row_labels_name_and_colour_the_prototypes(model):
    display = PrototypeDendrogramDisplay.from_estimator(model)
    _, attributes = model.get_prototypes()
    labels = display.ax_.get_yticklabels()
    assert [label.get_text() for label in labels] == [
        ", ".join(map(str, attributes[i])) for i in display.row_order_
    ]
    colors = class_colors(model.categories_[0])
    for label, i in zip(labels, display.row_order_):
        assert to_rgba(label.get_color()) == to_rgba(colors[attributes[i, 0]])


def test_dendrogram_axes_are_aligned_with_the_heat_map(model):
    display = PrototypeDendrogramDisplay.from_estimator(model)
    n_prototypes = len(model.prototypes_)
    # scipy puts leaf k at y = 10 k + 5; the flipped axis puts leaf 0 on top,
    # where heat-map row 0 is.
    low, high = display.row_dendrogram_ax_.get_ylim()
    assert (low, high) == (10 * n_prototypes, 0)
    top, bottom = display.ax_.get_ylim()
    assert (bottom, top) == (-0.5, n_prototypes - 0.5)
    assert display.figure_ is display.ax_.figure


def test_without_feature_clustering(model):
    _, ax = plt.subplots()
    display = PrototypeDendrogramDisplay.from_estimator(
        model, cluster_features=False, prototypes="mean", method="complete", ax=ax
    )
    prototypes, _ = model.get_prototypes("mean")
    assert display.ax_ is ax
    assert display.col_dendrogram_ax_ is None and display.col_linkage_ is None
    np.testing.assert_array_equal(display.col_order_, np.arange(prototypes.shape[1]))
    np.testing.assert_allclose(display.image_.get_array(), prototypes[display.row_order_])


def test_needs_two_prototypes():
    display = PrototypeDendrogramDisplay(
        prototypes=np.ones((1, 4)), prototype_attributes=np.array([["SR"]]), attribute_names=["r"]
    )
    with pytest.raises(ValueError, match="at least 2 prototypes"):
        display.plot()
