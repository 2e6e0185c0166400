"""PrototypeDisplay: one marker per prototype, colour by class, marker by sex, size by age."""

import numpy as np
import pytest
from matplotlib.colors import to_rgba

from sklearn_crocs.plotting import PrototypeDisplay
from sklearn_crocs.plotting._base import class_colors


def test_one_marker_per_prototype_grouped_by_class_and_sex(model):
    display = PrototypeDisplay.from_estimator(model)
    prototypes, attributes = model.get_prototypes()
    # 3 rhythms x 2 sexes scatters; each holds the 2 age groups of its pair.
    assert len(display.prototype_collections_) == 3 * 2
    offsets = np.vstack([c.get_offsets() for c in display.prototype_collections_])
    assert len(offsets) == len(prototypes)
    assert display.embedding_collections_ == []
    colors = class_colors(model.categories_[0])
    for collection in display.prototype_collections_:
        (face,) = {tuple(c) for c in collection.get_facecolors()}
        rows = [
            i
            for i, point in enumerate(display.prototype_coords)
            if any(np.allclose(point, o) for o in collection.get_offsets())
        ]
        rhythms = {attributes[i, 0] for i in rows}
        assert len(rhythms) == 1
        assert face == to_rgba(colors[rhythms.pop()])
        # Sizes grow with the age group (two groups here).
        ages = [list(model.categories_[2]).index(attributes[i, 2]) for i in rows]
        sizes = collection.get_sizes()
        assert len(sizes) == len(rows)
        np.testing.assert_allclose(sizes, 60 * (1 + np.array(ages)))


def test_embeddings_are_drawn_and_subsampled(model, data):
    X, y, _ = data
    display = PrototypeDisplay.from_estimator(model, X, y, max_embeddings=50)
    n_points = sum(len(c.get_offsets()) for c in display.embedding_collections_)
    assert n_points == 50
    assert len(display.embedding_coords) == 50
    assert display.ax_.get_xlabel() == "PCA 1"
    legend = [t.get_text() for t in display.ax_.get_legend().get_texts()]
    assert legend[:3] == list(model.categories_[0])


def test_title_names_the_prototypes(model):
    learned = PrototypeDisplay.from_estimator(model)
    assert learned.ax_.get_title().startswith("Clinical prototypes")
    mean = PrototypeDisplay.from_estimator(model, prototypes="mean")
    assert mean.ax_.get_title().startswith("Mean training embeddings")


def test_embeddings_without_labels_are_grey(model, data):
    X, _, _ = data
    display = PrototypeDisplay.from_estimator(model, X)
    (collection,) = display.embedding_collections_
    assert len(collection.get_offsets()) == len(X)


def test_unknown_projection_and_attribute(model):
    with pytest.raises(ValueError, match="projection must be"):
        PrototypeDisplay.from_estimator(model, projection="tsne")
    with pytest.raises(ValueError, match="is not one of"):
        PrototypeDisplay.from_estimator(model, class_attribute="disease")


def test_missing_matplotlib_gives_an_install_hint(monkeypatch):
    import sys

    from sklearn_crocs.plotting._base import check_matplotlib

    monkeypatch.setitem(sys.modules, "matplotlib.pyplot", None)
    with pytest.raises(ImportError, match=r"pip install 'sklearn-crocs\[plot\]'"):
        check_matplotlib("PrototypeDisplay")
