"""PrototypeDendrogramDisplay: HAC of the prototypes and of their features (paper, Appendix G)."""

import numpy as np
from scipy.cluster.hierarchy import dendrogram, linkage
from sklearn.utils.validation import check_is_fitted

from ._base import (
    FIGURE_WIDTH,
    attribute_index,
    check_matplotlib,
    class_colors,
    format_combination,
)

__all__ = ["PrototypeDendrogramDisplay"]


class PrototypeDendrogramDisplay:
    """Hierarchical clustering of clinical prototypes and of their features.

    The figure of the paper's Appendix G: the matrix of prototypes (rows)
    by embedding features (columns) as a heat map, with the rows reordered
    by hierarchical agglomerative clustering (HAC) of the prototypes (the
    dendrogram on the left) and the columns by HAC of the features, each
    feature being an observation over the prototypes (the dendrogram on
    top). Rows are labelled with their attribute combination, coloured by
    class, so one can see whether prototypes group by class first and by the
    other attributes within a class. Build it with :meth:`from_estimator`.

    Read more in the :ref:`User Guide <visualisation_dendrogram>`.

    Parameters
    ----------
    prototypes : ndarray of shape (n_prototypes, n_features)
        The prototypes (L2-normalised).
    prototype_attributes : ndarray of shape (n_prototypes, n_attributes)
        Attribute values of each prototype.
    attribute_names : list of str
        Names of the attributes.
    categories : list of array-like, default=None
        Values of each attribute in order (colour order of the class);
        defaults to sorted values.

    Attributes
    ----------
    ax_ : matplotlib Axes
        The heat map.
    row_dendrogram_ax_ : matplotlib Axes
        The dendrogram of the prototypes.
    col_dendrogram_ax_ : matplotlib Axes or None
        The dendrogram of the features (``None`` when features are not clustered).
    figure_ : matplotlib Figure
        Figure containing the axes.
    image_ : matplotlib AxesImage
        The heat map image.
    row_linkage_ : ndarray of shape (n_prototypes - 1, 4)
        SciPy linkage matrix of the prototypes.
    col_linkage_ : ndarray of shape (n_features - 1, 4) or None
        Linkage matrix of the features.
    row_order_ : ndarray of shape (n_prototypes,)
        Prototype index of each heat-map row, top to bottom (the dendrogram's leaves).
    col_order_ : ndarray of shape (n_features,)
        Feature index of each heat-map column, left to right.
    row_dendrogram_ : dict
        What :func:`scipy.cluster.hierarchy.dendrogram` returned for the rows.

    See Also
    --------
    PrototypeDisplay : 2-D map of the prototypes and embeddings.
    scipy.cluster.hierarchy.linkage : The clustering itself.

    Examples
    --------
    >>> import matplotlib
    >>> matplotlib.use("Agg")
    >>> import numpy as np
    >>> from sklearn_crocs import CROCSClusterer
    >>> from sklearn_crocs.plotting import PrototypeDendrogramDisplay
    >>> rng = np.random.RandomState(0)
    >>> y = np.column_stack([rng.choice(["SR", "SB"], 40), rng.choice(["F", "M"], 40)])
    >>> X = rng.randn(40, 400)
    >>> model = CROCSClusterer(embedding_dim=8, max_epochs=2, validation_fraction=None,
    ...                        random_state=0).fit(X, y)
    >>> display = PrototypeDendrogramDisplay.from_estimator(model)
    >>> display.image_.get_array().shape
    (4, 16)
    >>> sorted(display.row_order_.tolist())
    [0, 1, 2, 3]
    """

    def __init__(self, prototypes, prototype_attributes, attribute_names, categories=None):
        self.prototypes = prototypes
        self.prototype_attributes = prototype_attributes
        self.attribute_names = attribute_names
        self.categories = categories

    @classmethod
    def from_estimator(
        cls,
        estimator,
        *,
        prototypes=None,
        method="average",
        metric="euclidean",
        cluster_features=True,
        class_attribute=None,
        cmap="RdBu_r",
        ax=None,
    ):
        """Cluster a fitted CROCSClusterer's prototypes and plot the result.

        Parameters
        ----------
        estimator : CROCSClusterer
            Fitted estimator.
        prototypes : {"learned", "mean"}, default=None
            Which prototypes (see :meth:`~sklearn_crocs.CROCSClusterer.get_prototypes`).
        method : str, default="average"
            Linkage method of :func:`scipy.cluster.hierarchy.linkage`
            (``"ward"`` requires ``metric="euclidean"``).
        metric : str, default="euclidean"
            Distance between prototypes (and between features). On the unit
            prototypes, Euclidean distance ranks like the cosine similarity
            that CROCS uses.
        cluster_features : bool, default=True
            Also cluster and reorder the features (the columns).
        class_attribute : int or str, default=None
            Attribute whose values colour the row labels; default: the
            estimator's class attribute.
        cmap : str or Colormap, default="RdBu_r"
            Colour map of the heat map, centred on zero.
        ax : matplotlib Axes, default=None
            Axes for the heat map; the dendrograms are appended beside it.
            A new figure by default.

        Returns
        -------
        display : PrototypeDendrogramDisplay
            Object that stores the matplotlib artists.
        """
        check_is_fitted(estimator, "net_")
        vectors, attributes = estimator.get_prototypes(prototypes)
        display = cls(
            prototypes=vectors,
            prototype_attributes=np.asarray(attributes, dtype=object),
            attribute_names=list(estimator.attribute_names_),
            categories=[list(c) for c in estimator.categories_],
        )
        if class_attribute is None:
            class_attribute = estimator.class_index_
        return display.plot(
            ax=ax,
            method=method,
            metric=metric,
            cluster_features=cluster_features,
            class_attribute=class_attribute,
            cmap=cmap,
        )

    def plot(
        self,
        ax=None,
        *,
        method="average",
        metric="euclidean",
        cluster_features=True,
        class_attribute=0,
        cmap="RdBu_r",
    ):
        """Cluster the prototypes (and features) and draw heat map and dendrograms.

        Parameters
        ----------
        ax : matplotlib Axes, default=None
            Axes for the heat map; the dendrograms are appended beside it.
        method : str, default="average"
            Linkage method of :func:`scipy.cluster.hierarchy.linkage`.
        metric : str, default="euclidean"
            Distance between prototypes and between features.
        cluster_features : bool, default=True
            Also cluster and reorder the features.
        class_attribute : int or str, default=0
            Attribute whose values colour the row labels.
        cmap : str or Colormap, default="RdBu_r"
            Colour map of the heat map.

        Returns
        -------
        display : PrototypeDendrogramDisplay
            Object that stores the matplotlib artists.
        """
        plt = check_matplotlib("PrototypeDendrogramDisplay")
        from mpl_toolkits.axes_grid1 import make_axes_locatable

        prototypes = np.asarray(self.prototypes, dtype=float)
        attributes = np.asarray(self.prototype_attributes, dtype=object)
        if prototypes.ndim != 2 or len(prototypes) < 2:
            raise ValueError(
                "PrototypeDendrogramDisplay needs at least 2 prototypes as a 2-D array; "
                f"got shape {prototypes.shape}."
            )
        if len(attributes) != len(prototypes):
            raise ValueError(
                f"{len(prototypes)} prototypes but {len(attributes)} rows of attributes."
            )
        class_i = attribute_index(self.attribute_names, class_attribute)
        n_prototypes, n_features = prototypes.shape
        n_rows_inches = max(3.0, 0.22 * n_prototypes)
        if ax is None:
            figure, ax = plt.subplots(figsize=(FIGURE_WIDTH, n_rows_inches + 2.0))
            # Room on the right for the row labels, which sit outside the axes.
            figure.subplots_adjust(left=0.03, right=0.78, top=0.9, bottom=0.08)
        divider = make_axes_locatable(ax)

        # Rows: the prototypes. Leaves are listed top to bottom.
        self.row_dendrogram_ax_ = divider.append_axes("left", size="18%", pad=0.05)
        self.row_linkage_ = linkage(prototypes, method=method, metric=metric)
        self.row_dendrogram_ = dendrogram(
            self.row_linkage_,
            orientation="left",
            ax=self.row_dendrogram_ax_,
            color_threshold=0,
            above_threshold_color="0.2",
            no_labels=True,
        )
        # scipy draws the first leaf at the bottom of a left-oriented dendrogram;
        # flipped, it sits at the top, like row 0 of the heat map.
        self.row_order_ = np.asarray(self.row_dendrogram_["leaves"])
        self.row_dendrogram_ax_.invert_yaxis()
        self.row_dendrogram_ax_.set_axis_off()

        self.col_dendrogram_ax_ = None
        self.col_linkage_ = None
        self.col_order_ = np.arange(n_features)
        if cluster_features:
            self.col_dendrogram_ax_ = divider.append_axes("top", size="15%", pad=0.05)
            self.col_linkage_ = linkage(prototypes.T, method=method, metric=metric)
            col_dendrogram = dendrogram(
                self.col_linkage_,
                ax=self.col_dendrogram_ax_,
                color_threshold=0,
                above_threshold_color="0.2",
                no_labels=True,
            )
            self.col_order_ = np.asarray(col_dendrogram["leaves"])
            self.col_dendrogram_ax_.set_axis_off()

        matrix = prototypes[self.row_order_][:, self.col_order_]
        limit = float(np.abs(matrix).max()) or 1.0
        self.image_ = ax.imshow(
            matrix,
            aspect="auto",
            interpolation="nearest",
            cmap=cmap,
            vmin=-limit,
            vmax=limit,
        )
        ax.set_yticks(np.arange(n_prototypes))
        ax.set_yticklabels(
            [format_combination(attributes[i]) for i in self.row_order_], fontsize="small"
        )
        ax.yaxis.tick_right()
        classes = list(self.categories[class_i]) if self.categories is not None else []
        classes += sorted(set(attributes[:, class_i].tolist()) - set(classes), key=str)
        colors = class_colors(classes)
        for label, i in zip(ax.get_yticklabels(), self.row_order_):
            label.set_color(colors[attributes[i, class_i]])
        ax.set_xticks([])
        ax.set_xlabel(
            f"{n_features} embedding features"
            + (" (reordered by their own clustering)" if cluster_features else "")
        )
        colorbar_ax = divider.append_axes("bottom", size=0.15, pad=0.45)
        self.figure_ = ax.figure
        self.figure_.colorbar(
            self.image_, cax=colorbar_ax, orientation="horizontal", label="prototype value"
        )
        title_ax = self.col_dendrogram_ax_ if cluster_features else ax
        title_ax.set_title(
            f"HAC of {n_prototypes} prototypes ({method} linkage, {metric}); "
            f"labels coloured by {self.attribute_names[class_i]}"
        )
        self.ax_ = ax
        return self
