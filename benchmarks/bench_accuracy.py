"""Accuracy of CROCS on real 12-lead ECGs: the bundled PTB-XL sample, the paper's Tables 1 and 2.

Protocol (one row per method, mean (std) over the seeds):

- data: the 500 PTB-XL records of ``load_ptbxl_sample`` cut into two 5-s
  frames each, attributes class (NORM/ABN) x sex x age quartile (edges fitted
  on the training patients): 16 prototypes;
- splits: 60 % of the patients for training, 40 % for testing, one split per
  seed (``load_ptbxl_sample_frames(random_state=seed)``); the estimators see
  the training part only, and nothing is tuned on the test part;
- clustering (Table 1): accuracy and AMI per attribute and for the whole
  combination, for CP CROCS (nearest learned prototype), TP CROCS (nearest
  mean training embedding) and KM CROCS (k-means with 16 clusters on the
  embeddings, each cluster mapped to the combination most of its training
  ECGs have), next to the majority predictor (each attribute's most frequent
  training value) and KM raw (the same k-means on the signals);
- retrieval (Table 2): each prototype retrieves its K nearest test ECGs;
  P@K for K = 1, 5, 10 by number of matched attributes (>=1, >=2, =3), the
  paper's Eq. 5 as written (every prototype counts; one that no test ECG
  matches scores 0), next to Random (the expected P@K of K test ECGs drawn
  at random for each prototype);
- ablations (the paper's "marginal impact" table): NCE-hard, NCE-soft with
  tau_w = inf, NCE-soft with tau_w = 1 (all without the regulariser), and
  NCE-soft with tau_w = 1 + L_reg (beta = 0.2), each with the estimator's
  defaults otherwise;
- reference: a plain PyTorch CROCS written here from the paper (its CNN,
  NCE-soft + L_reg summed over pairs, Adam lr 1e-3, batch 128, 40 epochs, no
  early stopping), the baseline the defaults must beat;
- ceiling: the defaults' encoder, augmentation and optimiser trained with one
  cross-entropy head per attribute on the labels themselves: how much of each
  attribute this encoder can read from these few patients at all;
- levers past the frame-level defaults (issue 39), each on the same fit(s):
  "whole records" embeds each test record (its two frames) with
  ``longer_signals="average"`` and scores records (clustering per record,
  retrieval of records); "ensemble of M seeds" averages the cosine
  similarities of M default fits (seeds ``seed``, ``seed + 1000``, ...), its
  fit time the sum of theirs, and the two combine, with learned (CP) and
  mean (TP, from the ensemble's training embeddings) prototypes; the
  ceiling is also scored
  on whole records (its features of the two frames averaged); "pretrained
  (augment)" starts the defaults from an encoder pretrained in ``fit`` on the
  training ECGs (``ContrastivePretrainer(method="augment")``, its fit time
  including the pretraining);
- fit time of each model (seconds, this machine).

``--validation`` is how the levers are judged, without the test patients: it
scores two folds (of 4, by patient) of each seed's *training* patients,
trained on the rest, and prints each lever's paired difference from the
defaults on the same fold (mean and std over folds), with 5 evenly spaced
80 % crops of each frame averaged (test-time augmentation) as one more lever.

Usage::

    python benchmarks/bench_accuracy.py [--seeds 0 1 2 3 4] [--output accuracy.csv]
    python benchmarks/bench_accuracy.py --validation   # paired differences of the levers
    python benchmarks/bench_accuracy.py --quick   # one seed, 2 epochs: a smoke test
"""

import argparse
import math
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import torch
import torch.nn.functional as F
from sklearn.frozen import FrozenEstimator
from sklearn.model_selection import GroupKFold
from torch import nn

from sklearn_crocs import ContrastivePretrainer, CROCSClusterer, PrototypeRetriever
from sklearn_crocs.baselines import KMeansCROCS, KMeansRaw
from sklearn_crocs.datasets import load_ptbxl_sample_frames
from sklearn_crocs.metrics import (
    attribute_accuracy_score,
    attribute_ami_score,
    chance_precision_at_k,
    retrieval_report,
)
from sklearn_crocs.nn import RandomWindow, ResNet1dEncoder

sys.path.insert(0, str(Path(__file__).parent))
from _utils import machine_summary, reference_cnn  # noqa: E402

