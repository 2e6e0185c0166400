"""PrototypeRetriever: search an ECG database by attribute combination or by example."""

import functools
import math
import threading
import time
import warnings
from numbers import Integral

import numpy as np
import pandas as pd
import torch
from sklearn.base import BaseEstimator, MetaEstimatorMixin, _fit_context, clone
from sklearn.exceptions import NotFittedError
from sklearn.frozen import FrozenEstimator
from sklearn.pipeline import Pipeline
from sklearn.utils._param_validation import HasMethods, Interval, StrOptions
from sklearn.utils.validation import check_is_fitted

from ._clusterer import _python_value
from ._persistence import load_retriever, save_retriever

__all__ = ["PrototypeRetriever"]

# Database rows per block of a search: the block's scores (queries x rows)
# and its low-precision copy stay small, so that the memory of a search does
# not grow with the database.
_BLOCK_ROWS = 16384
# Among the rows compared exactly at once, (row, query) pairs beyond this many
# per query are first reduced to each query's k best by a partition.
_MAX_SPARSE = 512
# Rows kept by the filter are compared exactly, at most this many at a time,
# once this many have gathered or after _FLUSH_BLOCKS blocks (1, 2 and 4
# blocks at first, so that the first thresholds tighten sooner), and at the end.
_FLUSH_ROWS = 4096
_FLUSH_BLOCKS = 8
# Unless told otherwise, the rows of the database are unit vectors up to
# float32 rounding: their squared norms lie within this much of 1 (float32
# normalisation of a 128-value vector errs by about 1e-7, at most about 1e-5).
_NORM_SLACK = 2.0**-15
# Block filter precisions, fastest first. A search filters each block in the
# first precision of its chain that keeps few rows (float32 always ends it).
_PRECISIONS = ("int8", "bfloat16", "float32")
# A block whose filter keeps more than this fraction of its rows (tight
# clusters, duplicates) is filtered again in the next precision; after this
# many such blocks in a row, the rest of the search starts at the precision
# that sorted out the last of them.
_REFILTER_FRACTION = 1 / 4
_REFILTER_LIMIT = 3
# int8's error bound is about three times bfloat16's: while the thresholds
# are still loose, it keeps many more rows than bfloat16, so a search uses it
# from this block on (about 65,000 rows with blocks of _BLOCK_ROWS).
_INT8_FROM = 4
# A search's buffers of at most this many bytes each (the filters' block
# copies and products: 18.6 MB for the int8 and bfloat16 filters, 40 queries
# of 128 dimensions) are kept for the next search in the same thread: fresh
# ones would be faulted in page by page at every search (about 2,500 page
# faults, 3-6 ms, for 40 queries once glibc returns them to the system
# between searches).
_WORKSPACE_BYTES = 16 * 2**20
_workspace_cache = threading.local()
# 1.5 * 2**23: adding a float32 number of size <= 2**22 rounds it to an integer.
_ROUNDING_OFFSET = torch.tensor(1.5 * 2**23)


def _workspace(name, shape, dtype):
    """An uninitialised tensor of ``shape``, reused by later calls in this thread.

    Buffers larger than ``_WORKSPACE_BYTES`` are allocated for the call only.
    Two buffers in use at once need different ``name`` or ``dtype``.
    """
    size = math.prod(shape)
    if size * dtype.itemsize > _WORKSPACE_BYTES:
        return torch.empty(shape, dtype=dtype)
    buffers = _workspace_cache.__dict__.setdefault("buffers", {})
    buffer = buffers.get((name, dtype))
    if buffer is None or buffer.numel() < size:
        buffer = buffers[name, dtype] = torch.empty(size, dtype=dtype)
    return buffer[:size].view(shape)


def _crocs_step(estimator):
    """The CROCSClusterer in ``estimator``: itself, or inside a FrozenEstimator or Pipeline."""
    step = estimator
    while isinstance(step, (FrozenEstimator, Pipeline)):
        step = step.estimator if isinstance(step, FrozenEstimator) else step[-1]
    if not hasattr(step, "get_prototypes"):
        raise TypeError(
            "estimator must be a CROCSClusterer, a Pipeline ending in one or either "
            f"wrapped in sklearn.frozen.FrozenEstimator; got {type(step).__name__}, "
            "which has no get_prototypes method."
        )
    return step


def _cpu_supports(*checks):
    """Whether any of ``torch.cpu``'s feature checks (private, may be missing) says yes."""
    return any(getattr(torch.cpu, name, lambda: False)() for name in checks)


@functools.cache
def _bfloat16_is_fast():
    """Whether this CPU multiplies bfloat16 matrices natively (AVX512-BF16 or AMX)."""
    return _cpu_supports("_is_avx512_bf16_supported", "_is_amx_tile_supported")


@functools.cache
def _int8_works():
    """Whether this torch multiplies int8 matrices on the CPU (``torch._int_mm``, into ``out``)."""
    one = torch.ones((1, 8), dtype=torch.int8)
    out = torch.zeros((1, 1), dtype=torch.int32)
    try:
        torch._int_mm(one, one.T, out=out)
    except (AttributeError, RuntimeError, TypeError):  # not in this torch, or not on CPU
        return False
    return out.item() == 8


@functools.cache
def _int8_is_fast():
    """Whether int8 products run natively here (VNNI or AMX) and torch can do them."""
    return _cpu_supports("_is_vnni_supported", "_is_amx_tile_supported") and _int8_works()


def _filter_chain(precisions=None):
    """The filter precisions of a search, fastest first, ending in float32.

    ``None``: the precisions this CPU multiplies natively.
    """
    if precisions is None:
        native = {"int8": _int8_is_fast(), "bfloat16": _bfloat16_is_fast(), "float32": True}
        return [p for p in _PRECISIONS if native[p]]
    unknown = set(precisions) - set(_PRECISIONS)
    if unknown:
        raise ValueError(f"Unknown filter precisions {sorted(unknown)}; expected {_PRECISIONS}.")
    return [p for p in _PRECISIONS if p in precisions or p == "float32"]


