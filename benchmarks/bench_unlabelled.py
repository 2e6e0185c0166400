"""Unlabelled ECGs on the PTB-XL sample: 10 % labelled + 90 % unlabelled vs 10 % labelled alone.

The paper's Appendix trains on 10 % of the labelled data and leaves the rest
unused. Here the other 90 % of the training ECGs join the fit unlabelled
(every attribute missing): they share the batches, and those whose class
the model is sure of (probability above ``unlabelled_threshold``) train on
it as a pseudo-label.

Protocol (the data, splits and metrics of ``bench_accuracy.py``, whose helpers
this script uses):

- data: the PTB-XL sample's 5-s 12-lead frames, class x sex x age quartile;
  60 % of the patients for training, 40 % held out, one split per seed;
- labels: 10 % of the training patients (drawn per seed) keep their
  attributes; the others' ECGs are unlabelled. The held-out patients keep
  every label: they are only scored;
- methods, all ``CROCSClusterer()`` with its defaults: "10 % labelled alone"
  (the labelled ECGs only), "10 % labelled + 90 % unlabelled" (all training
  ECGs), and, as the ceiling, "100 % labelled" (every training ECG with its
  attributes);
- metrics, on the held-out patients: accuracy and AMI of ``predict`` per
  attribute and for the whole combination, and retrieval P@K (Eq. 5 as
  written, every prototype a query); nothing is tuned on them;
- levers: "ensemble of 2" fits ``ensemble_size=2`` on the "+ 90 %
  unlabelled" data, "pretrained (method)" starts it from an encoder
  pretrained in ``fit`` on all its ECGs (``ContrastivePretrainer(method=...)``
  with its defaults; the fit time includes the pretraining; the choice
  between them was made on validation folds by ``bench_pretraining.py``);
  whole records: those models also embed each
  held-out record (its two frames averaged, ``longer_signals="average"``),
  scored record by record;
- ECGs: the training ECGs a fit used (labelled / all); fit: seconds.

``--validation`` is how the defaults ``unlabelled_weight=1.0`` and
``unlabelled_threshold=0.99`` were chosen, without the test patients: it
scores two folds (of 4, by patient) of each seed's *training* patients
instead, trained on the rest, for several thresholds and for
``unlabelled_weight=0`` (unlabelled ECGs in the batches, no pseudo-labels).

Usage::

    python benchmarks/bench_unlabelled.py [--seeds 0 1 2 3 4] [--device cpu]
    python benchmarks/bench_unlabelled.py --validation   # the choice of the defaults
    python benchmarks/bench_unlabelled.py --quick   # one seed, 2 epochs: a smoke test

Five seeds take 32 s on an NVIDIA H200 (``--device cuda``).
"""

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
from sklearn.model_selection import GroupKFold

from sklearn_crocs import ContrastivePretrainer, CROCSClusterer
from sklearn_crocs.datasets import load_ptbxl_sample_frames

sys.path.insert(0, str(Path(__file__).parent))
from bench_accuracy import mean_std, prototype_row, records_of  # noqa: E402
from bench_missing import evaluate  # noqa: E402

from _utils import machine_summary  # noqa: E402

LABELLED = 0.1
SEMI = "10% labelled + 90% unlabelled"
ALONE = "10% labelled alone"
#: Fits of --validation: (uses the unlabelled ECGs, CROCSClusterer parameters).
VALIDATION = {
    ALONE: (False, {}),
    "unlabelled, no pseudo-labels (weight 0)": (True, {"unlabelled_weight": 0.0}),
    **{
        f"unlabelled, threshold {t}": (True, {"unlabelled_threshold": t}) for t in (0.9, 0.95, 0.99)
    },
}


def splits(seed, validation):
    """``(X, y, groups, X_score, y_score)`` of each scored split of a seed."""
    data = load_ptbxl_sample_frames(random_state=seed)
    if not validation:
        yield data.X_train, data.y_train, data.groups_train, data.X_test, data.y_test
        return
    X, y, groups = data.X_train, data.y_train.reset_index(drop=True), data.groups_train
    folds = GroupKFold(n_splits=4, shuffle=True, random_state=seed).split(X, groups=groups)
    for train, valid in list(folds)[:2]:
        yield X[train], y.iloc[train], groups[train], X[valid], y.iloc[valid]


