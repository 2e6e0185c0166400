"""Self-supervised pretraining of the ECG encoders on unlabelled signals, by contrast of views.

CLOCS (Kiyasseh, Zhu & Clifton, ICML 2021), the CROCS authors' prior method,
contrasts views of one ECG that share its physiology: adjacent segments in
time (CMSC), leads recorded at the same instant (CMLC), or both (CMSMLC).
With patient ids, the views of other recordings of the same patient are
positives too. The alternative ``method="augment"`` contrasts two randomly
perturbed windows of each recording instead (SimCLR's recipe for signals).
:class:`ContrastivePretrainer` learns an encoder of the package this way; a
:class:`~sklearn_crocs.CROCSClusterer` (or a baseline with an encoder) given
it as ``pretrained`` starts its encoder from it.
"""

from collections.abc import Mapping
from numbers import Integral, Real

import numpy as np
import torch
import torch.nn.functional as F
from sklearn.base import (
    BaseEstimator,
    ClassNamePrefixFeaturesOutMixin,
    TransformerMixin,
    _fit_context,
)
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import (
    check_array,
    check_consistent_length,
    check_is_fitted,
    validate_data,
)

from ._display import DocLinkMixin
from ._engine._nets import unit_rows
from ._guards import check_finite_embeddings
from ._persistence._pretrainer import PretrainerFile
from ._utils import _draw_seed
from .nn._encoders import ENCODERS, CNNEncoder, encoder_class

__all__ = ["ContrastivePretrainer", "clocs_loss"]


def clocs_loss(embeddings, groups, temperature=0.1):
    """Contrastive loss of CLOCS over the views of a batch of recordings.

    For every ordered pair of distinct views ``(a, b)`` and every recording
    ``i``, the cosine similarities of view ``a`` of ``i`` to view ``b`` of
    every recording in the batch, divided by ``temperature``, are turned
    into probabilities by a softmax; the loss of ``i`` is minus the mean
    log-probability of its positives (the recordings of the same group,
    ``i`` itself included). The result is the mean over recordings and view
    pairs. Ordered pairs make it symmetric, as CLOCS's two terms (rows and
    columns of each similarity matrix) are.

    Read more in the :ref:`User Guide <pretraining>`.

    Parameters
    ----------
    embeddings : torch.Tensor of shape (batch, n_views, embedding_dim)
        Embeddings of the views (not necessarily normalised).
    groups : torch.Tensor of shape (batch,)
        Patient id (any integer code) of each recording.
    temperature : float, default=0.1
        Temperature of the softmax.

    Returns
    -------
    loss : torch.Tensor
        A scalar.

    Examples
    --------
    >>> import torch
    >>> from sklearn_crocs import clocs_loss
    >>> z = torch.eye(4).repeat_interleave(2, dim=0).view(4, 2, 4)  # views agree
    >>> round(clocs_loss(z, torch.arange(4)).item(), 6)  # log(1 + 3 exp(-1 / 0.1))
    0.000136
    """
    z = F.normalize(embeddings, dim=-1)
    n_views = z.shape[1]
    # logits[a, b, i, j]: view a of recording i against view b of recording j.
    logits = torch.einsum("iae,jbe->abij", z, z) / temperature
    log_prob = torch.log_softmax(logits, dim=-1)
    positive = (groups[:, None] == groups[None, :]).to(z.dtype)
    per_anchor = -(log_prob * positive).sum(-1) / positive.sum(-1)
    distinct = ~torch.eye(n_views, dtype=torch.bool, device=z.device)
    return per_anchor[distinct].mean()


