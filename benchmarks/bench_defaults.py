"""How CROCSClusterer's defaults were chosen: each lever against the defaults, on validation folds.

The defaults must be chosen without looking at the accuracy benchmark's test
patients. This script therefore works inside the *training* part of each of
``bench_accuracy.py``'s splits (``load_ptbxl_sample_frames(random_state=seed)``,
60 % of the patients): it cuts those patients into ``--folds`` groups
(``GroupKFold``), trains on all but one and scores the one left out, for the
defaults and for each variant that changes one lever back (the paper's CNN,
no augmentation, early stopping, the paper's learning rate, ...). Figures are
the mean and the standard error over the seeds x folds fits; the variants see
the same folds, so their differences are paired.

Usage::

    python benchmarks/bench_defaults.py [--seeds 0 1 2] [--folds 4] [--fits-per-seed N]
                                        [--only NAME ...]

``--fits-per-seed 1`` scores only the first fold of each seed (a third of the
time of 4 folds x 3 seeds); the second table gives each variant's paired
difference from the defaults, which is what the choice rests on.
"""

import argparse
import sys
import time
from pathlib import Path

import pandas as pd
from sklearn.model_selection import GroupKFold

from sklearn_crocs import CROCSClusterer
from sklearn_crocs.datasets import load_ptbxl_sample_frames
from sklearn_crocs.metrics import evaluate_prototypes

sys.path.insert(0, str(Path(__file__).parent))
from _utils import machine_summary  # noqa: E402

#: One lever changed from the defaults per variant.
VARIANTS = {
    "defaults": {},
    "paper's CNN": {"encoder": "cnn"},
    "ResNet18 widths (64-512)": {"encoder_params": {"channels": (64, 128, 256, 512)}},
    "no augmentation": {"augment": None},
    "tau_w = 1 (paper)": {"tau_w": 1.0},
    "L_reg, beta = 0.2 (paper)": {"beta": 0.2},
    "L_reg, beta = 0.2, summed (Eq. 3)": {"beta": 0.2, "reg_reduction": "sum"},
    "early stopping on 10 %": {"validation_fraction": 0.1, "max_epochs": 100},
    "lr = 1e-4": {"lr": 1e-4},
    "80 epochs": {"max_epochs": 80},
    "age groups unordered (ordinal=None, paper)": {"ordinal": None},
}

METRICS = {
    "class Acc": ("clustering", "CP CROCS", ("class", "Acc")),
    "class AMI": ("clustering", "CP CROCS", ("class", "AMI")),
    "sex Acc": ("clustering", "CP CROCS", ("sex", "Acc")),
    "age Acc": ("clustering", "CP CROCS", ("age", "Acc")),
    "CP P@10 =3": ("retrieval", "CP CROCS", (10, "=3")),
    "TP P@10 =3": ("retrieval", "TP CROCS", (10, "=3")),
}


def folds(seed, n_folds):
    """(X_fit, y_fit, groups_fit, X_val, y_val) inside the training part of split ``seed``."""
    data = load_ptbxl_sample_frames(random_state=seed)
    X, y, groups = data.X_train, data.y_train, data.groups_train
    splitter = GroupKFold(n_splits=n_folds, shuffle=True, random_state=seed)
    for fit, val in splitter.split(X, groups=groups):
        yield (
            X[fit], y.iloc[fit].reset_index(drop=True), groups[fit],
            X[val], y.iloc[val].reset_index(drop=True),
        )  # fmt: skip


def score(params, seed, fold):
    X, y, groups, X_val, y_val = fold
    start = time.perf_counter()
    model = CROCSClusterer(**params, random_state=seed).fit(X, y, groups=groups)
    seconds = time.perf_counter() - start
    result = evaluate_prototypes(model, X_val, y_val, k=10, decimals=None)
    row = {
        name: result[table].loc[method, column] for name, (table, method, column) in METRICS.items()
    }
    return {**row, "epochs": model.n_iter_, "fit s": seconds}


def _mean_sem(grouped):
    text = grouped.mean().map(lambda v: f"{v:.1f}") + grouped.sem().map(lambda v: f" ({v:.1f})")
    return text.to_string()


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--folds", type=int, default=4)
    parser.add_argument("--fits-per-seed", type=int, default=None)
    parser.add_argument("--only", nargs="+", choices=list(VARIANTS), default=list(VARIANTS))
    parser.add_argument("--output", type=Path, default=Path("defaults.csv"))
    args = parser.parse_args(argv)
    print(f"Machine: {machine_summary()}")
    print(
        f"Validation folds inside the training part of the PTB-XL sample splits: seeds "
        f"{args.seeds} x {args.folds} folds; mean (standard error) over the fits"
    )
    splits = [
        (seed, fold)
        for seed in args.seeds
        for fold in list(folds(seed, args.folds))[: args.fits_per_seed]
    ]
    rows = []
    for name in args.only:
        start = time.perf_counter()
        for fit, (seed, fold) in enumerate(splits):
            rows.append({"variant": name, "fit": fit, **score(VARIANTS[name], seed, fold)})
        print(f"{name}: {time.perf_counter() - start:.0f} s", flush=True)
    table = pd.DataFrame(rows)
    table.to_csv(args.output, index=False)
    print(f"Per-fit rows written to {args.output}")
    grouped = table.drop(columns="fit").groupby("variant", sort=False)
    with pd.option_context("display.width", 250, "display.max_columns", 20):
        print(_mean_sem(grouped))
        if "defaults" in args.only:
            # The same folds for every variant: differences are paired, so
            # their spread is far smaller than each figure's.
            wide = table.set_index(["variant", "fit"])[list(METRICS)]
            diff = wide - wide.loc["defaults"].reindex(wide.index, level="fit")
            print("\nDifference from the defaults, fit by fit: mean (standard error)")
            diff = diff.drop(index="defaults", level="variant")
            print(_mean_sem(diff.groupby("variant", sort=False)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
