"""The recipe of the shipped PTB-XL model, chosen on validation patients of the PTB-XL
benchmark only (issue 56).

Every candidate is the shipped model's script (``scripts/build_pretrained.py``:
the same records, conditioning, 5-s frames and attributes) with other fitting
parameters. Each is fitted on the training patients of a split of
``bench_curve`` (``parts``: ``--validation`` holds out 20 % of the training
patients; without it, the split's test patients are scored) and scored on
whole 10-s records (the mean embedding of their two frames, as the shipped
model reads recordings): accuracy of the nearest prototype's class, sex and
age quartile (edges from the training ages, as the model stores them), and
the class AMI. The criterion is the mean of the three accuracies over the
splits; the ECGs of other hospitals (``bench_transfer.py``) choose nothing.

Usage::

    python benchmarks/bench_pretrained.py --validation --seeds 0 1 2
    python benchmarks/bench_pretrained.py --seeds 0 1 2 --candidates defaults "4 nets"
    python benchmarks/bench_pretrained.py --load-time   # from_pretrained, fresh processes
"""

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
from sklearn.metrics import adjusted_mutual_info_score

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "scripts"))
import build_pretrained  # noqa: E402
from bench_curve import parts  # noqa: E402

from sklearn_crocs._engine._neural import auto_max_epochs  # noqa: E402

from _utils import load_average, machine_summary  # noqa: E402


def _per_net(n_frames):
    """Epochs per net of the defaults (``max_epochs="auto"``: the budget shared by 2 nets)."""
    return max(1, round(auto_max_epochs(n_frames) / 2))


# Each candidate sets the ensemble and epochs itself: RECIPE holds the chosen ones.
CANDIDATES = {
    "defaults": lambda n_frames: {"ensemble_size": 2, "max_epochs": "auto"},
    # Longer: each of the 2 nets trains twice or four times the default epochs.
    "epochs x2": lambda n_frames: {"ensemble_size": 2, "max_epochs": 2 * _per_net(n_frames)},
    "epochs x4": lambda n_frames: {"ensemble_size": 2, "max_epochs": 4 * _per_net(n_frames)},
    # Wider: 4 nets, each with the default epochs of one of 2 (twice the compute): the
    # shipped recipe, scaled to the split's frames.
    "4 nets": lambda n_frames: {"ensemble_size": 4, "max_epochs": _per_net(n_frames)},
}


def binned(model, name, values):
    """``values`` of a continuous attribute as the model's bin labels."""
    edges = model.bin_edges_[name]
    labels = np.asarray(model.categories_[model.attribute_names_.index(name)], dtype=object)
    return labels[np.searchsorted(edges[1:-1], np.asarray(values, dtype=float), side="right")]


def score_records(model, X, attributes):
    """Accuracy per attribute and class AMI of whole records ``X`` (conditioned already)."""
    model.set_params(longer_signals="average")
    predicted = model.predict(X)
    truth = attributes.reset_index(drop=True).copy()
    truth["age"] = binned(model, "age", truth["age"])
    row = {
        f"{name} acc": float(np.mean(predicted[name].astype(str) == truth[name].astype(str)))
        for name in ("class", "sex", "age")
    }
    row["class AMI"] = adjusted_mutual_info_score(
        truth["class"].astype(str), predicted["class"].astype(str)
    )
    row["mean acc"] = np.mean([row[f"{n} acc"] for n in ("class", "sex", "age")])
    return row


_LOAD = """
import time
start = time.perf_counter()
from sklearn_crocs import CROCSClusterer
imported = time.perf_counter()
CROCSClusterer.from_pretrained("ptbxl")
first = time.perf_counter()
CROCSClusterer.from_pretrained("ptbxl")
print(imported - start, first - imported, time.perf_counter() - first)
"""


def load_times(repeats=5):
    """Seconds of the import, the first and a second ``from_pretrained`` in fresh processes."""
    import subprocess

    times = []
    for _ in range(repeats):
        out = subprocess.run([sys.executable, "-c", _LOAD], capture_output=True, text=True,
                             check=True).stdout  # fmt: skip
        times.append([float(v) for v in out.split()])
    return pd.DataFrame(times, columns=["import s", "first load s", "second load s"])


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--validation", action="store_true")
    parser.add_argument("--candidates", nargs="+", default=list(CANDIDATES),
                        choices=list(CANDIDATES))  # fmt: skip
    parser.add_argument("--data", type=Path, default=build_pretrained.DEFAULT_DATA)
    parser.add_argument("--output", type=Path, default=None)
    parser.add_argument("--load-time", action="store_true",
                        help="time from_pretrained in fresh processes instead")  # fmt: skip
    args = parser.parse_args(argv)
    print(machine_summary(), "|", load_average())
    if args.load_time:
        times = load_times()
        print(times.round(3).to_string())
        print("median:", times.median().round(3).to_dict())
        return
    records = build_pretrained.load_ptbxl(args.data)
    rows = []
    for seed in args.seeds:
        train, scored = parts(records, seed, args.validation)
        n_frames = 2 * len(train)
        for name in args.candidates:
            overrides = {**CANDIDATES[name](n_frames), "random_state": seed}
            start = time.perf_counter()
            model = build_pretrained.fit(records, train, ready=False, **overrides)
            seconds = time.perf_counter() - start
            row = score_records(model, records.X[scored], records.attributes.iloc[scored])
            rows.append({"seed": seed, "candidate": name, **row, "fit s": seconds,
                         "epochs": model.n_iter_})  # fmt: skip
            print(pd.DataFrame([rows[-1]]).round(3).to_string(index=False, header=len(rows) == 1),
                  flush=True)  # fmt: skip
    table = pd.DataFrame(rows)
    output = args.output or HERE / "results" / (
        f"pretrained_recipes_{'validation' if args.validation else 'test'}.csv"
    )
    table.to_csv(output, index=False)
    summary = table.drop(columns="seed").groupby("candidate", sort=False)
    print(f"\nMeans (stds) over seeds {args.seeds}, "
          f"{'validation' if args.validation else 'test'} patients:")  # fmt: skip
    print((summary.mean().round(3).astype(str) + " (" + summary.std().round(3).astype(str)
           + ")").to_string())  # fmt: skip
    print(f"Written {output}")


if __name__ == "__main__":
    main()
