"""k-means on the signals (KM raw) and on CROCS's embeddings (KM CROCS)."""

from numbers import Integral

from sklearn.base import BaseEstimator, ClusterMixin, TransformerMixin, _fit_context, clone
from sklearn.cluster import KMeans
from sklearn.utils._param_validation import HasMethods, Interval
from sklearn.utils.validation import check_is_fitted

from .._clusterer import CROCSClusterer
from .._display import DocLinkMixin
from .._engine._neural import SignalMixin
from ._base import MAPPING_CONSTRAINT, AttributeMapMixin

__all__ = ["KMeansCROCS", "KMeansRaw"]


class KMeansRaw(
    SignalMixin, DocLinkMixin, AttributeMapMixin, ClusterMixin, TransformerMixin, BaseEstimator
):
    """k-means on the ECG signals themselves (the CROCS paper's KM raw).

    Every ECG is flattened to one vector of ``n_leads * n_timepoints`` values
    and clustered by :class:`sklearn.cluster.KMeans`. With the attributes
    ``y`` of the training ECGs, each cluster is named after their
    combination (:func:`map_clusters`) and :meth:`predict_attributes` assigns
    attributes; ``y`` does not change the clustering.

    Read more in the :ref:`User Guide <reproducing>`.

    Parameters
    ----------
    n_clusters : int, default=8
        Number of clusters (the paper: the number of attribute combinations).
    n_init : int, default=10
        Runs of k-means with different centroid seeds; the best is kept.
    mapping : {"majority", "hungarian"}, default="majority"
        How clusters are named from ``y`` (see :func:`map_clusters`).
    random_state : int, RandomState instance or None, default=None
        Seeds k-means.

    Attributes
    ----------
    kmeans_ : sklearn.cluster.KMeans
        The fitted k-means.
    labels_ : ndarray of shape (n_samples,)
        Cluster of each training ECG.
    cluster_attributes_ : pandas.DataFrame of shape (n_clusters, n_attributes)
        Attributes of each cluster; only when ``fit`` was given ``y``.
    n_features_in_ : int
        Number of values per training ECG.
    input_shape_ : tuple of int
        ``(n_leads, n_timepoints)`` of the training signals.

    See Also
    --------
    KMeansCROCS : The same on CROCS's embeddings.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_crocs.baselines import KMeansRaw
    >>> rng = np.random.RandomState(0)
    >>> X = np.concatenate([rng.randn(20, 2, 50) - 2, rng.randn(20, 2, 50) + 2])
    >>> y = np.repeat(["AF", "SR"], 20)
    >>> model = KMeansRaw(n_clusters=2, random_state=0).fit(X, y)
    >>> model.predict_attributes(X[[0, -1]])["attribute_0"].tolist()
    ['AF', 'SR']
    >>> model.transform(X[:3]).shape  # distances to the 2 centroids
    (3, 2)
    """

    _parameter_constraints: dict = {
        "n_clusters": [Interval(Integral, 1, None, closed="left")],
        "n_init": [Interval(Integral, 1, None, closed="left")],
        **MAPPING_CONSTRAINT,
        "random_state": ["random_state"],
    }

    def __init__(self, *, n_clusters=8, n_init=10, mapping="majority", random_state=None):
        self.n_clusters = n_clusters
        self.n_init = n_init
        self.mapping = mapping
        self.random_state = random_state

    def _flat(self, X, reset):
        X = self._validate_signals(X, reset=reset)
        return X.reshape(len(X), -1)

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y=None):
        """Cluster the signals; name the clusters from ``y`` if given.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_timepoints) or (n_samples, n_leads, n_timepoints)
            ECG signals.
        y : array-like of shape (n_samples,) or (n_samples, n_attributes), or DataFrame, \
default=None
            Attributes of the ECGs, used only to name the clusters.

        Returns
        -------
        self : KMeansRaw
            The fitted estimator.
        """
        X = self._flat(X, reset=True)
        self.kmeans_ = KMeans(
            self.n_clusters, n_init=self.n_init, random_state=self.random_state
        ).fit(X)
        self.labels_ = self.kmeans_.labels_
        self._fit_map(self.labels_, y)
        return self

    def predict(self, X):
        """Index of the nearest centroid of each ECG.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_timepoints) or (n_samples, n_leads, n_timepoints)
            ECG signals.

        Returns
        -------
        labels : ndarray of shape (n_samples,)
            Cluster indices.
        """
        check_is_fitted(self)
        return self.kmeans_.predict(self._flat(X, reset=False))

    def transform(self, X):
        """Euclidean distance of each ECG to each centroid.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_timepoints) or (n_samples, n_leads, n_timepoints)
            ECG signals.

        Returns
        -------
        distances : ndarray of shape (n_samples, n_clusters)
            Distances to the centroids.
        """
        check_is_fitted(self)
        return self.kmeans_.transform(self._flat(X, reset=False))

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.three_d_array = True
        tags.target_tags.multi_output = True
        return tags


