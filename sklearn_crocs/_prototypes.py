"""The fitted prototypes of a prototype clusterer, with the attributes they stand for."""

import math

import numpy as np

from ._attributes import MAX_COMBINATIONS, AttributeCodec
from ._persistence import (
    InvalidModelFileError,
    decode_dtype,
    decode_values,
    encode_dtype,
    encode_values,
)

__all__ = ["FittedPrototypes"]


class FittedPrototypes:
    """Learned and mean prototypes of every attribute combination, and the attribute codec.

    One object holds what ``fit`` learns about the prototypes and writes it
    to a model file (:meth:`to_state`, :meth:`from_state`); the estimator's
    ``prototypes_``, ``prototype_counts_``, ``class_index_``... are views of it.

    Parameters
    ----------
    codec : AttributeCodec
        The attributes as ``fit`` saw them.
    class_index : int
        Position of the class attribute in ``codec.names``.
    learned : ndarray of shape (n_combinations, embedding_dim)
        L2-normalised learned prototypes, one per combination.
    means : ndarray of shape (n_combinations, embedding_dim)
        L2-normalised mean training embedding of each combination (NaN
        without training ECGs).
    counts : ndarray of shape (n_combinations,)
        Training ECGs of each combination with all attributes known.
    kind : {"learned", "mean"}
        The set that ``prototypes`` gives.
    """

    def __init__(self, codec, class_index, learned, means, counts, kind):
        self.codec = codec
        self.class_index = class_index
        self.learned = learned
        self.means = means
        self.counts = counts
        self.kind = kind
        used = self.used()
        self.combinations = np.flatnonzero(used)  # of each prototype of the chosen set
        self.prototypes, self.attributes = self.get()
        self.prototype_counts = counts[used]

    def used(self, kind=None):
        """Which combinations have a prototype in the ``kind`` set (default: ``self.kind``)."""
        if (self.kind if kind is None else kind) == "mean":
            return self.counts > 0
        return np.ones(len(self.counts), dtype=bool)

    def get(self, kind=None):
        """``(prototypes, attribute values)`` of the ``kind`` set (default: ``self.kind``)."""
        kind = self.kind if kind is None else kind
        used = self.used(kind)
        prototypes = self.means[used] if kind == "mean" else self.learned
        return prototypes, self.codec.values[used]

    def to_state(self):
        """``(document, tensors)``: JSON fields and arrays for a model file."""
        codec = self.codec
        document = {
            "attribute_names": codec.names,
            "categories": [
                encode_values(c, f"categories_ of attribute {n!r}")
                for n, c in zip(codec.names, codec.categories)
            ],
            "attribute_dtypes": [
                encode_dtype(d, f"the dtype of attribute {n!r}")
                for n, d in zip(codec.names, codec.dtypes)
            ],
            "y_kind": codec.layout,
            "bin_edges": {name: edges.tolist() for name, edges in codec.bin_edges.items()},
            "class_index": self.class_index,
        }
        tensors = {
            "learned_prototypes": self.learned,
            "mean_prototypes": self.means,
            "prototype_counts": self.counts.astype(np.int64),
        }
        return document, tensors

    @classmethod
    def from_state(cls, document, tensors, *, embedding_dim, kind, path):
        """Rebuild from :meth:`to_state`'s fields, checked against each other.

        The document's fields have been type-checked; a size that does not
        match raises ``ValueError``, values no fit produces an
        :class:`~sklearn_crocs.InvalidModelFileError`.
        """
        categories = [decode_values(c) for c in document["categories"]]
        names = document["attribute_names"]
        if len(set(names)) != len(names):
            raise ValueError(f"the attribute names {names[:20]} are not distinct")
        for name, values in zip(names, categories):
            # True == 1 in a set, as in the pandas index that query() builds from them.
            items = values.tolist()
            if len(set(items)) != len(items) or len({type(v) for v in items}) > 1:
                raise ValueError(
                    f"the categories of {name!r} ({items[:10]}) are not distinct values of one type"
                )
        dtypes = [decode_dtype(d) for d in document["attribute_dtypes"]]
        n_combinations = math.prod(len(c) for c in categories)
        shape = (n_combinations, embedding_dim)
        learned = tensors["learned_prototypes"]
        # Sizes the document declares, against the tensors, before anything is
        # allocated from them.
        if n_combinations > MAX_COMBINATIONS or tuple(learned.shape) != shape:
            raise ValueError(
                f"the categories give {n_combinations} attribute combinations and "
                f"embedding_dim={embedding_dim}, but the learned prototypes have shape "
                f"{tuple(learned.shape)}"
            )
        codec = AttributeCodec(
            document["attribute_names"], categories, dtypes, document["y_kind"],
            document.get("bin_edges"),
        )  # fmt: skip
        if not 0 <= document["class_index"] < len(codec.names):
            raise ValueError("inconsistent attribute description")
        means = tensors["mean_prototypes"].numpy()
        counts = tensors["prototype_counts"].numpy()
        if means.shape != shape or counts.shape != (n_combinations,):
            raise ValueError(
                f"prototype tensors do not have the shape {shape} that the categories and "
                "embedding_dim give"
            )
        if (counts < 0).any() or not np.isfinite(means[counts > 0]).all():
            raise InvalidModelFileError(
                f"{path}: tensor 'mean_prototypes' holds NaN or infinite values for attribute "
                "combinations with training ECGs (or prototype_counts is negative), which no "
                "fitted model has; the file was altered. Fit and save the model again."
            )
        # Both sets are stored L2-normalised: a row of another length (3e38, or
        # zeros) would make every similarity to it infinite, NaN or 0.
        for name, rows in (
            ("learned_prototypes", learned.numpy()),
            ("mean_prototypes", means[counts > 0]),
        ):
            norms = np.linalg.norm(rows.astype(np.float64), axis=1)
            if not np.all(np.abs(norms - 1) <= 1e-3):
                raise InvalidModelFileError(
                    f"{path}: tensor {name!r} holds rows that are not unit vectors (lengths "
                    f"up to {norms.max():.3g}), which no fitted model has; the file was "
                    "altered. Fit and save the model again."
                )
        return cls(codec, document["class_index"], learned.numpy(), means, counts, kind)
