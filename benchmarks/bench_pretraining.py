"""Self-supervised pretraining on the PTB-XL sample: CROCSClusterer() from random or pretrained.

Protocol (the data and folds of ``bench_unlabelled.py --validation``):

- data: the PTB-XL sample's 5-s 12-lead frames, class x sex x age quartile;
  per seed, the training patients of ``load_ptbxl_sample_frames(random_state=seed)``
  only, in 4 folds by patient: each of the first ``--folds`` folds is scored,
  the 3 others train. The test patients are never used;
- settings of issue 39: (a) 10 % of the training patients labelled, the
  other 90 % unlabelled (every attribute missing), and (b) every training
  ECG labelled;
- fits, all ``CROCSClusterer()`` with its defaults and ``random_state=seed``:
  from a random initialisation, or with ``pretrained=ContrastivePretrainer(
  method=...)`` for ``cmsc`` (CLOCS) and ``augment`` (``--methods``: others,
  e.g. CLOCS's lead views ``cmlc`` and ``cmsmlc``). In (a) the pretrainer
  is unfitted and fitted in ``fit`` on every ECG of the fold's training
  patients (labelled or not, no label used); (b) has the same signals, so it
  reuses that fit's ``pretrainer_`` (one pretraining, many fits);
- metrics, on the scored fold: accuracy of ``predict`` per attribute and for
  the whole combination, class AMI, exact-match P@10 (Eq. 5, every
  prototype a query); pretraining and fit seconds; the differences from the
  random initialisation, paired by fold.

Usage::

    python benchmarks/bench_pretraining.py [--seeds 0 1 2] [--folds 2]
    python benchmarks/bench_pretraining.py --params '{"amplitude_jitter": 0.5}'
    python benchmarks/bench_pretraining.py --methods cmlc cmsmlc
    python benchmarks/bench_pretraining.py --quick   # one seed, 2 epochs: a smoke test
"""

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
from sklearn.model_selection import GroupKFold

from sklearn_crocs import ContrastivePretrainer, CROCSClusterer
from sklearn_crocs.datasets import load_ptbxl_sample_frames

sys.path.insert(0, str(Path(__file__).parent))
from bench_accuracy import mean_std  # noqa: E402
from bench_missing import evaluate  # noqa: E402

from _utils import machine_summary  # noqa: E402

LABELLED = 0.1
SETTINGS = ("10% labelled + 90% unlabelled", "100% labelled")
METHODS = ("cmsc", "augment")
RANDOM = "random init"


def folds(seed, n_folds):
    """``(X, y, groups, X_score, y_score)`` of the scored folds of a seed's training patients."""
    data = load_ptbxl_sample_frames(random_state=seed)
    X, y, groups = data.X_train, data.y_train.reset_index(drop=True), data.groups_train
    split = GroupKFold(n_splits=4, shuffle=True, random_state=seed).split(X, groups=groups)
    for train, valid in list(split)[:n_folds]:
        yield X[train], y.iloc[train].reset_index(drop=True), groups[train], X[valid], y.iloc[valid]


def run_fold(seed, fold, params, quick, methods=METHODS):
    X, y, groups, X_score, y_score = fold
    kept = np.random.RandomState(seed).choice(
        np.unique(groups), size=round(LABELLED * len(np.unique(groups))), replace=False
    )
    y_semi = y.mask(np.broadcast_to(~np.isin(groups, kept)[:, None], y.shape))
    extra = {"max_epochs": 2} if quick else {}
    pretrain_extra = {"max_epochs": 2} if quick else {}
    rows, fitted = {}, {}
    for setting, y_fit in zip(SETTINGS, (y_semi, y)):
        for init in (RANDOM, *methods):
            if init == RANDOM:
                pretrained = None
            elif init in fitted:  # the same signals: the pretraining is reused
                pretrained = fitted[init]
            else:
                pretrained = ContrastivePretrainer(method=init, **params, **pretrain_extra)
            start = time.perf_counter()
            model = CROCSClusterer(**extra, pretrained=pretrained, random_state=seed).fit(
                X, y_fit, groups=groups
            )
            seconds = time.perf_counter() - start
            if pretrained is not None:
                fitted[init] = model.pretrainer_
            row = evaluate(model, X_score, y_score.reset_index(drop=True))
            rows[(setting, init)] = {
                **row,
                ("pretraining", "s"): model.pretraining_time_,
                ("fit", "s"): seconds - model.pretraining_time_,
                ("pretraining", "last loss"): (
                    model.pretrainer_.loss_curve_[-1] if pretrained is not None else np.nan
                ),
            }
    table = pd.DataFrame.from_dict(rows, orient="index")
    table.columns = pd.MultiIndex.from_tuples(table.columns)
    table.index = [f"{s} / {i}" for s, i in table.index]
    return table


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--folds", type=int, default=2, help="scored folds (of 4) per seed")
    parser.add_argument("--params", type=json.loads, default={}, help="ContrastivePretrainer")
    parser.add_argument(
        "--methods", nargs="+", default=list(METHODS), help="ContrastivePretrainer methods"
    )
    parser.add_argument("--quick", action="store_true", help="one seed, 2 epochs: a smoke test")
    args = parser.parse_args(argv)
    seeds, n_folds = (args.seeds[:1], 1) if args.quick else (args.seeds, args.folds)
    print(f"Machine: {machine_summary('cpu')}; load average {os.getloadavg()[0]:.2f}")
    print(
        f"PTB-XL sample; seeds {seeds}, {n_folds} validation fold(s) of the training patients "
        f"each; ContrastivePretrainer(**{args.params})"
    )
    start = time.perf_counter()
    tables = []
    for seed in seeds:
        for fold in folds(seed, n_folds):
            tables.append(run_fold(seed, fold, args.params, args.quick, args.methods))
        print(f"seed {seed} done ({time.perf_counter() - start:.0f} s)", flush=True)
    _, _, text = mean_std(tables)
    scores = [c for c in text.columns if c[1] == "Acc"] + [("class", "AMI")]
    scores += [c for c in text.columns if c[0] == "P@10" and c[1] == "=3"]
    times = [("pretraining", "s"), ("fit", "s"), ("pretraining", "last loss")]
    with pd.option_context("display.width", 250, "display.max_columns", 50):
        print(f"\nValidation folds, %: mean (std) over {len(tables)} folds")
        print(text[scores + times].to_string())
        print("\nMinus the random init of the same setting, paired by fold (points): mean (std)")
        diffs = {}
        for name in tables[0].index:
            setting, init = name.split(" / ")
            if init != RANDOM:
                d = pd.DataFrame([t.loc[name] - t.loc[f"{setting} / {RANDOM}"] for t in tables])
                diffs[name] = d[scores].agg(lambda c: f"{c.mean():+.1f} ({c.std(ddof=1):.1f})")
        print(pd.DataFrame(diffs).T.to_string())
    print(f"\nTotal time {time.perf_counter() - start:.0f} s; load {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
