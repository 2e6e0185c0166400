"""DTCR (Ma et al. 2019): seq2seq reconstruction, a k-means loss and a real/fake classifier."""

import math
from numbers import Integral, Real

import numpy as np
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
    N_CLUSTERS_CONSTRAINT,
    TRAINING_CONSTRAINTS,
    AttributeMapMixin,
    EncoderModule,
    NeuralBaseline,
    fill_doc,
)

__all__ = ["DTCR"]

_D = CROCS_DEFAULTS


def fake_copies(x, alpha):
    """Copies of a batch ``(batch, leads, time)`` with a fraction ``alpha`` of time points shuffled.

    In each copy, ``round(alpha * time)`` randomly chosen time points (all
    leads together) exchange their values by a random permutation (Ma et
    al.'s "fake" series): the values stay, the temporal order breaks.
    """
    batch, _, length = x.shape
    m = round(alpha * length)
    chosen = torch.rand(batch, length, device=x.device).argsort(dim=1)[:, :m]
    order = torch.rand(batch, m, device=x.device).argsort(dim=1)
    source = chosen.gather(1, order)
    index = torch.arange(length, device=x.device).repeat(batch, 1)
    index.scatter_(1, chosen, source)  # position chosen[k] takes the value at source[k]
    return x.gather(-1, index[:, None, :].expand_as(x))


def spectral_indicator(h, n_clusters):
    """The relaxed cluster indicator ``F`` of the k-means loss: top eigenvectors of ``H H^T``.

    ``Tr(F^T H H^T F)`` over orthonormal ``F`` of ``n_clusters`` columns is
    largest for the leading eigenvectors of the Gram matrix (Ma et al.,
    after Zha et al. 2002); ``F`` is held fixed (no gradient).
    """
    gram = (h @ h.T).detach().double()
    k = min(n_clusters, h.shape[0])
    return torch.linalg.eigh(gram).eigenvectors[:, -k:].to(h.dtype)


def kmeans_loss(h, f):
    """Relaxed k-means loss ``Tr(H H^T) - Tr(F^T H H^T F)`` of a batch of embeddings ``h``.

    Parameters
    ----------
    h : torch.Tensor of shape (batch, embedding_dim)
        Embeddings.
    f : torch.Tensor of shape (batch, n_clusters)
        Orthonormal relaxed cluster indicator (:func:`spectral_indicator`).

    Returns
    -------
    loss : torch.Tensor
        The within-cluster sum of squares of the relaxed clustering.
    """
    projected = f.T @ h  # F^T H: Tr(F^T H H^T F) = ||F^T H||^2
    return (h * h).sum() - (projected * projected).sum()


class Seq2SeqAutoencoder(EncoderModule):
    """Encoder, recurrent (GRU) decoder and real/fake classifier of DTCR.

    The decoder starts from the embedding and runs ``n_decoder_steps`` GRU
    steps (the embedding is its input at every step), each of which emits
    the next ``ceil(n_timepoints / n_decoder_steps)`` samples of every lead.
    ``forward`` returns ``(embeddings, reconstruction, real/fake logits, x)``
    for the ECGs followed by their fake copies.
    """

    def __init__(self, encoder, n_leads, n_timepoints, embedding_dim, n_decoder_steps, alpha):
        super().__init__(encoder)
        self.n_timepoints = n_timepoints
        self.n_steps = min(n_decoder_steps, n_timepoints)
        self.chunk = math.ceil(n_timepoints / self.n_steps)
        self.alpha = alpha
        self.init_state = nn.Linear(embedding_dim, embedding_dim)
        self.gru = nn.GRU(embedding_dim, embedding_dim, batch_first=True)
        self.output = nn.Linear(embedding_dim, n_leads * self.chunk)
        self.classifier = nn.Sequential(
            nn.Linear(embedding_dim, embedding_dim), nn.ReLU(), nn.Linear(embedding_dim, 1)
        )

    def decode(self, h):
        state = torch.tanh(self.init_state(h))[None]
        steps, _ = self.gru(h[:, None, :].expand(-1, self.n_steps, -1).contiguous(), state)
        out = self.output(steps).view(h.shape[0], self.n_steps, -1, self.chunk)
        return out.permute(0, 2, 1, 3).flatten(2)[..., : self.n_timepoints]

    def forward(self, x):
        both = self.encoder(torch.cat([x, fake_copies(x, self.alpha)]))
        h = both[: len(x)]
        return h, self.decode(h), self.classifier(both).squeeze(1), x


class DTCRLoss(nn.Module):
    """Reconstruction MSE + real/fake cross-entropy + ``lam`` times :func:`kmeans_loss`."""

    def __init__(self, n_clusters, lam):
        super().__init__()
        self.n_clusters = n_clusters
        self.lam = lam

    def forward(self, outputs, target):
        h, reconstruction, logits, x = outputs
        real = torch.arange(len(logits), device=logits.device) < len(h)
        classification = F.binary_cross_entropy_with_logits(logits, real.to(logits.dtype))
        kmeans = kmeans_loss(h, spectral_indicator(h, self.n_clusters))
        return F.mse_loss(reconstruction, x) + classification + self.lam * kmeans


