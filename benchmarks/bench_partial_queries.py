"""Partial queries on the PTB-XL sample: nearest matching prototype vs their mean.

A partial query (``PrototypeRetriever.query({"sex": "F"})``) names some
attributes and leaves the others free, so several prototypes match it. This
script compares the two ways of searching with them:

- ``partial="min"``: an ECG's distance to the query is its distance to the
  nearest matching prototype;
- ``partial="mean"``: its distance to the L2-normalised mean of the matching
  prototypes.

Protocol (as ``bench_accuracy.py``): the PTB-XL sample's 5-s frames, class x
sex x age quartile, 60 % of the patients for training and 40 % held out, one
split per seed; ``CROCSClusterer`` with its defaults fitted on the training
patients; the held-out ECGs are the database. Nothing is tuned on them. The
queries are every value of every single attribute (2 classes + 2 sexes + 4
age groups = 8 queries); for each, the 10 nearest held-out ECGs are
retrieved, and a retrieved ECG is relevant when it has the queried value.

Reported per attribute, mean (std) over seeds, in %:

- ``prec@K``: the fraction of the first K retrieved ECGs that are relevant,
  averaged over the attribute's values (``chance``: the fraction of
  relevant ECGs in the database, what a random search gets);
- ``P@K``: the paper's Eq. 5 for the attribute alone (the fraction of
  queries with at least one relevant ECG among the first K).

The decision rule, fixed before running: the estimator's default is the
method with the higher ``prec@10`` over all 8 queries, pooled over seeds.

Usage::

    python benchmarks/bench_partial_queries.py [--seeds 0 1 2]
    python benchmarks/bench_partial_queries.py --quick   # one seed, 2 epochs: a smoke test
"""

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
from sklearn.frozen import FrozenEstimator

from sklearn_crocs import CROCSClusterer, PrototypeRetriever
from sklearn_crocs.datasets import load_ptbxl_sample_frames
from sklearn_crocs.metrics import precision_at_k

sys.path.insert(0, str(Path(__file__).parent))
from bench_accuracy import KS, mean_std  # noqa: E402

from _utils import machine_summary  # noqa: E402

METHODS = ("min", "mean")


def run_seed(seed, quick):
    data = load_ptbxl_sample_frames(random_state=seed)
    extra = {"max_epochs": 2} if quick else {}
    start = time.perf_counter()
    model = CROCSClusterer(**extra, random_state=seed).fit(
        data.X_train, data.y_train, groups=data.groups_train
    )
    seconds = time.perf_counter() - start
    y_db = data.y_test.astype(object)
    queries = [
        (name, value)
        for name, values in zip(model.attribute_names_, model.categories_)
        for value in values
    ]
    rows = {}
    for method in METHODS:
        retriever = PrototypeRetriever(FrozenEstimator(model), partial=method).fit(data.X_test)
        indices = retriever.query(
            [{name: value} for name, value in queries], n_neighbors=max(KS), return_distance=False
        )
        for attribute in [*model.attribute_names_, "all"]:
            chosen = [i for i, (name, _) in enumerate(queries) if attribute in (name, "all")]
            relevant = np.array(
                [y_db[queries[i][0]].to_numpy()[indices[i]] == queries[i][1] for i in chosen]
            )
            row = rows.setdefault(attribute, {})
            row["chance", ""] = 100 * np.mean(
                [np.mean(y_db[queries[i][0]] == queries[i][1]) for i in chosen]
            )
            for k in KS:
                row[f"prec@{k}", method] = 100 * relevant[:, :k].mean()
            if attribute != "all":
                values = [[queries[i][1]] for i in chosen]
                for k in KS:
                    row[f"P@{k}", method] = 100 * precision_at_k(
                        y_db[[attribute]], indices[chosen], values, k=k
                    )
    table = pd.DataFrame.from_dict(rows, orient="index")
    table.columns = pd.MultiIndex.from_tuples(table.columns)
    return table, seconds


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--quick", action="store_true", help="one seed, 2 epochs: a smoke test")
    args = parser.parse_args(argv)
    seeds = args.seeds[:1] if args.quick else args.seeds
    print(f"Machine: {machine_summary()}")
    print(f"PTB-XL sample, held-out patients as the database; seeds {seeds}")
    start = time.perf_counter()
    tables = []
    for seed in seeds:
        table, seconds = run_seed(seed, args.quick)
        tables.append(table)
        print(f"seed {seed}: fit {seconds:.0f} s (total {time.perf_counter() - start:.0f} s)")
    mean, _, text = mean_std(tables)
    columns = [("chance", "")] + [(f"{m}@{k}", h) for m in ("prec", "P") for k in KS
                                   for h in METHODS]  # fmt: skip
    with pd.option_context("display.width", 250, "display.max_columns", 50):
        print("\nSingle-attribute queries, %: mean (std) over seeds")
        print(text[columns].fillna("").to_string())
    best = max(METHODS, key=lambda m: mean.loc["all", ("prec@10", m)])
    print(
        f"\nprec@10 over all queries: min {mean.loc['all', ('prec@10', 'min')]:.1f}, "
        f"mean {mean.loc['all', ('prec@10', 'mean')]:.1f} -> default partial={best!r}"
    )
    print(f"Total time {time.perf_counter() - start:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
