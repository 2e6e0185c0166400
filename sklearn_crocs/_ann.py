"""Approximate nearest-neighbour search with FAISS: the retriever's kernel for very large databases.

:class:`FaissIndex` builds a FAISS index over a database of embeddings (read
in blocks, so a memory map is never loaded whole) and searches it; the
neighbours it finds are re-ranked by their exact float64 distances, so only
*which* rows are found is approximate, never the distances returned.
"""

import math

import numpy as np

from ._search import BLOCK_ROWS, exact_distances
from ._utils import _warn

__all__ = ["FaissIndex", "INDEX_PARAMS"]

#: The parameters of each kind of index, with their defaults (None: chosen from the data).
INDEX_PARAMS = {
    "ivf_flat": {"nlist": None, "nprobe": 16},
    "ivf_pq": {"nlist": None, "nprobe": 16, "m": None, "nbits": None},
    "hnsw": {"M": 32, "ef_construction": 40, "ef_search": 64},
}
# FAISS's k-means wants at least this many training points per centroid.
_POINTS_PER_CENTROID = 39
# Embeddings that the product quantiser of "ivf_pq" needs for FAISS's usual
# 8-bit codes (2**8 centroids per sub-vector, each trained on 39 points);
# with fewer, its codes are coarser or poorly trained, and recall drops.
_PQ_MIN_EMBEDDINGS = _POINTS_PER_CENTROID * 2**8


def _import_faiss():
    try:
        import faiss
    except ImportError as exc:
        raise ImportError(
            "PrototypeRetriever(index=...) other than 'exact' needs FAISS, which could not "
            f"be imported ({exc}): pip install 'sklearn-crocs[faiss]' (the faiss-cpu package)."
        ) from exc
    return faiss


def resolve_params(kind, params, n_samples, dim):
    """``params`` completed with the defaults of ``kind``, the data-dependent ones chosen."""
    allowed = INDEX_PARAMS[kind]
    unknown = sorted(set(params or {}) - set(allowed))
    if unknown:
        raise ValueError(
            f"index_params {unknown} are not parameters of index={kind!r}; its parameters "
            f"are {sorted(allowed)}."
        )
    resolved = {**allowed, **(params or {})}
    if kind.startswith("ivf") and resolved["nlist"] is None:
        # FAISS's guide: about 4 sqrt(n) cells, each trained on enough points.
        resolved["nlist"] = max(1, min(int(4 * math.sqrt(n_samples)),
                                       n_samples // _POINTS_PER_CENTROID))  # fmt: skip
    if kind == "ivf_pq":
        if resolved["m"] is None:
            # Sub-vectors of 4 dimensions: 32 bytes per 128-d embedding at 8 bits.
            resolved["m"] = max(d for d in range(1, max(1, dim // 4) + 1) if dim % d == 0)
        if dim % resolved["m"]:
            raise ValueError(f"index_params m={resolved['m']} must divide the dimension {dim}.")
        if resolved["nbits"] is None:
            fit = int(math.log2(max(2, n_samples // _POINTS_PER_CENTROID)))
            resolved["nbits"] = max(1, min(8, fit))
    for name, value in resolved.items():
        if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or value < 1:
            raise ValueError(f"index_params {name} must be a positive int; got {value!r}.")
    if kind.startswith("ivf") and resolved["nlist"] > n_samples:
        raise ValueError(
            f"index_params nlist={resolved['nlist']} cells need at least as many embeddings, "
            f"but the database has {n_samples}."
        )
    return resolved


class FaissIndex:
    """A FAISS index of a database of embeddings, searched with exact re-ranking.

    Parameters
    ----------
    embeddings : array-like of shape (n_samples, dim)
        The database (float32 rows, a memory map is read in blocks).
    kind : {"ivf_flat", "ivf_pq", "hnsw"}
        FAISS index: inverted lists of the vectors themselves
        (``IVF{nlist},Flat``), of their product-quantised codes
        (``IVF{nlist},PQ{m}x{nbits}``: memory of ``m * nbits / 8`` bytes per
        ECG), or a graph (``HNSW{M}``).
    params : dict or None
        Overrides of :data:`INDEX_PARAMS`.

    Attributes
    ----------
    params : dict
        The parameters used, data-dependent defaults resolved.
    description : str
        The FAISS factory string.
    """

    def __init__(self, embeddings, kind, params=None):
        faiss = _import_faiss()
        n_samples, dim = embeddings.shape
        self.kind = kind
        self.params = params = resolve_params(kind, params, n_samples, dim)
        if kind == "ivf_pq" and n_samples < _PQ_MIN_EMBEDDINGS:
            _warn(
                f"index='ivf_pq' on {n_samples:,} embeddings: FAISS's k-means wants about "
                f"{_POINTS_PER_CENTROID} training points per centroid, {_PQ_MIN_EMBEDDINGS:,} "
                "for the product quantiser's usual 8-bit codes; on fewer, its codes are "
                f"coarser (nbits={params['nbits']} here) or poorly trained, and recall suffers "
                "(on tiny databases it collapses). Search a database this small with "
                "index='exact' or 'ivf_flat', or check what the index finds with recall()."
            )
        if kind == "ivf_flat":
            self.description = f"IVF{params['nlist']},Flat"
        elif kind == "ivf_pq":
            self.description = f"IVF{params['nlist']},PQ{params['m']}x{params['nbits']}"
        else:
            self.description = f"HNSW{params['M']}"
        index = faiss.index_factory(dim, self.description, faiss.METRIC_L2)
        if kind == "hnsw":
            index.hnsw.efConstruction = params["ef_construction"]
        if not index.is_trained:
            # A fixed sample (the same database gives the same index) of 64 rows
            # per cell, and enough for the 2**nbits codes of each PQ sub-vector.
            n_train = max(64 * params["nlist"], _POINTS_PER_CENTROID * 2 ** params.get("nbits", 0))
            n_train = min(n_samples, n_train)
            rows = np.sort(np.random.RandomState(0).choice(n_samples, n_train, replace=False))
            index.train(np.ascontiguousarray(embeddings[rows], dtype=np.float32))
        for start in range(0, n_samples, BLOCK_ROWS):
            block = embeddings[start : start + BLOCK_ROWS]
            index.add(np.ascontiguousarray(block, dtype=np.float32))
        space = faiss.ParameterSpace()
        if kind == "hnsw":
            space.set_index_parameter(index, "efSearch", params["ef_search"])
        else:
            space.set_index_parameter(index, "nprobe", min(params["nprobe"], params["nlist"]))
        self._index = index

    def search(self, queries, database, k):
        """``(distances, indices)`` of the ``k`` nearest rows found for each query.

        Distances are exact (float64, from ``database``) and increasing;
        equal distances are ordered by increasing index. Where the index
        finds fewer than ``k`` rows (too few in the probed cells), the row
        of ``indices`` holds ``-1`` in those places and ``distances`` inf.
        """
        queries = np.ascontiguousarray(queries, dtype=np.float32)
        _, indices = self._index.search(queries, k)
        found = indices >= 0
        distances = np.full(indices.shape, np.inf)
        safe = np.where(found, indices, 0)
        exact = exact_distances(queries.astype(np.float64), database, safe, BLOCK_ROWS)
        distances[found] = exact[found]
        order = np.lexsort((np.where(found, indices, np.iinfo(np.int64).max), distances))
        return (
            np.take_along_axis(distances, order, axis=1),
            np.take_along_axis(indices, order, axis=1),
        )
