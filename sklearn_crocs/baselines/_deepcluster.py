"""DeepCluster (Caron et al. 2018): k-means pseudo-labels, then a classifier on them, in turn."""

from numbers import Integral

import numpy as np
import torch
import torch.nn.functional as F
from sklearn.base import _fit_context
from sklearn.cluster import KMeans
from sklearn.decomposition import PCA
from sklearn.preprocessing import normalize
from sklearn.utils._param_validation import Interval
from sklearn.utils.validation import check_is_fitted
from skorch.callbacks import Callback
from torch import nn

from ._base import (
    CROCS_DEFAULTS,
    MAPPING_CONSTRAINT,
    N_CLUSTERS_CONSTRAINT,
    NO_VALIDATION_TRAINING_CONSTRAINTS,
    AttributeMapMixin,
    EncoderModule,
    NeuralBaseline,
    fill_doc,
)

__all__ = ["DeepCluster"]

_D = CROCS_DEFAULTS


class ClusterHead(EncoderModule):
    """Encoder and a linear layer to ``n_outputs`` logits (DeepCluster's and SeLA's network)."""

    def __init__(self, encoder, embedding_dim, n_outputs):
        super().__init__(encoder)
        self.head = nn.Linear(embedding_dim, n_outputs)

    def forward(self, x):
        return self.head(self.encoder(x))


def balanced_cross_entropy(logits, labels, counts):
    """Cross-entropy in which every pseudo-label weighs the same, whatever its cluster's size.

    Each ECG weighs ``1 / counts[label]``, and the weighted mean is taken:
    in expectation the same as DeepCluster's sampling of ECGs uniformly over
    the pseudo-labels, which keeps a large cluster from taking over.
    """
    weights = 1.0 / counts.to(logits.dtype)[labels]
    losses = F.cross_entropy(logits, labels, reduction="none")
    return (weights * losses).sum() / weights.sum()


class BalancedCrossEntropy(nn.Module):
    """:func:`balanced_cross_entropy` with the cluster sizes of the current pseudo-labels."""

    def __init__(self, n_clusters):
        super().__init__()
        self.register_buffer("counts", torch.ones(n_clusters))

    def forward(self, logits, labels):
        return balanced_cross_entropy(logits, labels, self.counts)


def reassign_empty_clusters(features, labels, centroids, rng):
    """Give every empty cluster part of a random non-empty one, as DeepCluster does.

    For each empty cluster, a cluster with at least two members is drawn
    (with probability proportional to its size) and its centroid ``c`` is
    split along a random direction ``d`` into ``c + eps d`` (the empty
    cluster) and ``c - eps d``: the drawn cluster's members with ``(x - c) . d
    > 0`` move to the empty cluster. Should none or all of them be on that
    side (coinciding ECGs), the one farthest along ``d`` moves.

    Parameters
    ----------
    features : ndarray of shape (n_samples, n_features)
        Clustered vectors.
    labels : ndarray of shape (n_samples,)
        Cluster of each vector.
    centroids : ndarray of shape (n_clusters, n_features)
        Centroids of the clusters.
    rng : numpy.random.Generator
        Draws the clusters to split and the directions.

    Returns
    -------
    labels : ndarray of shape (n_samples,)
        New labels: no cluster is empty if there are at least as many
        vectors as clusters.
    """
    labels = labels.copy()
    for empty in np.flatnonzero(np.bincount(labels, minlength=len(centroids)) == 0):
        sizes = np.bincount(labels, minlength=len(centroids))
        splittable = np.flatnonzero(sizes >= 2)
        if len(splittable) == 0:
            break
        donor = rng.choice(splittable, p=sizes[splittable] / sizes[splittable].sum())
        members = np.flatnonzero(labels == donor)
        direction = rng.standard_normal(features.shape[1])
        projection = (features[members] - centroids[donor]) @ direction
        moved = members[projection > 0]
        if len(moved) in (0, len(members)):
            moved = members[[np.argmax(projection)]]
        labels[moved] = empty
    return labels


class _PseudoLabels(Callback):
    """Before each epoch: k-means on the training embeddings, new pseudo-labels and a new head."""

    def __init__(self, estimator, seed):
        self.estimator = estimator
        self.seed = seed

    def on_epoch_begin(self, net, dataset_train=None, **kwargs):
        seed = self.seed + len(net.history)
        features, _ = self.estimator._fit_features(dataset_train.X, net, seed)
        labels = self.estimator._pseudo_labels(features, seed=seed)
        dataset_train.y = torch.as_tensor(labels, dtype=torch.long)
        net.criterion_.counts = torch.as_tensor(
            np.bincount(labels, minlength=self.estimator.n_clusters), dtype=torch.float32
        ).to(net.criterion_.counts.device)
        # A new classifier for the new labels (the cluster indices are arbitrary),
        # with fresh Adam moments.
        head = net.module_.head
        head.reset_parameters()
        for parameter in head.parameters():
            net.optimizer_.state.pop(parameter, None)


