"""SeLA (Asano et al. 2020): self-labelling with Sinkhorn-Knopp equipartitioned pseudo-labels."""

import math
from numbers import Real

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


class _SelfLabels(Callback):
    """Before each epoch: new pseudo-labels from the network's posteriors of all training ECGs."""

    def __init__(self, estimator):
        self.estimator = estimator

    def on_epoch_begin(self, net, dataset_train=None, **kwargs):
        log_probs = torch.log_softmax(self.estimator._logits(dataset_train.X, net), dim=1)
        q = sinkhorn_knopp(log_probs, self.estimator.sinkhorn_lambda)
        dataset_train.y = q.argmax(dim=1)


@fill_doc
class SeLA(AttributeMapMixin, NeuralBaseline):
    """Self-labelling (SeLA): a classifier trained on labels that split the data evenly.

    Before every epoch (Asano, Rupprecht & Vedaldi 2020) the network's
    posteriors over ``n_clusters`` clusters for all training ECGs are turned
    into pseudo-labels by the Sinkhorn-Knopp algorithm under the constraint
    that every cluster gets as many ECGs (``sinkhorn_knopp``), and the
    encoder and linear head are trained on them with cross-entropy for an
    epoch. The cluster of an ECG is the head's most probable one; with the
    attributes ``y`` each cluster is named after the combination of its
    training ECGs (:func:`map_clusters`).

    There is no early stopping: the pseudo-labels, and with them the loss,
    change every epoch.

    Read more in the :ref:`User Guide <reproducing>`.

    Parameters
    ----------
    n_clusters : int, default=8
        Number of clusters.
    sinkhorn_lambda : float, default=25.0
        Power of the posteriors in the Sinkhorn-Knopp step (Asano et al.'s
        lambda; larger gives harder labels).
    mapping : {"majority", "hungarian"}, default="majority"
        How clusters are named from ``y`` (see :func:`map_clusters`).
    {training}
    {run}

    Attributes
    ----------
    net_ : skorch.NeuralNet
        The fitted net (encoder and head).
    labels_ : ndarray of shape (n_samples,)
        Cluster of each training ECG.
    cluster_attributes_ : pandas.DataFrame of shape (n_clusters, n_attributes)
        Attributes of each cluster; only when ``fit`` was given ``y``.
    n_iter_ : int
        Epochs run.
    n_features_in_ : int
        Number of values per training ECG.
    input_shape_ : tuple of int
        ``(n_leads, n_timepoints)`` of the training signals.

    Notes
    -----
    Simplified from Asano et al. (2020), to fit the shared 30-epoch budget
    of the CROCS paper's DeepCluster:

    - one clustering head, where Asano et al. train several heads at
      once, each on its own pseudo-labels;
    - the pseudo-labels are recomputed before every epoch, where Asano et
      al. spread a fixed number of labelling steps over training.

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
        **MAPPING_CONSTRAINT,
        **NO_VALIDATION_TRAINING_CONSTRAINTS,
    }

    def __init__(
        self,
        *,
        n_clusters=8,
        sinkhorn_lambda=25.0,
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
    ):
        self.n_clusters = n_clusters
        self.sinkhorn_lambda = sinkhorn_lambda
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

    def _build(self, n_leads, n_timepoints, seed):
        module = ClusterHead(
            self._make_encoder(n_leads, n_timepoints), self.embedding_dim, self.n_clusters
        )
        return module, nn.CrossEntropyLoss(), [("self_labels", _SelfLabels(self))]

    def _logits(self, X, net=None):
        net = self.net_ if net is None else net
        head = net.module_.head
        with torch.inference_mode():
            embeddings = torch.from_numpy(self._encode(X, net)).to(head.weight)
            return head(embeddings).float().cpu()

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
        self._train(X, np.zeros(len(X), dtype=np.int64))
        self.labels_ = self._logits(X).argmax(dim=1).numpy()
        self._fit_map(self.labels_, y)
        return self

    def predict_proba(self, X):
        """Posterior of each cluster for each ECG (softmax of the head).

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
        logits = self._logits(self._validate_signals(X, reset=False))
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
