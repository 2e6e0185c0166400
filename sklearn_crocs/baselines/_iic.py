"""IIC (Ji et al. 2019): mutual information between the clusters of an ECG and a perturbed copy."""

import math
from numbers import Integral, Real

import numpy as np
import torch
from sklearn.base import _fit_context
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import check_is_fitted
from skorch.callbacks import Callback
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


def subhead_losses(p, p_perturbed):
    """``log(n_clusters) + iic_loss`` of each sub-head of a head.

    Parameters
    ----------
    p, p_perturbed : torch.Tensor of shape (batch, n_subheads, n_clusters)
        Cluster probabilities of the ECGs and of their perturbed copies.

    Returns
    -------
    losses : torch.Tensor of shape (n_subheads,)
        Non-negative: the mutual information of a head is at most
        ``log(n_clusters)``, so the offset keeps the loss above zero (which
        the relative threshold of the early stopping needs) and changes no
        gradient.
    """
    offset = math.log(p.shape[2])
    return torch.stack([offset + iic_loss(p[:, s], p_perturbed[:, s]) for s in range(p.shape[1])])


class SubHeads(nn.Module):
    """``n_subheads`` linear softmax heads of ``n_clusters`` clusters each, as one layer.

    Returns probabilities of shape ``(batch, n_subheads, n_clusters)``.
    """

    def __init__(self, embedding_dim, n_clusters, n_subheads):
        super().__init__()
        self.linear = nn.Linear(embedding_dim, n_subheads * n_clusters)
        self.n_clusters = n_clusters

    def forward(self, z):
        return self.linear(z).unflatten(1, (-1, self.n_clusters)).softmax(dim=-1)


class IICModule(EncoderModule):
    """Encoder with a main and an over-clustering head, run on an ECG and a perturbed copy.

    ``forward`` returns the four probability tensors ``(main, main of the
    copy, over-clustering, over-clustering of the copy)``, each of shape
    ``(batch, n_subheads, clusters)``.
    """

    def __init__(
        self, encoder, embedding_dim, n_clusters, n_overclusters, n_subheads, perturbation, scale
    ):
        super().__init__(encoder)
        self.head = SubHeads(embedding_dim, n_clusters, n_subheads)
        self.over_head = (
            SubHeads(embedding_dim, n_overclusters, n_subheads) if n_overclusters else None
        )
        self.perturbation = perturbation
        self.scale = scale

    def forward(self, x):
        both = self.encoder(torch.cat([x, perturb(x, self.perturbation, self.scale)]))
        outputs = self.head(both).chunk(2)
        if self.over_head is not None:
            outputs += self.over_head(both).chunk(2)
        return outputs


class IICLoss(nn.Module):
    """Mean of :func:`subhead_losses` over the sub-heads of the head being trained; no targets.

    ``head`` (0: main, 1: over-clustering) is set each epoch by
    :class:`_AlternateHeads`; in evaluation mode (the validation loss) it is
    always the main head's, so that the loss compares from epoch to epoch.
    """

    head = 0

    def forward(self, outputs, target):
        head = self.head if self.training else 0
        return subhead_losses(outputs[2 * head], outputs[2 * head + 1]).mean()


class _AlternateHeads(Callback):
    """Ji et al.'s alternation: the main head trains on odd epochs (first), the other on even ones.

    Only the chosen head's loss is back-propagated, so the other head gets no
    gradient (and Adam leaves it as it is) during that epoch.
    """

    def on_epoch_begin(self, net, **kwargs):
        has_over = net.module_.over_head is not None
        net.criterion_.head = (len(net.history) - 1) % 2 if has_over else 0


@fill_doc
class IIC(AttributeMapMixin, NeuralBaseline):
    """Invariant Information Clustering: clusters that a perturbation of the ECG does not change.

    The encoder and a softmax head are trained to maximise the mutual
    information between the cluster distributions of each ECG and of a
    randomly perturbed copy of it (Ji, Henriques & Vedaldi 2019), which
    rewards confident, balanced clusterings that the perturbation leaves
    alone. As in the CROCS paper, the perturbation is additive Gaussian
    noise. As in Ji et al., an auxiliary over-clustering head with more
    clusters (``n_overclusters``) is trained in alternation with the main
    head, one epoch each (the main head first), and each head has
    ``n_subheads`` sub-heads whose losses are averaged. After training, the
    main head's sub-head of lowest loss on the training ECGs is kept
    (``best_subhead_``). The cluster of an ECG is that sub-head's most
    probable one; with the
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
        n_clusters``; ``0`` drops the head (and the alternation: the main
        head trains every epoch).
    n_subheads : int, default=5
        Sub-heads per head (Ji et al.: 5), each a linear softmax layer
        trained alike from its own initialisation.
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
    subhead_losses_ : ndarray of shape (n_subheads,)
        Loss of each sub-head of the main head on the training ECGs (and one
        perturbed copy of them), after training.
    best_subhead_ : int
        The main head's sub-head of lowest loss, which ``predict`` uses.
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
    The heads alternate by epoch, as in Ji et al.'s code (one pass over the
    data for the main head, then one for the over-clustering head), and
    ``max_epochs`` counts these passes: each head gets half of them. The
    validation loss is the main head's, whatever head the epoch trained.

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
        "n_subheads": [Interval(Integral, 1, None, closed="left")],
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
        n_subheads=5,
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
        pretrained=None,
    ):
        self.n_clusters = n_clusters
        self.n_overclusters = n_overclusters
        self.n_subheads = n_subheads
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
        self.pretrained = pretrained

    def _build(self, n_leads, n_timepoints, seed):
        over = 5 * self.n_clusters if self.n_overclusters is None else self.n_overclusters
        module = IICModule(
            self._make_encoder(n_leads, n_timepoints),
            self.embedding_dim,
            self.n_clusters,
            over,
            self.n_subheads,
            self.perturbation,
            self.perturbation_scale,
        )
        return module, IICLoss(), [("alternate_heads", _AlternateHeads())]

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
        seed = self._train_encoder(X, np.zeros(len(X), dtype=np.int64), groups)
        self.subhead_losses_ = self._subhead_losses(X, seed)
        self.best_subhead_ = int(self.subhead_losses_.argmin())
        self.labels_ = self._proba(X).argmax(axis=1)
        self._fit_map(self.labels_, y)
        return self

    def _subhead_losses(self, X, seed):
        """Loss of each main sub-head on validated signals X and one seeded perturbed copy."""
        net, device = self.net_, torch.device(self.device)
        net.module_.train(False)
        parts = []
        with (
            torch.random.fork_rng(devices=[device] if device.type == "cuda" else []),
            torch.inference_mode(),
        ):
            torch.manual_seed(seed)
            for part in torch.as_tensor(X).split(net.inference_batch_size()):
                parts.append([p.float().cpu() for p in net.module_(part.to(device))[:2]])
        p, p_perturbed = (torch.cat(views) for views in zip(*parts))
        return subhead_losses(p, p_perturbed).numpy()

    def _proba(self, X):
        head = self.net_.module_.head
        with torch.inference_mode():
            embeddings = torch.from_numpy(self._encode(X)).to(head.linear.weight)
            return head(embeddings)[:, self.best_subhead_].float().cpu().numpy()

    def predict_proba(self, X):
        """Cluster probabilities of each ECG, from the main head's best sub-head.

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
