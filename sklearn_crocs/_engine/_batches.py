"""Embedding a database of ECGs batch by batch, in memory or into a ``.npy`` file.

The retriever's kernel for indexing: any fitted estimator with a
``transform`` (a ``CROCSClusterer``, or a Pipeline ending in one), any number
of rows, records of different lengths.
"""

import numpy as np
from tqdm import tqdm

from .._guards import NonFiniteEmbeddingError
from .._utils import _length_groups

__all__ = ["embed_rows"]


def _rows(X, start, stop):
    return X.iloc[start:stop] if hasattr(X, "iloc") else X[start:stop]


def _transform(estimator, rows, rate, positions, n_rows):
    """Float32 embeddings of ``rows``, ``positions`` of ``n_rows`` ECGs (named in errors).

    A list of records of different lengths goes in one length at a time.
    """
    groups = _length_groups(rows)
    if groups is None:
        try:
            return np.asarray(estimator.transform(rows, **rate), dtype=np.float32)
        except NonFiniteEmbeddingError as exc:
            raise exc.at(positions, n_rows) from None
    parts = [
        _transform(estimator, np.stack([rows[i] for i in g]), rate, positions[g], n_rows)
        for g in groups
    ]
    return np.concatenate(parts)[np.argsort(np.concatenate(groups))]  # back in order


def embed_rows(estimator, X, n_samples, rate, *, batch_size, path=None, verbose=False):
    """Embeddings by ``estimator`` of the ``n_samples`` rows of X, in memory or in ``path``.

    ``rate``: keyword arguments of ``transform`` (``{"sampling_rate": ...}``
    or none); ``path``: a ``.npy`` file written as the batches come, returned
    as its writable memory map. A non-finite embedding raises
    :class:`~sklearn_crocs._guards.NonFiniteEmbeddingError` naming its rows of X.
    """
    embeddings = None
    with tqdm(total=n_samples, desc="Embedding", unit="ECG", disable=not verbose) as bar:
        for start in range(0, n_samples, batch_size):
            stop = min(start + batch_size, n_samples)
            out = _transform(
                estimator, _rows(X, start, stop), rate, np.arange(start, stop), n_samples
            )
            if embeddings is None:
                shape = (n_samples, out.shape[1])
                embeddings = (
                    np.empty(shape, dtype=np.float32)
                    if path is None
                    else np.lib.format.open_memmap(path, mode="w+", dtype=np.float32, shape=shape)
                )
            embeddings[start:stop] = out
            bar.update(stop - start)
    return embeddings
