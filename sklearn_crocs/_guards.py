"""Checks around a CROCSClusterer: the memory a fit will need, whether training worked,
and whether its embeddings are finite."""

import math

import numpy as np
import psutil
import torch
from sklearn.exceptions import ConvergenceWarning

from ._config import get_config
from ._utils import _warn

# A contrastive loss above this means the similarities are scaled far beyond
# what training can use: with cosine similarities in [-1, 1] the NCE loss is
# at most 2 / tau_s + log(n_prototypes), about 30 for the paper's tau_s=0.1.
_NCE_LIMIT = 1e4
# Embeddings whose values spread less than this over all training ECGs (in
# every dimension) are one vector, up to rounding.
_COLLAPSE_SPREAD = 1e-6
# Stored activations of one training step, in multiples of the largest one:
# the forward pass keeps the outputs of every layer for the backward pass.
_ACTIVATION_COPIES = 8


def available_memory():
    """Bytes of memory available to a new allocation (psutil's ``available``)."""
    return psutil.virtual_memory().available


def activation_size(encoder, n_leads, n_timepoints, embedding_dim, encoder_params):
    """Elements per ECG of the encoder's largest tensor, from an instance on the meta device.

    The package's encoders say (``max_activation_size``); for another module,
    or one that cannot be built on the meta device, the input size.
    """
    try:
        with torch.random.fork_rng(devices=[]), torch.device("meta"):
            module = encoder(
                in_channels=n_leads,
                n_timepoints=n_timepoints,
                embedding_dim=embedding_dim,
                **encoder_params,
            )
        return int(module.max_activation_size)
    except Exception:  # the real construction in fit reports a bad encoder
        return n_leads * n_timepoints


def fit_memory(*, dims, class_index, embedding_dim, batch_size, activation_size):
    """Estimated peak bytes of a fit, by part.

    Parameters
    ----------
    dims : tuple of int
        Number of values of each attribute; their product is the number of
        prototypes ``M``.
    class_index : int
        Position of the class attribute in ``dims``.
    embedding_dim, batch_size : int
        The estimator's parameters.
    activation_size : int
        Elements per ECG of the encoder's largest tensor.

    Returns
    -------
    parts : dict of str to int
        ``"weight table"``: building the M x M soft weights, Hamming distances
        and class masks (float64 temporaries, then float32 buffers);
        ``"prototype pairs"``: the regulariser's same-class pairs (indices,
        gathered prototypes and their gradients); ``"prototypes"``: parameter,
        gradient and Adam's two moments; ``"batch"``: one step's activations
        and its B x M logits with their gradients.
    """
    m = math.prod(dims)
    n_attributes = len(dims)
    per_class = m // dims[class_index]
    pairs = dims[class_index] * per_class * (per_class - 1) // 2
    return {
        "weight table": m * m * (n_attributes + 8 * 4 + 4 * 2 + 1),
        "prototype pairs": pairs * (2 * 8 * 2 + 6 * embedding_dim * 4),
        "prototypes": m * embedding_dim * 4 * 6,
        "batch": batch_size * (activation_size * 4 * _ACTIVATION_COPIES + m * 4 * 6),
    }


def _gb(n):
    return f"{n / 1e9:.2g} GB"


def check_fit_memory(estimator, codec, class_index, activation_size):
    """Raise ValueError, before anything is allocated, if a fit would exceed the budget.

    The budget is the ``memory_budget`` of :func:`sklearn_crocs.get_config`;
    ``codec`` and ``class_index`` describe the attributes of ``y`` (see
    :class:`~sklearn_crocs._attributes.AttributeCodec`).
    """
    budget = setting = get_config()["memory_budget"]
    if budget is None:
        return
    if budget == "auto":
        budget = available_memory() // 2
    dims = codec.shape
    parts = fit_memory(
        dims=dims,
        class_index=class_index,
        embedding_dim=estimator.embedding_dim,
        batch_size=estimator.batch_size,
        activation_size=activation_size,
    )
    total = sum(parts.values())
    if total <= budget:
        return
    largest = max(parts, key=parts.get)
    if largest == "batch":
        cause = (
            f"batch_size={estimator.batch_size}: one training step on ECGs of "
            f"{estimator.input_shape_[0]} lead(s) x {estimator.input_shape_[1]} samples. "
            "Lower batch_size, or shorten or downsample the ECGs"
        )
    elif largest == "prototype pairs" and parts["prototype pairs"] > 4 * parts["weight table"]:
        cause = (
            f"embedding_dim={estimator.embedding_dim} times the same-class pairs of "
            f"prototypes. Lower embedding_dim, or set beta=0 to drop the regulariser"
        )
    else:
        cause = (
            f"y: {math.prod(dims)} attribute combinations "
            f"({' x '.join(map(str, dims))} values of {codec.names}), each "
            "pair of which has an entry in the weight tables. Bin continuous attributes "
            "into a few groups or drop an attribute"
        )
    listed = ", ".join(f"{name} {_gb(n)}" for name, n in parts.items())
    raise ValueError(
        f"This fit needs about {_gb(total)} of memory ({listed}), more than "
        f"memory_budget={setting!r} ({_gb(budget)}). Most of it comes from {cause}; or "
        "raise the budget with sklearn_crocs.config_context(memory_budget=<bytes>) "
        "(None turns this check off)."
    )


