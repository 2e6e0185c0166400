"""Accuracy at the size users train on: the PTB-XL sample with ptbxl-more, a learning curve.

Protocol (one row per method, mean (std) over the patient splits):

- data: the 500 records of the bundled sample (band-passed and z-scored by a
  third party) and the 3,903 raw records of ``../shared/data/ptbxl-more``
  through the documented path (``SignalConditioner`` on whole records,
  ``make_frames``), both cut into two 5-s 12-lead frames per record
  (``_ptbxl_all.py``); class (NORM/ABN) x sex x age quartile (edges fitted on
  the training patients): 16 prototypes;
- splits: per seed, 20 % of the patients (about 880 records) are the test
  part, stratified by class; the estimators see the training part only and
  nothing is chosen on the test part (``--validation`` scores a fold of 20 %
  of the *training* patients instead, trained on the rest: the folds on
  which the defaults were chosen);
- learning curve: ``CROCSClusterer()`` with its defaults on 500, 1,000,
  2,000 and all training records (whole patients drawn at random), each
  with its fit time;
- rows at full size: the majority predictor; "before" (the earlier
  defaults ``max_epochs=40, lr_schedule="constant"``, 40 epochs at every
  size); the supervised ceiling (the defaults' encoder, augmentation, epochs
  and cosine schedule with one cross-entropy head per attribute, trained on
  the labels); the levers mean prototypes (TP) and
  whole records (each test record's two frames averaged,
  ``longer_signals="average"``);
- 10 % labelled: 10 % of the training patients keep their attributes, the
  others' ECGs join the fit unlabelled ("10 % + 90 % unlabelled"), against
  the labelled ECGs alone and all labelled;
- the 500-record protocol of ``bench_accuracy.py`` (the sample alone, 60 %
  of its patients for training, its own 40 % for testing), as a row, so
  that both sizes can be compared.

Metrics: accuracy per attribute and of the combination, class AMI,
exact-match P@10 of the learned (CP) prototypes (the paper's Eq. 5), fit
time in seconds.

Usage::

    python benchmarks/bench_curve.py [--seeds 0 1 2] [--output curve.csv]
    python benchmarks/bench_curve.py --quick   # one seed, 500 and 1,000 records, 2 epochs
    python benchmarks/bench_curve.py --combine curve_0.csv curve_1.csv curve_2.csv  # one-seed runs
    python benchmarks/bench_curve.py --timing   # fit times alone, on a quiet machine

The user guide's figure (``docs/user_guide/learning_curve_chart.py``) is
drawn from ``benchmarks/results/learning_curve.csv``, an ``--output`` file.
"""

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).parent))
from _ptbxl_all import frames, load_records, split, subsample_patients  # noqa: E402
from bench_accuracy import (  # noqa: E402
    attribute_space,
    ceiling_rows,
    clustering_row,
    mean_prototypes,
    mean_std,
    prototype_row,
    records_of,
)

from sklearn_crocs import CROCSClusterer  # noqa: E402
from sklearn_crocs.datasets import load_ptbxl_sample_frames, patient_split  # noqa: E402

from _utils import machine_summary  # noqa: E402

SIZES = (500, 1000, 2000, None)  # None: every training record
COLUMNS = [("class", "Acc"), ("sex", "Acc"), ("age", "Acc"), ("combination", "Acc"),
           ("class", "AMI"), ("P@10", "=3"), ("records", "n"), ("fit", "s")]  # fmt: skip


def scored(model, X, y, X_train, y_train, whole=False):
    """Rows of a fitted model: learned (CP) and mean (TP) prototypes, frames and,
    if ``whole``, whole records."""
    y = y.reset_index(drop=True)
    learned = model.get_prototypes("learned")
    mean = mean_prototypes(model.transform(X_train), y_train.reset_index(drop=True), learned[1])
    frames_ = model.transform(X)
    rows = {"": prototype_row(frames_, *learned, y), ", TP": prototype_row(frames_, *mean, y)}
    if whole:
        model.set_params(longer_signals="average")
        records = model.transform(records_of(X))
        model.set_params(longer_signals="error")
        rows[", whole records"] = prototype_row(records, *learned, y.iloc[0::2])
        rows[", TP, whole records"] = prototype_row(records, *mean, y.iloc[0::2])
    return rows


def fit(params, X, y, groups, seed):
    start = time.perf_counter()
    model = CROCSClusterer(**params, random_state=seed).fit(X, y, groups=groups)
    return model, time.perf_counter() - start


def parts(records, seed, validation):
    """(training record indices, scored record indices) of a seed."""
    train, test = split(records, seed)
    if not validation:
        return train, test
    inner, _, valid = patient_split(
        records.groups[train], stratify=records.attributes["class"].to_numpy()[train],
        val_size=0.0, test_size=0.2, random_state=seed + 100,
    )  # fmt: skip
    return train[inner], train[valid]


