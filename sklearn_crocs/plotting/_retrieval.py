"""RetrievalDisplay: distances to one query and its nearest ECGs (paper, Fig. 5)."""

import math

import numpy as np
import pandas as pd
from sklearn.frozen import FrozenEstimator
from sklearn.utils.validation import check_consistent_length, check_is_fitted

from .._attributes import as_attribute_frame
from .._utils import _crocs_step
from ._base import (
    FIGURE_WIDTH,
    attribute_index,
    check_matplotlib,
    class_colors,
    embedding_model,
    format_attribute,
    format_combination,
    ordered_values,
)

__all__ = ["RetrievalDisplay"]

#: Border colours of retrieved ECGs whose class matches the query's, or not.
MATCH_COLOR = "tab:green"
MISMATCH_COLOR = "tab:red"
UNKNOWN_COLOR = "0.5"


def _query_values(retriever, query):
    """Attribute values of one query: a prototype row, a tuple or a dict."""
    names = retriever.attribute_names_
    if isinstance(query, (int, np.integer)) and not isinstance(query, bool):
        n_queries = len(retriever.query_attributes_)
        if not 0 <= query < n_queries:
            raise ValueError(
                f"query={query} is out of range: the retriever has {n_queries} prototype "
                "queries (rows of query_attributes_)."
            )
        return retriever.query_attributes_.iloc[int(query)].tolist(), None
    if isinstance(query, dict):
        missing = [n for n in names if n not in query]
        if missing:
            raise ValueError(f"query is missing a value for the attribute(s) {missing}.")
        values = [query[n] for n in names]
    elif isinstance(query, tuple):
        values = list(query)
    else:
        raise TypeError(
            "query must be the position of a prototype (int), an attribute combination "
            f"as a tuple or a dict keyed by attribute name; got {type(query).__name__}."
        )
    if len(values) != len(names):
        raise ValueError(
            f"query must give {len(names)} value(s), one per attribute of {names}; got {query!r}."
        )
    return values, query


