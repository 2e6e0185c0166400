"""IIC (Ji et al. 2019): mutual information between the clusters of an ECG and a perturbed copy."""

import math
from numbers import Integral, Real

import numpy as np
import torch
from sklearn.base import _fit_context
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import check_is_fitted
from torch import nn

from ._base import (
    CROCS_DEFAULTS,
    MAPPING_CONSTRAINT,
    N_CLUSTERS_CONSTRAINT,
    TRAINING_CONSTRAINTS,
    AttributeMapMixin,
    EncoderModule,
    NeuralBaseline,
    fill_doc,
)

__all__ = ["IIC"]

_D = CROCS_DEFAULTS
_EPS = torch.finfo(torch.float32).eps


def perturb(x, kind, scale):
    """A randomly perturbed copy of a batch of ECGs ``(batch, leads, time)``.

    - ``"noise"``: additive Gaussian noise of ``scale`` times each lead's
      standard deviation (the CROCS paper's choice: it cannot change the class);
    - ``"scale"``: each lead multiplied by ``1 + scale * N(0, 1)``;
    - ``"shift"``: each ECG rotated in time by up to ``scale`` of its length.
    """
    if kind == "noise":
        return x + scale * x.std(dim=-1, keepdim=True) * torch.randn_like(x)
    if kind == "scale":
        return x * (1 + scale * torch.randn(*x.shape[:-1], 1, dtype=x.dtype, device=x.device))
    length = x.shape[-1]
    reach = int(scale * length)
    shift = torch.randint(-reach, reach + 1, (x.shape[0], 1, 1), device=x.device)
    index = (torch.arange(length, device=x.device) - shift) % length
    return x.gather(-1, index.expand_as(x))


def iic_loss(p, p_perturbed):
    """Minus the mutual information between the cluster assignments of two views (IIC, Eq. 3).

    With ``P = 1/B sum_i p_i p'_i^T`` symmetrised (``(P + P^T) / 2``), the
    loss is ``-sum_{c, c'} P_cc' log(P_cc' / (P_c P_c'))``, entries clamped at
    float32's epsilon as in Ji et al.'s code.

    Parameters
    ----------
    p, p_perturbed : torch.Tensor of shape (batch, n_clusters)
        Cluster probabilities of the ECGs and of their perturbed copies.

    Returns
    -------
    loss : torch.Tensor
        A scalar, at least ``-log(n_clusters)``.
    """
    joint = p.T @ p_perturbed / p.shape[0]
    joint = ((joint + joint.T) / 2).clamp_min(_EPS)
    marginal_row = joint.sum(dim=1, keepdim=True)
    marginal_col = joint.sum(dim=0, keepdim=True)
    return -(joint * (joint.log() - marginal_row.log() - marginal_col.log())).sum()


class IICModule(EncoderModule):
    """Encoder with a main and an over-clustering softmax head, run on an ECG and a perturbed copy.

    ``forward`` returns the four probability matrices ``(main, main of the
    copy, over-clustering, over-clustering of the copy)``.
    """

    def __init__(self, encoder, embedding_dim, n_clusters, n_overclusters, perturbation, scale):
        super().__init__(encoder)
        self.head = nn.Linear(embedding_dim, n_clusters)
        self.over_head = nn.Linear(embedding_dim, n_overclusters) if n_overclusters else None
        self.perturbation = perturbation
        self.scale = scale

    def forward(self, x):
        both = self.encoder(torch.cat([x, perturb(x, self.perturbation, self.scale)]))
        outputs = self.head(both).softmax(dim=1).chunk(2)
        if self.over_head is not None:
            outputs += self.over_head(both).softmax(dim=1).chunk(2)
        return outputs


class IICLoss(nn.Module):
    """Sum over the heads of ``log(n_clusters) + iic_loss``; targets are ignored.

    The mutual information of a head is at most ``log(n_clusters)``: the
    offset makes the loss non-negative, which the relative threshold of the
    early stopping needs, and changes no gradient.
    """

    def forward(self, outputs, target):
        return sum(
            math.log(outputs[i].shape[1]) + iic_loss(outputs[i], outputs[i + 1])
            for i in range(0, len(outputs), 2)
        )