def run_seed(records, seed, args):
    train, test = parts(records, seed, args.validation)
    (X_all, y_all, g_all), (X_test, y_test, _) = frames(records, train, [train, test])
    extra = {"max_epochs": 2} if args.quick else {}
    rows = {}
    names = list(y_all.columns)
    majority = pd.DataFrame({c: [y_all[c].astype(str).mode()[0]] * len(y_test) for c in names})
    rows["Majority"] = clustering_row(y_test.astype(str).reset_index(drop=True), majority)
    sizes = SIZES[:2] if args.quick else SIZES
    for size in sizes:
        used = train if size is None else subsample_patients(records, train, size, seed)
        (X, y, g), = frames(records, train, [used])
        model, seconds = fit(extra, X, y, g, seed)
        label = "all" if size is None else str(size)
        for suffix, row in scored(model, X_test, y_test, X, y, whole=size is None).items():
            rows[f"CROCS, {label} records{suffix}"] = {
                **row, ("records", "n"): len(used), ("fit", "s"): seconds,
                ("epochs", "n"): model.n_iter_,
            }
        if size is None:
            epochs = model.n_iter_
    if not args.quick:
        model, seconds = fit({"max_epochs": 40, "lr_schedule": "constant"}, X_all, y_all,
                             g_all, seed)  # fmt: skip
        rows["Before (40 epochs, constant lr), all records"] = {
            **scored(model, X_test, y_test, X_all, y_all)[""],
            ("records", "n"): len(train), ("fit", "s"): seconds,
        }  # fmt: skip
        dims, codes, as_frame, _ = attribute_space(y_all)
        ceiling = ceiling_rows(X_all, codes, dims, X_test, y_test, seed, epochs, as_frame,
                               cosine=True)  # fmt: skip
        for name, row in ceiling.items():
            rows[name.replace("ceiling)", f"ceiling, {epochs} epochs)")] = {
                **row, ("records", "n"): len(train)
            }
    # 10 % of the training patients labelled, the others' ECGs unlabelled.
    rng = np.random.RandomState(seed)
    patients = np.unique(g_all)
    labelled = np.isin(g_all, rng.choice(patients, round(0.1 * len(patients)), replace=False))
    y_semi = y_all.reset_index(drop=True).mask(np.broadcast_to(~labelled[:, None], y_all.shape))
    model, seconds = fit(extra, X_all[labelled], y_all[labelled], g_all[labelled], seed)
    n_labelled = int(labelled.sum()) // 2  # two frames per record
    rows["10% labelled alone"] = {**scored(model, X_test, y_test, X_all, y_all)[""],
                                  ("records", "n"): n_labelled, ("fit", "s"): seconds}  # fmt: skip
    model, seconds = fit(extra, X_all, y_semi, g_all, seed)
    rows["10% labelled + 90% unlabelled"] = {
        **scored(model, X_test, y_test, X_all, y_all)[""],
        ("records", "n"): len(train), ("fit", "s"): seconds,
    }  # fmt: skip
    if not args.validation:
        # The 500-record protocol of bench_accuracy.py: the sample alone, its own test part.
        sample = load_ptbxl_sample_frames(random_state=seed)
        model, seconds = fit(extra, sample.X_train, sample.y_train, sample.groups_train, seed)
        rows["500-record protocol (sample alone, its own test part)"] = {
            **scored(model, sample.X_test, sample.y_test, sample.X_train, sample.y_train)[""],
            ("records", "n"): len(sample.X_train) // 2, ("fit", "s"): seconds,
        }  # fmt: skip
    table = pd.DataFrame.from_dict(rows, orient="index")
    table.columns = pd.MultiIndex.from_tuples(table.columns)
    return table


def timing(records, seed=0):
    """Fit time of the defaults at each size of the curve, one fit after another in
    this process (run with nothing else on the machine), and its ratio to 500 records."""
    train, _ = split(records, seed)
    seconds = {}
    for size in SIZES:
        used = train if size is None else subsample_patients(records, train, size, seed)
        (X, y, g), = frames(records, train, [used])
        model, seconds[size] = fit({}, X, y, g, seed)
        label = "all" if size is None else size
        ratio = seconds[size] / seconds[SIZES[0]]
        print(f"{label} records ({len(used)}), {model.n_iter_} epochs: {seconds[size]:.1f} s, "
              f"{ratio:.2f}x the 500-record fit", flush=True)  # fmt: skip
    return 0


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--output", type=Path, default=Path("curve.csv"))
    parser.add_argument("--quick", action="store_true",
                        help="one seed, 500 and 1,000 records, 2 epochs: a smoke test")  # fmt: skip
    parser.add_argument("--validation", action="store_true",
                        help="score a fold of the training patients")  # fmt: skip
    parser.add_argument("--timing", action="store_true",
                        help="fit times of the defaults at each size")  # fmt: skip
    parser.add_argument("--combine", type=Path, nargs="+",
                        help="join the --output files of one-seed runs")  # fmt: skip
    args = parser.parse_args(argv)
    if args.combine:
        tables = [pd.read_csv(f, header=[0, 1, 2], index_col=0)["mean"] for f in args.combine]
        return report(tables, args.output, "test patients", time.perf_counter())
    seeds = args.seeds[:1] if args.quick else args.seeds
    print(f"Machine: {machine_summary()}")
    part = "validation folds of the training patients" if args.validation else "test patients"
    records = load_records()
    if args.timing:
        print("PTB-XL sample + ptbxl-more, 5-s 12-lead frames; the defaults' fit times, seed 0")
        return timing(records)
    print(f"PTB-XL sample + ptbxl-more, 5-s 12-lead frames; seeds {seeds}; scored on {part}")
    start = time.perf_counter()
    tables = []
    for seed in seeds:
        tables.append(run_seed(records, seed, args))
        print(f"seed {seed} done ({time.perf_counter() - start:.0f} s)", flush=True)
        mean, std, _ = mean_std(tables)
        pd.concat({"mean": mean, "std": std}, axis=1).to_csv(args.output)
    return report(tables, args.output, part, start)


def report(tables, output, part, start):
    """Print the mean (std) over the splits' tables and write them to ``output``."""
    mean, std, text = mean_std(tables)
    pd.concat({"mean": mean, "std": std}, axis=1).to_csv(output)
    columns = [c for c in COLUMNS if c in text.columns]
    with pd.option_context("display.width", 250, "display.max_columns", 50):
        print(f"\n% on the {part}: mean (std) over {len(tables)} split(s)")
        print(text[columns].to_string())
    print(f"\nWritten to {output}; total time {time.perf_counter() - start:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
