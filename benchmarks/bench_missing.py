"""Missing attributes on the PTB-XL sample: marginalising them vs dropping those ECGs.

Protocol (the data, splits and metrics of ``bench_accuracy.py``, whose helpers
this script uses):

- data: the PTB-XL sample's 5-s 12-lead frames, class x sex x age quartile;
  60 % of the patients for training, 40 % held out, one split per seed;
- missing labels: of the training patients, a fraction (0, 30 or 60 %) loses
  its sex and, drawn independently, the same fraction loses its age group,
  for all of the patient's ECGs (a patient's record either has the value or
  not); the class is always known. The held-out patients keep every label:
  they are only scored;
- methods: ``CROCSClusterer()`` with its defaults (``missing="marginalise"``)
  on all training ECGs, and the same estimator on the training ECGs whose
  attributes are all known ("drop"); at 0 % the two are the same fit;
- metrics, on the held-out patients: accuracy and AMI of ``predict`` per
  attribute and for the whole combination, and retrieval P@K (Eq. 5 as
  written: every prototype a query, K = 1, 5, 10, exact match "=3" and
  ">=2"); nothing is tuned on them;
- kept: the number of training ECGs each fit used; fit: seconds on this
  machine.

Defaults: 3 seeds of the estimator's 40 epochs, which takes about 10 minutes
on 2 cores (``bench_accuracy.py`` uses 5 seeds); the spread over seeds is
printed with every figure.

Usage::

    python benchmarks/bench_missing.py [--seeds 0 1 2] [--fractions 0 0.3 0.6]
    python benchmarks/bench_missing.py --quick   # one seed, 2 epochs: a smoke test
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

sys.path.insert(0, str(Path(__file__).parent))
from bench_accuracy import KS, clustering_row, mean_std, retrieval_row  # noqa: E402

from _utils import machine_summary  # noqa: E402

REMOVED = ("sex", "age")


def remove_labels(y, groups, fraction, seed):
    """``y`` with each attribute of ``REMOVED`` missing for ``fraction`` of the patients."""
    rng = np.random.RandomState(seed)
    patients = np.unique(groups)
    y = y.copy()
    for attribute in REMOVED:
        lost = rng.choice(patients, size=round(fraction * len(patients)), replace=False)
        y.loc[np.isin(groups, lost), attribute] = None
    return y


def evaluate(model, X_test, y_test):
    retriever = PrototypeRetriever(FrozenEstimator(model)).fit(X_test)
    indices = retriever.query(n_neighbors=max(KS), return_distance=False)
    return {
        **clustering_row(y_test, model.predict(X_test)),
        **retrieval_row(y_test, retriever.query_attributes_, indices),
    }


def run_seed(seed, fractions, quick):
    data = load_ptbxl_sample_frames(random_state=seed)
    extra = {"max_epochs": 2} if quick else {}
    rows = {}
    for fraction in fractions:
        y = remove_labels(data.y_train, data.groups_train, fraction, seed)
        known = y.notna().all(axis=1).to_numpy()
        fits = {"marginalise": np.ones(len(y), dtype=bool)}
        if fraction:
            fits["drop"] = known
        for method, used in fits.items():
            start = time.perf_counter()
            model = CROCSClusterer(**extra, random_state=seed).fit(
                data.X_train[used], y[used], groups=data.groups_train[used]
            )
            seconds = time.perf_counter() - start
            name = f"{fraction:.0%} missing, {method}" if fraction else "0% missing"
            rows[name] = {
                **evaluate(model, data.X_test, data.y_test),
                ("kept", "ECGs"): used.sum(),
                ("fit", "s"): seconds,
            }
    table = pd.DataFrame.from_dict(rows, orient="index")
    table.columns = pd.MultiIndex.from_tuples(table.columns)
    return table


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--fractions", type=float, nargs="+", default=[0.0, 0.3, 0.6])
    parser.add_argument("--output", type=Path, default=None, help="CSV of means and stds")
    parser.add_argument("--quick", action="store_true", help="one seed, 2 epochs: a smoke test")
    args = parser.parse_args(argv)
    seeds = args.seeds[:1] if args.quick else args.seeds
    print(f"Machine: {machine_summary()}")
    print(f"PTB-XL sample; {', '.join(REMOVED)} removed per patient; seeds {seeds}")
    start = time.perf_counter()
    tables = []
    for seed in seeds:
        tables.append(run_seed(seed, args.fractions, args.quick))
        print(f"seed {seed} done ({time.perf_counter() - start:.0f} s)", flush=True)
    mean, std, text = mean_std(tables)
    clustering = [c for c in text.columns if c[1] in ("Acc", "AMI")]
    retrieval = [c for c in text.columns if c[0].startswith("P@") and c[1] in (">=2", "=3")]
    with pd.option_context("display.width", 250, "display.max_columns", 50):
        print("\nClustering of the held-out ECGs, %: mean (std) over seeds")
        print(text[clustering].to_string())
        print("\nRetrieval, P@K of Eq. 5 (every prototype a query), %; training ECGs used")
        print(text[[*retrieval, ("kept", "ECGs"), ("fit", "s")]].to_string())
    if args.output is not None:
        pd.concat({"mean": mean, "std": std}, axis=1).to_csv(args.output)
        print(f"\nWritten to {args.output}")
    print(f"Total time {time.perf_counter() - start:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
