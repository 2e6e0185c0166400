"""Retrieval: PrototypeRetriever.kneighbors against scikit-learn and the bare matrix product.

For each database size N, 40 unit-norm queries search N unit-norm float32
embeddings of size 128 for their 10 nearest rows:

- *bare matrix product* ``Q @ E.T`` into a preallocated output: the floor
  every exact method must pay;
- *sklearn NearestNeighbors(algorithm="brute")*: scikit-learn's exact search;
- *PrototypeRetriever.kneighbors*: the package's exact blockwise top-k,
  which filters each block with an int8 or bfloat16 product of proven error
  bound where the CPU multiplies those natively (then refines the few rows
  left in float64), so it can take less time than the float32 product. The
  retriever is fitted on a small real database, then its ``embeddings_`` are
  replaced by the N benchmark embeddings, so that exactly the code of
  ``kneighbors`` is timed and not the encoder.

The embeddings are random unit vectors; the last row repeats the largest N
with *clustered* embeddings, tight groups around the 40 queries (cosine
about 0.99 to their query), as CROCS embeddings gather around their
prototypes: there int8 and bfloat16 cannot tell rows apart, and the search
falls back to float32 filtering.

Each (method, N) runs in its own process, a few timed calls after an
untimed one; all sizes and methods take turns, round after round, so that a
change in machine speed (common on shared virtual machines) hits them
alike. Time is the median [IQR] over all timed calls; the ratios and the
growth with N are medians over rounds of the ratios within a round. "extra
MB" is the peak resident memory during the calls minus the memory held
before them (the stored embeddings included in the latter), the largest
over rounds. Results are checked against each other. Run ``python benchmarks/bench_retrieval.py``
(``--quick`` for small sizes).
"""

import argparse
import time

import numpy as np

from _utils import (
    fmt_ms,
    machine_summary,
    print_table,
    repeat,
    reset_peak_rss,
    rss_mb,
    run_rounds,
    summary,
)

N_QUERIES, DIM, K = 40, 128, 10


def _unit(rng, n):
    x = rng.standard_normal((n, DIM), dtype=np.float32)
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    return x


def _problem(n, clustered=False, seed=0):
    rng = np.random.default_rng(seed)
    queries = _unit(rng, N_QUERIES)
    if not clustered:
        return queries, _unit(rng, n)
    database = queries[rng.integers(0, N_QUERIES, n)]
    database += 0.01 * rng.standard_normal(database.shape, dtype=np.float32)
    database /= np.linalg.norm(database, axis=1, keepdims=True)
    return queries, database


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


def measure(method, n, repeats, clustered=False):
    queries, database = _problem(n, clustered)
    if method == "matmul":
        out = np.empty((len(queries), n), dtype=np.float32)  # allocated once: the pure product

        def run():
            return np.matmul(queries, database.T, out=out)
    elif method == "sklearn":
        from sklearn.neighbors import NearestNeighbors

        index = NearestNeighbors(n_neighbors=K, algorithm="brute").fit(database)

        def run():
            return index.kneighbors(queries, K)
    else:
        retriever = _retriever(database)
        retriever.prototypes_ = queries  # kneighbors() searches with every prototype

        def run():
            return retriever.kneighbors()

    before = rss_mb()
    reset_peak_rss()
    times = repeat(run, repeats)
    extra = rss_mb("VmHWM") - before
    result = run()
    indices = None if method == "matmul" else np.asarray(result[1]).tolist()
    return {
        "times": {"time": times.tolist()},
        "work": {"time": 1},
        "peak_mb": extra,
        "indices": indices,
    }


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="sizes up to 10^5, 2 rounds")
    args = parser.parse_args(argv)
    sizes = (
        [10_000, 50_000, 100_000] if args.quick else [10_000, 100_000, 250_000, 500_000, 1_000_000]
    )
    rounds, repeats = (2, 3) if args.quick else (5, 3)
    methods = ("matmul", "sklearn", "crocs")
    print(f"Machine: {machine_summary()}")
    start = time.perf_counter()
    sets = [(n, False) for n in sizes] + [(sizes[-1], True)]
    # Every size and method takes turns (each call in a fresh process), so that
    # a change of machine speed hits them alike; ratios and growth are taken
    # within each round, then the median over rounds.
    cases = [
        ("measure", {"method": m, "n": n, "clustered": clustered})
        for n, clustered in sets
        for m in methods
    ]
    pooled = run_rounds("bench_retrieval", cases, rounds, repeats=repeats)
    rows, previous = [], None
    for i, (n, clustered) in enumerate(sets):
        results = dict(zip(methods, pooled[3 * i : 3 * i + 3]))
        for crocs_run, sklearn_run in zip(results["crocs"]["runs"], results["sklearn"]["runs"]):
            if crocs_run["indices"] != sklearn_run["indices"]:
                mismatch = np.mean(
                    np.asarray(crocs_run["indices"]) != np.asarray(sklearn_run["indices"])
                )
                print(f"note: N={n}: {mismatch:.2%} of neighbour indices differ from scikit-learn")
                break
        # Seconds per call: every repeat pooled, and one median per round.
        times = {m: sum((r["times"]["time"] for r in results[m]["runs"]), []) for m in methods}
        per_round = {m: 1 / np.asarray(results[m]["time"]["rounds"]) for m in methods}
        growth = ""
        if previous is not None and not clustered:
            growth = f"{np.median(per_round['crocs'] / previous[1]):.2f} for x{n / previous[0]:g} N"
        rows.append(
            [
                f"{n:,}" + (" clustered" if clustered else ""),
                *(fmt_ms(summary(times[m])) for m in methods),
                f"{np.median(per_round['crocs'] / per_round['matmul']):.2f}",
                f"{np.median(per_round['sklearn'] / per_round['crocs']):.1f}",
                " / ".join(f"{results[m]['peak_mb']:.0f}" for m in methods),
                growth,
            ]
        )
        if not clustered:
            previous = (n, per_round["crocs"])
    print_table(
        f"Retrieval: {N_QUERIES} queries, k={K}, {DIM}-dim float32 embeddings, "
        f"{rounds} rounds x {repeats} repeats (ms)",
        [
            "N",
            "matmul Q@E.T",
            "sklearn brute",
            "kneighbors",
            "kneighbors/matmul",
            "sklearn/kneighbors",
            "extra MB (matmul/sklearn/crocs)",
            "kneighbors growth",
        ],
        rows,
    )
    print(f"({time.perf_counter() - start:.0f} s)")


if __name__ == "__main__":
    main()
