"""What ``evaluate`` does: fit and score on held-out patients, or cross-validate.

Records and attributes are read as ``fit`` reads them and each model is
scored as ``score`` scores one (:mod:`sklearn_crocs.cli._commands`), so that
the held-out numbers are those the two commands would give.
"""

import warnings
from pathlib import Path

import numpy as np
import pandas as pd
from sklearn.metrics import balanced_accuracy_score, recall_score
from sklearn.model_selection import StratifiedGroupKFold

from .._split import patient_split
from ..metrics import evaluate_prototypes
from ..metrics._evaluation import MAJORITY
from ._commands import (
    bin_ages_of,
    check_attributes,
    check_output,
    fit_labels,
    fit_settings,
    new_model,
    retrieval_query,
    save_figure,
    scorable,
    write_csv,
)
from ._common import CommandError, escape, note
from ._records import read_records

FILES = ("split.csv", "clustering.csv", "retrieval.csv", "per_class.csv", "confusion.png",
         "retrieval.png")  # fmt: skip


def _splits(args, groups, classes):
    """``[(train, test), ...]``: positions of the labelled records, split by patient."""
    # A record of unknown class is stratified as a class of its own.
    classes = pd.Series(classes, dtype=object).fillna("").astype(str).to_numpy()
    n_patients = len(np.unique(groups))
    try:
        if args.cv is None:
            train, _, test = patient_split(
                groups, stratify=classes, val_size=0, test_size=args.test_size,
                random_state=args.random_state,
            )  # fmt: skip
            return [(train, test)]
        if args.cv > n_patients:
            raise ValueError(f"--cv {args.cv} is more folds than the {n_patients} patients")
        folds = StratifiedGroupKFold(args.cv, shuffle=True, random_state=args.random_state)
        with warnings.catch_warnings():
            # A class of fewer patients than folds is in some folds only; per_class.csv pools them.
            warnings.filterwarnings("ignore", "The least populated class", UserWarning)
            return list(folds.split(groups, classes, groups))
    except ValueError as exc:
        raise CommandError(f"cannot split the records by patient: {exc}") from exc


def _score_part(args, model, X, y):
    """evaluate_prototypes' tables of ``model`` on ``X``, with balanced accuracy added."""
    result = evaluate_prototypes(model, X, y, k=args.k)
    clustering = result.clustering
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "y_pred contains classes not in y_true")
        for name in model.attribute_names_:
            clustering[(name, "BAcc")] = [
                round(100 * balanced_accuracy_score(y[name].astype(str),
                                                    result.predictions[m][name].astype(str)), 1)
                for m in clustering.index
            ]  # fmt: skip
    order = list(dict.fromkeys(name for name, _ in clustering.columns))
    result.clustering = clustering[[c for n in order for c in clustering.columns if c[0] == n]]
    return result


def _folds(tables):
    """The tables of each fold one under the other and, for several, their mean (std)."""
    table = pd.concat(tables, keys=[str(i) for i in range(1, len(tables) + 1)], names=["fold"])
    if len(tables) > 1:
        by_method = table.groupby(level=1, sort=False)
        mean, std = by_method.mean().round(1), by_method.std().round(1)
        summary = mean.astype(str) + " (" + std.astype(str) + ")"
        table = pd.concat([table, pd.concat([summary], keys=["mean (std)"], names=["fold"])])
    table.index.names = ["fold", "method"]
    return table