class _BlockFilter:
    """Approximate query-row similarities with a proven error bound.

    One matrix product per block, in ``precision``: ``"int8"`` (about 2.5
    times bfloat16's speed where the CPU has VNNI or AMX), ``"bfloat16"``
    (about twice float32's, with AVX512-BF16 or AMX) or ``"float32"``.

    Floating point (Higham, *Accuracy and Stability of Numerical
    Algorithms*, ch. 3): rounding the inputs to a format of unit roundoff
    ``u`` changes each product by at most ``(2u + u**2)`` of its size;
    float32 accumulation of ``n`` terms errs by at most
    ``gamma = n u32 / (1 - n u32)`` of the sum of their sizes, and the sum of
    the products' sizes is at most ``|q| |e|`` (Cauchy-Schwarz).

    int8: each query ``q`` is scaled by ``t = 127 / max|q_i|`` and rounded,
    ``t q = q' + r`` with ``|r_i| <= 1/2``; every row ``e`` by one ``s`` with
    ``s |e_i| <= 127`` for every value, ``s e = e' + f`` with ``|f_i| <= 1/2`` (and
    float32 rounding of ``s e``). The integer product ``P = q' . e'`` is
    exact and ``s t (q . e) - P = q' . f + s (r . e)``, so
    ``|q . e - P / (s t)| <= (|q'|_1 max|f_i| + s |r| |e|) / (s t)``.

    :meth:`passing` takes a threshold per query and returns every row whose
    exact similarity to some query reaches that query's threshold (and a few
    more). The lowered threshold is subtracted from the product (inside it,
    ``addmm``, in floating point), and rounding preserves signs, so a row
    passes when the sign bit of its largest value, read as an integer, is
    clear: one cheap reduction.
    """

    def __init__(
        self, queries, block_rows, *, precision, max_row_norm=1 + _NORM_SLACK, max_abs=None
    ):
        n_queries, self.n_features = queries.shape
        self.precision = precision
        queries64 = queries.astype(np.float64)
        self.scale = np.linalg.norm(queries64, axis=1) * max_row_norm  # >= |q . e|
        self.thresholds = None  # set, but not yet taken into the product
        if precision == "int8":
            self._init_int8(queries64, block_rows, max_row_norm, max_abs or max_row_norm or 1.0)
            return
        bfloat16 = precision == "bfloat16"
        self.u = 2.0**-8 if bfloat16 else 0.0  # inputs rounded to bfloat16
        self.u_out = 2.0**-8 if bfloat16 else 2.0**-24  # result and threshold
        n = self.n_features + 1
        self.gamma = n * 2.0**-24 / (1 - n * 2.0**-24)
        if bfloat16:
            # oneDNN's bfloat16 product is fastest as (queries, rows).
            self.queries = torch.from_numpy(queries).to(torch.bfloat16)
            self.bias = torch.zeros((n_queries, 1), dtype=torch.bfloat16)
            self.block = _workspace("block", (block_rows, self.n_features), torch.bfloat16)
            self.out = _workspace("out", (n_queries, block_rows), torch.bfloat16)
        else:
            # Float32 reads the block in place, fastest as (rows, queries).
            self.queries = torch.from_numpy(queries.T.copy())
            self.bias = torch.zeros((1, n_queries))
            self.out = _workspace("out", (block_rows, n_queries), torch.float32)

    def _init_int8(self, queries64, block_rows, max_row_norm, max_abs):
        n_queries = len(queries64)
        peak = np.abs(queries64).max(axis=1)
        query_scale = 127 / np.where(peak > 0, peak, 1)
        scaled = queries64 * query_scale[:, None]
        rounded = np.rint(scaled)
        self.queries = torch.from_numpy(rounded.astype(np.int8))
        # One scale for every row, a float32 number (as the product uses it),
        # with |s e_i| <= 127 for |e_i| <= max_abs: no value is clipped.
        self.row_scale = float(np.float32(127 / (max_abs * (1 + 2.0**-20))))
        # A similarity of 1 in units of the integer product, per query.
        self.unit = self.row_scale * query_scale
        row_error = 0.5 + 2.0**-10  # rounding to an integer, after float32 scaling
        query_error = np.linalg.norm(scaled - rounded, axis=1) + 1e-9
        self.bound = (
            1.01
            * (
                row_error * np.abs(rounded).sum(axis=1)
                + self.row_scale * query_error * max_row_norm
            )
            / self.unit
        )
        self.lowest = torch.full((n_queries, 1), -(2**30), dtype=torch.int32)
        self.staging = _workspace("staging", (block_rows, self.n_features), torch.float32)
        self.block = _workspace("block", (block_rows, self.n_features), torch.int8)
        self.out = _workspace("out", (n_queries * block_rows,), torch.int32)

    def _product(self, block):
        """The block's product with the queries, as (queries, rows) except for float32.

        Floating point: ``block . queries + bias``, (rows, queries) for
        float32; int8: the integer product ``P``.
        """
        rows = len(block)
        if block.flags.writeable:
            block = torch.from_numpy(block)
        else:
            with warnings.catch_warnings():  # a read-only memmap block is only read
                warnings.simplefilter("ignore", UserWarning)
                block = torch.from_numpy(block)
        if self.precision == "int8":
            # Scaled and rounded in one pass: 1.5 * 2**23 + x (|x| <= 127.5)
            # is a float32 number whose lowest 8 bits hold round(x) as a
            # two's-complement byte, which the cast to int8 keeps.
            staging = self.staging[:rows]
            torch.add(_ROUNDING_OFFSET, block, alpha=self.row_scale, out=staging)
            self.block[:rows].copy_(staging.view(torch.int32))
            out = self.out[: len(self.queries) * rows].view(-1, rows)  # must be contiguous
            return torch._int_mm(self.queries, self.block[:rows].T, out=out)
        if self.precision == "bfloat16":
            self.block[:rows].copy_(block)
            return torch.addmm(self.bias, self.queries, self.block[:rows].T, out=self.out[:, :rows])
        return torch.addmm(self.bias, block, self.queries, out=self.out[:rows])

    def score_bound(self):
        """Bound on |score - similarity| of :meth:`scores`, per query."""
        if self.precision == "int8":
            return 1.01 * (self.bound + 2.0**-22 * (self.scale + self.bound))
        u, gamma = self.u, self.gamma
        return 1.01 * (2 * u + u**2 + 2 * gamma + 2 * self.u_out) * self.scale

    def scores(self, block):
        """Approximate similarities, tensor of shape (n_queries, rows); clears the thresholds.

        Floating point: a view of the filter's buffer, valid until its next product.
        """
        if self.precision == "int8":
            self.lowest.fill_(-(2**30))
            self.thresholds = None
            unit = torch.from_numpy((1 / self.unit).astype(np.float32)[:, None])
            return self._product(block).float().mul_(unit)
        self.bias.zero_()
        self.thresholds = None
        out = self._product(block)
        return out if self.precision == "bfloat16" else out.T

    def first_pass(self, block, k, spread=0.0):
        """Thresholds from the ``k`` best scores of a block, and its rows that pass them.

        ``k`` rows score at least the block's ``k``-th best score ``s`` of a
        query, so their similarities are at least ``s - bound``: its ``k``-th
        nearest is at least as near as a row of that similarity (and
        ``spread`` lower, for rows not of unit norm). A row whose similarity
        reaches a threshold scores at least ``threshold - bound``: the block's
        rows are compared with that, from the same scores (one product).

        Returns ``thresholds`` (float64, one per query) and what
        ``passing(block, thresholds, pairs=True)`` returns.
        """
        scores = self.scores(block)
        kth = torch.topk(scores, min(k, len(block)), dim=1, sorted=False).values.amin(1)
        bound = self.score_bound()
        thresholds = kth.double().numpy() - bound - spread
        cut = thresholds - bound
        # Exact comparisons in float32: the largest float32 number <= cut.
        cut32 = cut.astype(np.float32)
        cut32 = np.where(cut32 > cut, np.nextafter(cut32, np.float32(-np.inf)), cut32)
        reach = scores.float().numpy() >= cut32[:, None]
        rows = np.flatnonzero(reach.any(axis=0))
        return thresholds, rows, np.take(reach, rows, axis=1).T

    def set_thresholds(self, thresholds):
        """Set the threshold of each query (float64 array) for :meth:`passing`.

        Taken into the product at the next :meth:`passing`: a search sets
        them in every filter, and may use only one.
        """
        self.thresholds = thresholds

    def _take_thresholds(self, thresholds):
        if self.precision == "int8":
            # P >= s t (threshold - bound) for every row that reaches the
            # threshold; one unit lower for the float64 rounding of that
            # product (clipped to 2**30). -inf lets every product through.
            lowest = np.floor(self.unit * (thresholds - self.bound)) - 1
            lowest = np.clip(lowest, -(2**30), 2**30)
            self.lowest.view(-1).copy_(torch.from_numpy(lowest.astype(np.int32)))
            return
        u, gamma = self.u, self.gamma
        # Input rounding and accumulation; then the rounding of the product,
        # should the bias be added after it (oneDNN adds it before), and of the
        # lowered threshold, whose size is at most |threshold| + margin, and
        # margin < scale + base while |threshold| <= scale (a similarity).
        base = (2 * u + u**2 + 2 * gamma) * self.scale
        size = self.scale + np.abs(thresholds) + base
        margin = 1.01 * (base + (self.u_out + 2 * gamma) * size)
        lowered = np.nan_to_num(thresholds - margin, neginf=-np.finfo(np.float32).max)
        self.bias.view(-1).copy_(torch.from_numpy(-lowered.astype(np.float32)))

    def passing(self, block, thresholds=None, *, pairs=False):
        """Rows (increasing) whose similarity may reach some query's threshold.

        ``thresholds`` (float64, one per query) replaces those set before.
        With ``pairs=True``, also returns a boolean array of shape (rows,
        n_queries): which of the queries' thresholds each row may reach.
        """
        if thresholds is not None:
            self.thresholds = thresholds
        if self.thresholds is not None:
            self._take_thresholds(self.thresholds)
            self.thresholds = None
        out = self._product(block)
        if self.precision == "int8":
            signs = torch.sub(out, self.lowest, out=out)  # |P| <= n 127**2 << 2**30
        elif self.precision == "bfloat16":
            signs = out.view(torch.int16)
        else:
            signs = out.view(torch.int32).T
        # The few rows found are picked out in numpy (a third of torch's
        # time), along the product's own layout: np.take copies an array that
        # is not C-contiguous.
        rows = np.flatnonzero(torch.amax(signs, dim=0).numpy() >= 0)
        if not pairs:
            return rows
        if self.precision == "float32":
            return rows, np.take(signs.T.numpy(), rows, axis=0) >= 0
        return rows, np.take(signs.numpy(), rows, axis=1).T >= 0


