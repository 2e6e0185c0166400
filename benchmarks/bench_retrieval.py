"""Retrieval: PrototypeRetriever.kneighbors against scikit-learn and a bare blockwise torch search.

For each database size N, 40 unit-norm queries search N unit-norm float32
embeddings of size 128 for their 10 nearest rows:

- *torch mm + topk*: a bare blockwise search written here, one
  ``torch.mm`` of the queries with each block of 65,536 rows,
  ``torch.topk`` on it and on the concatenation with the best so far: the
  floor of the package's search, which does the same with Euclidean
  scores, ties to the lower index and float64 distances of the rows found;
- *sklearn NearestNeighbors(algorithm="brute")*: scikit-learn's exact
  search (its chunked ArgKmin);
- *PrototypeRetriever.kneighbors*: the package. The retriever is fitted on
  a small random database, then its index is replaced by the N benchmark
  embeddings, so that exactly the code of ``kneighbors`` is timed and not
  the encoder.

Each (method, N) runs in its own process, a few timed calls after an
untimed one; all sizes and methods take turns, round after round, so that a
change in machine speed (common on shared virtual machines) hits them
alike. Time is the median [IQR] over all timed calls; the ratios and the
growth with N are medians over rounds of the ratios within a round. "extra
MB" is the peak resident memory during the calls minus the memory held
before them (the stored embeddings included in the latter), the largest
over rounds. The load average is printed before and after the runs: compare
figures only from a quiet machine. Results are checked against each other.
Run ``python benchmarks/bench_retrieval.py`` (``--quick`` for small sizes).
"""

import argparse
import time

import numpy as np
import torch

from _utils import (
    fmt_ms,
    load_average,
    machine_summary,
    print_table,
    repeat,
    reset_peak_rss,
    rss_mb,
    run_rounds,
    summary,
    write_csv,
)

N_QUERIES, DIM, K = 40, 128, 10
BLOCK_ROWS = 65536  # as the package's search
METHODS = ("kneighbors", "sklearn", "torch")


def _unit(rng, n):
    x = rng.standard_normal((n, DIM), dtype=np.float32)
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    return x


def _problem(n, seed=0):
    rng = np.random.default_rng(seed)
    return _unit(rng, N_QUERIES), _unit(rng, n)


def _retriever(database):
    """A fitted PrototypeRetriever whose index holds ``database``."""
    from sklearn_crocs import CROCSClusterer, PrototypeRetriever

    rng = np.random.default_rng(1)
    X = rng.standard_normal((64, 400)).astype(np.float32)
    y = np.column_stack([rng.integers(0, 4, 64), rng.integers(0, 2, 64), rng.integers(0, 5, 64)])
    model = CROCSClusterer(
        embedding_dim=DIM, max_epochs=1, validation_fraction=None, random_state=0
    )
    retriever = PrototypeRetriever(model.fit(X, y), n_neighbors=K).fit(X)
    retriever._set_embeddings(database)  # as fit indexes its embeddings
    return retriever


def blockwise_topk(queries, database, k):
    """Indices of the ``k`` largest inner products: torch.mm and torch.topk per block."""
    queries = torch.from_numpy(queries)
    best_values = torch.empty((len(queries), 0))
    best_indices = torch.empty((len(queries), 0), dtype=torch.int64)
    for start in range(0, len(database), BLOCK_ROWS):
        scores = torch.mm(queries, torch.from_numpy(database[start : start + BLOCK_ROWS]).T)
        values, indices = torch.topk(scores, min(k, scores.shape[1]), dim=1)
        values = torch.cat([best_values, values], dim=1)
        indices = torch.cat([best_indices, indices + start], dim=1)
        best_values, order = torch.topk(values, min(k, values.shape[1]), dim=1)
        best_indices = indices.gather(1, order)
    return best_values, best_indices


