"""SeLA (Asano et al. 2020): self-labelling with Sinkhorn-Knopp equipartitioned pseudo-labels."""

import math
from numbers import Integral, Real

import numpy as np
import torch
from sklearn.base import _fit_context
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
    NeuralBaseline,
    fill_doc,
)
from ._deepcluster import ClusterHead

__all__ = ["SeLA"]

_D = CROCS_DEFAULTS


def sinkhorn_knopp(log_probs, lam, *, tol=1e-6, max_iter=1000):
    """Equipartitioned soft labels: Sinkhorn-Knopp scaling of ``probs ** lam``.

    Finds ``Q = diag(a) P**lam diag(b)`` whose rows sum to ``1/N`` and whose
    columns sum to ``1/K`` (each of the ``K`` clusters gets ``N/K`` ECGs'
    worth of mass), by alternately normalising columns and rows (Asano et
    al. 2020, Eq. 8), in the log domain so that ``lam = 25`` does not
    underflow.

    Parameters
    ----------
    log_probs : torch.Tensor of shape (n_samples, n_clusters)
        Log posteriors of the network.
    lam : float
        Sharpness of the labels (Asano et al.: 25).
    tol : float, default=1e-6
        Stop when no row scaling changes by more than this (in log).
    max_iter : int, default=1000
        Most alternations.

    Returns
    -------
    q : torch.Tensor of shape (n_samples, n_clusters)
        The scaled matrix; ``q.argmax(1)`` are the pseudo-labels.
    """
    n, k = log_probs.shape
    log_q = lam * log_probs.double()
    log_row = torch.zeros(n, dtype=log_q.dtype, device=log_q.device)
    for _ in range(max_iter):
        log_col = -math.log(k) - torch.logsumexp(log_q + log_row[:, None], dim=0)
        new_row = -math.log(n) - torch.logsumexp(log_q + log_col[None, :], dim=1)
        converged = (new_row - log_row).abs().max() < tol
        log_row = new_row
        if converged:
            break
    return torch.exp(log_q + log_row[:, None] + log_col[None, :])


def labelling_epochs(max_epochs, n_labelings):
    """Epochs (0-based) at whose start the pseudo-labels are computed: evenly spread, from 0."""
    n = math.ceil(max_epochs / 2) if n_labelings is None else min(n_labelings, max_epochs)
    return np.arange(n) * max_epochs // n


class MultiHead(ClusterHead):
    """Encoder and ``n_heads`` linear heads of ``n_clusters`` logits, as one layer.

    Returns logits of shape ``(batch, n_clusters, n_heads)``, the layout of
    :class:`torch.nn.CrossEntropyLoss`, which then averages over the heads.
    """

    def __init__(self, encoder, embedding_dim, n_clusters, n_heads):
        super().__init__(encoder, embedding_dim, n_clusters * n_heads)
        self.n_clusters = n_clusters

    def heads(self, embeddings):
        return self.head(embeddings).unflatten(1, (-1, self.n_clusters)).transpose(1, 2)

    def forward(self, x):
        return self.heads(self.encoder(x))


class _SelfLabels(Callback):
    """At the labelling epochs: each head's pseudo-labels, from its posteriors of the ECGs."""

    def __init__(self, estimator):
        self.estimator = estimator

    def on_train_begin(self, net, **kwargs):
        self.epochs = set(labelling_epochs(net.max_epochs, self.estimator.n_labelings).tolist())

    def on_epoch_begin(self, net, dataset_train=None, **kwargs):
        if len(net.history) - 1 not in self.epochs:
            return
        log_probs = torch.log_softmax(self.estimator._logits(dataset_train.X, net), dim=1)
        dataset_train.y = torch.stack(
            [
                sinkhorn_knopp(log_probs[..., h], self.estimator.sinkhorn_lambda).argmax(dim=1)
                for h in range(log_probs.shape[2])
            ],
            dim=1,
        )
        net.history.record("labelled", True)