class KMeansCROCS(DocLinkMixin, AttributeMapMixin, ClusterMixin, TransformerMixin, BaseEstimator):
    """k-means on the embeddings of a CROCS encoder (the CROCS paper's KM CROCS).

    ``fit(X, y)`` fits a clone of ``crocs`` on the attributes ``y`` (or uses
    it as it is when it is wrapped in :class:`sklearn.frozen.FrozenEstimator`),
    runs :class:`sklearn.cluster.KMeans` on its unit-norm embeddings of ``X``
    and names each cluster after the attributes of its training ECGs
    (:func:`map_clusters`). The clusters are k-means's; the prototypes are
    not used.

    Read more in the :ref:`User Guide <reproducing>`.

    Parameters
    ----------
    crocs : CROCSClusterer, default=None
        The embedding model; ``None`` means ``CROCSClusterer(random_state=random_state)``
        with its defaults.
    n_clusters : int, default=None
        Number of clusters; ``None`` means one per attribute combination (the
        number of CROCS prototypes), as in the paper.
    n_init : int, default=10
        Runs of k-means; the best is kept.
    mapping : {"majority", "hungarian"}, default="majority"
        How clusters are named from ``y`` (see :func:`map_clusters`).
    random_state : int, RandomState instance or None, default=None
        Seeds k-means (and the default ``crocs``).

    Attributes
    ----------
    crocs_ : CROCSClusterer
        The fitted embedding model.
    kmeans_ : sklearn.cluster.KMeans
        The fitted k-means.
    n_clusters_ : int
        Number of clusters used.
    labels_ : ndarray of shape (n_samples,)
        Cluster of each training ECG.
    cluster_attributes_ : pandas.DataFrame of shape (`n_clusters_`, n_attributes)
        Attributes of each cluster.
    n_features_in_ : int
        Number of values per training ECG.

    See Also
    --------
    KMeansRaw : The same on the signals.
    sklearn_crocs.CROCSClusterer : CP and TP CROCS, which cluster by prototypes.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_crocs import CROCSClusterer
    >>> from sklearn_crocs.baselines import KMeansCROCS
    >>> rng = np.random.RandomState(0)
    >>> y = np.repeat(["AF", "SR"], 30)
    >>> freq = np.where(y == "SR", 1.0, 3.0)[:, None]
    >>> X = np.sin(freq * np.linspace(0, 20, 400)) + 0.2 * rng.randn(60, 400)
    >>> crocs = CROCSClusterer(embedding_dim=8, max_epochs=5, lr=1e-2,
    ...                        validation_fraction=None, random_state=0)
    >>> model = KMeansCROCS(crocs, random_state=0).fit(X, y)
    >>> model.n_clusters_  # one per combination
    2
    >>> float((model.predict_attributes(X)["attribute_0"] == y).mean())
    1.0
    """

    _parameter_constraints: dict = {
        "crocs": [HasMethods(["fit", "transform", "get_prototypes"]), None],
        "n_clusters": [Interval(Integral, 1, None, closed="left"), None],
        "n_init": [Interval(Integral, 1, None, closed="left")],
        **MAPPING_CONSTRAINT,
        "random_state": ["random_state"],
    }

    def __init__(
        self, crocs=None, *, n_clusters=None, n_init=10, mapping="majority", random_state=None
    ):
        self.crocs = crocs
        self.n_clusters = n_clusters
        self.n_init = n_init
        self.mapping = mapping
        self.random_state = random_state

    def _n_clusters_out(self):
        return self.n_clusters_

    @_fit_context(prefer_skip_nested_validation=False)
    def fit(self, X, y, groups=None):
        """Fit CROCS on ``(X, y)``, then k-means on its embeddings of X.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_timepoints) or (n_samples, n_leads, n_timepoints)
            ECG signals.
        y : array-like of shape (n_samples,) or (n_samples, n_attributes), or DataFrame
            Attributes of the ECGs: CROCS's training targets and the clusters' names.
        groups : array-like of shape (n_samples,), default=None
            Patient of each ECG, for CROCS's validation split.

        Returns
        -------
        self : KMeansCROCS
            The fitted estimator.
        """
        if self.crocs is None:
            crocs = CROCSClusterer(random_state=self.random_state)
        else:
            crocs = clone(self.crocs)
        # fit, then transform: a FrozenEstimator's fit does nothing, but its
        # fit_transform would be the wrapped model's and refit it.
        embeddings = crocs.fit(X, y, groups=groups).transform(X)
        self.crocs_ = crocs
        self.n_features_in_ = crocs.n_features_in_
        self.n_clusters_ = self.n_clusters or len(crocs.get_prototypes("learned")[0])
        self.kmeans_ = KMeans(
            self.n_clusters_, n_init=self.n_init, random_state=self.random_state
        ).fit(embeddings)
        self.labels_ = self.kmeans_.labels_
        self._fit_map(self.labels_, y)
        return self

    def fit_predict(self, X, y, groups=None):
        """Fit and return the cluster of each training ECG.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_timepoints) or (n_samples, n_leads, n_timepoints)
            ECG signals.
        y : array-like of shape (n_samples,) or (n_samples, n_attributes), or DataFrame
            Attributes of the ECGs.
        groups : array-like of shape (n_samples,), default=None
            Patient of each ECG, for the validation split.

        Returns
        -------
        labels : ndarray of shape (n_samples,)
            Same as ``fit(X, y, groups).labels_``.
        """
        return self.fit(X, y, groups).labels_

    def predict(self, X):
        """Index of the nearest k-means centroid of each ECG's embedding.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_timepoints) or (n_samples, n_leads, n_timepoints)
            ECG signals.

        Returns
        -------
        labels : ndarray of shape (n_samples,)
            Cluster indices.
        """
        check_is_fitted(self)
        return self.kmeans_.predict(self.transform(X))

    def transform(self, X):
        """CROCS's unit-norm embeddings of the ECGs.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_timepoints) or (n_samples, n_leads, n_timepoints)
            ECG signals.

        Returns
        -------
        embeddings : ndarray of shape (n_samples, embedding_dim)
            As ``crocs_.transform(X)``.
        """
        check_is_fitted(self)
        return self.crocs_.transform(X)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.three_d_array = True
        tags.target_tags.required = True
        tags.target_tags.multi_output = True
        return tags