class ContrastivePretrainer(
    PretrainerFile, DocLinkMixin, ClassNamePrefixFeaturesOutMixin, TransformerMixin, BaseEstimator
):
    """Pretrain an ECG encoder on unlabelled signals by contrasting views of each one.

    The views of a recording are, by ``method``:

    - ``"cmsc"`` (CLOCS): its two adjacent halves in time;
    - ``"cmlc"`` (CLOCS): its leads, one at a time;
    - ``"cmsmlc"`` (CLOCS): each lead of each half;
    - ``"augment"``: two windows of a fraction ``crop`` of its samples at
      random offsets, drawn anew on every pass.

    Each view is then multiplied by a factor from ``N(1, amplitude_jitter^2)``
    and gets Gaussian noise of ``noise`` times its own standard deviation
    (per lead), so that two views cannot be matched by their amplitude alone;
    with both at 0, ``"cmsc"``, ``"cmlc"`` and ``"cmsmlc"`` are CLOCS as
    published. Views of one recording, and of recordings of the same patient
    when ``groups`` is given, are pulled together; views of the other
    recordings in the batch are pushed apart (:func:`clocs_loss`).

    The encoder is built for the views' shape (``input_shape_``): all the
    leads with ``"cmsc"`` and ``"augment"``, one lead with ``"cmlc"`` and
    ``"cmsmlc"``; with ``"cmsc"``, ``"cmsmlc"`` and ``"augment"`` it sees
    shorter signals than the recordings, which the ResNet (it pools over
    time) embeds at any length, the CNN (its linear layer takes one length)
    not. As ``pretrained=`` of an estimator, a single-lead encoder starts a
    multi-lead one with each filter of its first layer spread evenly over
    the leads (the "inflation" of Carreira & Zisserman, 2017: three copies
    of a lead are read as the single-lead encoder read it); a pretraining
    whose encoder cannot start the estimator's (the CNN with shorter views)
    is refused before it runs.

    Read more in the :ref:`User Guide <pretraining>`.

    Parameters
    ----------
    encoder : {"resnet", "cnn"} or torch.nn.Module subclass, default="resnet"
        The encoder, built as ``encoder(in_channels, n_timepoints,
        embedding_dim, **encoder_params)`` as by
        :class:`~sklearn_crocs.CROCSClusterer`.
    encoder_params : dict, default=None
        Further arguments of the encoder.
    embedding_dim : int, default=128
        Output dimension of the encoder.
    method : {"cmsc", "cmlc", "cmsmlc", "augment"}, default="cmsc"
        The views contrasted: segments, leads, both, or random windows.
    crop : float, default=0.5
        Fraction of the samples in each view of ``method="augment"``.
    amplitude_jitter : float, default=0.2
        Standard deviation of each view's amplitude factor.
    noise : float, default=0.1
        Standard deviation of the Gaussian noise added to each view, relative
        to the view's own per-lead standard deviation.
    temperature : float, default=0.1
        Temperature of the contrastive loss (CLOCS's value).
    max_epochs : int, default=20
        Passes over the recordings.
    batch_size : int, default=128
        Recordings per batch (each with all its views); the other recordings
        of a batch are the negatives.
    lr : float, default=1e-3
        Learning rate of Adam.
    device : str or torch.device, default="cpu"
        Where the encoder is trained and run.
    random_state : int, RandomState instance or None, default=None
        Seed of the initial parameters, of the batch order, of the views and
        of dropout. ``None`` draws a fresh seed from the operating system.
    verbose : int, default=0
        Print the loss after every epoch if above 0.

    Attributes
    ----------
    encoder_ : torch.nn.Module
        The pretrained encoder, in evaluation mode.
    input_shape_ : tuple of int
        ``(in_channels, n_timepoints)`` of the views the encoder was trained on.
    loss_curve_ : list of float
        Mean loss over the batches of each epoch.
    n_iter_ : int
        Epochs run.
    n_features_in_ : int
        Leads of the signals given to :meth:`fit`.

    See Also
    --------
    sklearn_crocs.CROCSClusterer : Its ``pretrained`` parameter takes a pretrainer.
    clocs_loss : The loss.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_crocs import ContrastivePretrainer
    >>> X = np.random.RandomState(0).randn(16, 2, 200).astype(np.float32)
    >>> pretrainer = ContrastivePretrainer(encoder_params={"channels": (4, 8)},
    ...                                    embedding_dim=8, max_epochs=2,
    ...                                    random_state=0).fit(X)
    >>> pretrainer.input_shape_  # two leads, half the samples
    (2, 100)
    >>> pretrainer.transform(X).shape
    (16, 8)
    """

    _parameter_constraints = {
        "encoder": [StrOptions(set(ENCODERS)), type],
        "encoder_params": [dict, None],
        "embedding_dim": [Interval(Integral, 1, None, closed="left")],
        "method": [StrOptions({"cmsc", "cmlc", "cmsmlc", "augment"})],
        "crop": [Interval(Real, 0, 1, closed="right")],
        "amplitude_jitter": [Interval(Real, 0, None, closed="left")],
        "noise": [Interval(Real, 0, None, closed="left")],
        "temperature": [Interval(Real, 0, None, closed="neither")],
        "max_epochs": [Interval(Integral, 1, None, closed="left")],
        "batch_size": [Interval(Integral, 2, None, closed="left")],
        "lr": [Interval(Real, 0, None, closed="neither")],
        "device": [str, torch.device],
        "random_state": ["random_state"],
        "verbose": ["verbose"],
    }

    def __init__(
        self,
        *,
        encoder="resnet",
        encoder_params=None,
        embedding_dim=128,
        method="cmsc",
        crop=0.5,
        amplitude_jitter=0.2,
        noise=0.1,
        temperature=0.1,
        max_epochs=20,
        batch_size=128,
        lr=1e-3,
        device="cpu",
        random_state=None,
        verbose=0,
    ):
        self.encoder = encoder
        self.encoder_params = encoder_params
        self.embedding_dim = embedding_dim
        self.method = method
        self.crop = crop
        self.amplitude_jitter = amplitude_jitter
        self.noise = noise
        self.temperature = temperature
        self.max_epochs = max_epochs
        self.batch_size = batch_size
        self.lr = lr
        self.device = device
        self.random_state = random_state
        self.verbose = verbose

    def _build_encoder(self, input_shape):
        encoder = encoder_class(self.encoder)
        return encoder(*input_shape, self.embedding_dim, **(self.encoder_params or {}))

    def _views(self, X, generator):
        """The views of a batch ``X`` (n, leads, samples): a tensor (n, n_views, channels, L)."""
        n, n_leads, n_samples = X.shape
        if self.method == "augment":
            length = max(1, round(self.crop * n_samples))
            offsets = torch.randint(n_samples - length + 1, (n, 2, 1, 1), generator=generator)
            index = (offsets + torch.arange(length)).expand(n, 2, n_leads, length)
            views = X[:, None].expand(n, 2, n_leads, n_samples).gather(3, index)
        elif self.method in ("cmsc", "cmsmlc"):
            half = n_samples // 2
            views = torch.stack([X[..., :half], X[..., half : 2 * half]], dim=1)
        else:
            views = X[:, None]
        if self.method in ("cmlc", "cmsmlc"):
            # Every lead of every segment becomes a single-lead view.
            views = views.reshape(n, -1, 1, views.shape[-1])
        if self.amplitude_jitter:
            factors = torch.randn(*views.shape[:2], 1, 1, generator=generator)
            views = views * (1 + self.amplitude_jitter * factors)
        if self.noise:
            scale = self.noise * views.std(dim=-1, keepdim=True)
            views = views + scale * torch.randn(views.shape, generator=generator)
        return views

    def _check_views(self, n_leads, n_samples):
        if self.method in ("cmsc", "cmsmlc") and n_samples < 2:
            raise ValueError(f"method={self.method!r} halves the recordings; got 1 sample.")
        if self.method in ("cmlc", "cmsmlc") and n_leads < 2:
            raise ValueError(f"method={self.method!r} contrasts leads; X has one lead.")

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y=None, groups=None):
        """Pretrain the encoder on the recordings X.

        Parameters
        ----------
        X : array-like of shape (n_recordings, n_leads, n_samples)
            Unlabelled signals.
        y : None
            Ignored.
        groups : array-like of shape (n_recordings,), default=None
            Patient id of each recording: the views of recordings of the same
            patient are positives too. ``None``: each recording is its own
            patient.

        Returns
        -------
        self : ContrastivePretrainer
            The fitted pretrainer.
        """
        X = validate_data(self, X, allow_nd=True, dtype=np.float32, reset=True)
        if X.ndim != 3:
            raise ValueError(
                f"X must have shape (n_recordings, n_leads, n_samples); got {X.shape}."
            )
        if len(X) < 2:
            raise ValueError("fit needs at least 2 recordings: the others are the negatives.")
        self._check_views(*X.shape[1:])
        if groups is None:
            codes = np.arange(len(X))
        else:
            check_consistent_length(X, groups)
            codes = np.unique(np.asarray(groups), return_inverse=True)[1].ravel()
        X, codes = torch.from_numpy(X), torch.from_numpy(codes)
        device = torch.device(self.device)
        seed = _draw_seed(self.random_state)
        draws = torch.Generator().manual_seed(seed)
        self.input_shape_ = tuple(self._views(X[:1], draws).shape[2:])
        # A fit uses its own random stream: it neither reads nor moves the global one.
        with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []):
            torch.manual_seed(seed)
            encoder = self._build_encoder(self.input_shape_).to(device)
            optimizer = torch.optim.Adam(encoder.parameters(), lr=self.lr)
            n = len(X)
            # A last batch of one recording has no negative: it joins the previous one.
            n_batches = max(1, n // self.batch_size)
            self.loss_curve_ = []
            encoder.train()
            for epoch in range(self.max_epochs):
                total = 0.0
                for batch in torch.tensor_split(torch.randperm(n, generator=draws), n_batches):
                    views = self._views(X[batch], draws).to(device)
                    z = encoder(views.flatten(0, 1)).view(len(batch), views.shape[1], -1)
                    loss = clocs_loss(z, codes[batch].to(device), self.temperature)
                    optimizer.zero_grad()
                    loss.backward()
                    optimizer.step()
                    total += loss.item()
                self.loss_curve_.append(total / n_batches)
                if self.verbose:
                    print(f"epoch {epoch + 1}: loss {self.loss_curve_[-1]:.4f}")
        self.encoder_ = encoder.eval()
        self.n_iter_ = self.max_epochs
        return self

    def transform(self, X):
        """L2-normalised embeddings of signals by the pretrained encoder.

        Parameters
        ----------
        X : array-like of shape (n_samples, in_channels, n_timepoints)
            Signals with the views' channels (``input_shape_[0]``); with the
            ResNet, any number of time points.

        Returns
        -------
        embeddings : ndarray of shape (n_samples, embedding_dim), dtype float32
            Unit-norm embeddings.
        """
        check_is_fitted(self)
        # Not validate_data: with "cmlc" the encoder takes one lead of the fit's signals.
        X = check_array(X, allow_nd=True, dtype=np.float32)
        in_channels, n_timepoints = self.input_shape_
        if X.ndim != 3 or X.shape[1] != in_channels:
            raise ValueError(
                f"The encoder takes signals of shape (n, {in_channels}, n_timepoints); "
                f"got {X.shape}."
            )
        if isinstance(self.encoder_, CNNEncoder) and X.shape[2] != n_timepoints:
            raise ValueError(
                f"The CNN encoder was built for {n_timepoints} time points (its linear layer "
                f"takes one length only); got {X.shape[2]}."
            )
        device = next(self.encoder_.parameters()).device
        parts = []
        with torch.inference_mode():
            for batch in torch.split(torch.from_numpy(np.ascontiguousarray(X)), 256):
                parts.append(unit_rows(self.encoder_(batch.to(device))).cpu())
        embeddings = torch.cat(parts).numpy()
        check_finite_embeddings(embeddings)
        return embeddings

    @property
    def _n_features_out(self):
        return self.embedding_dim

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.three_d_array = True
        tags.transformer_tags.preserves_dtype = ["float32"]
        return tags

    # ------------------------------------------------------------ model files
    def save(self, path, *, overwrite=False):
        """Write the pretrained encoder to a file that runs no code when loaded.

        A safetensors file, as :meth:`CROCSClusterer.save
        <sklearn_crocs.CROCSClusterer.save>` writes: the encoder's weights and
        a JSON document with the parameters (a custom encoder class by name
        only), ``input_shape_``, ``loss_curve_`` and the library versions.

        Parameters
        ----------
        path : str or path-like
            File to write. A model file already there is replaced atomically;
            any other file is refused.
        overwrite : bool, default=False
            Replace ``path`` even if it is not a model file of this package.
            A symbolic link at ``path`` is refused either way: no file is
            written through a link or in place of one.

        Returns
        -------
        self : ContrastivePretrainer
            The pretrainer, unchanged.

        Examples
        --------
        >>> import os, tempfile
        >>> import numpy as np
        >>> from sklearn_crocs import ContrastivePretrainer
        >>> X = np.random.RandomState(0).randn(16, 2, 200).astype(np.float32)
        >>> pretrainer = ContrastivePretrainer(encoder_params={"channels": (4, 8)},
        ...                                    embedding_dim=8, max_epochs=1,
        ...                                    random_state=0).fit(X)
        >>> with tempfile.TemporaryDirectory() as folder:
        ...     path = os.path.join(folder, "encoder.safetensors")
        ...     _ = pretrainer.save(path)
        ...     loaded = ContrastivePretrainer.load(path)
        >>> np.array_equal(loaded.transform(X), pretrainer.transform(X))
        True
        """
        check_is_fitted(self)
        self._write_file(path, overwrite=overwrite)
        return self

    @classmethod
    def load(cls, path, *, device=None, encoder=None, sha256=None):
        """Read a pretrainer written by :meth:`save`; nothing in the file is executed.

        The file is refused with an :class:`~sklearn_crocs.InvalidModelFileError`
        when it is damaged or altered (its tensors differ from its document,
        or its document from its SHA-256) or does not describe a valid
        pretrainer.

        Parameters
        ----------
        path : str or path-like
            A file written by :meth:`save`.
        device : str or torch.device, default=None
            Device of the loaded encoder. ``None``: the saved ``device`` if
            torch can use it here, else the CPU, with a warning.
        encoder : nn.Module subclass, default=None
            The encoder class, for a pretrainer with a custom encoder class:
            the file records only its name.
        sha256 : str, default=None
            The SHA-256 of the whole file, as published by its source: a file
            with another hash is refused before it is parsed.

        Returns
        -------
        pretrainer : ContrastivePretrainer
            The fitted pretrainer, with the saved encoder.
        """
        return cls._read_file(path, device=device, encoder=encoder, sha256=sha256)


def fit_weights(target, weights):
    """``weights`` shaped for the state dict ``target``, or ValueError.

    The keys and shapes must be equal, with one exception: a single-lead
    encoder (``method="cmlc"`` or ``"cmsmlc"``) starts a multi-lead one by
    spreading each filter of its first layer evenly over the leads (the
    "inflation" of Carreira & Zisserman, 2017), so that the multi-lead
    encoder first reads the mean of the leads as the pretrained one read a lead.
    """
    problems = sorted(set(target) ^ set(weights))
    fitted = {}
    for key, value in target.items():
        if key not in weights:
            continue
        weight = weights[key]
        if (
            weight.ndim >= 3
            and weight.shape[1] == 1
            and weight.shape[:1] + weight.shape[2:] == value.shape[:1] + value.shape[2:]
        ):
            weight = weight.expand(value.shape) / value.shape[1]
        if weight.shape != value.shape:
            problems.append(f"{key} {tuple(weights[key].shape)} != {tuple(value.shape)}")
        fitted[key] = weight
    if problems:
        raise ValueError(
            "The pretrained encoder does not fit this one (build both with the same encoder, "
            "encoder_params, embedding_dim and leads; the CNN with the same time points): "
            f"{', '.join(problems[:5])}."
        )
    return fitted


def check_starts(pretrainer, input_shape):
    """Raise ValueError, before any training, unless the encoder that the unfitted
    ``pretrainer`` fits on recordings of ``input_shape`` (leads, samples) can start one
    built for them with its settings."""
    pretrainer._check_views(*input_shape)
    views = torch.zeros(1, *input_shape)
    views = tuple(pretrainer._views(views, torch.Generator()).shape[2:])
    try:
        with torch.device("meta"):
            fit_weights(
                pretrainer._build_encoder(input_shape).state_dict(),
                pretrainer._build_encoder(views).state_dict(),
            )
    except ValueError as exc:
        raise ValueError(
            f"method={pretrainer.method!r} pretrains the encoder on views of {views[0]} "
            f"lead(s) x {views[1]} samples, and with encoder={pretrainer.encoder!r} its weights "
            f"cannot start the estimator's for {input_shape[0]} x {input_shape[1]}: {exc} The "
            "ResNet (encoder='resnet') embeds any length."
        ) from None


def init_encoder(module, pretrained):
    """Copy the encoder of a fitted pretrainer into ``module`` in place; return ``module``.

    ``pretrained`` is a fitted :class:`ContrastivePretrainer` or a state dict;
    ``module`` must have the same keys and shapes (the same class,
    ``encoder_params``, ``embedding_dim`` and leads, and for the CNN the
    same time points), or be the multi-lead version of a single-lead
    encoder (see :func:`fit_weights`).
    """
    if isinstance(pretrained, ContrastivePretrainer):
        check_is_fitted(pretrained)
        pretrained = pretrained.encoder_.state_dict()
    if not isinstance(pretrained, Mapping):
        raise TypeError(f"pretrained must be a fitted ContrastivePretrainer; got {pretrained!r}.")
    module.load_state_dict(fit_weights(module.state_dict(), pretrained))
    return module