@fill_doc
class SeLA(AttributeMapMixin, NeuralBaseline):
    """Self-labelling (SeLA): a classifier trained on labels that split the data evenly.

    The network has ``n_heads`` linear heads over ``n_clusters`` clusters
    (Asano, Rupprecht & Vedaldi 2020). ``n_labelings`` times during training,
    at the start of epochs spread evenly from the first, each head's
    posteriors for all training ECGs are turned into its own pseudo-labels by
    the Sinkhorn-Knopp algorithm under the constraint that every cluster gets
    as many ECGs (``sinkhorn_knopp``); in between, the encoder and heads are
    trained on them with cross-entropy averaged over the heads. The cluster
    of an ECG is the first head's most probable one; with the attributes
    ``y`` each cluster is named after the combination of its training ECGs
    (:func:`map_clusters`).

    There is no early stopping: the pseudo-labels, and with them the loss,
    change during training.

    Read more in the :ref:`User Guide <reproducing>`.

    Parameters
    ----------
    n_clusters : int, default=8
        Number of clusters.
    sinkhorn_lambda : float, default=25.0
        Power of the posteriors in the Sinkhorn-Knopp step (Asano et al.'s
        lambda; larger gives harder labels).
    n_heads : int, default=10
        Clustering heads, each with its own pseudo-labels (Asano et al.'s
        best setting has 10).
    n_labelings : int or None, default=None
        Times the pseudo-labels are computed, at most once an epoch;
        ``None`` means once every two epochs (``ceil(max_epochs / 2)``),
        the rate of Asano et al.'s code (100 in 200 epochs).
    mapping : {"majority", "hungarian"}, default="majority"
        How clusters are named from ``y`` (see :func:`map_clusters`).
    {training}
    {run}

    Attributes
    ----------
    net_ : skorch.NeuralNet
        The fitted net (encoder and heads); its history marks the
        labelling epochs (``"labelled"``).
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
    Simplified from Asano et al. (2020) in one step: the labelling epochs
    are spread evenly, where their code spreads labelling steps
    quadratically (denser early) and may run them within an epoch; the
    package's training loop relabels only between epochs, and their code
    notes that an even spread works as well in practice.

    References
    ----------
    Y. M. Asano, C. Rupprecht and A. Vedaldi, "Self-labelling via simultaneous
    clustering and representation learning", ICLR 2020.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.metrics import adjusted_rand_score
    >>> from sklearn_crocs.baselines import SeLA
    >>> rng = np.random.RandomState(0)
    >>> kind = np.repeat([0, 1], 30)
    >>> freq = np.where(kind == 1, 1.0, 3.0)[:, None]
    >>> X = np.sin(freq * np.linspace(0, 20, 400)) + 0.2 * rng.randn(60, 400)
    >>> model = SeLA(n_clusters=2, embedding_dim=32, max_epochs=20, lr=3e-3,
    ...              random_state=0).fit(X)
    >>> adjusted_rand_score(kind, model.labels_)
    1.0
    >>> model.predict_proba(X[:2]).shape
    (2, 2)
    """

    _parameter_constraints: dict = {
        **N_CLUSTERS_CONSTRAINT,
        "sinkhorn_lambda": [Interval(Real, 0, None, closed="neither")],
        "n_heads": [Interval(Integral, 1, None, closed="left")],
        "n_labelings": [Interval(Integral, 1, None, closed="left"), None],
        **MAPPING_CONSTRAINT,
        **NO_VALIDATION_TRAINING_CONSTRAINTS,
    }

    def __init__(
        self,
        *,
        n_clusters=8,
        sinkhorn_lambda=25.0,
        n_heads=10,
        n_labelings=None,
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
        self.sinkhorn_lambda = sinkhorn_lambda
        self.n_heads = n_heads
        self.n_labelings = n_labelings
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
        module = MultiHead(
            self._make_encoder(n_leads, n_timepoints),
            self.embedding_dim,
            self.n_clusters,
            self.n_heads,
        )
        return module, nn.CrossEntropyLoss(), [("self_labels", _SelfLabels(self))]

    def _logits(self, X, net=None):
        """Logits of every head, of shape ``(n_samples, n_clusters, n_heads)``."""
        net = self.net_ if net is None else net
        module = net.module_
        with torch.inference_mode():
            embeddings = torch.from_numpy(self._encode(X, net)).to(module.head.weight)
            return module.heads(embeddings).float().cpu()

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y=None):
        """Train on Sinkhorn-Knopp pseudo-labels; cluster the training ECGs.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_timepoints) or (n_samples, n_leads, n_timepoints)
            ECG signals.
        y : array-like of shape (n_samples,) or (n_samples, n_attributes), or DataFrame, \
default=None
            Attributes of the ECGs, used only to name the clusters.

        Returns
        -------
        self : SeLA
            The fitted estimator.
        """
        X = self._validate_signals(X, reset=True)
        self._train_encoder(X, np.zeros(len(X), dtype=np.int64))
        self.labels_ = self._logits(X)[..., 0].argmax(dim=1).numpy()
        self._fit_map(self.labels_, y)
        return self

    def predict_proba(self, X):
        """Posterior of each cluster for each ECG (softmax of the first head).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_timepoints) or (n_samples, n_leads, n_timepoints)
            ECG signals.

        Returns
        -------
        proba : ndarray of shape (n_samples, n_clusters)
            Rows sum to one.
        """
        check_is_fitted(self)
        logits = self._logits(self._validate_signals(X, reset=False))[..., 0]
        return torch.softmax(logits, dim=1).numpy()

    def predict(self, X):
        """Most probable cluster of each ECG.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_timepoints) or (n_samples, n_leads, n_timepoints)
            ECG signals.

        Returns
        -------
        labels : ndarray of shape (n_samples,)
            Cluster indices.
        """
        return self.predict_proba(X).argmax(axis=1)
