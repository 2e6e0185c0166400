"""PrototypeDisplay: 2-D map of clinical prototypes and ECG embeddings (paper, Figs. 3-4)."""

import numpy as np
import pandas as pd
from sklearn.decomposition import PCA
from sklearn.utils.validation import check_consistent_length, check_is_fitted

from .._attributes import as_attribute_frame
from ._base import (
    FIGURE_WIDTH,
    attribute_index,
    check_matplotlib,
    class_colors,
    embedding_model,
    format_attribute,
    ordered_values,
)

__all__ = ["PrototypeDisplay"]

_MARKERS = ["o", "^", "s", "D", "v", "P", "X", "*", "<", ">"]


def _project(vectors, projection, random_state):
    """Fit a 2-D projection on ``vectors``; return the fitted projector."""
    if projection == "pca":
        return PCA(n_components=2, random_state=random_state).fit(vectors)
    if projection == "umap":
        try:
            import umap
        except ImportError as exc:
            raise ImportError(
                "projection='umap' requires the umap-learn package (pip install umap-learn); "
                "use projection='pca' otherwise."
            ) from exc
        return umap.UMAP(n_components=2, random_state=random_state).fit(vectors)
    if hasattr(projection, "fit") and hasattr(projection, "transform"):
        return projection.fit(vectors)
    raise ValueError(
        "projection must be 'pca', 'umap' or an estimator with fit and transform; "
        f"got {projection!r}."
    )