KS = (1, 5, 10)
ABLATIONS = {
    "NCE-hard": {"loss": "hard", "beta": 0.0},
    "NCE-soft, tau_w = inf": {"tau_w": math.inf, "beta": 0.0},
    "NCE-soft, tau_w = 1": {"tau_w": 1.0, "beta": 0.0},
    "NCE-soft, tau_w = 1, + L_reg": {"tau_w": 1.0, "beta": 0.2},
}


# ------------------------------------------------------------------ plain loop
def plain_crocs(X, codes, dims, *, seed, epochs=40, batch_size=128, lr=1e-3, tau_s=0.1,
                tau_w=1.0, beta=0.2, embedding_dim=128):  # fmt: skip
    """Train CROCS as a short script would; return (encoder, unit prototypes, seconds)."""
    torch.manual_seed(seed)
    combos = torch.as_tensor(np.indices(dims).reshape(len(dims), -1).T)
    n_equal = (combos[:, None, :] == combos[None, :, :]).sum(-1).double()
    same_class = combos[:, None, 0] == combos[None, :, 0]
    weights = torch.softmax((n_equal / tau_w).masked_fill(~same_class, -math.inf), dim=1).float()
    target_distance = beta * (len(dims) - n_equal).float()
    encoder = reference_cnn(X.shape[1], X.shape[2], embedding_dim)
    prototypes = nn.Parameter(torch.randn(len(combos), embedding_dim))
    optimizer = torch.optim.Adam([*encoder.parameters(), prototypes], lr=lr)
    X = torch.as_tensor(X)
    target = torch.as_tensor(np.ravel_multi_index(codes.T, dims))
    start = time.perf_counter()
    for _ in range(epochs):
        encoder.train()
        for batch in torch.randperm(len(X)).split(batch_size):
            if len(batch) < 2:  # batch norm cannot train on one ECG
                continue
            v = F.normalize(encoder(X[batch]), dim=1)
            p = F.normalize(prototypes, dim=1)
            log_p = F.log_softmax(v @ p.T / tau_s, dim=1)
            nce = -(weights[target[batch]] * log_p).sum(1).mean()
            distance = torch.cdist(p, p)
            reg = ((distance - target_distance)[same_class] ** 2).sum()
            optimizer.zero_grad()
            (nce + reg).backward()
            optimizer.step()
    seconds = time.perf_counter() - start
    return encoder.eval(), F.normalize(prototypes.detach(), dim=1).numpy(), seconds


def supervised_ceiling(X, codes, dims, *, seed, epochs=40, batch_size=128, lr=1e-3,
                       cosine=False):  # fmt: skip
    """The defaults' encoder and augmentation trained on the labels directly.

    One linear head and cross-entropy per attribute: what this encoder reads
    of each attribute when it is told it, which bounds what any clustering
    of its embeddings can reach. ``cosine``: the learning rate decays along
    a half cosine over the epochs, as ``lr_schedule="cosine"`` does.
    Returns (predict, seconds).
    """
    torch.manual_seed(seed)
    generator = torch.Generator().manual_seed(seed)
    encoder = ResNet1dEncoder(in_channels=X.shape[1], n_timepoints=X.shape[2], embedding_dim=128)
    heads = nn.ModuleList(nn.Linear(128, d) for d in dims)
    augment = RandomWindow(crop=0.8, amplitude_jitter=0.1)
    optimizer = torch.optim.Adam([*encoder.parameters(), *heads.parameters()], lr=lr)
    schedule = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, epochs) if cosine else None
    X, target = torch.as_tensor(X), torch.as_tensor(codes, dtype=torch.long)
    start = time.perf_counter()
    for _ in range(epochs):
        encoder.train()
        for batch in torch.randperm(len(X), generator=generator).split(batch_size):
            if len(batch) < 2:
                continue
            features = encoder(augment(X[batch], generator))
            loss = sum(F.cross_entropy(head(features), target[batch, a])
                       for a, head in enumerate(heads))  # fmt: skip
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        if schedule is not None:
            schedule.step()
    seconds = time.perf_counter() - start
    encoder.eval()

    def predict(X_new, records=False):
        """Codes of each frame of X_new; ``records``: of each pair of consecutive frames
        (a record), from the mean of their features."""
        with torch.no_grad():
            features = encoder(torch.as_tensor(X_new))
            if records:
                features = features.view(-1, 2, features.shape[1]).mean(1)
            return np.column_stack([head(features).argmax(1).numpy() for head in heads])

    return predict, seconds