@fill_doc
class DTCR(AttributeMapMixin, NeuralBaseline):
    """Deep Temporal Clustering Representation: an autoencoder shaped for k-means.

    The network of Ma et al. (2019): an encoder (here the package's), a
    recurrent decoder that reconstructs the ECG from its embedding, and a
    classifier that tells real ECGs from "fake" copies in which a fraction
    ``alpha`` of the time points were shuffled. The loss adds the
    reconstruction error, the real/fake cross-entropy and ``lam`` times a
    relaxed k-means loss ``Tr(H H^T) - Tr(F^T H H^T F)`` on each mini-batch's
    embeddings ``H``, with ``F`` the leading eigenvectors of the batch's Gram
    matrix. After training, :class:`sklearn.cluster.KMeans` clusters the
    training embeddings; with the attributes ``y`` each cluster is named
    after the combination of its training ECGs (:func:`map_clusters`).

    Read more in the :ref:`User Guide <reproducing>`.

    Parameters
    ----------
    n_clusters : int, default=8
        Clusters of the k-means loss and of the final k-means.
    alpha : float, default=0.2
        Fraction of time points shuffled in the fake copies (the CROCS paper's 0.2).
    lam : float, default=1e-3
        Weight of the k-means loss (the CROCS paper's 1e-3).
    n_decoder_steps : int, default=50
        Steps of the GRU decoder.
    n_init : int, default=10
        Runs of the final k-means; the best is kept.
    mapping : {"majority", "hungarian"}, default="majority"
        How clusters are named from ``y`` (see :func:`map_clusters`).
    {training}
    {early_stopping}
    {run}

    Attributes
    ----------
    net_ : skorch.NeuralNet
        The fitted net.
    kmeans_ : sklearn.cluster.KMeans
        k-means fitted on the training embeddings.
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
    Simplified from Ma et al. (2019):

    - the package's encoder replaces their dilated recurrent network, so
      that every method of the CROCS paper's comparison shares one;
    - the GRU decoder emits ``ceil(n_timepoints / n_decoder_steps)``
      samples per step (``n_decoder_steps`` steps in all) where theirs
      emits one, which keeps training on 2500-sample ECGs affordable on a CPU.

    References
    ----------
    Q. Ma, J. Zheng, S. Li and G. W. Cottrell, "Learning Representations for
    Time Series Clustering", NeurIPS 2019.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.metrics import adjusted_rand_score
    >>> from sklearn_crocs.baselines import DTCR
    >>> rng = np.random.RandomState(0)
    >>> kind = np.repeat([0, 1], 30)
    >>> freq = np.where(kind == 1, 1.0, 3.0)[:, None]
    >>> X = np.sin(freq * np.linspace(0, 20, 400)) + 0.2 * rng.randn(60, 400)
    >>> model = DTCR(n_clusters=2, embedding_dim=32, max_epochs=20, lr=1e-3,
    ...              validation_fraction=None, random_state=0).fit(X)
    >>> adjusted_rand_score(kind, model.labels_)
    1.0
    """

    _parameter_constraints: dict = {
        **N_CLUSTERS_CONSTRAINT,
        "alpha": [Interval(Real, 0, 1, closed="both")],
        "lam": [Interval(Real, 0, None, closed="left")],
        "n_decoder_steps": [Interval(Integral, 1, None, closed="left")],
        "n_init": [Interval(Integral, 1, None, closed="left")],
        **MAPPING_CONSTRAINT,
        **TRAINING_CONSTRAINTS,
    }

    def __init__(
        self,
        *,
        n_clusters=8,
        alpha=0.2,
        lam=1e-3,
        n_decoder_steps=50,
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
        self.n_clusters = n_clusters
        self.alpha = alpha
        self.lam = lam
        self.n_decoder_steps = n_decoder_steps
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

    def _build(self, n_leads, n_timepoints, seed):
        module = Seq2SeqAutoencoder(
            self._make_encoder(n_leads, n_timepoints),
            n_leads,
            n_timepoints,
            self.embedding_dim,
            self.n_decoder_steps,
            self.alpha,
        )
        return module, DTCRLoss(self.n_clusters, self.lam), []

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y=None, groups=None):
        """Train the network; k-means on the training embeddings.

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
        self : DTCR
            The fitted estimator.
        """
        X = self._validate_signals(X, reset=True)
        if self.n_clusters > len(X):
            raise ValueError(f"n_clusters={self.n_clusters} is more than the {len(X)} ECGs.")
        seed = self._train_encoder(X, np.zeros(len(X), dtype=np.int64), groups)
        self.kmeans_ = KMeans(self.n_clusters, n_init=self.n_init, random_state=seed)
        self.labels_ = self.kmeans_.fit_predict(self._encode(X))
        self._fit_map(self.labels_, y)
        return self

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