class PrototypeDisplay:
    """Map of prototypes (and optionally ECG embeddings) in two dimensions.

    Colour shows the class attribute, marker shape a second attribute (sex)
    and marker size a third (age group), as in the paper's Figures 3 and 4.
    Prototypes are drawn large with a black edge; embeddings small and
    translucent. Build it with :meth:`from_estimator` rather than directly.

    Read more in the :ref:`User Guide <visualisation_prototype_map>`.

    Parameters
    ----------
    prototype_coords : ndarray of shape (n_prototypes, 2)
        Projected prototypes.
    prototype_attributes : ndarray of shape (n_prototypes, n_attributes)
        Attribute values of each prototype.
    attribute_names : list of str
        Names of the attributes.
    embedding_coords : ndarray of shape (n_samples, 2), default=None
        Projected ECG embeddings.
    embedding_attributes : ndarray of shape (n_samples, n_attributes), default=None
        True attributes of those ECGs.
    projection_name : str, default="PCA"
        Used in the axis labels.
    categories : list of array-like, default=None
        Order of the values of each attribute (legend order; marker sizes grow
        along it). Defaults to sorted values.

    Attributes
    ----------
    ax_ : matplotlib Axes
        Axes with the map.
    figure_ : matplotlib Figure
        Figure containing the map.
    prototype_collections_ : list of matplotlib PathCollection
        One scatter per (class, marker attribute value) of prototypes.
    embedding_collections_ : list of matplotlib PathCollection
        The same for embeddings (empty without embeddings).

    Examples
    --------
    >>> import matplotlib
    >>> matplotlib.use("Agg")
    >>> import numpy as np
    >>> from sklearn_crocs import CROCSClusterer
    >>> from sklearn_crocs.plotting import PrototypeDisplay
    >>> rng = np.random.RandomState(0)
    >>> y = np.column_stack([rng.choice(["SR", "SB"], 40), rng.choice(["F", "M"], 40)])
    >>> X = rng.randn(40, 400)
    >>> model = CROCSClusterer(embedding_dim=8, max_epochs=2, validation_fraction=None,
    ...                        random_state=0).fit(X, y)
    >>> display = PrototypeDisplay.from_estimator(model, X, y)
    >>> len(display.prototype_collections_)
    4
    """

    def __init__(
        self,
        prototype_coords,
        prototype_attributes,
        attribute_names,
        embedding_coords=None,
        embedding_attributes=None,
        projection_name="PCA",
        categories=None,
    ):
        self.prototype_coords = prototype_coords
        self.prototype_attributes = prototype_attributes
        self.attribute_names = attribute_names
        self.embedding_coords = embedding_coords
        self.embedding_attributes = embedding_attributes
        self.projection_name = projection_name
        self.categories = categories

    @classmethod
    def from_estimator(
        cls,
        estimator,
        X=None,
        y=None,
        *,
        prototypes=None,
        projection="pca",
        max_embeddings=2000,
        random_state=0,
        ax=None,
        class_attribute=None,
        marker_attribute=None,
        size_attribute=None,
        sampling_rate=None,
    ):
        """Project a fitted CROCSClusterer's prototypes (and the embeddings of X) and plot them.

        Parameters
        ----------
        estimator : CROCSClusterer
            Fitted estimator.
        X : array-like of ECG signals, default=None
            ECGs to show beside the prototypes (e.g. held-out data): frames,
            or whole records (a list when their lengths differ), each embedded
            as the mean of its frames by a model fitted with ``sampling_rate``
            (as by :class:`~sklearn_crocs.PrototypeRetriever` and
            :class:`RetrievalDisplay`; the model is not changed).
        y : array-like or DataFrame, default=None
            True attributes of ``X``, for colouring the embeddings. Numbers
            of an attribute the model bins (``continuous``, e.g. ages in
            years) are put into its groups.
        prototypes : {"learned", "mean"}, default=None
            Which prototypes (see :meth:`~sklearn_crocs.CROCSClusterer.get_prototypes`).
        projection : "pca", "umap" or estimator, default="pca"
            2-D projection, fitted on prototypes and embeddings together.
        max_embeddings : int, default=2000
            At most this many embeddings (a random subset) are drawn.
        random_state : int, default=0
            Seed of the subset and of the projection.
        ax : matplotlib Axes, default=None
            Axes to draw on; a new figure by default.
        class_attribute, marker_attribute, size_attribute : int or str, default=None
            Attributes for colour, marker and size; default: the estimator's
            class attribute, then the remaining attributes in order.
        sampling_rate : float, default=None
            Rate of ``X`` in Hz when it is not the model's ``sampling_rate``,
            as in :meth:`~sklearn_crocs.CROCSClusterer.transform`.

        Returns
        -------
        display : PrototypeDisplay
        """
        check_is_fitted(estimator, "net_")
        kind = prototypes or estimator.prototypes
        prototypes, attributes = estimator.get_prototypes(kind)
        vectors, embedding_attributes = prototypes, None
        if X is not None:
            embeddings_all = embedding_model(estimator).transform(X, sampling_rate=sampling_rate)
            keep = np.arange(len(embeddings_all))
            if len(keep) > max_embeddings:
                rng = np.random.RandomState(random_state)
                keep = np.sort(rng.choice(len(keep), max_embeddings, replace=False))
            embeddings = embeddings_all[keep]
            if y is not None:
                names = None if isinstance(y, pd.DataFrame) else estimator.attribute_names_
                frame = as_attribute_frame(y, names)
                check_consistent_length(embeddings_all, frame)
                # Raw numbers of a binned attribute (ages) would each get a legend entry.
                frame = estimator.attribute_codec_.read(frame, allow_missing=True)
                embedding_attributes = frame.to_numpy(dtype=object)[keep]
            vectors = np.vstack([prototypes, embeddings])
        projector = _project(vectors, projection, random_state)
        coords = projector.transform(vectors)
        name = projection.upper() if isinstance(projection, str) else type(projection).__name__
        display = cls(
            prototype_coords=coords[: len(prototypes)],
            prototype_attributes=np.asarray(attributes, dtype=object),
            attribute_names=list(estimator.attribute_names_),
            embedding_coords=coords[len(prototypes) :] if X is not None else None,
            embedding_attributes=embedding_attributes,
            projection_name=name,
            categories=[list(c) for c in estimator.categories_],
        )
        if class_attribute is None:
            class_attribute = estimator.class_index_
        display.plot(
            ax=ax,
            class_attribute=class_attribute,
            marker_attribute=marker_attribute,
            size_attribute=size_attribute,
        )
        if kind == "mean":
            display.ax_.set_title(
                "Mean training embeddings (TP CROCS prototypes, large) and ECG embeddings"
            )
        return display

    def _index(self, attribute):
        if attribute is None:
            return None
        return attribute_index(self.attribute_names, attribute)

    def plot(self, ax=None, *, class_attribute=0, marker_attribute=None, size_attribute=None):
        """Draw the map.

        Parameters
        ----------
        ax : matplotlib Axes, default=None
            Axes to draw on; a new figure by default.
        class_attribute : int or str, default=0
            Attribute shown by colour.
        marker_attribute : int or str, default=None
            Attribute shown by marker shape; default: the first other attribute.
        size_attribute : int or str, default=None
            Attribute shown by marker size (ordered by sorted value); default:
            the second other attribute.

        Returns
        -------
        display : PrototypeDisplay
            Object that stores the matplotlib artists.
        """
        plt = check_matplotlib("PrototypeDisplay")
        if ax is None:
            _, ax = plt.subplots(figsize=(FIGURE_WIDTH, 5.0), layout="constrained")
        n_attributes = len(self.attribute_names)
        color_i = self._index(class_attribute)
        others = [i for i in range(n_attributes) if i != color_i]
        marker_i = self._index(marker_attribute) if marker_attribute is not None else None
        if marker_i is None and others:
            marker_i = others[0]
        size_i = self._index(size_attribute) if size_attribute is not None else None
        if size_i is None:
            rest = [i for i in others if i != marker_i]
            size_i = rest[0] if rest else None

        def values(i):
            columns = [self.prototype_attributes[:, i]]
            if self.embedding_attributes is not None:
                columns.append(self.embedding_attributes[:, i])
            order = list(self.categories[i]) if self.categories is not None else None
            return ordered_values(np.concatenate(columns), order)

        classes = values(color_i)
        # Colours follow the full category order, as in the other displays.
        palette = list(self.categories[color_i]) if self.categories is not None else []
        colors = class_colors(palette + [c for c in classes if c not in palette])
        markers = (
            {m: _MARKERS[k % len(_MARKERS)] for k, m in enumerate(values(marker_i))}
            if marker_i is not None
            else {None: "o"}
        )
        size_levels = values(size_i) if size_i is not None else [None]
        scale = {s: 1.0 + k for k, s in enumerate(size_levels)}

        def groups(attributes):
            keys = [
                (row[color_i], row[marker_i] if marker_i is not None else None)
                for row in attributes
            ]
            for key in sorted(set(keys), key=str):
                yield key, np.array([k == key for k in keys])

        def sizes(attributes, base):
            if size_i is None:
                return base
            return np.array([base * scale[row[size_i]] for row in attributes])

        self.embedding_collections_ = []
        if self.embedding_coords is not None:
            attributes = self.embedding_attributes
            if attributes is None:
                self.embedding_collections_.append(
                    ax.scatter(*self.embedding_coords.T, s=8, c="0.6", alpha=0.4, linewidths=0)
                )
            else:
                for (c, m), mask in groups(attributes):
                    self.embedding_collections_.append(
                        ax.scatter(
                            *self.embedding_coords[mask].T,
                            s=sizes(attributes[mask], 6),
                            color=colors[c],
                            marker=markers[m],
                            alpha=0.35,
                            linewidths=0,
                        )
                    )
        self.prototype_collections_ = []
        for (c, m), mask in groups(self.prototype_attributes):
            self.prototype_collections_.append(
                ax.scatter(
                    *self.prototype_coords[mask].T,
                    s=sizes(self.prototype_attributes[mask], 60),
                    color=colors[c],
                    marker=markers[m],
                    edgecolors="black",
                    linewidths=1.0,
                    zorder=3,
                )
            )
        # Legend: colour per class, marker per second attribute, size per third.
        handles = [
            plt.Line2D([], [], color=colors[c], marker="o", linestyle="", label=str(c))
            for c in classes
        ]
        if marker_i is not None:
            handles += [
                plt.Line2D(
                    [],
                    [],
                    color="0.3",
                    marker=markers[m],
                    linestyle="",
                    label=format_attribute(self.attribute_names[marker_i], m),
                )
                for m in markers
            ]
        if size_i is not None:
            handles += [
                plt.Line2D(
                    [],
                    [],
                    color="0.3",
                    marker="o",
                    linestyle="",
                    markersize=4 + 2 * scale[s],
                    label=format_attribute(self.attribute_names[size_i], s),
                )
                for s in size_levels
            ]
        ax.legend(
            handles=handles,
            title=self.attribute_names[color_i],
            loc="center left",
            bbox_to_anchor=(1.0, 0.5),
            fontsize="small",
        )
        ax.set_xlabel(f"{self.projection_name} 1")
        ax.set_ylabel(f"{self.projection_name} 2")
        ax.set_title("Clinical prototypes (large, black edge) and ECG embeddings")
        self.ax_ = ax
        self.figure_ = ax.figure
        return self
