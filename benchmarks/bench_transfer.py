"""Transfer of the shipped PTB-XL model to ECGs of other hospitals and devices (issue 56).

The test ECGs are not PTB-XL: the 102 LUDB records bundled with the package
(``load_ludb``: Lobachevsky University, Nizhny Novgorod, 500 Hz, raw mV,
rhythm, sex and age; one record per patient) and, for the zero-shot row, the
CinC 2021 records of ``../shared/data/cinc2021`` that are not PTB-XL (its
``HR*`` records are PTB-XL's and are left out). ``ludb-subset`` adds nothing:
its 12 records are among the bundled 102. These ECGs choose nothing: the
shipped recipe was chosen on PTB-XL validation patients
(``bench_pretrained.py``), and the fine-tuning default on validation patients
drawn from the training folds (``--choose``).

Rows, on LUDB with patient-grouped 5-fold cross-validation and several seeds
(means and stds over folds x seeds):

- (a) the shipped model unchanged (zero-shot), age quartiles by the model's
  PTB-XL edges, against the majority rate of the scored records;
- (b) CROCS from scratch on the training folds (rhythm, sex, age quartiles of
  the training folds' ages);
- (c) the same fit starting from the shipped model (``pretrained="ptbxl"``);
- (d) a logistic regression on the shipped model's embeddings (a linear probe);
- (e) a logistic regression on the conditioned signals downsampled to 25 Hz.

Rows (b)-(e) take the age quartile edges of the training folds. Every model
reads whole 10-s records (CROCS: the mean embedding of the two 5-s frames).

Usage::

    python benchmarks/bench_transfer.py                   # the table (3 seeds)
    python benchmarks/bench_transfer.py --choose          # the fine-tuning default
    python benchmarks/bench_transfer.py --zero-shot       # row (a) on every record
"""

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
from scipy.signal import resample_poly
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import adjusted_mutual_info_score
from sklearn.model_selection import GroupKFold
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from skorch.callbacks import Freezer

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from bench_pretrained import binned  # noqa: E402

from sklearn_crocs import CROCSClusterer  # noqa: E402
from sklearn_crocs._engine._neural import auto_max_epochs  # noqa: E402
from sklearn_crocs.datasets import load_ludb, load_wfdb, patient_split  # noqa: E402
from sklearn_crocs.datasets._base import parse_age, parse_sex  # noqa: E402
from sklearn_crocs.preprocessing import AgeGroupEncoder, SignalConditioner, make_frames  # noqa: E402

from _utils import load_average, machine_summary  # noqa: E402

CINC = HERE.parents[1] / "shared" / "data" / "cinc2021"
RATE = 100.0
ATTRIBUTES = ("rhythm", "sex", "age")


#: Ways to fine-tune from the shipped model, compared by ``--choose``.
FINE_TUNING = {
    "defaults": {"freeze": False},  # every layer at lr (before freeze="auto")
    "lr x0.1": {"lr": 1e-4, "freeze": False},
    "half epochs": {"max_epochs": "half", "freeze": False},
    # The ResNet's stem and first two of its four stages kept.
    "freeze early": {
        "freeze": False, "callbacks": [("freeze", Freezer(["stem.*", "blocks.0.*", "blocks.1.*"]))],
    },
    # The stem and three stages: the package's freeze="auto" since (early_layers).
    "freeze stages 1-3": {"freeze": True},
    # Every stage (the head trains).
    "freeze all stages": {
        "freeze": False, "callbacks": [("freeze", Freezer(["stem.*", "blocks.*"]))],
    },
}


def ludb():
    """The bundled LUDB records conditioned as the shipped model conditions (at 100 Hz),
    their attributes (age in years) and patients."""
    data = load_ludb()
    conditioner = SignalConditioner(sampling_rate=data.fs, target_rate=RATE)
    X = conditioner.fit_transform(data.data.astype(np.float64)).astype(np.float32)
    return X, data.attributes[list(ATTRIBUTES)].reset_index(drop=True), data.groups


def cinc():
    """The CinC 2021 records that are not PTB-XL's, at 100 Hz (as lists: lengths differ),
    with sex and age."""
    data = load_wfdb(CINC, target_fs=RATE, signal_length="variable", on_error="skip")
    keep = [i for i, name in enumerate(data.record_names) if not str(name).startswith("HR")]
    table = data.attributes.iloc[keep]
    columns = {c.lower(): c for c in table.columns}
    attributes = pd.DataFrame({
        "sex": [parse_sex(v) for v in table[columns["sex"]]],
        "age": [parse_age(v) for v in table[columns["age"]]],
    })  # fmt: skip
    return [data.data[i] for i in keep], attributes