class RetrievalDisplay:
    """Distances from one query to a database of ECGs, and the ECGs it retrieves.

    The paper's Figure 5: on top, the distribution of the Euclidean
    distances between the query (a prototype, i.e. an attribute combination)
    and the embedding of every database ECG, one histogram per class; below,
    the ``n_neighbors`` nearest ECGs drawn as traces, with a green border
    where the ECG's class matches the query's and a red one where it does not.
    Build it with :meth:`from_estimator` rather than directly.

    Read more in the :ref:`User Guide <visualisation_retrieval>`.

    Parameters
    ----------
    distances : ndarray of shape (n_samples,)
        Distance of every database ECG to the query, in database order.
    neighbors : ndarray of shape (n_neighbors,)
        Database rows of the retrieved ECGs, nearest first.
    signals : ndarray of shape (n_neighbors, n_timepoints) or list of ndarray
        The drawn lead of each retrieved ECG (a list when their lengths differ).
    query_attributes : array-like of shape (n_attributes,)
        Attribute values of the query.
    attribute_names : list of str
        Names of the attributes.
    labels : ndarray of shape (n_samples, n_attributes), default=None
        True attributes of the database ECGs. Without them the histogram is
        not split by class and the borders are grey.
    class_attribute : int or str, default=0
        Attribute whose agreement colours the borders and splits the histogram.
    categories : list of array-like, default=None
        Values of each attribute in order (for the class colours).
    sampling_rate : float, default=None
        Sampling rate of the signals in Hz, for a time axis in seconds;
        ``None`` counts samples.
    lead : int, default=0
        Lead drawn (for the title).

    Attributes
    ----------
    ax_ : matplotlib Axes
        The distance histogram.
    trace_axes_ : ndarray of matplotlib Axes of shape (n_neighbors,)
        One axes per retrieved ECG, nearest first.
    figure_ : matplotlib Figure
        Figure containing the axes.
    histograms_ : dict
        Patches of the histogram of each class (key ``None`` without labels).
    histogram_counts_ : dict of ndarray
        Number of ECGs of each class per bin (the histograms' heights when
        ``density=False``).
    bin_edges_ : ndarray of shape (bins + 1,)
        Bin edges shared by all classes.
    trace_lines_ : list of matplotlib Line2D
        The retrieved ECG traces.
    matches_ : ndarray of shape (n_neighbors,) of bool, or None
        Whether each retrieved ECG has the query's class (``None`` without labels).
    border_colors_ : list of str
        Border colour of each trace: ``"tab:green"`` (class matches),
        ``"tab:red"`` (it does not) or ``"0.5"`` (no labels).

    See Also
    --------
    sklearn_crocs.PrototypeRetriever : The search itself.

    Examples
    --------
    >>> import matplotlib
    >>> matplotlib.use("Agg")
    >>> import numpy as np
    >>> import pandas as pd
    >>> from sklearn_crocs import CROCSClusterer
    >>> from sklearn_crocs.plotting import RetrievalDisplay
    >>> rng = np.random.RandomState(0)
    >>> y = pd.DataFrame({"rhythm": rng.choice(["AFIB", "SR"], 60),
    ...                   "sex": rng.choice(["F", "M"], 60)})
    >>> freq = np.where(y["rhythm"] == "SR", 1.0, 2.5)[:, None]
    >>> X = np.sin(freq * np.linspace(0, 20, 500)) + 0.3 * rng.randn(60, 500)
    >>> model = CROCSClusterer(embedding_dim=8, max_epochs=3, lr=1e-3,
    ...                        validation_fraction=None, random_state=0).fit(X, y)
    >>> display = RetrievalDisplay.from_estimator(model, X, y, query=("SR", "F"),
    ...                                           n_neighbors=4)
    >>> len(display.trace_axes_), sorted(display.histograms_)
    (4, ['AFIB', 'SR'])
    >>> all((color == "tab:green") == match
    ...     for color, match in zip(display.border_colors_, display.matches_))
    True
    """

    def __init__(
        self,
        distances,
        neighbors,
        signals,
        query_attributes,
        attribute_names,
        labels=None,
        class_attribute=0,
        categories=None,
        sampling_rate=None,
        lead=0,
    ):
        self.distances = distances
        self.neighbors = neighbors
        self.signals = signals
        self.query_attributes = query_attributes
        self.attribute_names = attribute_names
        self.labels = labels
        self.class_attribute = class_attribute
        self.categories = categories
        self.sampling_rate = sampling_rate
        self.lead = lead

    @classmethod
    def from_estimator(
        cls,
        estimator,
        X,
        y=None,
        *,
        query=0,
        n_neighbors=6,
        lead=0,
        prototypes="learned",
        class_attribute=None,
        sampling_rate=None,
        n_cols=3,
        bins=30,
        density=False,
        ax=None,
    ):
        """Search X for one query and plot the distances and the retrieved ECGs.

        Parameters
        ----------
        estimator : PrototypeRetriever or CROCSClusterer
            A fitted :class:`~sklearn_crocs.PrototypeRetriever` whose database
            is ``X``, or a fitted CROCSClusterer (or Pipeline ending in one),
            in which case ``X`` is indexed here with ``prototypes``.
        X : array-like of shape (n_samples, n_timepoints) or (n_samples, n_leads, n_timepoints)
            The database of ECGs: frames, or whole records (a list when their
            lengths differ), each embedded as the mean of its frames by a model
            fitted with ``sampling_rate``, as by :class:`PrototypeDisplay`
            (the model is not changed); a retriever embeds as its
            ``longer_signals`` says.
        y : array-like or DataFrame, default=None
            True attributes of ``X``, in the layout used in ``fit``.
        query : int, tuple or dict, default=0
            The query: the position of a prototype in the retriever's
            ``query_attributes_``, or an attribute combination (a tuple in
            the order of the attributes, or a dict keyed by attribute name).
        n_neighbors : int, default=6
            Number of ECGs retrieved and drawn (the paper shows 6).
        lead : int, default=0
            Lead drawn for multi-lead ECGs.
        prototypes : {"learned", "mean"}, default="learned"
            Prototypes used as queries when ``estimator`` is not a retriever:
            learned (CP CROCS) or mean training embeddings (TP CROCS), as
            ``PrototypeRetriever(prototypes=...)``.
        class_attribute : int or str, default=None
            Attribute compared for the border colours; default: the
            estimator's class attribute.
        sampling_rate : float, default=None
            Sampling rate of X in Hz when it is not the model's
            ``sampling_rate``: the model brings X to its rate to search it,
            and the time axis is in seconds. ``None``: the model's
            ``sampling_rate`` (samples on the axis when it has none).
        n_cols : int, default=3
            Retrieved ECGs per row.
        bins : int, default=30
            Number of histogram bins (shared by all classes).
        density : bool, default=False
            Normalise each class's histogram to unit area, to compare the
            shapes of classes of very different sizes.
        ax : matplotlib Axes, default=None
            Axes whose area the figure fills (it is replaced by a grid of
            axes); a new figure by default.

        Returns
        -------
        display : RetrievalDisplay
            Object that stores the matplotlib artists.
        """
        from .._retrieval import PrototypeRetriever

        if isinstance(estimator, PrototypeRetriever):
            retriever = estimator
            check_is_fitted(retriever)
        else:
            check_is_fitted(estimator)
            model = FrozenEstimator(embedding_model(estimator))
            retriever = PrototypeRetriever(model, prototypes=prototypes)
            retriever.fit(X, sampling_rate=sampling_rate)
        n_samples = X.shape[0] if hasattr(X, "shape") else len(X)
        if n_samples != retriever.n_samples_fit_:
            raise ValueError(
                f"X has {n_samples} ECGs but the retriever indexed {retriever.n_samples_fit_}; "
                "pass the database the retriever was fitted on."
            )
        crocs = _crocs_step(retriever.estimator_)
        names = list(retriever.attribute_names_)
        values, combination = _query_values(retriever, query)
        queries = None if combination is None else dict(zip(names, values))
        sorted_distances, order = retriever.query(queries, n_neighbors=retriever.n_samples_fit_)
        if combination is None:
            sorted_distances, order = sorted_distances[query], order[query]
        else:
            sorted_distances, order = sorted_distances[0], order[0]
        distances = np.empty(n_samples)
        distances[order] = sorted_distances
        if not isinstance(n_neighbors, (int, np.integer)) or not 1 <= n_neighbors <= n_samples:
            raise ValueError(
                f"n_neighbors must be an integer in [1, {n_samples}]; got {n_neighbors!r}."
            )
        neighbors = order[:n_neighbors]
        # Each retrieved ECG as it was given (at the rate of X, any length): leads x samples.
        n_leads = crocs.input_shape_[0]
        rows = [
            np.asarray(X.iloc[i] if hasattr(X, "iloc") else X[i], dtype=float).reshape(n_leads, -1)
            for i in neighbors
        ]
        if not 0 <= lead < n_leads:
            raise ValueError(f"lead={lead} is out of range for ECGs with {n_leads} lead(s).")
        labels = None
        if y is not None:
            frame = as_attribute_frame(y, None if isinstance(y, pd.DataFrame) else names)
            check_consistent_length(distances, frame)
            # Numbers of binned attributes (raw ages) are read into the model's groups.
            frame = crocs.attribute_codec_.read(frame[names], allow_missing=True)
            labels = frame.to_numpy(dtype=object)
        if sampling_rate is None:
            sampling_rate = getattr(crocs, "sampling_rate", None)
        display = cls(
            distances=distances,
            neighbors=neighbors,
            signals=[row[lead] for row in rows],
            query_attributes=np.asarray(values, dtype=object),
            attribute_names=names,
            labels=labels,
            class_attribute=crocs.class_index_ if class_attribute is None else class_attribute,
            categories=[list(c) for c in crocs.categories_],
            sampling_rate=sampling_rate,
            lead=lead,
        )
        return display.plot(ax=ax, n_cols=n_cols, bins=bins, density=density)

    def plot(self, ax=None, *, n_cols=3, bins=30, density=False):
        """Draw the distance histogram and the retrieved ECGs.

        Parameters
        ----------
        ax : matplotlib Axes, default=None
            Axes whose area the figure fills (it is replaced by a grid of
            axes); a new figure by default.
        n_cols : int, default=3
            Retrieved ECGs per row.
        bins : int, default=30
            Number of histogram bins.
        density : bool, default=False
            Normalise each class's histogram to unit area.

        Returns
        -------
        display : RetrievalDisplay
            Object that stores the matplotlib artists.
        """
        plt = check_matplotlib("RetrievalDisplay")
        distances = np.asarray(self.distances, dtype=float)
        neighbors = np.asarray(self.neighbors)
        signals = [np.asarray(signal, dtype=float) for signal in self.signals]
        query = np.asarray(self.query_attributes, dtype=object)
        n_neighbors = len(neighbors)
        if len(signals) != n_neighbors:
            raise ValueError(f"{n_neighbors} neighbors but {len(signals)} signals.")
        class_i = attribute_index(self.attribute_names, self.class_attribute)
        n_cols = max(1, min(int(n_cols), n_neighbors))
        n_rows = math.ceil(n_neighbors / n_cols)
        height_ratios = [2.0] + [1.0] * n_rows
        if ax is None:
            figure = plt.figure(figsize=(FIGURE_WIDTH, 3.2 + 1.5 * n_rows), layout="constrained")
            grid = figure.add_gridspec(1 + n_rows, n_cols, height_ratios=height_ratios)
        else:
            spec = ax.get_subplotspec()
            if spec is None:
                raise ValueError(
                    "ax must be a subplot (e.g. from plt.subplots) so that its area can be "
                    "divided; pass ax=None for a new figure."
                )
            figure = ax.figure
            ax.remove()
            grid = spec.subgridspec(1 + n_rows, n_cols, height_ratios=height_ratios)

        # Top: distances of the whole database, by class.
        hist_ax = figure.add_subplot(grid[0, :])
        edges = np.histogram_bin_edges(distances, bins=bins)
        self.bin_edges_ = edges
        self.histograms_ = {}
        self.histogram_counts_ = {}
        query_class = query[class_i]
        if self.labels is None:
            _, _, patches = hist_ax.hist(
                distances, bins=edges, density=density, color="0.5", alpha=0.6, label="all ECGs"
            )
            self.histograms_[None] = patches
            self.histogram_counts_[None] = np.histogram(distances, bins=edges)[0]
            colors = {}
        else:
            labels = np.asarray(self.labels, dtype=object)
            classes = ordered_values(
                labels[:, class_i],
                self.categories[class_i] if self.categories is not None else None,
            )
            palette = list(self.categories[class_i]) if self.categories is not None else []
            colors = class_colors(palette + [c for c in classes if c not in palette])
            for c in classes:
                mask = labels[:, class_i] == c
                marker = " (query class)" if c == query_class else ""
                _, _, patches = hist_ax.hist(
                    distances[mask],
                    bins=edges,
                    density=density,
                    histtype="stepfilled",
                    color=colors[c],
                    alpha=0.45,
                    edgecolor=colors[c],
                    label=f"{c}{marker}, n={int(mask.sum())}",
                )
                self.histograms_[c] = patches
                self.histogram_counts_[c] = np.histogram(distances[mask], bins=edges)[0]
        radius = distances[neighbors].max()
        hist_ax.axvline(
            radius, color="black", linestyle="--", linewidth=1, label=f"{n_neighbors} nearest"
        )
        hist_ax.set_xlabel("Euclidean distance to the query (unit-norm embeddings)")
        hist_ax.set_ylabel("density" if density else "number of ECGs")
        described = ", ".join(map(format_attribute, self.attribute_names, query))
        title = f"Query {described}: distances to {len(distances)} ECGs"
        if self.labels is not None:
            matches = np.asarray(self.labels, dtype=object)[neighbors, class_i] == query_class
            title += (
                f"\n{n_neighbors} nearest (lead {self.lead} below): {int(matches.sum())} share "
                f"the query's {self.attribute_names[class_i]} (green border), "
                f"{int((~matches).sum())} do not (red)"
            )
        hist_ax.set_title(title, fontsize="medium")
        hist_ax.legend(fontsize="small", title=self.attribute_names[class_i])

        # Bottom: the retrieved ECGs, green border if the class matches.
        self.trace_axes_ = np.empty(n_neighbors, dtype=object)
        self.trace_lines_ = []
        self.border_colors_ = []
        self.matches_ = None
        if self.labels is not None:
            labels = np.asarray(self.labels, dtype=object)
            self.matches_ = labels[neighbors, class_i] == query_class
        for rank, row in enumerate(neighbors):
            axis = figure.add_subplot(grid[1 + rank // n_cols, rank % n_cols])
            time = np.arange(len(signals[rank]), dtype=float)  # records may differ in length
            if self.sampling_rate:
                time = time / float(self.sampling_rate)
            (line,) = axis.plot(time, signals[rank], color="black", linewidth=0.7)
            self.trace_lines_.append(line)
            if self.matches_ is None:
                color, title = UNKNOWN_COLOR, f"#{rank + 1}: ECG {row}"
            else:
                color = MATCH_COLOR if self.matches_[rank] else MISMATCH_COLOR
                title = f"#{rank + 1}: {format_combination(labels[row])}"
            for spine in axis.spines.values():
                spine.set_visible(True)
                spine.set_edgecolor(color)
                spine.set_linewidth(2.5)
            self.border_colors_.append(color)
            axis.set_title(f"{title}  (d={distances[row]:.3f})", fontsize="small")
            axis.set_yticks([])
            axis.tick_params(axis="x", labelsize="x-small")
            if rank // n_cols == n_rows - 1:
                axis.set_xlabel("time (s)" if self.sampling_rate else "sample", fontsize="small")
            self.trace_axes_[rank] = axis
        self.ax_ = hist_ax
        self.figure_ = figure
        return self