def evaluate(args):
    out_dir = Path(args.out_dir)
    if out_dir.exists() and not out_dir.is_dir():
        raise CommandError(f"--out-dir {out_dir} is a file, not a folder.")
    written = [check_output(out_dir / n, args.force, option="--out-dir:") for n in FILES]
    if args.labels is None and args.record_column is not None:
        raise CommandError("--record-column needs --labels.")
    if args.cv is None and not args.test_size < 1:
        raise CommandError(f"--test-size {args.test_size:g} leaves no patient for training.")
    if args.cv is not None and args.cv < 2:
        raise CommandError("--cv needs at least 2 folds.")
    class_attribute, class_map = check_attributes(args)
    settings = fit_settings(args)
    records, source = read_records(args, settings, leads=args.leads)
    # Ages stay in years here: each fold bins them with its training records' groups.
    years, labelled, _ = fit_labels(
        args, records, source, class_attribute, class_map, bin_ages=False
    )
    settings.update(class_attribute=class_attribute, class_map=class_map,
                    multi_class=args.multi_class)  # fmt: skip
    groups = records.groups[labelled]
    frame_of = pd.Series(np.arange(len(labelled)), index=labelled)  # record -> labelled row
    y, _ = bin_ages_of(years, np.arange(len(years)), args.age_groups)  # to stratify only
    splits = _splits(args, groups, y[class_attribute].to_numpy())
    part = np.full(len(labelled), "", dtype=object)
    results, truth, predicted = [], [], {}
    for fold, (train, test) in enumerate(splits, 1):
        part[test] = "test" if args.cv is None else f"fold {fold}"
        y, settings["age_groups"] = bin_ages_of(years, train, args.age_groups)
        frames = np.flatnonzero(np.isin(records.frame_record, labelled[train]))
        y_train = y.iloc[frame_of[records.frame_record[frames]].to_numpy()]
        model = new_model(args, settings, class_attribute)
        model.fit(
            records.frames[frames], y_train.reset_index(drop=True),
            groups=records.groups[records.frame_record[frames]],
        )  # fmt: skip
        query = retrieval_query(args.query, model, settings)  # a wrong --query stops at once
        y_test = y.iloc[test].astype({name: object for name in y.columns})
        known = scorable(y_test, model)
        if not known.all():
            note(
                f"fold {fold}: left out {int((~known).sum())} of {len(test)} held-out record(s) "
                "with an unknown attribute or a value that no training record has"
            )
        kept = labelled[test[known]]
        rows = np.flatnonzero(np.isin(records.frame_record, kept))
        X, y_rows = (
            records.frames[rows],
            y_test[known]
            .iloc[np.searchsorted(kept, records.frame_record[rows])]
            .reset_index(drop=True),
        )
        if len(rows) < max(args.k):
            raise CommandError(
                f"fold {fold}: only {len(rows)} held-out frames can be scored; --k "
                f"{max(args.k)} needs at least that many. Hold out more patients."
            )
        print(
            f"Fold {fold}: trained on {len(frames)} frames of {len(train)} records "
            f"({len(np.unique(groups[train]))} patients); scored on {len(rows)} frames of "
            f"{len(kept)} records ({len(np.unique(groups[test]))} other patients)."
        )
        results.append(_score_part(args, model, X, y_rows))
        truth.append(y_rows[class_attribute])
        for method in ("CP CROCS", "TP CROCS"):
            found = results[-1].predictions[method][class_attribute]
            predicted.setdefault(method, []).append(found)
    clustering = _folds([r.clustering for r in results])
    retrieval = _folds([r.retrieval for r in results])
    truth = pd.concat(truth, ignore_index=True).astype(str)
    predicted = {m: pd.concat(p, ignore_index=True).astype(str) for m, p in predicted.items()}
    classes = sorted(truth.unique())
    per_class = pd.DataFrame({class_attribute: classes,
                              "frames": truth.value_counts()[classes].to_numpy()})  # fmt: skip
    for method, values in predicted.items():
        recall = recall_score(truth, values, labels=classes, average=None, zero_division=0)
        per_class[f"{method} recall"] = (100 * recall).round(1)
    # Per fold, and their mean (std) with --cv, as clustering.csv and retrieval.csv hold them.
    print("Clustering of the held-out ECGs (%; BAcc: balanced accuracy, the classes' mean recall):")
    print(escape(clustering.to_string(), lines=True))
    print(MAJORITY)
    print("Retrieval of the K nearest held-out ECGs per prototype, P@K (%):")
    print(escape(retrieval.to_string(), lines=True))
    print(escape(f"Recall of each class of {class_attribute!r} on the held-out frames (%):"))
    print(escape(per_class.to_string(index=False), lines=True))
    out_dir.mkdir(parents=True, exist_ok=True)
    split = pd.DataFrame({"record": np.asarray(records.names)[labelled], "patient": groups,
                          "part": np.where(part == "", "train", part)})  # fmt: skip
    write_csv(split, written[0], args.force)
    write_csv(clustering.reset_index(), written[1], args.force)
    write_csv(retrieval.reset_index(), written[2], args.force)
    write_csv(per_class, written[3], args.force)
    try:
        import matplotlib

        matplotlib.use("Agg")  # files only, no window
        from sklearn.metrics import ConfusionMatrixDisplay

        from ..plotting import RetrievalDisplay
    except ImportError as exc:
        note(f"no figures: {exc}")
        return 0
    import matplotlib.pyplot as plt

    confusion = ConfusionMatrixDisplay.from_predictions(
        truth, predicted["CP CROCS"], xticks_rotation="vertical", colorbar=False
    )
    confusion.ax_.set_title(f"CP CROCS, {class_attribute}, held-out frames")
    save_figure(confusion.figure_, written[4], args.force)
    # The last fold's model and held-out frames.
    display = RetrievalDisplay.from_estimator(
        model, X, y_rows, query=query, n_neighbors=min(6, len(X))
    )
    save_figure(display.figure_, written[5], args.force)
    plt.close("all")
    print(escape(f"Tables and figures written to {out_dir}"))
    return 0
