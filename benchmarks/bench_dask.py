"""A hyperparameter search on a dask cluster: wall time with 1 and 2 workers.

``GridSearchCV`` of ``CROCSClusterer`` (the paper's CNN on the bundled PTB-XL
sample's 5-s frames, lead II, 4 candidates x 2 patient-grouped folds = 8
fits of a few epochs, AMI of the class as the score) run three ways:

- *joblib, n_jobs=1*: scikit-learn's sequential search in this process,
  torch on its default threads (the baseline);
- *dask, 1 worker* and *dask, 2 workers*: the same search through joblib's
  dask backend on a ``LocalCluster`` of worker processes on 127.0.0.1, one
  thread each (``torch.set_num_threads(1)`` in every worker: the
  application's choice, not the library's).

The three take turns, round after round. Scores are the same up to float
rounding, which can differ from process to process and, over a few epochs of
training, moves a score slightly: the largest differences from
the sequential search are printed. Time
is the median over rounds, and the ratios are medians of the ratios within
a round. On 2 cores, 2 workers of 1 thread do the work of 1 process of 2
threads: the point is that the same code runs unchanged on a cluster, and
what it costs. Run ``python benchmarks/bench_dask.py`` (needs the ``dask``
extra; ``--quick`` for one round of one epoch).
"""

import argparse
import os
import time

import joblib
import numpy as np
import torch
from sklearn.model_selection import GridSearchCV, GroupKFold

from sklearn_crocs import CROCSClusterer
from sklearn_crocs.datasets import load_ptbxl_sample_frames
from sklearn_crocs.metrics import make_ami_scorer

from _utils import machine_summary, print_table, write_csv


def _problem():
    data = load_ptbxl_sample_frames()
    X = np.concatenate([data.X_train, data.X_test])[:, 1:2]  # lead II
    y = np.concatenate([data.y_train, data.y_test])
    groups = np.concatenate([data.groups_train, data.groups_test])
    return X, y, groups


def _search(epochs):
    estimator = CROCSClusterer(encoder="cnn", max_epochs=epochs, random_state=0)
    return GridSearchCV(
        estimator,
        {"tau_w": [0.5, 1.0], "beta": [0.0, 0.2]},
        scoring=make_ami_scorer(),
        cv=GroupKFold(n_splits=2),
    )


def _time(fn):
    start = time.perf_counter()
    scores = fn()
    return time.perf_counter() - start, scores


def main(argv=None):
    import distributed

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="one round, one epoch")
    parser.add_argument("--csv", help="also append the table to this CSV file")
    args = parser.parse_args(argv)
    write_csv(args.csv)
    rounds, epochs = (1, 1) if args.quick else (3, 5)
    print(f"Machine: {machine_summary()}")
    print("Before: load average " + " ".join(f"{v:.2f}" for v in os.getloadavg()))
    X, y, groups = _problem()

    def sequential():
        return _search(epochs).fit(X, y, groups=groups).cv_results_["mean_test_score"]

    def on_cluster():
        with joblib.parallel_config(backend="dask"):
            search = _search(epochs).set_params(n_jobs=-1)
            return search.fit(X, y, groups=groups).cv_results_["mean_test_score"]

    times = {"joblib, n_jobs=1": [], "dask, 1 worker": [], "dask, 2 workers": []}
    differences = {"dask, 1 worker": [], "dask, 2 workers": []}
    clusters = {}
    for n in (1, 2):
        cluster = distributed.LocalCluster(
            n_workers=n, threads_per_worker=1, host="127.0.0.1", dashboard_address=None
        )
        client = distributed.Client(cluster, set_as_default=False)
        client.run(torch.set_num_threads, 1)
        clusters[n] = (cluster, client)
    try:
        for _ in range(rounds):
            t, sequential_scores = _time(sequential)
            times["joblib, n_jobs=1"].append(t)
            for n, label in [(1, "dask, 1 worker"), (2, "dask, 2 workers")]:
                _, client = clusters[n]
                with client.as_current():
                    t, result = _time(on_cluster)
                times[label].append(t)
                differences[label].append(np.abs(result - sequential_scores).max())
    finally:
        for cluster, client in clusters.values():
            client.close()
            cluster.close()
    base = np.asarray(times["joblib, n_jobs=1"])
    rows = [
        [
            label,
            f"{np.median(t):.1f}",
            f"{np.median(base / np.asarray(t)):.2f}x",
            f"{max(differences[label]):.1e}" if label in differences else "",
        ]
        for label, t in times.items()
    ]
    print_table(
        f"GridSearchCV, 4 candidates x 2 folds, {len(X)} frames, {epochs} epoch(s), "
        f"{rounds} round(s)",
        ["case", "wall s (median)", "speed vs n_jobs=1", "largest score difference"],
        rows,
    )
    print("After: load average " + " ".join(f"{v:.2f}" for v in os.getloadavg()))


if __name__ == "__main__":
    main()