def _block_top_k(values, k):
    """Columns of the ``k`` largest values of each row, ties to the lower column.

    Returns an integer array of shape (n_rows, k) whose rows list the chosen
    columns in increasing order (not by value).
    """
    n_rows, n_columns = values.shape
    if k >= n_columns:
        return np.broadcast_to(np.arange(n_columns), (n_rows, n_columns))
    kth = np.partition(values, n_columns - k, axis=1)[:, n_columns - k, None]
    keep = values >= kth
    # Rows where values equal to the k-th largest continue past k: keep the
    # lowest columns among those ties.
    crowded = np.flatnonzero(keep.sum(axis=1) > k)
    if crowded.size:
        rows, threshold = values[crowded], kth[crowded]
        above = rows > threshold
        tied = rows == threshold
        room = k - above.sum(axis=1, keepdims=True)
        keep[crowded] = above | (tied & (np.cumsum(tied, axis=1) <= room))
    return np.nonzero(keep)[1].reshape(n_rows, k)


def _top_k(
    queries, database, k, *, block_size=None, precisions=None, sq_norm_range=None, max_abs=None
):
    """Exact ``k`` nearest database rows of each query, for unit vectors.

    The database is read in blocks of ``block_size`` rows, so memory does not
    grow with it. Each block goes through two stages:

    1. *Filter* (:class:`_BlockFilter`): one low-precision matrix product
       with a proven error bound drops every row that cannot come nearer to
       any query than its current ``k``-th nearest: usually almost all rows.
       It runs in the lowest precision the CPU multiplies natively (int8
       from block ``_INT8_FROM`` on, else bfloat16, else float32), and again
       in the next one for blocks where a precision keeps many rows. The
       first block is filtered with the scores that set the first thresholds.
    2. *Exact*: the remaining rows, gathered over a few blocks, are compared
       with the queries in float64; their squared Euclidean distances (from
       the float64 dot products and norms) are merged with the best so far,
       equal distances going to the lower index.

    The result is therefore the exact ``k`` nearest rows whatever the
    precision of the filter. The distances of the rows found are finally
    computed directly as ``|q - e|`` in float64, accurate also near 0, and each
    row is sorted by (distance, index).

    Parameters
    ----------
    queries : ndarray of shape (n_queries, n_features)
        Unit vectors.
    database : ndarray of shape (n_samples, n_features)
        Any array that supports slicing, such as a memmap. Its rows are
        unit vectors, or their squared norms lie in ``sq_norm_range``.
    k : int
        ``1 <= k <= n_samples``.
    block_size : int, default=None
        Database rows per block (``_BLOCK_ROWS`` by default).
    precisions : sequence of {"int8", "bfloat16", "float32"}, default=None
        Filter precisions to use, float32 always among them; None: those the
        CPU multiplies natively.
    sq_norm_range : (float, float), default=None
        Smallest and largest squared norm of the database rows (or a wider
        range). Rows far from unit norm (zero embeddings) keep the result
        exact but weaken the filter. None: measured, with ``max_abs``, in one
        pass over the database (:func:`_value_ranges`); callers that search
        the same database often measure it once and pass both.
    max_abs : float, default=None
        Largest absolute value in the database (or more), which sets the
        scale of the int8 filter; measured with ``sq_norm_range`` when that
        is None, else None means the largest norm.

    Returns
    -------
    distances : ndarray of shape (n_queries, k), dtype float64
        Increasing along each row.
    indices : ndarray of shape (n_queries, k), dtype intp
        Database rows; equal distances are ordered by increasing index.
    """
    queries = np.ascontiguousarray(queries, dtype=np.float32)
    n_queries = len(queries)
    n_samples = len(database)
    block_size = min(max(block_size or _BLOCK_ROWS, k), n_samples)  # first block: >= k rows
    chain = _filter_chain(precisions)
    if sq_norm_range is None:
        sq_norm_range, max_abs = _value_ranges(database)
    low, high = sq_norm_range
    thresholds = np.full(n_queries, -np.inf)
    filters = {}  # built when first used

    def get_filter(precision):
        if precision not in filters:
            filters[precision] = _BlockFilter(
                queries, block_size, precision=precision, max_row_norm=high**0.5, max_abs=max_abs
            )
            filters[precision].set_thresholds(thresholds)
        return filters[precision]

    queries64 = torch.from_numpy(queries.T.astype(np.float64))
    half_query_sq = 0.5 * np.einsum("ij,ij->i", queries, queries, dtype=np.float64)
    # Best so far per query: squared distances (increasing) and indices.
    best = np.full((n_queries, k), np.inf)
    best_indices = np.full((n_queries, k), n_samples, dtype=np.intp)
    crowded = 0  # blocks in a row where the chain's first precision kept too many rows
    pending, n_pending = [], 0  # rows kept by the filter, waiting for the exact stage
    flush_blocks = 1
    for start in range(0, n_samples, block_size):
        block = np.asarray(database[start : start + block_size], dtype=np.float32)
        block_chain = chain
        if chain[0] == "int8" and start < _INT8_FROM * block_size:
            block_chain = chain[1:]  # thresholds still loose
        for precision in block_chain:  # float32, the last, keeps what it keeps
            filt = get_filter(precision)
            if start == 0 and precision == block_chain[0]:
                # Nothing known yet: thresholds from this block's scores.
                thresholds, rows, pairs = filt.first_pass(block, k, 0.5 * (high - low))
                for other in filters.values():
                    other.set_thresholds(thresholds)
            else:
                rows, pairs = filt.passing(block, pairs=True)
            if rows.size <= _REFILTER_FRACTION * len(block):
                break
        # Precisions too coarse for this database (tight clusters,
        # duplicates) are dropped for the rest of the search if that persists.
        crowded = crowded + 1 if precision != block_chain[0] else 0
        if crowded == _REFILTER_LIMIT:
            chain, crowded = chain[chain.index(precision) :], 0
        if rows.size:
            pending.append((rows + start, block[rows], pairs))
            n_pending += rows.size
        last = start + block_size >= n_samples
        if pending and (last or n_pending >= _FLUSH_ROWS or len(pending) >= flush_blocks):
            # The exact stage runs on the rows of several blocks at once: its
            # cost is mostly per call. Thresholds meanwhile stay those of the
            # best so far, which are valid, only less tight.
            indices, vectors, pairs = (np.concatenate(part) for part in zip(*pending))
            pending, n_pending = [], 0
            flush_blocks = min(2 * flush_blocks, _FLUSH_BLOCKS)
            for chunk in range(0, len(indices), _FLUSH_ROWS):  # bounded float64 copies
                best, best_indices = _merge_exact(
                    best,
                    best_indices,
                    vectors[chunk : chunk + _FLUSH_ROWS],
                    indices[chunk : chunk + _FLUSH_ROWS],
                    queries64,
                    half_query_sq,
                    n_samples,
                    pairs[chunk : chunk + _FLUSH_ROWS],
                )
            # |q - e|^2 = |q|^2 + |e|^2 - 2 q.e beats the k-th nearest's d^2
            # only if q.e > |q|^2/2 + |e|^2/2 - d^2/2, with |e|^2 >= low.
            thresholds = half_query_sq + 0.5 * low - 0.5 * best[:, -1]
            for filt in filters.values():
                filt.set_thresholds(thresholds)
    distances = _pair_distances(queries, database, best_indices)
    order = np.lexsort((best_indices, distances), axis=1)
    return np.take_along_axis(distances, order, 1), np.take_along_axis(best_indices, order, 1)


