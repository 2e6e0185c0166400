"""The levers of issue 39 at the size users train on: mean prototypes, whole records, ensembles.

Protocol (the data, splits and scoring of ``bench_curve.py``): per seed,
``CROCSClusterer()`` with its defaults (two nets sharing the epoch budget)
and the ``--fits`` chosen (one net, ``ensemble_size=1``, by default; or two
nets each on the full budget) is fitted on every training record
(``--size N``: about N of them, whole patients; by default scored on a
validation fold of 20 % of the training patients, ``--test`` scores the
test patients), each scored with its learned (CP) and mean (TP)
prototypes, on 5-s frames and on whole
records (the two frames averaged, ``longer_signals="average"``). Printed:
mean (std) over the seeds, the paired difference of each row from the
defaults' CP frames, and the fit time.

Usage::

    python benchmarks/bench_levers.py --seeds 0 1
    python benchmarks/bench_levers.py --seeds 0 1 --size 500 --fits defaults ensemble_size=1
    python benchmarks/bench_levers.py --seeds 0 1 --fits defaults lr=2e-3 lr=5e-4 augment=None
    python benchmarks/bench_levers.py --combine levers_0.csv levers_1.csv
"""

import argparse
import os
import sys
import time
from pathlib import Path

import pandas as pd

sys.path.insert(0, str(Path(__file__).parent))
from _ptbxl_all import frames, load_records, subsample_patients  # noqa: E402
from bench_accuracy import mean_std  # noqa: E402
from bench_curve import fit, parts, scored  # noqa: E402

from sklearn_crocs._engine._neural import auto_max_epochs  # noqa: E402

from _utils import machine_summary  # noqa: E402

SCORES = [("class", "Acc"), ("sex", "Acc"), ("age", "Acc"), ("combination", "Acc"),
          ("class", "AMI"), ("P@10", "=3")]  # fmt: skip
FITS = {
    "defaults": lambda n: {},
    "ensemble_size=1": lambda n: {"ensemble_size": 1},  # one net, the default until 2026-11-29
    # max_epochs="auto" is shared by the nets: two of half the epochs, in about one's time
    "ensemble_size=2": lambda n: {"ensemble_size": 2},
    # each net on the whole budget, as before 2026-11-29: twice the time
    "ensemble_size=2, full budget each": lambda n: {
        "ensemble_size": 2,
        "max_epochs": auto_max_epochs(n),
    },
    # the learning rate and the augmentation, chosen on 500 records, at full size
    "lr=2e-3": lambda n: {"lr": 2e-3},
    "lr=5e-4": lambda n: {"lr": 5e-4},
    "augment=None": lambda n: {"augment": None},
}
BASE = "defaults"


def run_seed(records, seed, test, fits, size=None):
    train, scored_part = parts(records, seed, validation=not test)
    used = train if size is None else subsample_patients(records, train, size, seed)
    (X, y, g), (X_test, y_test, _) = frames(records, train, [used, scored_part])
    rows = {}
    for name in fits:
        model, seconds = fit(FITS[name](len(X)), X, y, g, seed)
        for suffix, row in scored(model, X_test, y_test, X, y, whole=True).items():
            rows[f"{name}{suffix}"] = {**row, ("fit", "s"): seconds}
        print(f"seed {seed}: {name} done ({seconds:.0f} s)", flush=True)
    table = pd.DataFrame.from_dict(rows, orient="index")
    table.columns = pd.MultiIndex.from_tuples(table.columns)
    return table


def report(tables, output, part):
    mean, std, text = mean_std(tables)
    pd.concat({"mean": mean, "std": std}, axis=1).to_csv(output)
    with pd.option_context("display.width", 250, "display.max_columns", 50):
        print(f"\n% on the {part}: mean (std) over {len(tables)} split(s)")
        print(text[SCORES + [("fit", "s")]].to_string())
        print("\nMinus the defaults (CP prototypes, frames), paired by split (points)")
        diffs = pd.concat(
            [t[SCORES] - t.loc[BASE, SCORES] for t in tables], keys=range(len(tables))
        )
        grouped = diffs.groupby(level=1, sort=False)
        paired = grouped.mean().map(lambda v: f"{v:+.1f}") + grouped.std(ddof=1).map(
            lambda v: f" ({v:.1f})" if v == v else ""
        )
        print(paired.drop(index=BASE).to_string())
    print(f"\nWritten to {output}")
    return 0


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    parser.add_argument("--test", action="store_true", help="score the test patients")
    parser.add_argument(
        "--fits",
        nargs="+",
        choices=list(FITS),
        default=list(FITS)[:2],
        help=f"the fits to compare (the first, {BASE!r}, is the baseline)",
    )
    parser.add_argument("--size", type=int, help="train on this many records (default: all)")
    parser.add_argument("--output", type=Path, default=Path("levers.csv"))
    parser.add_argument("--combine", type=Path, nargs="+",
                        help="join the --output files of one-seed runs")  # fmt: skip
    args = parser.parse_args(argv)
    part = "test patients" if args.test else "validation folds of the training patients"
    if args.combine:
        tables = [pd.read_csv(f, header=[0, 1, 2], index_col=0)["mean"] for f in args.combine]
        return report(tables, args.output, part)
    print(f"Machine: {machine_summary()}; load average {os.getloadavg()[0]:.2f}")
    records = load_records()
    start = time.perf_counter()
    tables = []
    fits = [BASE] + [name for name in dict.fromkeys(args.fits) if name != BASE]
    for seed in args.seeds:
        tables.append(run_seed(records, seed, args.test, fits, args.size))
        mean, std, _ = mean_std(tables)
        pd.concat({"mean": mean, "std": std}, axis=1).to_csv(args.output)
    print(f"total {time.perf_counter() - start:.0f} s")
    return report(tables, args.output, part)


if __name__ == "__main__":
    sys.exit(main())
