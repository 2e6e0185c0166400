"""The fitted prototypes of a prototype clusterer, with the attributes they stand for."""

import numpy as np

__all__ = ["FittedPrototypes"]


class FittedPrototypes:
    """Learned and mean prototypes of every attribute combination, and the attribute codec.

    One object holds what ``fit`` learns about the prototypes (a model file
    stores it: :mod:`sklearn_crocs._persistence._estimator`); the estimator's
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