def _value_ranges(vectors):
    """What an exact search needs to know of the rows of ``vectors``.

    Returns ``((low, high), max_abs)``: the smallest and largest squared norm
    of a row, in float64, and the largest absolute value. Read in blocks of
    ``_BLOCK_ROWS`` rows, so a memmap is not loaded whole.
    """
    low, high, max_abs = np.inf, -np.inf, 0.0
    for start in range(0, len(vectors), _BLOCK_ROWS):
        block = np.asarray(vectors[start : start + _BLOCK_ROWS])
        sq_norms = np.einsum("ij,ij->i", block, block, dtype=np.float64)
        low, high = min(low, sq_norms.min()), max(high, sq_norms.max())
        max_abs = max(max_abs, float(np.abs(block).max()))
    return (float(low), float(high)), max_abs


def _merge_exact(
    best, best_indices, vectors, indices, queries64, half_query_sq, n_samples, pairs=None
):
    """Merge candidate rows into the best so far by their float64 squared distances.

    ``vectors`` (float32, one row per candidate, database rows ``indices`` in
    increasing order) are compared with every query, or, where ``pairs`` (a
    boolean array of shape (rows, n_queries)) is given, with the queries it
    marks; rows that beat a query's current ``k``-th nearest enter its list,
    equal distances going to the lower index.
    """
    n_queries, k = best.shape
    candidates = vectors.astype(np.float64)
    # Half the squared distances, shape (rows, queries). The product runs in
    # torch: numpy's BLAS threads would spin and slow torch's down.
    products = torch.mm(torch.from_numpy(candidates), queries64).numpy()
    squared = half_query_sq + 0.5 * np.einsum("ij,ij->i", candidates, candidates)[:, None]
    squared -= products
    better = squared < 0.5 * best[:, -1]
    if pairs is not None:
        better &= pairs
    owners, positions = np.nonzero(better.T)  # grouped by query
    if owners.size == 0:
        return best, best_indices
    counts = np.bincount(owners, minlength=n_queries)
    if counts.max() > _MAX_SPARSE:
        # Many rows beat the k-th best (the first block, or a database sorted
        # by similarity): keep each query's k best of them.
        values = np.where(better, -squared, -np.inf).T
        columns = _block_top_k(values, min(k, len(indices)))
        owners = np.repeat(np.arange(n_queries), columns.shape[1])
        positions = columns.ravel()
        keep = np.isfinite(values[owners, positions])
        owners, positions = owners[keep], positions[keep]
        counts = np.bincount(owners, minlength=n_queries)
    slots = np.arange(owners.size) - np.repeat(np.cumsum(counts) - counts, counts)
    values = np.full((n_queries, counts.max()), np.inf)
    values[owners, slots] = 2 * squared[positions, owners]
    found = np.full(values.shape, n_samples, dtype=np.intp)
    found[owners, slots] = indices[positions]
    return _merge(best, best_indices, values, found, k)


