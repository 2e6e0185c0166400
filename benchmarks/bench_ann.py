"""Retrieval at scale: exact search against the FAISS indexes of PrototypeRetriever.

For each database size N, synthetic 128-d unit embeddings are written to a
memory map on disk: 64 cluster centres (as embeddings gather around their
prototypes) plus Gaussian noise. 40 queries (noisy centres) search them for
their 10 nearest rows with:

- *exact*: ``PrototypeRetriever(index="exact")``, the blockwise search that
  reads every row (the baseline);
- *ivf_flat*, *ivf_pq*: ``PrototypeRetriever(index=...)`` with
  ``nlist=4096`` cells (fewer than the default ``4 sqrt(N)``, whose k-means
  would take tens of minutes on 2 cores at 10^7) and the default
  ``nprobe=16``; PQ with its default 32 bytes per embedding;
- *hnsw*: up to 10^6 only (its graph takes hours to build at 10^7 on 2
  cores).

Reported per method and N: the build time (the index; exact has none), the
median search time of 5 calls after one untimed call, the anonymous memory
that building the index added (MB; the memory map's pages are page cache and
not counted), and recall@10 against the exact search (as
``PrototypeRetriever.recall`` computes it). Each (method, N) runs in its own process.
Needs the ``[faiss]`` extra and ~5.2 GB of free disk at 10^7.

Usage::

    python benchmarks/bench_ann.py [--sizes 1000000 10000000] [--dir /tmp/bench_ann]
    python benchmarks/bench_ann.py --quick      # 10^5 rows: a smoke test
"""

import argparse
import multiprocessing
import os
import sys
import time
from pathlib import Path

import numpy as np

from _utils import machine_summary, rss_mb

N_QUERIES, DIM, K, N_CENTRES = 40, 128, 10, 64
METHODS = ("exact", "ivf_flat", "ivf_pq", "hnsw")
HNSW_MAX = 1_000_000
BLOCK = 1_000_000


def database_path(folder, n):
    return Path(folder) / f"embeddings_{n}.npy"


def write_database(folder, n):
    """Unit embeddings around 64 centres, written block by block to a .npy memory map."""
    path = database_path(folder, n)
    if path.exists():
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    centres = rng.standard_normal((N_CENTRES, DIM), dtype=np.float32)
    out = np.lib.format.open_memmap(path, mode="w+", dtype=np.float32, shape=(n, DIM))
    for start in range(0, n, BLOCK):
        stop = min(n, start + BLOCK)
        rows = centres[rng.integers(0, N_CENTRES, stop - start)]
        rows += 0.5 * rng.standard_normal(rows.shape, dtype=np.float32)
        rows /= np.linalg.norm(rows, axis=1, keepdims=True)
        out[start:stop] = rows
    out.flush()
    del out
    return path


def queries():
    rng = np.random.default_rng(0)
    centres = rng.standard_normal((N_CENTRES, DIM), dtype=np.float32)
    rng = np.random.default_rng(1)
    rows = centres[rng.integers(0, N_CENTRES, N_QUERIES)]
    rows += 0.5 * rng.standard_normal(rows.shape, dtype=np.float32)
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


def _retriever(method):
    """An unfitted PrototypeRetriever around a small fitted model (its encoder is not timed)."""
    from sklearn_crocs import CROCSClusterer, PrototypeRetriever

    rng = np.random.default_rng(1)
    X = rng.standard_normal((64, 400)).astype(np.float32)
    y = rng.integers(0, 4, 64)
    model = CROCSClusterer(encoder="cnn", embedding_dim=DIM, max_epochs=1, random_state=0)
    retriever = PrototypeRetriever(model.fit(X, y), n_neighbors=K).fit(X)
    # Fitted state; the benchmark's database then replaces the embeddings.
    params = {"nlist": 4096} if method.startswith("ivf") else None
    return retriever.set_params(index=method, index_params=params)


def measure(method, path, out):
    database = np.load(path, mmap_mode="r")
    vectors = queries()
    retriever = _retriever(method)
    # Anonymous memory only: pages of the memory map read by a search are page
    # cache, which the kernel reclaims, though they count in the resident size.
    before = rss_mb("RssAnon")
    start = time.perf_counter()
    retriever._set_embeddings(database)  # as fit indexes the embeddings it computed
    build = time.perf_counter() - start
    index_mb = rss_mb("RssAnon") - before
    exact = retriever._top_k(vectors, K, exact=True)
    found = retriever._top_k(vectors, K)
    times = []
    for _ in range(5):
        start = time.perf_counter()
        retriever._top_k(vectors, K)
        times.append(time.perf_counter() - start)
    hits = [len(np.intersect1d(a, b)) for a, b in zip(found[1], exact[1])]
    out.put({
        "build_s": build if method != "exact" else float("nan"),
        "search_ms": 1e3 * float(np.median(times)),
        "index_mb": index_mb,
        "recall": float(np.sum(hits)) / exact[1].size,
    })  # fmt: skip


def run(method, path):
    context = multiprocessing.get_context("spawn")
    out = context.Queue()
    process = context.Process(target=measure, args=(method, path, out))
    process.start()
    process.join()
    if process.exitcode != 0:
        raise RuntimeError(f"{method} failed (exit code {process.exitcode}); see above.")
    return out.get(timeout=10)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1_000_000, 10_000_000])
    parser.add_argument("--dir", default="/tmp/bench_ann", help="where the memory maps go")
    parser.add_argument("--quick", action="store_true", help="10^5 rows: a smoke test")
    args = parser.parse_args(argv)
    sizes = [100_000] if args.quick else args.sizes
    print(f"Machine: {machine_summary()}; load average {os.getloadavg()}")
    print(f"{N_QUERIES} queries, k = {K}, {DIM}-d unit embeddings around {N_CENTRES} centres")
    print(f"{'N':>10} {'method':>9} {'build s':>9} {'search ms':>10} {'index MB':>9} "
          f"{'recall@10':>9}")  # fmt: skip
    for n in sizes:
        path = write_database(args.dir, n)
        for method in METHODS:
            if method == "hnsw" and n > HNSW_MAX:
                continue
            r = run(method, path)
            print(f"{n:>10} {method:>9} {r['build_s']:>9.1f} {r['search_ms']:>10.1f} "
                  f"{r['index_mb']:>9.0f} {r['recall']:>9.3f}", flush=True)  # fmt: skip
    print(f"load average {os.getloadavg()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