# --------------------------------------------------------------------- metrics
def clustering_row(y_true, y_pred):
    """{(attribute, "Acc" | "AMI"): percent} for every attribute and the combination."""
    acc = attribute_accuracy_score(y_true, y_pred)
    ami = attribute_ami_score(y_true, y_pred)
    return {
        **{(a, "Acc"): 100 * v for a, v in acc.items()},
        **{(a, "AMI"): 100 * v for a, v in ami.items()},
    }


def retrieval_row(y_true, query_attributes, indices):
    """{("P@K", ">=m"): percent} of the paper's Eq. 5 as written."""
    report = retrieval_report(y_true, (query_attributes, indices), k=KS, decimals=None)
    return {(f"P@{k}", m): v for (k, m), v in report.iloc[0].items()}


def nearest_rows(queries, embeddings, k):
    """Rows of ``embeddings`` nearest each of ``queries`` (cosine), best first."""
    similarity = queries @ embeddings.T
    return np.argsort(-similarity, axis=1, kind="stable")[:, :k]


def records_of(X):
    """The sample's records from their frames (``make_frames`` puts a record's two 5-s
    frames in consecutive rows): shape (n / 2, leads, 2 * frame length)."""
    return np.concatenate([X[0::2], X[1::2]], axis=-1)


def ensemble(models, X):
    """Embeddings of X and learned prototypes of an ensemble, with the attributes.

    Each model's unit embeddings and prototypes are concatenated and divided
    by sqrt(M): still unit vectors, whose cosine is the mean of the models'
    (what ``CROCSClusterer(ensemble_size=M)`` computes for its nets).
    """
    return join([m.transform(X) for m in models], models)


def join(embeddings, models):
    """``(embeddings, learned prototypes, attributes)`` of an ensemble from each
    member's embeddings (see :func:`ensemble`)."""
    attributes = models[0].get_prototypes("learned")[1]
    for model in models[1:]:  # same y, so the same combinations in the same order
        assert (model.get_prototypes("learned")[1] == attributes).all()
    scale = math.sqrt(len(models))
    prototypes = np.concatenate([m.get_prototypes("learned")[0] for m in models], axis=1)
    return np.concatenate(embeddings, axis=1) / scale, prototypes / scale, attributes


def mean_prototypes(train_embeddings, y_train, attributes):
    """TP CROCS: the unit mean training embedding of each combination that has
    training ECGs, and those combinations' attributes."""
    keys = y_train.astype(str).agg("|".join, axis=1).to_numpy()
    prototypes, kept = [], []
    for i, combination in enumerate(attributes):
        found = keys == "|".join(map(str, combination))
        if found.any():
            mean = train_embeddings[found].mean(axis=0)
            prototypes.append(mean / np.linalg.norm(mean))
            kept.append(i)
    return np.array(prototypes), attributes[kept]


def crops(model, X, n_crops=5, fraction=0.8):
    """Test-time augmentation: the unit mean embedding of ``n_crops`` evenly spaced
    windows of ``fraction`` of each frame (the training crops' length)."""
    length = X.shape[-1]
    window = round(fraction * length)
    encoder = model.net_.module_.eval()
    total = 0
    with torch.no_grad():
        for start in np.linspace(0, length - window, n_crops).round().astype(int):
            part = torch.as_tensor(np.ascontiguousarray(X[..., start : start + window]))
            total = total + F.normalize(encoder(part), dim=1).numpy()
    return total / np.linalg.norm(total, axis=1, keepdims=True)


def prototype_row(embeddings, prototypes, attributes, y_true):
    """Clustering (nearest prototype) and retrieval (nearest embeddings) of unit vectors."""
    names = list(y_true.columns)
    predicted = pd.DataFrame(attributes[np.argmax(embeddings @ prototypes.T, axis=1)],
                             columns=names)  # fmt: skip
    return {
        **clustering_row(y_true, predicted),
        **retrieval_row(y_true, pd.DataFrame(attributes, columns=names),
                        nearest_rows(prototypes, embeddings, max(KS))),
    }  # fmt: skip


def default_fits(X, y, groups, seed, n_models, extra):
    """``n_models`` fits of the defaults (seeds seed, seed + 1000, ...) and their seconds."""
    models, seconds = [], []
    for k in range(n_models):
        start = time.perf_counter()
        model = CROCSClusterer(**extra, random_state=seed + 1000 * k)
        models.append(model.fit(X, y, groups=groups))
        seconds.append(time.perf_counter() - start)
    return models, seconds