@fill_doc
class DeepCluster(AttributeMapMixin, NeuralBaseline):
    """DeepCluster: alternate k-means pseudo-labels and supervised training on them.

    At the start of every epoch (Caron et al. 2018) the training ECGs are
    embedded, their embeddings reduced by PCA to ``pca_components``
    dimensions (whitened with ``whiten=True``) and L2-normalised, and
    clustered by k-means into ``n_clusters`` clusters, empty clusters
    refilled by splitting a large one (``reassign_empty_clusters``), and the
    cluster indices become the labels of a linear classifier head,
    re-initialised each time, trained with the encoder for one epoch. Every
    cluster weighs the same in the loss (``balanced_cross_entropy``), in
    place of the paper's sampling uniformly over clusters. After training,
    a final k-means on the features (PCA and L2 norm, fitted anew) of the
    training ECGs gives the clusters; each is named after the attribute
    combination of its training ECGs (:func:`map_clusters`).

    There is no early stopping: the pseudo-labels, and with them the loss,
    change every epoch (the CROCS paper trained DeepCluster for a fixed 30
    epochs).

    Read more in the :ref:`User Guide <reproducing>`.

    Parameters
    ----------
    n_clusters : int, default=8
        Number of k-means clusters (the CROCS paper: the number of classes).
    n_init : int, default=10
        Runs of the final k-means (the per-epoch k-means runs once, from
        a new seed each epoch).
    pca_components : int or None, default=256
        Dimensions kept by the PCA before k-means (Caron et al.: 256),
        clipped to the embedding size and one less than the number of ECGs; ``None``
        clusters the L2-normalised embeddings without PCA or whitening.
    whiten : bool, default=False
        Scale the principal components to unit variance, as Caron et al.
        do (see Notes); ignored when ``pca_components`` is ``None``.
    mapping : {"majority", "hungarian"}, default="majority"
        How clusters are named from ``y`` (see :func:`map_clusters`).
    {training}
    {run}

    Attributes
    ----------
    net_ : skorch.NeuralNet
        The fitted net (encoder and head).
    pca_ : sklearn.decomposition.PCA or None
        The PCA (and whitening) of the training embeddings before the final
        k-means; ``None`` when ``pca_components`` is ``None``.
    kmeans_ : sklearn.cluster.KMeans
        The final k-means, on the unit-norm features of the training ECGs.
    labels_ : ndarray of shape (n_samples,)
        Cluster of each training ECG.
    cluster_attributes_ : pandas.DataFrame of shape (n_clusters, n_attributes)
        Attributes of each cluster; only when ``fit`` was given ``y``.
    n_iter_ : int
        Epochs run.
    {pretraining}
    n_features_in_ : int
        Number of values per training ECG.
    input_shape_ : tuple of int
        ``(n_leads, n_timepoints)`` of the training signals.

    Notes
    -----
    Caron et al.'s feature steps are all here (PCA to 256 dimensions,
    whitening, L2 normalisation), but the whitening is off by default:
    their PCA keeps 256 of 4096 dimensions, whereas the package's
    embeddings have 128 or 256 (the CROCS paper's sizes), so nothing is
    dropped and whitening gives
    every noise direction the weight of the signal. On the package's test
    data (two kinds of sine buried in noise, 32-dimensional embeddings),
    k-means on the whitened features no longer separates the kinds after
    training (adjusted Rand index 0.03, against 0.96 unwhitened).
    ``whiten=True`` restores their pipeline.

    Simplified from Caron et al. in one step, which the CROCS paper's
    appendix does not describe: cluster-balanced loss weights in place of
    sampling the ECGs uniformly over the pseudo-labels (the same in
    expectation, with the package's fixed batches).

    References
    ----------
    M. Caron, P. Bojanowski, A. Joulin and M. Douze, "Deep Clustering for
    Unsupervised Learning of Visual Features", ECCV 2018.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.metrics import adjusted_rand_score
    >>> from sklearn_crocs.baselines import DeepCluster
    >>> rng = np.random.RandomState(0)
    >>> kind = np.repeat([0, 1], 30)
    >>> freq = np.where(kind == 1, 1.0, 3.0)[:, None]
    >>> X = np.sin(freq * np.linspace(0, 20, 400)) + 0.2 * rng.randn(60, 400)
    >>> model = DeepCluster(n_clusters=2, embedding_dim=32, max_epochs=20, lr=3e-3,
    ...                     random_state=0).fit(X)
    >>> adjusted_rand_score(kind, model.labels_)
    1.0
    >>> model.transform(X[:3]).shape
    (3, 32)
    """

    _parameter_constraints: dict = {
        **N_CLUSTERS_CONSTRAINT,
        "n_init": [Interval(Integral, 1, None, closed="left")],
        "pca_components": [Interval(Integral, 1, None, closed="left"), None],
        "whiten": ["boolean"],
        **MAPPING_CONSTRAINT,
        **NO_VALIDATION_TRAINING_CONSTRAINTS,
    }

    def __init__(
        self,
        *,
        n_clusters=8,
        n_init=10,
        pca_components=256,
        whiten=False,
        mapping="majority",
        encoder=_D["encoder"],
        encoder_params=_D["encoder_params"],
        embedding_dim=_D["embedding_dim"],
        max_epochs=_D["max_epochs"],
        batch_size=_D["batch_size"],
        lr=_D["lr"],
        device="cpu",
        random_state=None,
        verbose=0,
        pretrained=None,
    ):
        self.n_clusters = n_clusters
        self.n_init = n_init
        self.pca_components = pca_components
        self.whiten = whiten
        self.mapping = mapping
        self.encoder = encoder
        self.encoder_params = encoder_params
        self.embedding_dim = embedding_dim
        self.max_epochs = max_epochs
        self.batch_size = batch_size
        self.lr = lr
        self.device = device
        self.random_state = random_state
        self.verbose = verbose
        self.pretrained = pretrained

    def _build(self, n_leads, n_timepoints, seed):
        module = ClusterHead(
            self._make_encoder(n_leads, n_timepoints), self.embedding_dim, self.n_clusters
        )
        callbacks = [("pseudo_labels", _PseudoLabels(self, seed))]
        return module, BalancedCrossEntropy(self.n_clusters), callbacks

    def _fit_features(self, X, net, seed):
        """What k-means clusters, for validated signals X, and the PCA fitted to get it.

        The embeddings, through a PCA (whitened if ``whiten``) fitted to them
        unless ``pca_components`` is None (the PCA is then None), L2-normalised.
        """
        embeddings = self._encode(X, net)
        if self.pca_components is None:
            return normalize(embeddings), None
        # n - 1 components at most: the centred embeddings have no variance along an n-th.
        n_components = max(1, min(self.pca_components, embeddings.shape[1], len(embeddings) - 1))
        pca = PCA(n_components, whiten=self.whiten, random_state=seed).fit(embeddings)
        # transform, not fit_transform: it maps what the embeddings do not vary
        # along (dead units) to 0 when whitening, as predict does.
        return normalize(pca.transform(embeddings)), pca

    def _features(self, X):
        """What the final k-means clusters, for validated signals X, with the PCA of ``fit``."""
        embeddings = self._encode(X)
        return normalize(embeddings if self.pca_ is None else self.pca_.transform(embeddings))

    def _pseudo_labels(self, features, *, seed):
        kmeans = KMeans(self.n_clusters, n_init=1, random_state=seed).fit(features)
        return reassign_empty_clusters(
            features, kmeans.labels_, kmeans.cluster_centers_, np.random.default_rng(seed)
        )

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y=None):
        """Train by alternating k-means and classification; cluster the training ECGs.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_timepoints) or (n_samples, n_leads, n_timepoints)
            ECG signals.
        y : array-like of shape (n_samples,) or (n_samples, n_attributes), or DataFrame, \
default=None
            Attributes of the ECGs, used only to name the clusters.

        Returns
        -------
        self : DeepCluster
            The fitted estimator.
        """
        X = self._validate_signals(X, reset=True)
        if self.n_clusters > len(X):
            raise ValueError(f"n_clusters={self.n_clusters} is more than the {len(X)} ECGs.")
        seed = self._train_encoder(X, np.zeros(len(X), dtype=np.int64))
        features, self.pca_ = self._fit_features(X, None, seed)
        self.kmeans_ = KMeans(self.n_clusters, n_init=self.n_init, random_state=seed)
        self.labels_ = self.kmeans_.fit_predict(features)
        self._fit_map(self.labels_, y)
        return self

    def predict(self, X):
        """Index of the nearest final k-means centroid of each ECG's features.

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
        return self.kmeans_.predict(self._features(self._validate_signals(X, reset=False)))
