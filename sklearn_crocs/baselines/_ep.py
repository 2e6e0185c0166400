"""KM EP: an autoencoder with a prototype layer (Gee et al. 2019), then k-means on its codes."""

from numbers import Integral, Real

import torch
import torch.nn.functional as F
from sklearn.base import _fit_context
from sklearn.cluster import KMeans
from sklearn.utils._param_validation import Interval
from sklearn.utils.validation import check_is_fitted
from torch import nn

from ._base import (
    CROCS_DEFAULTS,
    MAPPING_CONSTRAINT,
    TRAINING_CONSTRAINTS,
    AttributeMapMixin,
    EncoderModule,
    NeuralBaseline,
    class_codes,
    fill_doc,
    n_combinations,
)

__all__ = ["KMeansEP"]

_D = CROCS_DEFAULTS


class PrototypeAutoencoder(EncoderModule):
    """Encoder, linear decoder, prototype layer and class head (Li et al. 2018; Gee et al. 2019).

    ``forward`` returns ``(codes, reconstruction, squared_distances, logits,
    x)``: the squared Euclidean distances from each code to the
    ``n_prototypes`` prototypes are the input of the linear class head.
    """

    def __init__(self, encoder, n_leads, n_timepoints, embedding_dim, n_prototypes, n_classes):
        super().__init__(encoder)
        self.decoder = nn.Linear(embedding_dim, n_leads * n_timepoints)
        # The package's encoders end in a ReLU: codes are non-negative, so are the
        # initial prototypes (uniform in [0, 1), as Li et al.).
        self.prototypes = nn.Parameter(torch.rand(n_prototypes, embedding_dim))
        self.head = nn.Linear(n_prototypes, n_classes)

    def forward(self, x):
        codes = self.encoder(x)
        reconstruction = self.decoder(codes).view_as(x)
        squared = torch.cdist(codes, self.prototypes.to(codes.dtype)) ** 2
        return codes, reconstruction, squared, self.head(squared), x


class PrototypeAutoencoderLoss(nn.Module):
    """Classification, reconstruction and the two prototype terms of Li et al. (2018).

    ``CE(logits, class) + reconstruction_weight * MSE(reconstruction, x) +
    r1_weight * mean_j min_i d_ij + r2_weight * mean_i min_j d_ij`` with ``d``
    the squared distances between the batch's codes ``i`` and the prototypes
    ``j``: R1 keeps every prototype near some ECG, R2 every ECG near some
    prototype.
    """

    def __init__(self, reconstruction_weight=1.0, r1_weight=1.0, r2_weight=1.0):
        super().__init__()
        self.reconstruction_weight = reconstruction_weight
        self.r1_weight = r1_weight
        self.r2_weight = r2_weight

    def forward(self, outputs, target):
        _, reconstruction, squared, logits, x = outputs
        return (
            F.cross_entropy(logits, target)
            + self.reconstruction_weight * F.mse_loss(reconstruction, x)
            + self.r1_weight * squared.min(dim=0).values.mean()
            + self.r2_weight * squared.min(dim=1).values.mean()
        )