@fill_doc
class IIC(AttributeMapMixin, NeuralBaseline):
    """Invariant Information Clustering: clusters that a perturbation of the ECG does not change.

    The encoder and a softmax head are trained to maximise the mutual
    information between the cluster distributions of each ECG and of a
    randomly perturbed copy of it (Ji, Henriques & Vedaldi 2019), which
    rewards confident, balanced clusterings that the perturbation leaves
    alone. As in the CROCS paper, the perturbation is additive Gaussian
    noise, and an auxiliary over-clustering head with more clusters
    (``n_overclusters``) is trained alongside (the two losses are added).
    The cluster of an ECG is the main head's most probable one; with the
    attributes ``y`` each cluster is named after the combination of its
    training ECGs (:func:`map_clusters`).

    Read more in the :ref:`User Guide <reproducing>`.

    Parameters
    ----------
    n_clusters : int, default=8
        Clusters of the main head (the CROCS paper: the number of attribute
        combinations).
    n_overclusters : int or None, default=None
        Clusters of the over-clustering head; ``None`` means ``5 *
        n_clusters``; ``0`` drops the head.
    perturbation : {"noise", "scale", "shift"}, default="noise"
        Additive Gaussian noise (``perturbation_scale`` times each lead's
        standard deviation), random amplitude scaling of each lead
        (``1 + perturbation_scale * N(0, 1)``), or a random circular shift in
        time by up to ``perturbation_scale`` of the length.
    perturbation_scale : float, default=0.1
        Strength of the perturbation.
    mapping : {"majority", "hungarian"}, default="majority"
        How clusters are named from ``y`` (see :func:`map_clusters`).
    {training}
    {early_stopping}
    {run}

    Attributes
    ----------
    net_ : skorch.NeuralNet
        The fitted net (encoder and heads).
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
    Simplified from Ji et al. (2019), to keep one training loop of the
    shared epoch budget (neither is described in the CROCS paper's appendix):

    - one sub-head per head, where Ji et al. train five and keep the one
      of lowest loss;
    - the losses of the main and over-clustering heads are summed at every
      step, where Ji et al. train the two heads in alternating epochs.

    References
    ----------
    X. Ji, J. F. Henriques and A. Vedaldi, "Invariant Information Clustering
    for Unsupervised Image Classification and Segmentation", ICCV 2019.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.metrics import adjusted_rand_score
    >>> from sklearn_crocs.baselines import IIC
    >>> rng = np.random.RandomState(0)
    >>> kind = np.repeat([0, 1], 30)
    >>> freq = np.where(kind == 1, 1.0, 3.0)[:, None]
    >>> X = np.sin(freq * np.linspace(0, 20, 400)) + 0.2 * rng.randn(60, 400)
    >>> model = IIC(n_clusters=2, embedding_dim=32, max_epochs=20, lr=3e-3,
    ...             validation_fraction=None, random_state=0).fit(X)
    >>> adjusted_rand_score(kind, model.labels_)
    1.0
    >>> model.predict_proba(X[:2]).shape
    (2, 2)
    """

    _parameter_constraints: dict = {
        **N_CLUSTERS_CONSTRAINT,
        "n_overclusters": [Interval(Integral, 0, None, closed="left"), None],
        "perturbation": [StrOptions({"noise", "scale", "shift"})],
        "perturbation_scale": [Interval(Real, 0, None, closed="left")],
        **MAPPING_CONSTRAINT,
        **TRAINING_CONSTRAINTS,
    }

    def __init__(
        self,
        *,
        n_clusters=8,
        n_overclusters=None,
        perturbation="noise",
        perturbation_scale=0.1,
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
    ):
        self.n_clusters = n_clusters
        self.n_overclusters = n_overclusters
        self.perturbation = perturbation
        self.perturbation_scale = perturbation_scale
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

    def _build(self, n_leads, n_timepoints, seed):
        over = 5 * self.n_clusters if self.n_overclusters is None else self.n_overclusters
        module = IICModule(
            self._make_encoder(n_leads, n_timepoints),
            self.embedding_dim,
            self.n_clusters,
            over,
            self.perturbation,
            self.perturbation_scale,
        )
        return module, IICLoss(), []

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y=None, groups=None):
        """Train the encoder and heads; cluster the training ECGs.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_timepoints) or (n_samples, n_leads, n_timepoints)
            ECG signals.
        y : array-like of shape (n_samples,) or (n_samples, n_attributes), or DataFrame, \
default=None
            Attributes of the ECGs, used only to name the clusters.
        groups : array-like of shape (n_samples,), default=None
            Patient of each ECG, for the validation split.

        Returns
        -------
        self : IIC
            The fitted estimator.
        """
        X = self._validate_signals(X, reset=True)
        self._train(X, np.zeros(len(X), dtype=np.int64), groups)
        self.labels_ = self._proba(X).argmax(axis=1)
        self._fit_map(self.labels_, y)
        return self

    def _proba(self, X):
        head = self.net_.module_.head
        with torch.inference_mode():
            embeddings = torch.from_numpy(self._encode(X)).to(head.weight)
            return head(embeddings).softmax(dim=1).float().cpu().numpy()

    def predict_proba(self, X):
        """Main head's cluster probabilities of each ECG.

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
        return self._proba(self._validate_signals(X, reset=False))

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