def measure(method, n, repeats):
    queries, database = _problem(n)
    if method == "torch":

        def run():
            return blockwise_topk(queries, database, K)
    elif method == "sklearn":
        from sklearn.neighbors import NearestNeighbors

        index = NearestNeighbors(n_neighbors=K, algorithm="brute").fit(database)

        def run():
            return index.kneighbors(queries, K)
    else:
        retriever = _retriever(database)
        retriever.prototypes_ = queries  # query() searches with every prototype

        def run():
            return retriever.query()

    before = rss_mb()
    reset_peak_rss()
    times = repeat(run, repeats)
    extra = rss_mb("VmHWM") - before
    return {
        "times": {"time": times.tolist()},
        "work": {"time": 1},
        "peak_mb": extra,
        "indices": np.asarray(run()[1]).tolist(),
    }


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="sizes up to 10^5, 2 rounds")
    parser.add_argument("--csv", help="also append every table to this CSV file")
    parser.add_argument("--sizes", type=int, nargs="+", help="database sizes (default: 10^4-10^6)")
    parser.add_argument("--rounds", type=int, help="rounds of fresh processes (default: 5)")
    args = parser.parse_args(argv)
    write_csv(args.csv)
    sizes = args.sizes or (
        [10_000, 50_000, 100_000] if args.quick else [10_000, 100_000, 250_000, 500_000, 1_000_000]
    )
    rounds, repeats = (2, 3) if args.quick else (5, 3)
    rounds = args.rounds or rounds
    print(f"Machine: {machine_summary()}")
    print(f"Before: {load_average()}")
    start = time.perf_counter()
    # Every size and method takes turns (each call in a fresh process), so that
    # a change of machine speed hits them alike; ratios and growth are taken
    # within each round, then the median over rounds.
    cases = [("measure", {"method": m, "n": n}) for n in sizes for m in METHODS]
    pooled = run_rounds("bench_retrieval", cases, rounds, repeats=repeats)
    rows, previous = [], None
    for i, n in enumerate(sizes):
        results = dict(zip(METHODS, pooled[len(METHODS) * i : len(METHODS) * (i + 1)]))
        for other in ("sklearn", "torch"):
            ours = np.asarray(results["kneighbors"]["runs"][0]["indices"])
            theirs = np.asarray(results[other]["runs"][0]["indices"])
            if not np.array_equal(ours, theirs):
                print(f"note: N={n}: {np.mean(ours != theirs):.2%} of indices differ from {other}")
        # Seconds per call: every repeat pooled, and one median per round.
        times = {m: sum((r["times"]["time"] for r in results[m]["runs"]), []) for m in METHODS}
        per_round = {m: 1 / np.asarray(results[m]["time"]["rounds"]) for m in METHODS}
        growth = ""
        if previous is not None:
            ratio = np.median(per_round["kneighbors"] / previous[1])
            growth = f"{ratio:.2f} for x{n / previous[0]:g} N"
        rows.append(
            [
                f"{n:,}",
                *(fmt_ms(summary(times[m])) for m in METHODS),
                f"{np.median(per_round['sklearn'] / per_round['kneighbors']):.2f}",
                f"{np.median(per_round['kneighbors'] / per_round['torch']):.2f}",
                " / ".join(f"{results[m]['peak_mb']:.0f}" for m in METHODS),
                growth,
            ]
        )
        previous = (n, per_round["kneighbors"])
    print_table(
        f"Retrieval: {N_QUERIES} queries, k={K}, {DIM}-dim float32 embeddings, "
        f"{rounds} rounds x {repeats} repeats (ms)",
        [
            "N",
            "kneighbors",
            "sklearn brute",
            "torch mm+topk",
            "sklearn/kneighbors",
            "kneighbors/torch",
            "extra MB (kneighbors/sklearn/torch)",
            "kneighbors growth",
        ],
        rows,
    )
    print(f"After: {load_average()} ({time.perf_counter() - start:.0f} s)")


if __name__ == "__main__":
    main()