def lever_rows(models, seconds, X, y, train, with_crops=False):
    """Rows of the defaults (``models[0]``) and of each lever, scored on (X, y), with
    learned (CP) and mean (TP, from ``train = (X_train, y_train)``) prototypes."""
    y = y.reset_index(drop=True)
    frames = [m.transform(X) for m in models]
    for m in models:
        m.set_params(longer_signals="average")
    whole = [m.transform(records_of(X)) for m in models]
    for m in models:
        m.set_params(longer_signals="error")
    training = [m.transform(train[0]) for m in models]
    rows = {}
    for n in range(1, len(models) + 1):
        members, fit = models[:n], {("fit", "s"): sum(seconds[:n])}
        E, learned, attributes = join(frames[:n], members)
        mean = mean_prototypes(join(training[:n], members)[0], train[1], attributes)
        suffix = "" if n == 1 else f", ensemble of {n} seeds"
        for kind, prototypes in (("CP", (learned, attributes)), ("TP", mean)):
            rows[f"{kind} CROCS{suffix}"] = {**prototype_row(E, *prototypes, y), **fit}
            rows[f"{kind} CROCS{suffix}, whole records"] = {
                **prototype_row(join(whole[:n], members)[0], *prototypes, y.iloc[0::2]), **fit
            }
    if with_crops:
        learned = models[0].get_prototypes("learned")
        rows["CP CROCS, 5 crops (TTA)"] = {**prototype_row(crops(models[0], X), *learned, y),
                                           ("fit", "s"): seconds[0]}  # fmt: skip
    return rows


def ceiling_rows(X_train, codes_train, dims, X, y, seed, epochs, as_frame, cosine=False):
    """The supervised ceiling scored on the frames of X and on its whole records."""
    predict, seconds = supervised_ceiling(X_train, codes_train, dims, seed=seed, epochs=epochs,
                                          cosine=cosine)  # fmt: skip
    y = y.reset_index(drop=True)
    rows = {}
    for name, records, truth in (("", False, y), (", whole records", True, y.iloc[0::2])):
        predicted = as_frame(np.ravel_multi_index(predict(X, records).T, dims))
        rows[f"Supervised, same encoder (ceiling){name}"] = {
            **clustering_row(truth.astype(str).reset_index(drop=True), predicted.astype(str)),
            ("fit", "s"): seconds,
        }
    return rows


def attribute_space(y_train):
    """(dims, training codes, as_frame: combination indices -> attribute DataFrame)."""
    names = list(y_train.columns)
    categories = [list(y_train[c].cat.categories if c == "age" else sorted(y_train[c].unique()))
                  for c in names]  # fmt: skip
    dims = tuple(len(c) for c in categories)
    codes = np.column_stack(
        [pd.Categorical(y_train[c], categories=cats).codes for c, cats in zip(names, categories)]
    )
    all_attributes = pd.DataFrame(
        np.array([[cats[i] for cats, i in zip(categories, idx)] for idx in np.ndindex(*dims)],
                 dtype=object), columns=names)  # fmt: skip

    def as_frame(combination):
        return all_attributes.iloc[combination].reset_index(drop=True)

    return dims, codes, as_frame, all_attributes


# ----------------------------------------------------------------------- runs
def run_validation(seed, quick, n_models=3):
    """Lever rows on two folds of the training patients of seed's split (no test patient)."""
    data = load_ptbxl_sample_frames(random_state=seed)
    X, y, groups = data.X_train, data.y_train.reset_index(drop=True), data.groups_train
    extra = {"max_epochs": 2} if quick else {}
    folds = GroupKFold(n_splits=4, shuffle=True, random_state=seed).split(X, groups=groups)
    tables = []
    for train, valid in list(folds)[:2]:
        models, seconds = default_fits(
            X[train], y.iloc[train], groups[train], seed, n_models, extra
        )
        rows = lever_rows(models, seconds, X[valid], y.iloc[valid],
                          (X[train], y.iloc[train]), with_crops=True)  # fmt: skip
        dims, codes, as_frame, _ = attribute_space(y.iloc[train])
        rows.update(ceiling_rows(X[train], codes, dims, X[valid], y.iloc[valid], seed,
                                 2 if quick else 40, as_frame))  # fmt: skip
        table = pd.DataFrame.from_dict(rows, orient="index")
        table.columns = pd.MultiIndex.from_tuples(table.columns)
        tables.append(table)
    return tables


def paired_differences(tables, reference="CP CROCS"):
    """'mean (std)' over folds of each row minus the reference row of the same fold."""
    diffs = [t - t.loc[reference] for t in tables]
    return mean_std(diffs)[2].drop(index=reference)