def run_split(seed, split, quick, device, validation):
    X, y, groups, X_score, y_score = split
    y = y.reset_index(drop=True)
    rng = np.random.RandomState(seed)
    patients = np.unique(groups)
    kept = rng.choice(patients, size=round(LABELLED * len(patients)), replace=False)
    labelled = np.isin(groups, kept)
    y_semi = y.mask(np.broadcast_to(~labelled[:, None], y.shape))
    everything = np.ones(len(y), dtype=bool)
    if validation:
        fits = {
            name: (everything, y_semi, params) if semi else (labelled, y, params)
            for name, (semi, params) in VALIDATION.items()
        }
    else:
        fits = {
            ALONE: (labelled, y, {}),
            SEMI: (everything, y_semi, {}),
            f"{SEMI}, ensemble of 2": (everything, y_semi, {"ensemble_size": 2}),
            **{
                f"{SEMI}, pretrained ({method})": (
                    everything, y_semi, {"pretrained": ContrastivePretrainer(method=method)}
                )
                for method in ("cmsc", "cmsmlc", "augment")
            },
            "100% labelled": (everything, y, {}),
        }
    extra = {"max_epochs": 2} if quick else {}
    rows = {}
    for name, (used, y_fit, params) in fits.items():
        start = time.perf_counter()
        model = CROCSClusterer(**extra, **params, device=device, random_state=seed).fit(
            X[used], y_fit[used], groups=groups[used]
        )
        seconds = time.perf_counter() - start
        counts = {
            ("ECGs", "labelled"): int((used if y_fit is y else labelled).sum()),
            ("ECGs", "all"): int(used.sum()),
            ("fit", "s"): seconds,
        }
        rows[name] = {**evaluate(model, X_score, y_score.reset_index(drop=True)), **counts}
        if not validation and name != ALONE:
            # The same model on whole records (their two frames averaged).
            model.set_params(longer_signals="average")
            embeddings = model.transform(records_of(X_score))
            truth = y_score.reset_index(drop=True).iloc[0::2]
            rows[f"{name}, whole records"] = {
                **prototype_row(embeddings, *model.get_prototypes("learned"), truth),
                **counts,
            }
    table = pd.DataFrame.from_dict(rows, orient="index")
    table.columns = pd.MultiIndex.from_tuples(table.columns)
    return table


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--output", type=Path, default=None, help="CSV of means and stds")
    parser.add_argument(
        "--validation",
        action="store_true",
        help="score folds of the training patients: the choice of the defaults",
    )
    parser.add_argument("--quick", action="store_true", help="one seed, 2 epochs: a smoke test")
    args = parser.parse_args(argv)
    seeds = args.seeds[:1] if args.quick else args.seeds
    print(f"Machine: {machine_summary(args.device)}")
    print(
        f"PTB-XL sample; {LABELLED:.0%} of the training patients labelled; seeds {seeds}; "
        + ("2 validation folds of the training patients each" if args.validation
           else "scored on the test patients")
    )  # fmt: skip
    start = time.perf_counter()
    tables = []
    for seed in seeds:
        for split in splits(seed, args.validation):
            tables.append(run_split(seed, split, args.quick, args.device, args.validation))
        print(f"seed {seed} done ({time.perf_counter() - start:.0f} s)", flush=True)
    mean, std, text = mean_std(tables)
    clustering = [c for c in text.columns if c[1] in ("Acc", "AMI")]
    retrieval = [c for c in text.columns if c[0].startswith("P@") and c[1] in (">=2", "=3")]
    with pd.option_context("display.width", 250, "display.max_columns", 50):
        print("\nClustering of the held-out ECGs, %: mean (std) over seeds")
        print(text[clustering].to_string())
        print("\nRetrieval, P@K of Eq. 5 (every prototype a query), %; training ECGs used")
        print(text[[*retrieval, ("ECGs", "labelled"), ("ECGs", "all"), ("fit", "s")]].to_string())
    # Paired differences: the fits of a split share its labelled patients.
    columns = [*clustering, *retrieval]
    paired = {
        name: pd.DataFrame([t.loc[name] - t.loc[ALONE] for t in tables])[columns].agg(
            lambda d: f"{d.mean():+.1f} ({d.std(ddof=1) / np.sqrt(len(d)):.1f})"
        )
        for name in tables[0].index
        if name not in (ALONE, "100% labelled") and not name.endswith("whole records")
    }
    print(f"\nMinus {ALONE!r}, paired by split (points): mean (standard error)")
    with pd.option_context("display.width", 250, "display.max_columns", 50):
        print(pd.DataFrame(paired).T.to_string())
    if args.output is not None:
        pd.concat({"mean": mean, "std": std}, axis=1).to_csv(args.output)
        print(f"\nWritten to {args.output}")
    print(f"Total time {time.perf_counter() - start:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