@fill_doc
class KMeansEP(AttributeMapMixin, NeuralBaseline):
    """k-means on the codes of an explainable-prototype network (the CROCS paper's KM EP).

    The network of Gee et al. (2019), after Li et al. (2018): the encoder's
    code of an ECG is decoded back to the ECG and compared with
    ``n_prototypes`` learned prototypes; the squared distances feed a linear
    head that predicts the class. The loss (``PrototypeAutoencoderLoss``)
    adds cross-entropy, reconstruction error and two terms that keep
    prototypes and codes close. After training, :class:`sklearn.cluster.KMeans`
    clusters the codes of the training ECGs; each cluster is named after the
    attribute combination of its training ECGs (:func:`map_clusters`).

    Read more in the :ref:`User Guide <reproducing>`.

    Parameters
    ----------
    n_prototypes : int, default=None
        Number of prototypes; ``None`` means one per attribute combination of
        ``y`` (as many as CROCS's, as in the CROCS paper).
    n_clusters : int, default=None
        Clusters of the k-means; ``None`` means ``n_prototypes``.
    reconstruction_weight : float, default=1.0
        Weight of the reconstruction error.
    r1_weight : float, default=1.0
        Weight of R1 (each prototype near some code).
    r2_weight : float, default=1.0
        Weight of R2 (each code near some prototype).
    class_attribute : int or str, default=0
        Column of ``y`` holding the class that the head predicts.
    n_init : int, default=10
        Runs of k-means; the best is kept.
    mapping : {"majority", "hungarian"}, default="majority"
        How clusters are named from ``y`` (see :func:`map_clusters`).
    {training}
    {early_stopping}
    {run}

    Attributes
    ----------
    net_ : skorch.NeuralNet
        The fitted net; ``net_.module_`` is the ``PrototypeAutoencoder``.
    kmeans_ : sklearn.cluster.KMeans
        k-means fitted on the training codes.
    n_clusters_ : int
        Number of clusters.
    labels_ : ndarray of shape (n_samples,)
        Cluster of each training ECG.
    cluster_attributes_ : pandas.DataFrame of shape (`n_clusters_`, n_attributes)
        Attributes of each cluster.
    n_iter_ : int
        Epochs run.
    {pretraining}
    n_features_in_ : int
        Number of values per training ECG.
    input_shape_ : tuple of int
        ``(n_leads, n_timepoints)`` of the training signals.

    Notes
    -----
    Simplified from Gee et al. (2019): without their prototype-diversity
    term (a penalty on prototypes close to one another), as the CROCS
    paper's appendix describes the network without it; the loss keeps Li et
    al.'s (2018) cross-entropy, reconstruction, R1 and R2.

    References
    ----------
    A. H. Gee, D. Garcia-Olano, J. Ghosh and D. Paydarfar, "Explaining Deep
    Classification of Time-Series Data with Learned Prototypes", KHD@IJCAI 2019.
    O. Li, H. Liu, C. Chen and C. Rudin, "Deep Learning for Case-Based
    Reasoning through Prototypes", AAAI 2018.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_crocs.baselines import KMeansEP
    >>> rng = np.random.RandomState(0)
    >>> y = np.column_stack([np.repeat(["AF", "SR"], 30), np.tile(["F", "M"], 30)])
    >>> freq = np.where(y[:, 0] == "SR", 1.0, 3.0)[:, None]
    >>> X = np.sin(freq * np.linspace(0, 20, 400)) + 0.2 * rng.randn(60, 400)
    >>> model = KMeansEP(n_clusters=2, embedding_dim=32, max_epochs=20, lr=3e-3,
    ...                  validation_fraction=None, random_state=0).fit(X, y)
    >>> model.net_.module_.prototypes.shape  # one per combination
    torch.Size([4, 32])
    >>> bool((model.predict_attributes(X)["attribute_0"] == y[:, 0]).mean() > 0.9)
    True
    """

    _parameter_constraints: dict = {
        "n_prototypes": [Interval(Integral, 1, None, closed="left"), None],
        "n_clusters": [Interval(Integral, 1, None, closed="left"), None],
        "reconstruction_weight": [Interval(Real, 0, None, closed="left")],
        "r1_weight": [Interval(Real, 0, None, closed="left")],
        "r2_weight": [Interval(Real, 0, None, closed="left")],
        "class_attribute": [Interval(Integral, 0, None, closed="left"), str],
        "n_init": [Interval(Integral, 1, None, closed="left")],
        **MAPPING_CONSTRAINT,
        **TRAINING_CONSTRAINTS,
    }

    def __init__(
        self,
        *,
        n_prototypes=None,
        n_clusters=None,
        reconstruction_weight=1.0,
        r1_weight=1.0,
        r2_weight=1.0,
        class_attribute=0,
        n_init=10,
        mapping="majority",
        encoder=_D["encoder"],
        encoder_params=_D["encoder_params"],
        embedding_dim=_D["embedding_dim"],
        max_epochs=_D["max_epochs"],
        batch_size=_D["batch_size"],
        lr=_D["lr"],
        validation_fraction=_D["validation_fraction"],
        n_iter_no_change=_D["n_iter_no_change"],
        device="cpu",
        random_state=None,
        verbose=0,
        pretrained=None,
    ):
        self.n_prototypes = n_prototypes
        self.n_clusters = n_clusters
        self.reconstruction_weight = reconstruction_weight
        self.r1_weight = r1_weight
        self.r2_weight = r2_weight
        self.class_attribute = class_attribute
        self.n_init = n_init
        self.mapping = mapping
        self.encoder = encoder
        self.encoder_params = encoder_params
        self.embedding_dim = embedding_dim
        self.max_epochs = max_epochs
        self.batch_size = batch_size
        self.lr = lr
        self.validation_fraction = validation_fraction
        self.n_iter_no_change = n_iter_no_change
        self.device = device
        self.random_state = random_state
        self.verbose = verbose
        self.pretrained = pretrained

    def _n_clusters_out(self):
        return self.n_clusters_

    def _build(self, n_leads, n_timepoints, seed):
        module = PrototypeAutoencoder(
            self._make_encoder(n_leads, n_timepoints),
            n_leads,
            n_timepoints,
            self.embedding_dim,
            self._n_prototypes,
            self._n_classes,
        )
        criterion = PrototypeAutoencoderLoss(
            self.reconstruction_weight, self.r1_weight, self.r2_weight
        )
        return module, criterion, []

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y, groups=None):
        """Train the network on the classes of ``y``, then k-means on the training codes.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_timepoints) or (n_samples, n_leads, n_timepoints)
            ECG signals.
        y : array-like of shape (n_samples,) or (n_samples, n_attributes), or DataFrame
            Attributes of the ECGs: the class column trains the head, all of
            them name the clusters.
        groups : array-like of shape (n_samples,), default=None
            Patient of each ECG, for the validation split.

        Returns
        -------
        self : KMeansEP
            The fitted estimator.
        """
        X = self._validate_signals(X, reset=True)
        if y is None:
            raise ValueError(
                "KMeansEP requires y to be passed, but the target y is None: its head "
                "learns the class attribute."
            )
        frame, classes = class_codes(y, self.class_attribute)
        if len(frame) != len(X):
            raise ValueError(f"X has {len(X)} ECGs but y has {len(frame)} rows.")
        self._n_classes = int(classes.max()) + 1
        self._n_prototypes = self.n_prototypes or n_combinations(frame)
        self.n_clusters_ = self.n_clusters or self._n_prototypes
        seed = self._train_encoder(X, classes, groups)
        self.kmeans_ = KMeans(self.n_clusters_, n_init=self.n_init, random_state=seed)
        self.labels_ = self.kmeans_.fit_predict(self._encode(X))
        self._fit_map(self.labels_, frame)
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
        """Index of the nearest k-means centroid of each ECG's code.

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

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.required = True
        return tags
