"""Embedding dask arrays block by block, on the workers of a dask cluster.

Needs the ``dask`` extra (``pip install "sklearn-crocs[dask]"``). For
hyperparameter searches on a cluster, scikit-learn's own searches run
through joblib's dask backend unchanged (see the user guide's
:ref:`cluster` page).
"""

import numpy as np
from sklearn.utils.validation import check_is_fitted

from ._guards import NonFiniteEmbeddingError

__all__ = ["map_blocks"]

_METHODS = ("transform", "predict_proba")


def _dask_array():
    try:
        import dask
        import dask.array as da
    except ImportError as exc:  # the optional extra
        raise ImportError(
            "sklearn_crocs.parallel needs dask: pip install 'sklearn-crocs[dask]'"
        ) from exc
    return dask, da


def _apply(block, estimator, method, n_rows, block_info=None):
    try:
        return getattr(estimator, method)(block)
    except NonFiniteEmbeddingError as exc:  # named by their rows of the whole array
        start = block_info[0]["array-location"][0][0]
        raise exc.at(np.arange(start, start + len(block)), n_rows) from None


def map_blocks(estimator, X, *, method="transform"):
    """Apply a fitted estimator to each block of ECGs of a dask array, lazily.

    Each block of whole ECGs (the array is rechunked along the leads and
    time axes only if they are split) goes through ``estimator``'s
    ``method`` where the block lies: on the workers of a
    :class:`dask.distributed.Client` if one is active, otherwise on dask's
    local scheduler. The estimator is sent to each worker once. Nothing
    runs until the result is computed.

    Read more in the :ref:`User Guide <cluster>`.

    Parameters
    ----------
    estimator : CROCSClusterer
        A fitted clusterer (or any fitted estimator with ``prototypes_``
        and the method named by ``method``).
    X : dask.array.Array of shape (n_samples, n_leads, n_timepoints) or (n_samples, n_timepoints)
        ECGs, chunked along the first axis.
    method : {"transform", "predict_proba"}, default="transform"
        ``"transform"``: the unit-norm embeddings; ``"predict_proba"``: the
        probabilities of each prototype.

    Returns
    -------
    result : dask.array.Array of shape (n_samples, embedding_dim) or (n_samples, n_prototypes)
        float32, chunked as ``X`` along the first axis.

    Examples
    --------
    >>> import dask.array as da
    >>> import numpy as np
    >>> from sklearn_crocs import CROCSClusterer
    >>> from sklearn_crocs.parallel import map_blocks
    >>> rng = np.random.RandomState(0)
    >>> X = rng.randn(40, 1, 500).astype(np.float32)
    >>> y = np.column_stack([rng.randint(0, 2, 40), rng.randint(0, 2, 40)])
    >>> model = CROCSClusterer(encoder="cnn", embedding_dim=16, max_epochs=2,
    ...                        random_state=0).fit(X, y)
    >>> embeddings = map_blocks(model, da.from_array(X, chunks=16))
    >>> embeddings.shape, embeddings.chunks[0]
    ((40, 32), (16, 16, 8))
    >>> np.allclose(embeddings.compute(), model.transform(X), atol=1e-6)
    True
    """
    dask, da = _dask_array()
    if method not in _METHODS:
        raise ValueError(f"method must be one of {_METHODS}, got {method!r}.")
    check_is_fitted(estimator)
    if not isinstance(X, da.Array):
        raise TypeError(
            f"X must be a dask array, got {type(X).__name__}; call the estimator's "
            f"{method} directly on in-memory arrays."
        )
    if X.ndim not in (2, 3):
        raise ValueError(f"X must have 2 or 3 dimensions, got shape {X.shape}.")
    X = X.rechunk({axis: -1 for axis in range(1, X.ndim)})  # whole ECGs per block
    n_prototypes, embedding_dim = estimator.prototypes_.shape
    width = embedding_dim if method == "transform" else n_prototypes
    return da.map_blocks(
        _apply,
        X,
        # A delayed estimator enters the graph once, not once per block.
        dask.delayed(estimator, pure=True),
        method,
        X.shape[0],
        drop_axis=list(range(2, X.ndim)),
        chunks=(X.chunks[0], (width,)),
        dtype=np.float32,
        meta=np.empty((0, 0), dtype=np.float32),
    )
