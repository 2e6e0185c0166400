"""Scarce diagnoses, sex and age in every header (issue 56, point 4).

On the PTB-XL benchmark (ptbxl-sample + ptbxl-more, the patient splits of
``bench_curve``), the class (NORM/ABN) is known for 10 % of the training
patients (the draw of ``bench_curve``/``bench_pool``) and sex and age for
all. Rows, each a CROCS fit with the defaults from a random start (no model
that saw these patients' labels starts any row, so not the shipped one):

- ``10% alone``: the 10 % with every attribute, the other 90 % left out;
- ``class summed out``: every training patient, the 90 %'s class missing and
  summed out of the loss (``missing="marginalise"``, the default when measured);
- ``posterior completion``: the same data, the missing class completed by the
  model's class posterior (``missing="posterior"``, the default since);
- ``class from the 10% model``: every training patient, the 90 %'s class as the
  ``10% alone`` model predicts it (self-training with a teacher);
- ``all labelled``: every training patient with every attribute.

Each is scored on the split's scored patients (``--validation``: 20 % of the
training patients; else the test patients), frame by frame, with the learned
prototypes: accuracy and AMI of the class, sex and age group. The gap closed is
``(row - 10% alone) / (all labelled - 10% alone)`` on the class accuracy and
AMI, from the means over the splits.

Usage::

    python benchmarks/bench_scarce.py --validation --seeds 0 1 2
    python benchmarks/bench_scarce.py --seeds 0 1 2
"""

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from _ptbxl_all import frames, load_records  # noqa: E402
from bench_accuracy import clustering_row  # noqa: E402
from bench_curve import parts  # noqa: E402

from sklearn_crocs import CROCSClusterer  # noqa: E402

from _utils import load_average, machine_summary  # noqa: E402

ALONE, DEFAULT, ALL = "10% alone", "class summed out", "all labelled"
TEACHER = "class from the 10% model"
#: Rows beyond the three of the issue: name -> (data, CROCSClusterer parameters).
PATHS = {
    # The class summed out: every class's prototypes alike.
    DEFAULT: ("scarce", {"missing": "marginalise"}),
    # The class completed by the model's own class posterior (an E step each batch): the
    # package's default since.
    "posterior completion": ("scarce", {"missing": "posterior"}),
    # Self-training: the 90 %'s class as the "10% alone" model predicts it (a teacher).
    TEACHER: ("teacher", {}),
}


def run_seed(records, seed, validation, rows_wanted):
    train, scored = parts(records, seed, validation)
    (X, y, g), (X_test, y_test, _) = frames(records, train, [train, scored])
    y, y_test = y.reset_index(drop=True), y_test.reset_index(drop=True)
    rng = np.random.RandomState(seed)  # the draw of bench_curve.py's 10 % rows
    patients = np.unique(g)
    labelled = np.isin(g, rng.choice(patients, round(0.1 * len(patients)), replace=False))
    data = {
        "alone": (X[labelled], y[labelled].reset_index(drop=True), g[labelled]),
        "scarce": (X, y.assign(**{"class": y["class"].where(labelled)}), g),
        "all": (X, y, g),
    }
    plan = {ALONE: ("alone", {}), **PATHS, ALL: ("all", {})}
    rows, models = {}, {}
    for name in rows_wanted:
        part, params = plan[name]
        if part == "teacher":
            if ALONE not in models:
                models[ALONE] = CROCSClusterer(random_state=seed).fit(*data["alone"][:2],
                                                                       groups=data["alone"][2])
            taught = models[ALONE].predict(X[~labelled])["class"].to_numpy()
            pseudo = y["class"].to_numpy(dtype=object).copy()
            pseudo[~labelled] = taught
            data["teacher"] = (X, y.assign(**{"class": pseudo}), g)
        X_fit, y_fit, g_fit = data[part]
        start = time.perf_counter()
        model = CROCSClusterer(**params, random_state=seed).fit(X_fit, y_fit, groups=g_fit)
        seconds = time.perf_counter() - start
        models[name] = model
        predicted = model.predict(X_test)
        rows[name] = {
            **{f"{a} {m}": v for (a, m), v in clustering_row(y_test, predicted).items()},
            "fit s": seconds,
            "frames": len(X_fit),
        }
        print(f"seed {seed}, {name}: " + ", ".join(
            f"{k} {v:.1f}" for k, v in rows[name].items() if k.startswith(("class", "sex", "age"))
        ), flush=True)  # fmt: skip
    return rows


def gap_closed(mean):
    """``(row - 10% alone) / (all labelled - 10% alone)`` of the class Acc and AMI."""
    out = {}
    for metric in ("class Acc", "class AMI"):
        low, high = mean.loc[ALONE, metric], mean.loc[ALL, metric]
        out[metric] = (mean[metric] - low) / (high - low)
    return pd.DataFrame(out)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--validation", action="store_true")
    parser.add_argument("--rows", nargs="+", default=[ALONE, *PATHS, ALL],
                        choices=[ALONE, *PATHS, ALL])  # fmt: skip
    parser.add_argument("--output", type=Path, default=None, help="the results CSV")
    args = parser.parse_args(argv)
    print(machine_summary(), "|", load_average())
    records = load_records()
    rows = []
    for seed in args.seeds:
        for name, row in run_seed(records, seed, args.validation, args.rows).items():
            rows.append({"seed": seed, "row": name, **row})
    table = pd.DataFrame(rows)
    part = "validation" if args.validation else "test"
    output = args.output or HERE / "results" / f"scarce_class_{part}.csv"
    table.to_csv(output, index=False)
    numbers = table.drop(columns="seed").groupby("row", sort=False)
    mean = numbers.mean()
    print(f"\nMeans (stds) over seeds {args.seeds}, {part} patients, frames:")
    print((mean.round(1).astype(str) + " (" + numbers.std().round(1).astype(str) + ")")
          [[c for c in mean.columns if c != "frames"]].to_string())  # fmt: skip
    if {ALONE, ALL} <= set(mean.index):
        print("\nGap closed (from the means):")
        print(gap_closed(mean).round(2).to_string())
    print(f"Written {output}")


if __name__ == "__main__":
    main()