def accuracy_row(truth, predicted, names):
    row = {}
    for name in names:
        t, p = np.asarray(truth[name]).astype(str), np.asarray(predicted[name]).astype(str)
        row[f"{name} acc"] = float(np.mean(t == p))
        if name == "rhythm":
            row["rhythm AMI"] = adjusted_mutual_info_score(t, p)
    return row


def zero_shot(shipped, X, attributes, rate=RATE):
    """Row (a): the shipped model's sex and age quartile of records ``X`` (a list or an array
    at ``rate``, conditioned or not: the model conditions them), with the majority rates."""
    truth = attributes.assign(age=binned(shipped, "age", attributes["age"]))
    known = truth["sex"].notna() & attributes["age"].notna()
    rows = [shipped.predict(np.asarray(x)[np.newaxis], sampling_rate=rate) for x in X]
    predicted = pd.concat(rows, ignore_index=True)[known.to_numpy()]
    truth = truth[known.to_numpy()]
    row = accuracy_row(truth, predicted, ("sex", "age"))
    for name in ("sex", "age"):
        shares = truth[name].astype(str).value_counts(normalize=True)
        row[f"{name} majority"] = float(shares.iloc[0])
    row["n"] = int(known.sum())
    return row


def _age_labels(ages_train, ages):
    encoder = AgeGroupEncoder(n_groups=4).fit(np.asarray(ages_train, dtype=float)[:, None])
    return encoder.transform(np.asarray(ages, dtype=float)[:, None]).ravel()


def fit_crocs(X, y, groups, seed, pretrained=None, **params):
    """A CROCS model fitted on 5-s frames of the conditioned records ``X``."""
    frames, y_frames, g_frames = make_frames(X, 500, attributes=y, groups=groups)
    if params.get("max_epochs") == "half":  # half of what "auto" gives each of the 2 nets
        params["max_epochs"] = max(1, round(auto_max_epochs(len(frames)) / 4))
    model = CROCSClusterer(
        class_attribute="rhythm", continuous={"age": 4}, sampling_rate=RATE,
        longer_signals="average", random_state=seed, pretrained=pretrained, **params,
    )  # fmt: skip
    start = time.perf_counter()
    model.fit(frames, y_frames, groups=g_frames)
    return model, time.perf_counter() - start


def crocs_row(model, seconds, X, y):
    truth = y.reset_index(drop=True).assign(age=binned(model, "age", y["age"]))
    return {**accuracy_row(truth, model.predict(X), ATTRIBUTES), "fit s": seconds}


def probe_row(features_train, y_train, features_test, y_test):
    """A logistic regression per attribute (age as training-fold quartiles)."""
    predicted, truth = {}, {}
    start = time.perf_counter()
    for name in ATTRIBUTES:
        target = y_train[name].astype(str)
        tested = y_test[name].astype(str)
        if name == "age":
            target = _age_labels(y_train["age"], y_train["age"])
            tested = _age_labels(y_train["age"], y_test["age"])
        model = make_pipeline(StandardScaler(), LogisticRegression(max_iter=2000))
        predicted[name] = model.fit(features_train, target).predict(features_test)
        truth[name] = np.asarray(tested)
    return {**accuracy_row(truth, predicted, ATTRIBUTES), "fit s": time.perf_counter() - start}


def folds(groups, seed):
    """Patient-grouped 5 folds, shuffled by ``seed``."""
    return GroupKFold(n_splits=5, shuffle=True, random_state=seed).split(groups, groups=groups)


def table(X, y, groups, shipped, seeds, fine_tuning):
    rows = []
    embeddings = shipped.transform(X, sampling_rate=RATE)  # the model conditions X again
    downsampled = resample_poly(X, 1, 4, axis=-1).reshape(len(X), -1)  # 25 Hz
    for seed in seeds:
        for fold, (train, test) in enumerate(folds(groups, seed)):
            y_train, y_test = y.iloc[train], y.iloc[test]
            zero = zero_shot(shipped, X[test], y_test)
            key = {"seed": seed, "fold": fold}
            rows.append({**key, "row": "(a) shipped, zero-shot", **zero})
            model, s = fit_crocs(X[train], y_train, groups[train], seed)
            rows.append({**key, "row": "(b) CROCS from scratch",
                         **crocs_row(model, s, X[test], y_test)})  # fmt: skip
            model, s = fit_crocs(X[train], y_train, groups[train], seed, "ptbxl", **fine_tuning)
            rows.append({**key, "row": "(c) CROCS fine-tuned from shipped",
                         **crocs_row(model, s, X[test], y_test)})  # fmt: skip
            rows.append({**key, "row": "(d) logistic, shipped embeddings",
                         **probe_row(embeddings[train], y_train, embeddings[test], y_test)})
            rows.append({**key, "row": "(e) logistic, signals at 25 Hz",
                         **probe_row(downsampled[train], y_train, downsampled[test], y_test)})
            print(pd.DataFrame(rows[-5:]).round(3).to_string(index=False), flush=True)
    return pd.DataFrame(rows)