def run_seed(seed, crocs_params, quick):
    data = load_ptbxl_sample_frames(random_state=seed)
    X_train, y_train, groups = data.X_train, data.y_train, data.groups_train
    X_test, y_test = data.X_test, data.y_test
    names = list(y_train.columns)
    dims, codes_train, as_frame, all_attributes = attribute_space(y_train)
    rows = {}
    # Majority predictor: each attribute's most frequent training value.
    majority = pd.DataFrame({c: [y_train[c].astype(str).mode()[0]] * len(y_test) for c in names})
    rows["Majority"] = clustering_row(y_test.astype(str), majority)
    # Random retrieval: expected P@K of K test ECGs drawn at random per prototype.
    rows["Random"] = {
        (f"P@{k}", f">={m}" if m < len(names) else f"={m}"): 100
        * chance_precision_at_k(y_test.astype(str), all_attributes.astype(str), k=k, min_matches=m)
        for k in KS
        for m in range(1, len(names) + 1)
    }

    # KM raw: k-means on the signals themselves.
    start = time.perf_counter()
    km_raw = KMeansRaw(n_clusters=math.prod(dims), random_state=seed).fit(X_train, y_train)
    rows["KM raw"] = {
        **clustering_row(y_test.astype(str), km_raw.predict_attributes(X_test).astype(str)),
        ("fit", "s"): time.perf_counter() - start,
    }

    # Plain PyTorch CROCS, the reference the defaults must beat.
    epochs = 2 if quick else 40
    encoder, prototypes, seconds = plain_crocs(X_train, codes_train, dims, seed=seed, epochs=epochs)
    with torch.no_grad():
        embeddings = F.normalize(encoder(torch.as_tensor(X_test)), dim=1).numpy()
    predicted = as_frame(np.argmax(embeddings @ prototypes.T, axis=1))
    rows["Plain loop (reference)"] = {
        **clustering_row(y_test.astype(str), predicted.astype(str)),
        **retrieval_row(
            y_test.astype(str),
            all_attributes.astype(str),
            nearest_rows(prototypes, embeddings, max(KS)),
        ),  # fmt: skip
        ("fit", "s"): seconds,
    }

    # Supervised: the same encoder told the attributes, a ceiling for clustering.
    rows.update(ceiling_rows(X_train, codes_train, dims, X_test, y_test, seed, epochs, as_frame))

    # CROCSClusterer with its defaults: CP, TP and KM CROCS; the levers on the same fits.
    extra = {"max_epochs": 2} if quick else {}
    models, fit_seconds = default_fits(X_train, y_train, groups, seed, 3, {**crocs_params, **extra})
    model, seconds = models[0], fit_seconds[0]
    for method, kind in (("CP CROCS", "learned"), ("TP CROCS", "mean")):
        retriever = PrototypeRetriever(FrozenEstimator(model), prototypes=kind).fit(X_test)
        indices = retriever.query(n_neighbors=max(KS), return_distance=False)
        prototypes, attributes = model.get_prototypes(kind)
        nearest = np.argmax(retriever.embeddings_ @ prototypes.T, axis=1)
        predicted = pd.DataFrame(attributes[nearest], columns=names)
        rows[method] = {
            **clustering_row(y_test, predicted),
            **retrieval_row(y_test, retriever.query_attributes_, indices),
            ("fit", "s"): seconds,
        }
    levers = lever_rows(models, fit_seconds, X_test, y_test, (X_train, y_train))
    # The defaults' own CP and TP rows come from the retriever above.
    rows.update({k: v for k, v in levers.items() if k not in ("CP CROCS", "TP CROCS")})
    start = time.perf_counter()
    pretrained = CROCSClusterer(
        **crocs_params, **extra, pretrained=ContrastivePretrainer(method="augment"),
        random_state=seed,
    ).fit(X_train, y_train, groups=groups)  # fmt: skip
    rows["CP CROCS, pretrained (augment)"] = {
        **prototype_row(pretrained.transform(X_test), *pretrained.get_prototypes("learned"),
                        y_test.reset_index(drop=True)),
        ("fit", "s"): time.perf_counter() - start,
    }  # fmt: skip
    km_crocs = KMeansCROCS(FrozenEstimator(model), random_state=seed).fit(X_train, y_train)
    predicted = km_crocs.predict_attributes(X_test)
    rows["KM CROCS"] = {**clustering_row(y_test.astype(str), predicted.astype(str)),
                        ("fit", "s"): seconds}  # fmt: skip

    # Ablations of the loss, with the estimator's defaults otherwise.
    for name, params in ABLATIONS.items():
        start = time.perf_counter()
        variant = CROCSClusterer(**{**crocs_params, **params}, **extra, random_state=seed).fit(
            X_train, y_train, groups=groups
        )
        seconds = time.perf_counter() - start
        retriever = PrototypeRetriever(FrozenEstimator(variant)).fit(X_test)
        rows[f"Ablation: {name}"] = {
            **clustering_row(y_test, variant.predict(X_test)),
            **retrieval_row(y_test, retriever.query_attributes_,
                            retriever.query(n_neighbors=max(KS), return_distance=False)),
            ("fit", "s"): seconds,
        }  # fmt: skip
    table = pd.DataFrame.from_dict(rows, orient="index")
    table.columns = pd.MultiIndex.from_tuples(table.columns)
    return table


