"""The epoch budget and learning-rate schedule at the size users train on, on validation patients.

How ``max_epochs="auto"`` and ``lr_schedule="cosine"`` were chosen, without
the test patients. Per seed, the training patients of ``bench_curve.py``'s
split are cut again by patient: 20 % are the validation fold, and fits on
500, 1,000, 2,000 and all of the other records (whole patients) are scored
on it after each of several epochs. With a constant learning rate the first
E epochs of a long run are the fit with ``max_epochs=E``, so one run gives
every budget (``--schedule constant``); with ``--schedule cosine`` the
schedule depends on the budget, so each run is one budget
(``max_epochs="auto"`` at each size, or ``--epochs``), its intermediate
epochs printed for reference.

Usage::

    python benchmarks/bench_budget.py --seed 0 --schedule constant
    python benchmarks/bench_budget.py --seed 0 --schedule cosine --sizes all
    python benchmarks/bench_budget.py --table budget_*.csv   # the mean over the seeds
"""

import argparse
import sys
import time
from pathlib import Path

import pandas as pd

sys.path.insert(0, str(Path(__file__).parent))
from _ptbxl_all import frames, load_records, subsample_patients  # noqa: E402
from _snapshots import Snapshots, at_epochs  # noqa: E402
from bench_accuracy import mean_prototypes, prototype_row  # noqa: E402
from bench_curve import parts  # noqa: E402

from sklearn_crocs import CROCSClusterer  # noqa: E402
from sklearn_crocs._engine._neural import auto_max_epochs  # noqa: E402

EPOCHS = (1, 2, 3, 4, 5, 6, 8, 10, 13, 16, 20, 25, 30, 40)
#: The most ECGs seen by a constant-rate run at each size.
CONSTANT_BUDGET = 120_000
SIZES = {"500": 500, "1000": 1000, "2000": 2000, "all": None}
COLUMNS = ["class_Acc", "class_AMI", "sex_Acc", "age_Acc", "combination_Acc", "P@10_=3",
           "TP_class", "TP_sex", "TP_age", "TP_P@10"]  # fmt: skip


def run(seed, schedule, sizes, epochs=None):
    records = load_records()
    fit_pool, valid = parts(records, seed, validation=True)
    rows = []
    for name in sizes:
        size = SIZES[name]
        used = fit_pool if size is None else subsample_patients(records, fit_pool, size, seed)
        (X, y, groups), (X_valid, y_valid, _) = frames(records, used, [used, valid])
        if schedule == "constant":
            total = int(min(40, max(4, CONSTANT_BUDGET // len(X))))
        else:
            total = epochs or auto_max_epochs(len(X))
        kept = sorted({e for e in EPOCHS if e <= total} | {total})
        start = time.perf_counter()
        model = CROCSClusterer(
            max_epochs=total, lr_schedule=schedule, callbacks=[("snapshots", Snapshots(kept))],
            random_state=seed,
        ).fit(X, y, groups=groups)  # fmt: skip
        seconds = time.perf_counter() - start
        snapshots = dict(model.net_.callbacks_)["snapshots"]
        attributes = model.get_prototypes("learned")[1]
        on_valid, on_train = at_epochs(model, snapshots, X_valid), at_epochs(model, snapshots, X)
        y_valid, y = y_valid.reset_index(drop=True), y.reset_index(drop=True)
        for epoch in kept:
            embeddings, learned = on_valid[epoch]
            cp = prototype_row(embeddings, learned, attributes, y_valid)
            tp = prototype_row(embeddings, *mean_prototypes(on_train[epoch][0], y, attributes),
                               y_valid)  # fmt: skip
            rows.append({
                "seed": seed, "schedule": schedule, "size": name, "records": len(used),
                "total_epochs": total, "epoch": epoch, "seen": epoch * len(X),
                "fit_s": seconds * epoch / total,
                **{f"{a}_{m}": v for (a, m), v in cp.items()},
                **{f"TP_{a}": tp[(a, "Acc")] for a in ("class", "sex", "age")},
                "TP_P@10": tp[("P@10", "=3")],
            })  # fmt: skip
        print(f"seed {seed}, {name} records ({len(used)}), {total} epochs: {seconds:.0f} s",
              flush=True)  # fmt: skip
    return pd.DataFrame(rows)


def table(files):
    data = pd.concat([pd.read_csv(f) for f in files])
    keys = ["schedule", "total_epochs", "size", "epoch"]
    grouped = data.groupby(keys, sort=False)
    out = grouped[COLUMNS].mean().round(1)
    out["seeds"] = grouped["seed"].nunique()
    with pd.option_context("display.width", 250, "display.max_rows", 500):
        print(out.sort_index(level=["schedule", "size", "total_epochs", "epoch"]).to_string())


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--schedule", choices=["constant", "cosine"], default="constant")
    parser.add_argument("--sizes", nargs="+", choices=list(SIZES), default=list(SIZES))
    parser.add_argument("--epochs", type=int, help="cosine: this budget instead of 'auto'")
    parser.add_argument("--output", type=Path)
    parser.add_argument("--table", type=Path, nargs="+", help="print the mean of these files")
    args = parser.parse_args(argv)
    if args.table:
        table(args.table)
        return 0
    out = run(args.seed, args.schedule, args.sizes, args.epochs)
    output = args.output or Path(f"budget_{args.schedule}_{args.seed}.csv")
    out.to_csv(output, index=False)
    print(f"Written to {output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