def choose(X, y, groups, seeds, options):
    """Each fine-tuning option fitted on 75 % of each training fold's patients and scored on
    the other 25 % (the test folds are never read)."""
    rows = []
    for seed in seeds:
        for fold, (train, _) in enumerate(folds(groups, seed)):
            inner, _, valid = patient_split(
                groups[train], stratify=y["rhythm"].to_numpy()[train], val_size=0.0,
                test_size=0.25, random_state=seed,
            )  # fmt: skip
            fit_idx, valid_idx = train[inner], train[valid]
            for name in options:
                model, s = fit_crocs(
                    X[fit_idx], y.iloc[fit_idx], groups[fit_idx], seed, "ptbxl",
                    **FINE_TUNING[name],
                )  # fmt: skip
                row = crocs_row(model, s, X[valid_idx], y.iloc[valid_idx])
                row["mean acc"] = np.mean([row[f"{n} acc"] for n in ATTRIBUTES])
                rows.append({"seed": seed, "fold": fold, "option": name, **row})
                print(pd.DataFrame(rows[-1:]).round(3).to_string(index=False), flush=True)
    return pd.DataFrame(rows)


def summary(frame, by):
    numbers = frame.drop(columns=[c for c in ("seed", "fold") if c in frame])
    numbers = numbers.groupby(by, sort=False)
    return numbers.mean().round(3).astype(str) + " (" + numbers.std().round(3).astype(str) + ")"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--choose", action="store_true", help="compare FINE_TUNING options")
    parser.add_argument("--options", nargs="+", default=list(FINE_TUNING),
                        choices=list(FINE_TUNING), help="the options that --choose compares")
    parser.add_argument("--output", type=Path, default=None, help="the results CSV")
    parser.add_argument("--zero-shot", action="store_true", help="row (a) on every record only")
    parser.add_argument("--fine-tuning", default="freeze stages 1-3", choices=list(FINE_TUNING))
    args = parser.parse_args(argv)
    print(machine_summary(), "|", load_average())
    X, y, groups = ludb()
    if args.choose:
        result = choose(X, y, groups, args.seeds, args.options)
        output = args.output or HERE / "results" / "transfer_fine_tuning_validation.csv"
        result.to_csv(output, index=False)
        print("\nMeans (stds) over folds x seeds, validation patients of the training folds:")
        print(summary(result, "option").to_string())
        print(f"Written {output}")
        return
    shipped = CROCSClusterer.from_pretrained("ptbxl")
    raw = load_ludb()  # as a user has them: raw mV at 500 Hz
    whole = [{"data": "ludb (bundled, all 102)",
              **zero_shot(shipped, raw.data, raw.attributes[["sex", "age"]], raw.fs)}]  # fmt: skip
    records, attributes = cinc()
    whole.append({"data": "cinc2021 (not PTB-XL)", **zero_shot(shipped, records, attributes)})
    whole = pd.DataFrame(whole)
    whole.to_csv(HERE / "results" / "transfer_zero_shot.csv", index=False)
    print("(a) zero-shot on every record, age quartiles by the shipped model's edges:")
    print(whole.round(3).to_string(index=False))
    if args.zero_shot:
        return
    result = table(X, y, groups, shipped, args.seeds, FINE_TUNING[args.fine_tuning])
    output = args.output or HERE / "results" / "transfer_ludb.csv"
    result.to_csv(output, index=False)
    print(f"\nLUDB, means (stds) over 5 folds x seeds {args.seeds}:")
    print(summary(result, "row").to_string())
    paired = result.pivot_table(index=["seed", "fold"], columns="row")
    for name in ("sex acc", "age acc", "rhythm acc", "rhythm AMI"):
        diff = paired[(name, "(c) CROCS fine-tuned from shipped")] - paired[
            (name, "(b) CROCS from scratch")
        ]
        print(f"(c) - (b), {name}: {diff.mean():+.3f} (std {diff.std():.3f}, "
              f"{int((diff > 0).sum())}/{len(diff)} folds better)")  # fmt: skip
    print(f"Written {output}")


if __name__ == "__main__":
    main()
