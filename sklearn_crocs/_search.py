"""Exact nearest-neighbour search by blockwise matrix products.

The package's one search: :class:`~sklearn_crocs.PrototypeRetriever` and the
retrieval metrics call :func:`top_k`.
"""

import numpy as np
import torch
from sklearn import get_config

__all__ = ["BLOCK_ROWS", "exact_distances", "half_squared_norms", "top_k"]

# Database rows per block. A block's float32 copy (32 MiB at 128 dimensions,
# for a memory map) and its scores (256 KiB per query) bound the memory of a
# search, whatever the size of the database; fewer, larger products ran faster
# than blocks of 16,384 rows (benchmarks/RESULTS.md).
BLOCK_ROWS = 65536
# Rows per chunk whose maximum is taken before the top k are selected (see _largest).
_CHUNK = 64


def half_squared_norms(database, *, block_rows=BLOCK_ROWS):
    """``-|e|^2 / 2`` of every database row (float32), read ``block_rows`` rows at a time.

    What :func:`top_k` adds to each block's products; a database searched
    repeatedly passes them as ``half_sq_norms`` to save that pass over it.
    """
    out = np.empty(len(database), dtype=np.float32)
    for start in range(0, len(database), block_rows):
        out[start : start + block_rows] = _half_sq_norms(_block(database, start, block_rows))
    return out


def _block(database, start, block_rows):
    """Rows ``start:start + block_rows`` of the database as a float32 tensor."""
    block = np.asarray(database[start : start + block_rows], dtype=np.float32)
    if not block.flags.writeable:  # a read-only memory map, which torch will not share
        block = block.copy()
    return torch.from_numpy(block)


def _half_sq_norms(block):
    return torch.linalg.vector_norm(block, dim=1).square_().mul_(-0.5)