def mean_std(tables):
    """'mean (std)' over seeds of each cell, as the paper writes them."""
    stacked = pd.concat(tables, keys=range(len(tables)))
    grouped = stacked.groupby(level=1, sort=False)
    mean, std = grouped.mean(), grouped.std(ddof=1)
    text = mean.map(lambda v: f"{v:.1f}") + std.map(lambda v: f" ({v:.1f})" if v == v else "")
    return mean, std, text.where(mean.notna(), "")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    parser.add_argument("--output", type=Path, default=Path("accuracy.csv"))
    parser.add_argument("--quick", action="store_true", help="one seed, 2 epochs: a smoke test")
    parser.add_argument(
        "--validation",
        action="store_true",
        help="paired differences of the levers on folds of the training patients",
    )
    args = parser.parse_args(argv)
    seeds = args.seeds[:1] if args.quick else args.seeds
    crocs_params = {}  # CROCSClusterer's defaults
    print(f"Machine: {machine_summary()}")
    if args.validation:
        return validation_main(seeds, args.quick, args.output)
    print(f"PTB-XL sample, 5-s 12-lead frames, class x sex x age quartile; seeds {seeds}")
    start = time.perf_counter()
    tables = []
    for seed in seeds:
        tables.append(run_seed(seed, crocs_params, args.quick))
        print(f"seed {seed} done ({time.perf_counter() - start:.0f} s)", flush=True)
    mean, std, text = mean_std(tables)
    clustering = [c for c in text.columns if c[1] in ("Acc", "AMI")]
    retrieval = [c for c in text.columns if c[0].startswith("P@")]
    with pd.option_context("display.width", 250, "display.max_columns", 50):
        print("\nClustering of the held-out ECGs, % (Table 1): mean (std) over seeds")
        has_clustering = mean[clustering].notna().any(axis=1)
        print(text.loc[has_clustering, clustering].to_string())
        print("\nRetrieval, P@K of Eq. 5 (every prototype counts), % (Table 2)")
        has_retrieval = mean[retrieval].notna().any(axis=1)
        print(text.loc[has_retrieval, [*retrieval, ("fit", "s")]].to_string())
    out = pd.concat({"mean": mean, "std": std}, axis=1)
    out.to_csv(args.output)
    print(f"\nWritten to {args.output}; total time {time.perf_counter() - start:.0f} s")
    return 0


def validation_main(seeds, quick, output):
    print(f"PTB-XL sample, 5-s frames; seeds {seeds}, 2 validation folds of the training "
          "patients each (no test patient)")  # fmt: skip
    start = time.perf_counter()
    tables = []
    for seed in seeds:
        tables += run_validation(seed, quick)
        print(f"seed {seed} done ({time.perf_counter() - start:.0f} s)", flush=True)
    mean, std, text = mean_std(tables)
    columns = [c for c in text.columns if c[1] in ("Acc", "AMI") or c == ("P@10", "=3")]
    with pd.option_context("display.width", 250, "display.max_columns", 50):
        print(f"\nValidation folds ({len(tables)}), %: mean (std) over folds")
        print(text[[*columns, ("fit", "s")]].to_string())
        print("\nPaired difference from CP CROCS (the defaults, frame by frame) on the same fold")
        print(paired_differences(tables)[[*columns, ("fit", "s")]].to_string())
    pd.concat({"mean": mean, "std": std}, axis=1).to_csv(output)
    print(f"\nWritten to {output}; total time {time.perf_counter() - start:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