def _merge(best, best_indices, values, indices, k):
    """The ``k`` smallest of two candidate sets per row, equal values to the lower index."""
    values = np.concatenate([best, values], 1)
    indices = np.concatenate([best_indices, indices], 1)
    order = np.lexsort((indices, values), axis=1)[:, :k]
    return np.take_along_axis(values, order, 1), np.take_along_axis(indices, order, 1)


def _pair_distances(queries, database, indices):
    """Float64 Euclidean distance between each query and its rows of ``indices``."""
    n_queries, k = indices.shape
    rows = indices.ravel()
    owners = np.repeat(np.arange(n_queries), k)
    out = np.empty(rows.size, dtype=np.float64)
    step = _BLOCK_ROWS
    for start in range(0, rows.size, step):
        stop = start + step
        diff = np.asarray(database[rows[start:stop]], dtype=np.float64)
        diff -= queries[owners[start:stop]]
        out[start:stop] = np.sqrt(np.einsum("ij,ij->i", diff, diff))
    return out.reshape(n_queries, k)


def _n_rows(X):
    return X.shape[0] if hasattr(X, "shape") else len(X)


def _rows(X, start, stop):
    return X.iloc[start:stop] if hasattr(X, "iloc") else X[start:stop]


class PrototypeRetriever(MetaEstimatorMixin, BaseEstimator):
    """Retrieve the ECGs of a database that best match attribute combinations.

    The retrieval setting of CROCS (Kiyasseh, Zhu & Clifton, NeurIPS 2021):
    the ECGs of a database, typically unlabelled, are embedded once by a
    fitted :class:`~sklearn_crocs.CROCSClusterer`; a query is the prototype
    of an attribute combination ("AFIB, female, over 70") or the embedding of
    an example ECG, and :meth:`kneighbors` returns the database ECGs nearest
    to it.

    Parameters
    ----------
    estimator : CROCSClusterer or Pipeline ending in one
        Gives the embeddings (``transform``) and the prototypes
        (``get_prototypes``). ``fit(X, y)`` fits a clone of it; ``fit(X)``
        uses it as it is, so it must be fitted already (plain, or wrapped in
        :class:`sklearn.frozen.FrozenEstimator`).
    n_neighbors : int, default=10
        Number of ECGs retrieved per query by default (the paper's K).
    query : {"learned", "mean"}, default="learned"
        Prototypes that attribute combinations are translated into: the
        learned clinical prototypes (CP CROCS), one for every combination, or
        the mean training embedding of each combination (TP CROCS), which
        exists only for combinations with training ECGs.
    batch_size : int, default=1024
        ECGs embedded at a time: ``fit`` reads the database in slices of this
        many rows, so that a :func:`numpy.load` memmap is never loaded whole.
    verbose : int, default=0
        ``0`` is silent; ``1`` prints the embedding progress about ten times;
        ``2`` after every batch.

    Attributes
    ----------
    estimator_ : estimator
        The estimator used: a fitted clone of ``estimator`` when ``fit`` was
        given ``y``, else ``estimator`` itself (not a copy).
    embeddings_ : ndarray of shape (`n_samples_fit_`, embedding_dim), dtype float32
        Unit-norm embeddings of the indexed database.
    n_samples_fit_ : int
        Number of ECGs in the database.
    prototypes_ : ndarray of shape (n_prototypes, embedding_dim)
        The query prototypes (learned or mean, see ``query``), unit norm.
    prototype_attributes_ : ndarray of shape (n_prototypes, n_attributes)
        Attribute values of each row of ``prototypes_``.
    query_attributes_ : pandas.DataFrame of shape (n_prototypes, n_attributes)
        The same values with the attribute names as columns: row ``i`` names
        row ``i`` of ``kneighbors()``.
    attribute_names_ : list of str
        Names of the attributes.
    n_features_in_ : int
        Number of values per ECG seen by the estimator in fit.

    See Also
    --------
    CROCSClusterer.get_prototypes : The learned and mean prototypes.
    sklearn.neighbors.NearestNeighbors : General nearest-neighbour search.
    sklearn_crocs.metrics.precision_at_k : Precision of the retrieved ECGs.

    Notes
    -----
    The search is exact and reads the database block by block, so memory
    stays bounded however large the database. Each block is first
    filtered with one low-precision matrix product whose rounding error has
    a proven bound (int8 or bfloat16 where the CPU multiplies them natively,
    else float32; a more precise one for blocks that it cannot sort out):
    only rows that may come nearer to a query than its current
    ``n_neighbors``-th nearest are kept, and those are compared with the
    queries in float64.
    Neighbours are chosen by float64 squared Euclidean distance; the
    distances returned are computed directly, in float64, for the
    neighbours found. Equal distances are ordered by increasing database
    index, so results are deterministic.

    Examples
    --------
    >>> import numpy as np
    >>> import pandas as pd
    >>> from sklearn.frozen import FrozenEstimator
    >>> from sklearn_crocs import CROCSClusterer, PrototypeRetriever
    >>> rng = np.random.RandomState(0)
    >>> y = pd.DataFrame({"rhythm": rng.choice(["AFIB", "SR"], 60),
    ...                   "sex": rng.choice(["F", "M"], 60)})
    >>> freq = np.where(y["rhythm"] == "SR", 1.0, 2.5)[:, None]
    >>> X = np.sin(freq * np.linspace(0, 20, 500)) + 0.3 * rng.randn(60, 500)
    >>> model = CROCSClusterer(embedding_dim=8, max_epochs=3, lr=1e-3,
    ...                        validation_fraction=None, random_state=0).fit(X, y)
    >>> database = rng.randn(30, 500)  # unlabelled ECGs
    >>> retriever = PrototypeRetriever(FrozenEstimator(model), n_neighbors=3).fit(database)
    >>> distances, indices = retriever.kneighbors()  # one row per prototype
    >>> indices.shape
    (4, 3)
    >>> retriever.query_attributes_
      rhythm sex
    0   AFIB   F
    1   AFIB   M
    2     SR   F
    3     SR   M
    >>> retriever.kneighbors([("SR", "F"), ("AFIB", "M")], return_distance=False).shape
    (2, 3)
    >>> retriever.kneighbors({"rhythm": "SR", "sex": "M"}, n_neighbors=5)[1].shape
    (1, 5)
    >>> retriever.kneighbors(database[:2], n_neighbors=1)[1].ravel()  # query by example
    array([0, 1])
    """

    _parameter_constraints: dict = {
        "estimator": [HasMethods(["fit", "transform"])],
        "n_neighbors": [Interval(Integral, 1, None, closed="left")],
        "query": [StrOptions({"learned", "mean"})],
        "batch_size": [Interval(Integral, 1, None, closed="left")],
        "verbose": ["verbose"],
    }

    def __init__(self, estimator, *, n_neighbors=10, query="learned", batch_size=1024, verbose=0):
        self.estimator = estimator
        self.n_neighbors = n_neighbors
        self.query = query
        self.batch_size = batch_size
        self.verbose = verbose

    @_fit_context(prefer_skip_nested_validation=False)
    def fit(self, X, y=None, groups=None):
        """Index a database of ECGs, fitting the estimator first if ``y`` is given.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_timepoints) or (n_samples, n_leads, n_timepoints)
            The ECGs to search, for example a :func:`numpy.load` memmap; read
            ``batch_size`` rows at a time.
        y : array-like of shape (n_samples,) or (n_samples, n_attributes), or DataFrame, \
default=None
            Attributes of ``X``: a clone of ``estimator`` is fitted on
            ``(X, y)`` and then ``X`` is indexed. ``None``: ``estimator`` must
            be fitted already and ``X`` is only indexed.
        groups : array-like of shape (n_samples,), default=None
            Patient of each ECG, passed to the estimator's ``fit`` with ``y``
            (for a Pipeline, to its last step); ignored without ``y``.

        Returns
        -------
        self : PrototypeRetriever
            The fitted retriever.
        """
        crocs = _crocs_step(self.estimator)
        if y is None:
            estimator = self.estimator
            try:
                check_is_fitted(estimator)
            except NotFittedError as exc:
                raise NotFittedError(
                    f"{type(self).__name__}.fit(X) without y indexes X with an already "
                    f"fitted estimator, but this {type(crocs).__name__} is not fitted. "
                    "Fit it first (and optionally wrap it in sklearn.frozen.FrozenEstimator), "
                    "or pass y to fit a clone of it on (X, y)."
                ) from exc
        else:
            estimator = clone(self.estimator)
            params = {}
            if groups is not None:
                last = estimator.steps[-1][0] if isinstance(estimator, Pipeline) else None
                params["groups" if last is None else f"{last}__groups"] = groups
            estimator.fit(X, y, **params)
            crocs = _crocs_step(estimator)
        self.estimator_ = estimator
        self._set_fitted(estimator, self._embed(X, name="X"))
        return self

    def _set_fitted(self, estimator, embeddings):
        """Set the fitted state for a fitted ``estimator`` and the database ``embeddings``."""
        crocs = _crocs_step(estimator)
        self.estimator_ = estimator
        self._set_embeddings(embeddings)
        self.prototypes_, self.prototype_attributes_ = crocs.get_prototypes(self.query)
        self.attribute_names_ = list(crocs.attribute_names_)
        self.query_attributes_ = pd.DataFrame(
            {n: self.prototype_attributes_[:, i] for i, n in enumerate(self.attribute_names_)}
        )
        self.n_features_in_ = estimator.n_features_in_

    def save(self, path, *, include_embeddings=False):
        """Write the retriever to a file that runs no code when loaded.

        The estimator is saved as by :meth:`CROCSClusterer.save`, with its
        wrapping (:class:`~sklearn.frozen.FrozenEstimator`, a
        :class:`~sklearn.pipeline.Pipeline` of
        :class:`~sklearn_crocs.preprocessing.FrameNormalizer` steps ending in the
        clusterer). The database embeddings are written only when asked:
        they describe the indexed ECGs, which may be patient data.

        Parameters
        ----------
        path : str or path-like
            File to write (replaced atomically if it exists).
        include_embeddings : bool, default=False
            Also write ``embeddings_``, so that the loaded retriever searches
            without the database. Without them, index the database again with
            ``PrototypeRetriever.load(path).fit(X_database)``.

        Returns
        -------
        self : PrototypeRetriever
            The retriever, unchanged.

        Examples
        --------
        >>> import os, tempfile
        >>> import numpy as np
        >>> from sklearn_crocs import CROCSClusterer, PrototypeRetriever
        >>> rng = np.random.RandomState(0)
        >>> X, y = rng.randn(40, 400), np.repeat(["A", "B"], 20)
        >>> model = CROCSClusterer(embedding_dim=8, max_epochs=2,
        ...                        validation_fraction=None, random_state=0).fit(X, y)
        >>> retriever = PrototypeRetriever(model, n_neighbors=3).fit(X)
        >>> with tempfile.TemporaryDirectory() as folder:
        ...     path = os.path.join(folder, "retriever.safetensors")
        ...     _ = retriever.save(path)
        ...     loaded = PrototypeRetriever.load(path).fit(X)  # index the database again
        >>> np.array_equal(loaded.kneighbors()[1], retriever.kneighbors()[1])
        True
        """
        check_is_fitted(self)
        save_retriever(self, path, include_embeddings=include_embeddings)
        return self

    @classmethod
    def load(cls, path, *, device=None, encoder=None):
        """Read a retriever written by :meth:`save`.

        Nothing in the file is executed or imported; the checks of
        :meth:`CROCSClusterer.load` apply.

        Parameters
        ----------
        path : str or path-like
            A file written by :meth:`save`.
        device : str or torch.device, default=None
            Device of the loaded estimator, as in :meth:`CROCSClusterer.load`.
        encoder : nn.Module subclass, default=None
            The encoder class of a model fitted with a custom one.

        Returns
        -------
        retriever : PrototypeRetriever
            Fitted if the file holds the embeddings; otherwise its
            ``estimator`` is the fitted model and ``fit(X_database)`` indexes
            a database with it.

        Examples
        --------
        >>> import os, tempfile
        >>> import numpy as np
        >>> from sklearn_crocs import CROCSClusterer, PrototypeRetriever
        >>> rng = np.random.RandomState(0)
        >>> X, y = rng.randn(40, 400), np.repeat(["A", "B"], 20)
        >>> model = CROCSClusterer(embedding_dim=8, max_epochs=2,
        ...                        validation_fraction=None, random_state=0).fit(X, y)
        >>> retriever = PrototypeRetriever(model, n_neighbors=3).fit(X)
        >>> with tempfile.TemporaryDirectory() as folder:
        ...     path = os.path.join(folder, "retriever.safetensors")
        ...     _ = retriever.save(path, include_embeddings=True)
        ...     loaded = PrototypeRetriever.load(path)
        >>> loaded.kneighbors(("B",), return_distance=False).shape
        (1, 3)
        """
        return load_retriever(cls, path, device=device, encoder=encoder)

    def _set_embeddings(self, embeddings):
        """Index ``embeddings``, the unit-norm rows that kneighbors searches."""
        self.embeddings_ = embeddings
        self.n_samples_fit_ = len(embeddings)
        # Exact search needs the range of the squared norms (1 up to rounding,
        # or 0 for an encoder output of zeros, which cannot be normalised) and
        # the largest value, which sets the scale of the int8 filter.
        self._sq_norm_range, self._max_abs = _value_ranges(embeddings)

    def _embed(self, X, *, name):
        """Unit-norm float32 embeddings of X, computed ``batch_size`` rows at a time."""
        if not hasattr(X, "shape") and not hasattr(X, "iloc"):
            X = np.asarray(X)
        if len(getattr(X, "shape", (0, 0))) < 2:
            raise ValueError(
                f"{name} must have shape (n_samples, n_timepoints) or (n_samples, n_leads, "
                f"n_timepoints); got shape {getattr(X, 'shape', None)}. Reshape a single "
                "ECG with X[None]."
            )
        n_samples = _n_rows(X)
        if n_samples == 0:
            raise ValueError(f"{name} holds no ECG (shape {X.shape}); pass at least one.")
        n_batches = -(-n_samples // self.batch_size)
        report_every = 1 if self.verbose > 1 else max(1, -(-n_batches // 10))
        start_time = time.perf_counter()
        embeddings = None
        for batch, start in enumerate(range(0, n_samples, self.batch_size), 1):
            stop = min(start + self.batch_size, n_samples)
            rows = _rows(X, start, stop)
            out = np.asarray(self.estimator_.transform(rows), dtype=np.float32)
            if embeddings is None:
                embeddings = np.empty((n_samples, out.shape[1]), dtype=np.float32)
            embeddings[start:stop] = out
            if self.verbose and (batch % report_every == 0 or batch == n_batches):
                print(
                    f"Embedded {stop}/{n_samples} ECGs ({time.perf_counter() - start_time:.1f} s)"
                )
        return embeddings

    def _attribute_queries(self, queries):
        """Attribute combinations as a DataFrame, or None if ``queries`` are signals."""
        names = self.attribute_names_
        if isinstance(queries, pd.Series):
            queries = queries.to_dict()
        if isinstance(queries, pd.DataFrame):
            frame = queries.reset_index(drop=True)
        elif isinstance(queries, dict):
            listed = [not isinstance(v, (str, tuple)) and np.ndim(v) > 0 for v in queries.values()]
            frame = pd.DataFrame(queries) if any(listed) else pd.DataFrame([queries])
        elif isinstance(queries, tuple) or (
            isinstance(queries, list)
            and len(queries) > 0
            and all(isinstance(q, (tuple, dict)) for q in queries)
        ):
            rows = [queries] if isinstance(queries, tuple) else queries
            if all(isinstance(q, dict) for q in rows):
                frame = pd.DataFrame(rows)
            else:
                for row in rows:
                    if isinstance(row, dict) or len(row) != len(names):
                        raise ValueError(
                            f"Each attribute combination must give {len(names)} value(s), "
                            f"one per attribute of {names}; got {row!r}."
                        )
                frame = pd.DataFrame([list(row) for row in rows], columns=names, dtype=object)
        else:
            array = np.asarray(queries)
            if array.dtype.kind in "fiu":
                return None
            if array.dtype.kind not in "OUSb" or array.ndim not in (1, 2):
                raise ValueError(
                    "queries must be None, attribute combinations (a tuple, a list of "
                    "tuples, a dict keyed by attribute name, a DataFrame or an array of "
                    "strings) or numeric ECG signals; got an array of dtype "
                    f"{array.dtype} and shape {array.shape}."
                )
            rows = array.reshape(-1, array.shape[-1]) if array.ndim == 2 else array[None]
            if rows.shape[1] != len(names):
                raise ValueError(
                    f"Each attribute combination must give {len(names)} value(s), one per "
                    f"attribute of {names}; got {rows.shape[1]}."
                )
            frame = pd.DataFrame(rows, columns=names, dtype=object)
        frame.columns = [str(c) for c in frame.columns]
        missing = [n for n in names if n not in frame.columns]
        extra = [c for c in frame.columns if c not in names]
        if missing or extra:
            raise ValueError(
                f"Attribute queries must give a value for each attribute of {names}; "
                f"missing {missing}, unknown {extra}."
            )
        if len(frame) == 0:
            raise ValueError("queries holds no attribute combination; pass at least one.")
        return frame[names]

    def _query_rows(self, frame):
        """Rows of ``prototypes_`` of the combinations in ``frame``."""
        crocs = _crocs_step(self.estimator_)
        codes = crocs._encode_attributes(frame)  # clear error for unknown values
        values = [tuple(cats[code] for cats, code in zip(crocs.categories_, row)) for row in codes]
        position = {tuple(row): i for i, row in enumerate(self.prototype_attributes_)}
        missing = [v for v in values if v not in position]
        if missing:
            listed = "; ".join(str(tuple(map(_python_value, v))) for v in missing[:10])
            raise ValueError(
                f"No training ECG has the attribute combination(s) {listed} of "
                f"{self.attribute_names_}, so query='mean' (TP CROCS) has no prototype for "
                "them. Use query='learned' (CP CROCS), which has a prototype for every "
                "combination."
            )
        return np.array([position[v] for v in values], dtype=np.intp)

    def kneighbors(self, queries=None, n_neighbors=None, return_distance=True):
        """Find the database ECGs nearest to each query.

        Parameters
        ----------
        queries : None, attribute combinations or ECG signals, default=None
            What to search for. Told apart by type:

            - ``None``: every prototype, in the order of ``query_attributes_``
              (the paper's retrieval setting);
            - attribute combinations, each translated into its prototype: a
              tuple (one value per attribute, in the order of
              ``attribute_names_``), a list of tuples, a dict keyed by attribute
              name (scalar values: one query; lists: several), a list of such
              dicts, a DataFrame with the attribute names as columns, or an
              array of strings (one combination per row). Numeric attribute
              values must come as tuples, dicts or a DataFrame;
            - a numeric array of shape (n_queries, n_timepoints) or
              (n_queries, n_leads, n_timepoints): ECG signals, embedded by the
              estimator (query by example).
        n_neighbors : int, default=None
            Number of ECGs per query; ``None`` uses ``self.n_neighbors``.
        return_distance : bool, default=True
            Whether to return the distances too.

        Returns
        -------
        distances : ndarray of shape (n_queries, n_neighbors), dtype float64
            Euclidean distances between the unit-norm query and database
            embeddings, increasing along each row. Only returned if
            ``return_distance=True``.
        indices : ndarray of shape (n_queries, n_neighbors)
            Rows of the database (``X`` in ``fit``), nearest first; equal
            distances are ordered by increasing index.
        """
        check_is_fitted(self)
        if n_neighbors is None:
            n_neighbors = self.n_neighbors
        elif not isinstance(n_neighbors, Integral) or isinstance(n_neighbors, bool):
            raise TypeError(f"n_neighbors must be an integer; got {n_neighbors!r}.")
        elif n_neighbors <= 0:
            raise ValueError(f"Expected n_neighbors > 0. Got {n_neighbors}")
        if queries is None:
            vectors = self.prototypes_
        else:
            frame = self._attribute_queries(queries)
            if frame is None:
                vectors = self._embed(queries, name="queries")
            else:
                vectors = self.prototypes_[self._query_rows(frame)]
        if n_neighbors > self.n_samples_fit_:
            raise ValueError(
                f"Expected n_neighbors <= n_samples_fit, but n_neighbors = {n_neighbors}, "
                f"n_samples_fit = {self.n_samples_fit_}, n_samples = {len(vectors)}"
            )
        distances, indices = _top_k(
            vectors,
            self.embeddings_,
            n_neighbors,
            sq_norm_range=self._sq_norm_range,
            max_abs=self._max_abs,
        )
        if return_distance:
            return distances, indices
        return indices

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.three_d_array = True
        tags.target_tags.required = False
        tags.target_tags.multi_output = True
        return tags