def top_k(queries, database, k, *, block_rows=BLOCK_ROWS, half_sq_norms=None):
    """The ``k`` database rows nearest to each query in Euclidean distance.

    The database is read ``block_rows`` rows at a time, so that memory does
    not grow with it and a memory map is never loaded whole; each block is
    compared with as many queries at a time as keep their scores within
    scikit-learn's ``working_memory`` (:func:`sklearn.get_config`), so that
    memory does not grow with the queries either. For each block and group
    of queries, one float32 matrix product gives ``q . e - |e|^2 / 2`` for every query
    ``q`` and row ``e`` (the nearer the row, the larger), the block's ``k``
    largest are selected among the chunks of 64 rows of largest maxima, and
    these are merged with the best so far. Equal scores go to the lower
    index, so the rows chosen do not depend on how :func:`torch.topk`
    orders ties. Rows are thus chosen as by a float32
    brute-force search: rows whose squared distances to a query differ by
    less than float32 rounding (about 1e-7 for unit vectors) may swap places
    at the ``k``-th position. The distances of the rows chosen are then
    computed directly as ``|q - e|`` in float64 (exactly 0 for a row equal to
    its query), and each query's rows are sorted by (distance, index).

    Computations run on torch's threads (:func:`torch.get_num_threads`),
    whose settings are left as they are.

    Parameters
    ----------
    queries : array-like of shape (n_queries, n_features)
        Query vectors, usually float32.
    database : ndarray of shape (n_samples, n_features)
        Any array whose slices and integer-array indexing give arrays, such
        as a :func:`numpy.load` memory map.
    k : int
        Rows per query; ``min(k, n_samples)`` are returned.
    block_rows : int, default=65536
        Database rows read and compared at a time.
    half_sq_norms : ndarray of shape (n_samples,) or float, default=None
        :func:`half_squared_norms` of ``database``, if already computed; a
        float where all rows have the same norm (unit vectors): the scores
        are then the products alone.

    Returns
    -------
    distances : ndarray of shape (n_queries, min(k, n_samples)), dtype float64
        Euclidean distances, increasing along each row.
    indices : ndarray of shape (n_queries, min(k, n_samples)), dtype int64
        Database rows, nearest first; equal distances are ordered by
        increasing index.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_crocs._search import top_k
    >>> database = np.array([[0, 1], [0, -1], [1, 0], [-1, 0]], dtype=np.float32)
    >>> distances, indices = top_k([[1, 0]], database, 3)
    >>> indices  # rows 0 and 1 are equally near: the lower index first
    array([[2, 0, 1]])
    >>> distances.round(4)
    array([[0.    , 1.4142, 1.4142]])
    """
    queries = np.asarray(queries)
    n_queries, n_samples = len(queries), len(database)
    k = min(k, n_samples)
    # Queries per group: a group's scores against a block fill at most working_memory.
    group = int(get_config()["working_memory"] * 2**20 // (4 * min(block_rows, n_samples or 1)))
    group = max(1, group)
    groups = [slice(start, start + group) for start in range(0, n_queries, group)]
    # Queries as columns: the product of a block (rows x features) with them
    # runs on all of torch's threads, where queries x block.T leaves one idle.
    query_columns = [
        torch.tensor(queries[part], dtype=torch.float32).T.contiguous() for part in groups
    ]
    best = [
        (torch.empty((len(c.T), 0)), torch.empty((len(c.T), 0), dtype=torch.int64))
        for c in query_columns
    ]
    for start in range(0, n_samples if k > 0 else 0, block_rows):
        block = _block(database, start, block_rows)
        if half_sq_norms is None:
            norms = _half_sq_norms(block)
        elif not isinstance(half_sq_norms, float):
            norms = torch.from_numpy(np.asarray(half_sq_norms[start : start + block_rows]))
        for g, columns in enumerate(query_columns):
            # q . e - |e|^2 / 2 = (|q|^2 - |q - e|^2) / 2: the nearer the row, the larger.
            if isinstance(half_sq_norms, float):  # equal norms: the products rank alike
                scores = torch.mm(block, columns)
            else:
                scores = torch.addmm(norms[:, None], block, columns)
            rows = _largest(scores, k)
            if n_samples <= block_rows:  # one block: nothing to merge (ordered below)
                best[g] = (None, rows)
                continue
            best[g] = _best(
                torch.cat([best[g][0], scores.T.gather(1, rows)], dim=1),
                torch.cat([best[g][1], rows + start], dim=1),
                k,
            )
    best_indices = (
        torch.cat([indices for _, indices in best])
        if best
        else torch.empty((0, k), dtype=torch.int64)
    )
    indices = best_indices.numpy()
    distances = exact_distances(queries, database, indices, block_rows)
    order = np.lexsort((indices, distances), axis=1)
    return np.take_along_axis(distances, order, 1), np.take_along_axis(indices, order, 1)


def _largest(scores, k):
    """Rows of the ``k`` largest scores of each column of ``scores`` (rows x queries).

    Returns shape ``(n_queries, k)``; equal scores go to the lower row. In a
    block of many rows, the rows are cut into chunks of ``_CHUNK``: a
    query's ``k`` largest scores lie in its ``k`` chunks of largest maxima
    (each of the others has ``k`` chunks, so ``k`` scores, above its
    maximum), so one pass of maxima and a selection among ``k * _CHUNK``
    candidates replace a selection over all rows.
    """
    n_rows, n_queries = scores.shape
    n_chunks = n_rows // _CHUNK
    # Too few chunks for the maxima to pay for their steps (on 2 cores, with
    # k = 10 and 40 queries, they gain from about 10,000 rows of 128 floats).
    if n_chunks < 8 * k:
        return _select(scores.T, k)
    maxima = scores[: n_chunks * _CHUNK].view(n_chunks, _CHUNK, n_queries).amax(dim=1).T
    values, chunks = torch.topk(maxima, k + 1, dim=1)
    # A chunk tied with the k-th largest maximum may hold a lower row of equal
    # score: those (rare) queries choose among all rows.
    tied = values[:, k - 1] == values[:, k]
    offsets = torch.arange(_CHUNK)
    candidates = (chunks[:, :k].sort(dim=1).values[:, :, None] * _CHUNK + offsets).flatten(1)
    tail = torch.arange(n_chunks * _CHUNK, n_rows)  # rows after the last whole chunk
    candidates = torch.cat([candidates, tail.expand(n_queries, len(tail))], dim=1)
    out = _select(scores.T, k, candidates)
    if tied.any():
        out[tied] = _select(scores.T[tied], k)
    return out


def _select(scores, k, candidates=None):
    """Columns of the ``k`` largest scores of each row, among ``candidates`` if given.

    ``candidates`` (increasing columns of ``scores`` per row) defaults to
    every column. Equal scores go to the lower column.
    """
    values = scores if candidates is None else scores.gather(1, candidates)
    if values.shape[1] <= k:
        order = torch.arange(values.shape[1]).expand(values.shape[0], -1)
    else:
        top, order = torch.topk(values, k + 1, dim=1)
        order = order[:, :k]
        # torch.topk takes any of the columns tied with the k-th largest
        # score: the (rare) rows where the (k+1)-th ties with it are sorted, stably.
        tied = top[:, k - 1] == top[:, k]
        if tied.any():
            ranked = torch.sort(values[tied], dim=1, descending=True, stable=True).indices
            order[tied] = ranked[:, :k]
    return order if candidates is None else candidates.gather(1, order)


def _best(scores, indices, k):
    """The ``k`` largest scores of each row and their indices, equal scores to the lower index."""
    indices, order = indices.sort(dim=1)
    scores, order = scores.gather(1, order).sort(dim=1, descending=True, stable=True)
    return scores[:, :k], indices.gather(1, order[:, :k])


def exact_distances(queries, database, indices, block_rows):
    """Float64 ``|q - e|`` of each query and its rows of ``indices``, ``block_rows`` at a time."""
    n_queries, k = indices.shape
    rows, owners = indices.ravel(), np.repeat(np.arange(n_queries), k)
    out = np.empty(rows.size)
    for start in range(0, rows.size, block_rows):
        part = slice(start, start + block_rows)
        diff = np.asarray(database[rows[part]], dtype=np.float64) - queries[owners[part]]
        out[part] = np.sqrt(np.einsum("ij,ij->i", diff, diff))
    return out.reshape(n_queries, k)