def _abs_max(X, rows=4096):
    """Largest absolute value of X, read ``rows`` at a time (X may be a lazy array)."""
    return max(float(np.abs(np.asarray(X[i : i + rows])).max()) for i in range(0, X.shape[0], rows))


def check_training(history, spread, X):
    """Warn when training failed: a non-finite or exploding loss, else collapsed embeddings.

    ``spread``: the largest range of an embedding dimension over the training
    ECGs (NaN if an embedding is not finite); ``X``: the training signals.
    """
    scale = (
        "normalise each frame, e.g. with sklearn_crocs.preprocessing.FrameNormalizer before "
        "the clusterer in a Pipeline"
    )
    losses = np.asarray(history[:, "train_loss"], dtype=float)
    nce = np.asarray(history[:, "train_nce"], dtype=float)
    if not np.isfinite(losses).all():
        epoch = int(np.flatnonzero(~np.isfinite(losses))[0]) + 1
        message = (
            f"The training loss became {losses[epoch - 1]} in epoch {epoch}: training "
            f"diverged and the model is not usable. Scale the input ({scale}), lower lr, "
            "or raise tau_s."
        )
    elif nce.max() > _NCE_LIMIT:
        message = (
            f"The contrastive loss reached {nce.max():.3g}, far above the at most "
            "about 2 / tau_s + log(n_prototypes) of similarities at a sensible scale: "
            "tau_s is so small that the softmax is saturated and training learns "
            "nothing. Use tau_s around 0.1 (the paper's value)."
        )
    elif not np.isfinite(spread) or spread <= _COLLAPSE_SPREAD:
        message = (
            f"All {X.shape[0]} training ECGs have the same embedding (fewer than 2 "
            "distinct ones): the encoder's output collapsed, and every ECG gets the "
            "same prototype. The usual cause is input far from unit scale (the largest "
            f"absolute value here is {_abs_max(X):.3g}): {scale}. Otherwise, "
            "lr or tau_s may be far from their defaults."
        )
    else:
        return
    _warn(message, ConvergenceWarning)


class NonFiniteEmbeddingError(ValueError):
    """A model embedded some ECGs as NaN or infinity; ``rows`` are their positions."""

    def __init__(self, rows, n_rows):
        self.rows, self.n_rows = np.asarray(rows), n_rows
        shown = ", ".join(map(str, self.rows[:10].tolist()))
        more = f" and {len(self.rows) - 10} more" if len(self.rows) > 10 else ""
        super().__init__(
            f"The embeddings of row(s) {shown}{more} ({len(self.rows)} of {n_rows} ECGs) "
            "are not finite (NaN or infinity): the model's weights overflow on these "
            "inputs, so they have no nearest prototype. Look at these ECGs for spikes or "
            "a wrong scale; if they are ordinary ECGs, the model is faulty: fit it again "
            "or load a model file you trust."
        )

    def at(self, positions, n_rows):
        """The same error for an input whose rows were ``positions`` of ``n_rows`` ECGs."""
        return NonFiniteEmbeddingError(np.asarray(positions)[self.rows], n_rows)


def check_finite_embeddings(embeddings, rows=None, n_rows=None):
    """Raise :class:`NonFiniteEmbeddingError` unless every row of ``embeddings`` is finite.

    ``rows``: the positions of the rows in the caller's input of ``n_rows``
    ECGs (default: the rows themselves), named in the message. Used on every
    embedding of unseen ECGs, whatever a model file holds: a NaN embedding
    would otherwise be "nearest" to the first prototype.
    """
    embeddings = np.asarray(embeddings)
    bad = ~np.isfinite(embeddings).all(axis=1)
    if bad.any():
        positions = np.flatnonzero(bad) if rows is None else np.asarray(rows)[bad]
        raise NonFiniteEmbeddingError(positions, len(embeddings) if n_rows is None else n_rows)
