"""The CROCS paper's experiments on the bundled data: baselines, Tables 1-3, sweeps, ablations.

Protocol (every number is a mean (std) over the seeds; one patient split per seed):

- data: the PTB-XL sample (``load_ptbxl_sample_frames``: 5-s 12-lead frames,
  class NORM/ABN x sex x age quartile, 16 combinations, 60/40 patient split)
  and LUDB (``load_ludb_instances``, lead II of each record: 10-s single-lead
  instances at 250 Hz, rhythm x sex x age quartile, 80/20 patient split; all
  12 leads as instances would train on 12 times as much, an estimated 4 hours
  on 2 cores from the fit times of ``--quick``, for the same 21 test
  patients); models see the training part only,
  with the training patients as ``groups`` for their early stopping, and
  nothing is tuned on the test part;
- Table 1 (clustering of the test ECGs, accuracy and AMI per attribute):
  CP CROCS (nearest learned prototype), TP CROCS (nearest mean training
  embedding) and KM CROCS, each with the package's defaults and with the
  paper's settings (``paper_params``: ``"ptbxl"`` on the PTB-XL sample,
  ``"chapman"`` on LUDB, whose single-lead 2500-sample instances at 250 Hz
  are Chapman's frames), DTC (at the paper's tau_w = 1), KM EP, KM raw,
  DeepCluster, IIC, SeLA and DTCR, beside the majority predictor. Clusters
  of the unsupervised methods are named after the attributes of their
  training ECGs (majority vote, ``map_clusters``). Number of clusters as in
  the paper: DeepCluster one per class, the other unsupervised methods one
  per attribute combination. Reference rows: the majority predictor, and
  CP, TP and KM CROCS untrained (one epoch at lr = 1e-12: the initial
  encoder's random features), which show what training adds;
- Table 2 (retrieval): each prototype of DTC, TP CROCS and CP CROCS (all
  three configurations) retrieves its K nearest test ECGs; P@K for K = 1, 5, 10 by number of matched
  attributes, the paper's Eq. 5 as written (a prototype that no test ECG
  matches scores 0), beside random retrieval;
- Table 3 (ablations, clustering and retrieval): NCE-hard, NCE-soft with
  tau_w = inf and with the paper's tau_w = 1 (both without the
  regulariser), NCE-soft + L_reg (tau_w = 1, beta = 0.2, L_reg summed over
  the prototype pairs as in Eq. 3), and the prototype map of each (the
  paper's Figs. 3-4; UMAP if umap-learn is installed, else PCA), on the
  first seed;
- sweeps, PTB-XL only: beta in {0.05, 0.1, 0.2, 0.4}; embedding size in
  {32, 64, 128, 256}; 10 % of the labelled training data (10 % of the
  training patients): CROCS, DTC and KM EP train on them; the unsupervised
  methods keep all training ECGs and name their clusters from the 10 %.

With ``--dataset ptbxl`` or ``--dataset chapman`` the same experiments
(without the sweeps) run on the paper's datasets, read from ``--data-home``
with the package's loaders and the paper's protocol (Sec. 5, App. A):
PTB-XL (``load_ptbxl``: 500 Hz, records with one diagnostic superclass, two
2500-sample frames per record, each frame z-scored; 5 superclasses x sex x
age quartile = 40 combinations) and Chapman (``load_chapman`` resampled to
250 Hz: one 2500-sample frame per record, each lead a single-lead instance
scaled to [0, 1]; 4 rhythm groups x sex x age quartile = 32 combinations);
records with an unknown attribute are left out; a 60:20:20 patient split per
seed (``patient_split``, stratified by class), age quartiles of the training
patients; models train on the 60 % and every score is on the validation
20 %, the split the paper's tables report; the test 20 % is held out unused
(nothing is tuned).

Every other model uses CROCSClusterer's defaults (encoder, embedding size,
learning rate, batch size, 40 epochs without an early-stopping split),
except DeepCluster and SeLA, which train the paper's 30 epochs of
DeepCluster. The paper states no epoch count for CROCS: the paper-settings
rows train the same 40 epochs.

``--quick`` is a smoke test that shows learning: the PTB-XL sample only,
one seed, one value per sweep, every network trained 2 epochs except CROCS
with its defaults, 5 (enough to learn the class, and some of sex);
``benchmarks/results/paper_tables_quick.csv`` holds its committed numbers
(the ``raw.csv`` of ``OMP_NUM_THREADS=1 python benchmarks/paper_tables.py
--quick``, one thread as the test suite runs), which
``tests/test_paper_tables.py`` compares with a fresh fit.

Usage::

    python benchmarks/paper_tables.py [--seeds 0 1 2 3 4] [--n-jobs 1] [--output-dir paper_tables]
    python benchmarks/paper_tables.py --quick
    python benchmarks/paper_tables.py --dataset ptbxl --data-home DIR [--cache-dir CACHE]
    python benchmarks/paper_tables.py --from-raw RAW [--output-dir DIR] [--docs PATH]

A run writes ``raw.csv`` under the output folder: every seed, method and
score, a ``data`` row per dataset and seed, and a ``run`` row (time,
machine). Everything else is derived from that file alone (``--from-raw``
derives it from a given one without running anything): ``tables.md``
(Markdown, mean (std), best mean per column in bold), one CSV per table
(means and standard deviations) and, with ``--docs PATH``, the Markdown at
PATH. ``figures/`` holds the prototype maps. The documentation's
"Reproducing the paper" page includes ``docs/user_guide/paper_tables.txt``,
rebuilt from the committed ``benchmarks/results/paper_tables_raw.csv``::

    python benchmarks/paper_tables.py --from-raw benchmarks/results/paper_tables_raw.csv \\
        --docs docs/user_guide/paper_tables.txt
"""

import argparse
import importlib.util
import math
import sys
import time
from functools import partial
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from joblib import Parallel, delayed
from sklearn.frozen import FrozenEstimator
from sklearn.model_selection import GroupShuffleSplit
from sklearn.utils import Bunch
from threadpoolctl import threadpool_limits

from sklearn_crocs import CROCSClusterer, PrototypeRetriever, paper_params
from sklearn_crocs.baselines import (
    DTC,
    DTCR,
    IIC,
    DeepCluster,
    KMeansCROCS,
    KMeansEP,
    KMeansRaw,
    SeLA,
    map_clusters,
)
from sklearn_crocs.datasets import (
    load_chapman,
    load_ludb_instances,
    load_ptbxl,
    load_ptbxl_sample_frames,
    patient_split,
)
from sklearn_crocs.metrics import (
    attribute_accuracy_score,
    attribute_ami_score,
    chance_precision_at_k,
    retrieval_report,
)
from sklearn_crocs.preprocessing import (
    AgeGroupEncoder,
    leads_as_instances,
    make_frames,
    normalize_frames,
)

sys.path.insert(0, str(Path(__file__).parent))
from _utils import machine_summary  # noqa: E402

KS = (1, 5, 10)
BETAS = (0.05, 0.1, 0.2, 0.4)
EMBEDDING_DIMS = (32, 64, 128, 256)
LABELLED_FRACTION = 0.1
# DeepCluster and SeLA have no early stopping; the paper trained DeepCluster 30 epochs.
PSEUDO_LABEL_EPOCHS = 30
# --quick (see the docstring); on LUDB nothing learns even in 40 epochs.
QUICK_DATASETS = ["PTB-XL sample"]
QUICK_EPOCHS = 2
QUICK_DEFAULTS = {"max_epochs": 5}
QUICK_SWEEPS = {"beta": (0.2,), "embedding_dim": (32,)}
# CROCS left untrained (its initial encoder and prototypes): a reference row
# that shows what training adds to random convolutional features.
UNTRAINED = {"max_epochs": 1, "lr": 1e-12, "ensemble_size": 1}


def load_ludb_lead_ii(random_state):
    """``load_ludb_instances`` restricted to lead II, the rhythm lead."""
    data = load_ludb_instances(random_state=random_state)
    lead = data.lead_names.index("II")
    for part in ("train", "test"):
        keep = data[f"lead_{part}"] == lead
        for name in ("X", "y", "groups", "lead"):
            values = data[f"{name}_{part}"]
            data[f"{name}_{part}"] = (
                values[keep].reset_index(drop=True) if name == "y" else values[keep]
            )
    return data


# The paper's protocol (Sec. 5 and App. A): 2500-sample frames; PTB-XL at 500 Hz
# (two 5-s frames per record, single-label records, z-scored frames), Chapman
# resampled to 250 Hz (one frame per record, each lead an instance, frames
# scaled to [0, 1]); 60:20:20 patient splits; age quartiles.
FRAME_LENGTH = 2500
VAL_SIZE = TEST_SIZE = 0.2
N_AGE_GROUPS = 4
# Where fetch_ptbxl and fetch_chapman put each dataset under their data_home.
DATA_FOLDERS = {"ptbxl": "ptb-xl-1.0.3", "chapman": "ecg-arrhythmia-1.0.0"}


def find_dataset_folder(data_home, name, marker):
    """The dataset's folder: ``data_home`` itself, or the fetcher's folder inside it."""
    data_home = Path(data_home).expanduser()
    nested = data_home / DATA_FOLDERS[name]
    return nested if not (data_home / marker).exists() and nested.is_dir() else data_home


def paper_split(signals, attributes, groups, *, normalize, instances, random_state):
    """The paper's protocol on loaded records: 60:20:20 patient split, frames, age quartiles.

    Records with an unknown attribute are left out (they would form
    combinations of their own). The split is stratified by class (the first
    attribute), so that every class is in each part; age quartiles are those
    of the training patients (one age per patient). Frames are cut from the
    training and validation records only, so the test records are never
    copied. Returns the ``X``/``y``/``groups`` of ``train`` and, as the scored
    part ``test`` of the tables, of the validation patients (20 %): the
    paper's tables report its validation split. Nothing is tuned, so the test
    patients (20 %) are held out unused.
    """
    known = np.flatnonzero(attributes.notna().all(axis=1).to_numpy())
    attributes = attributes.iloc[known].reset_index(drop=True)
    groups = np.asarray(groups)[known]
    train, valid, _ = patient_split(
        groups, stratify=attributes.iloc[:, 0], val_size=VAL_SIZE, test_size=TEST_SIZE,
        random_state=random_state,
    )  # fmt: skip
    patients = pd.DataFrame({"patient": groups[train], "age": attributes["age"].iloc[train]})
    ages = AgeGroupEncoder(n_groups=N_AGE_GROUPS).fit(patients.drop_duplicates("patient")[["age"]])
    attributes["age"] = pd.Categorical(
        ages.transform(attributes[["age"]]).ravel(), categories=ages.labels_, ordered=True
    )
    out = Bunch()
    for part, records in (("train", train), ("test", valid)):
        X, y, part_groups = make_frames(
            signals[known[records]], FRAME_LENGTH,
            attributes=attributes.iloc[records].reset_index(drop=True), groups=groups[records],
        )  # fmt: skip
        if instances:
            X, y, part_groups, _ = leads_as_instances(X, y, part_groups)
        out[f"X_{part}"] = normalize_frames(X, method=normalize)
        out[f"y_{part}"] = y.reset_index(drop=True)
        out[f"groups_{part}"] = part_groups
    return out


def load_ptbxl_paper(data_home, random_state, cache_dir=None):
    """PTB-XL as in the paper: 5 superclasses x sex x age quartile (40 combinations)."""
    folder = find_dataset_folder(data_home, "ptbxl", "ptbxl_database.csv")
    # 500 Hz, records with exactly one diagnostic superclass: load_ptbxl's defaults.
    ptbxl = load_ptbxl(folder, sampling_rate=500, single_label=True, cache_dir=cache_dir)
    return paper_split(
        ptbxl.data, ptbxl.attributes, ptbxl.groups,
        normalize="zscore", instances=False, random_state=random_state,
    )  # fmt: skip


def load_chapman_paper(data_home, random_state, cache_dir=None):
    """Chapman as in the paper: 4 rhythm groups x sex x age quartile (32 combinations)."""
    folder = find_dataset_folder(data_home, "chapman", "Diagnostics.xlsx")
    chapman = load_chapman(folder, target_fs=250, cache_dir=cache_dir)
    return paper_split(
        chapman.data, chapman.attributes, chapman.groups,
        normalize="minmax", instances=True, random_state=random_state,
    )  # fmt: skip


LOADERS = {"PTB-XL sample": load_ptbxl_sample_frames, "LUDB": load_ludb_lead_ii}
# The paper's datasets, read from --data-home: {--dataset: (name, loader)}.
FULL_DATASETS = {"ptbxl": ("PTB-XL", load_ptbxl_paper), "chapman": ("Chapman", load_chapman_paper)}
# The paper's dataset whose settings each dataset takes: LUDB's lead-II
# instances (one lead, 2500 samples at 250 Hz) are shaped like Chapman's frames.
PAPER_DATASETS = {"PTB-XL sample": "ptbxl", "LUDB": "chapman", "PTB-XL": "ptbxl",
                  "Chapman": "chapman"}  # fmt: skip
# The two CROCS configurations of Tables 1 and 2.
DEFAULTS_ROW = "package defaults"
PAPER_ROW = "paper settings"
UNTRAINED_ROW = "untrained"
SWEEP_DATASETS = {"PTB-XL sample"}
# The paper's ablations at its tau_w = 1 and beta = 0.2, with L_reg summed
# (Eq. 3) and unordered age groups (the estimator's defaults, tau_w = 0.5,
# beta = 0, a mean and ordinal age groups, were chosen on validation folds).
_PAPER = {"ordinal": None}
ABLATIONS = {
    "NCE-hard": {"loss": "hard", "beta": 0.0, **_PAPER},
    "NCE-soft, tau_w = inf": {"tau_w": math.inf, "beta": 0.0, **_PAPER},
    "NCE-soft": {"tau_w": 1.0, "beta": 0.0, **_PAPER},
    "NCE-soft + L_reg": {"tau_w": 1.0, "beta": 0.2, "reg_reduction": "sum", **_PAPER},
}
# DTC's target uses CROCS's weights; the paper's tau_w for both is 1.
DTC_PARAMS = {"tau_w": 1.0}
TABLES = {
    "table1": "Table 1: clustering of the test ECGs (%)",
    "table2": "Table 2: retrieval, P@K of Eq. 5 (%)",
    "table3": "Table 3: ablations of the CROCS loss (%)",
    "beta": "Appendix: effect of beta on CP CROCS (%)",
    "embedding": "Appendix: effect of the embedding size on CP CROCS (%)",
    "labels10": "Appendix: 10 % of the labelled training data (%)",
}


# --------------------------------------------------------------------- metrics
def clustering_scores(y_true, y_pred):
    """{"<attribute> Acc" | "<attribute> AMI": percent} for each attribute."""
    y_true = y_true.astype(str).reset_index(drop=True)
    y_pred = pd.DataFrame(y_pred, columns=y_true.columns).astype(str).reset_index(drop=True)
    accuracy = attribute_accuracy_score(y_true, y_pred).drop("combination")
    ami = attribute_ami_score(y_true, y_pred).drop("combination")
    scores = {}
    for name in y_true.columns:
        scores[f"{name} Acc"] = 100 * accuracy[name]
        scores[f"{name} AMI"] = 100 * ami[name]
    return scores


def retrieval_scores(y_true, query_attributes, indices):
    """{"P@K >=m": percent}: the paper's Eq. 5 as written (``no_match="zero"``)."""
    report = retrieval_report(
        y_true.astype(str), (query_attributes.astype(str), indices), k=KS, decimals=None
    )
    return {f"P@{k} {m}": v for (k, m), v in report.iloc[0].items()}


def chance_scores(y_true, query_attributes):
    """Expected P@K of retrieving K test ECGs at random, for the same queries."""
    n_attributes = y_true.shape[1]
    scores = {}
    for k in KS:
        for m in range(1, n_attributes + 1):
            label = f">={m}" if m < n_attributes else f"={m}"
            scores[f"P@{k} {label}"] = 100 * chance_precision_at_k(
                y_true.astype(str), query_attributes.astype(str), k=k, min_matches=m
            )
    return scores


def prototype_rows(model, X_test, y_test, kinds):
    """Clustering and retrieval scores of a fitted CROCS-like model, per prototype kind."""
    rows = {}
    for name, kind in kinds.items():
        retriever = PrototypeRetriever(FrozenEstimator(model), prototypes=kind).fit(X_test)
        indices = retriever.query(n_neighbors=max(KS), return_distance=False)
        prototypes, attributes = model.get_prototypes(kind)
        nearest = np.argmax(retriever.embeddings_ @ prototypes.T, axis=1)
        rows[name] = {
            **clustering_scores(y_test, attributes[nearest]),
            **retrieval_scores(y_test, retriever.query_attributes_, indices),
        }
    return rows


# ------------------------------------------------------------------------ runs
def labelled_subset(groups, seed):
    """Indices of the ECGs of 10 % of the training patients."""
    splitter = GroupShuffleSplit(n_splits=1, train_size=LABELLED_FRACTION, random_state=seed)
    subset, _ = next(splitter.split(np.empty(len(groups)), groups=groups))
    return np.sort(subset)


def split_scores(values):
    """(clustering scores, retrieval scores) of one row of :func:`prototype_rows`."""
    retrieval = {k: v for k, v in values.items() if k.startswith("P@")}
    return {k: v for k, v in values.items() if k not in retrieval}, retrieval


def n_fits(dataset, quick):
    """Number of models :func:`run_task` fits (each reported by a :class:`FitProgress` line)."""
    count = 3 + 1 + 6 + len(ABLATIONS)  # CROCS configurations, DTC, clusterers, ablations
    if dataset in SWEEP_DATASETS:
        defaults = CROCSClusterer().get_params()
        sweeps = QUICK_SWEEPS if quick else {"beta": BETAS, "embedding_dim": EMBEDDING_DIMS}
        count += sum(v != defaults[p] for p, values in sweeps.items() for v in values)
        count += 3  # 10 % of the labels: CROCS, DTC, KM EP
    return count


def _duration(seconds):
    return f"{seconds / 60:.0f} min" if seconds >= 600 else f"{seconds:.0f} s"


class FitProgress:
    """One line per fit on stderr: method, seed, elapsed time and an estimate of what remains.

    The estimate takes every fit to cost the mean of those so far, and the
    tasks not started yet to cost this one, ``n_jobs`` of them at a time.
    """

    def __init__(self, dataset, seed, total, task=(1, 1), n_jobs=1, file=None):
        self.dataset, self.seed, self.total = dataset, seed, total
        self.task, self.n_jobs, self.file = task, n_jobs, file
        self.start = time.perf_counter()
        self.done = 0

    def __call__(self, method, seconds):
        self.done += 1
        elapsed = time.perf_counter() - self.start
        per_fit = elapsed / self.done
        left = per_fit * max(self.total - self.done, 0)
        i, n = self.task
        later = per_fit * self.total * max(n - i, 0) / self.n_jobs
        print(
            f"[{i}/{n}] {self.dataset}, seed {self.seed}: fit {self.done}/{self.total} "
            f"{method} in {_duration(seconds)}; {_duration(elapsed)} elapsed, about "
            f"{_duration(left)} left in this task" + (
                f", {_duration(left + later)} in the run" if n > i else ""
            ),
            file=sys.stderr if self.file is None else self.file,
            flush=True,
        )


def task_cores(n_jobs, n_tasks):
    """``(processes, threads per process)``: every allowed core busy, even for one task."""
    processes = max(1, min(n_jobs, n_tasks))
    return processes, max(1, n_jobs // processes)


def run_task(dataset, load, seed, quick, max_ecgs, figures, progress=None):
    """Every experiment on one dataset (``load(random_state=seed)``) and seed: result rows.

    ``progress(method, seconds)`` is called after each fit (default: a
    :class:`FitProgress` of this task alone).
    """
    if progress is None:
        progress = FitProgress(dataset, seed, n_fits(dataset, quick))
    if figures is not None:
        import matplotlib

        matplotlib.use("Agg")
    data = load(random_state=seed)
    X, y, groups = data.X_train, data.y_train, data.groups_train
    X_test, y_test, groups_test = data.X_test, data.y_test, data.groups_test
    if max_ecgs:  # a small subset, for smoke tests only
        X, y, groups = X[:max_ecgs], y.iloc[:max_ecgs], groups[:max_ecgs]
        X_test, y_test, groups_test = (
            X_test[:max_ecgs],
            y_test.iloc[:max_ecgs],
            groups_test[:max_ecgs],
        )
    n_combinations = int(np.prod(y.nunique().to_numpy()))
    n_classes = y.iloc[:, 0].nunique()
    epochs = {"max_epochs": QUICK_EPOCHS} if quick else {}
    pseudo_epochs = {"max_epochs": QUICK_EPOCHS if quick else PSEUDO_LABEL_EPOCHS}
    rows = []

    def add(experiment, method, scores, cost=None):
        rows.append({"dataset": dataset, "experiment": experiment, "method": method,
                     "seed": seed, **scores, **(cost or {})})  # fmt: skip

    def fit(estimator, X_fit, y_fit, groups_fit=None, *, method):
        """Fit; return the estimator and its cost: seconds, and epochs if it trains a net."""
        kwargs = {} if groups_fit is None else {"groups": groups_fit}
        start = time.perf_counter()
        estimator.fit(X_fit, y_fit, **kwargs)
        cost = {"fit (s)": time.perf_counter() - start}
        if hasattr(estimator, "n_iter_"):
            cost["epochs"] = estimator.n_iter_
        progress(method, cost["fit (s)"])
        return estimator, cost

    def crocs(X_fit, y_fit, groups_fit, *, method, **params):
        params = {**epochs, **params, "random_state": seed}
        return fit(CROCSClusterer(**params), X_fit, y_fit, groups_fit, method=method)

    # What was trained and scored, shown above the dataset's tables; the
    # attributes in order, for the tables' columns.
    add("data", "data", {"train ECGs": len(X), "train patients": len(np.unique(groups)),
                         "test ECGs": len(X_test), "test patients": len(np.unique(groups_test)),
                         "combinations": n_combinations,
                         "attributes": ", ".join(y.columns)})  # fmt: skip

    # Majority predictor and random retrieval: what any method must beat.
    majority = pd.DataFrame({c: [y[c].astype(str).mode()[0]] * len(y_test) for c in y.columns})
    add("table1", "Majority", clustering_scores(y_test, majority))

    # CROCS with its defaults and with the paper's settings: CP, TP and KM CROCS;
    # and untrained, a reference row.
    configurations = {UNTRAINED_ROW: UNTRAINED, DEFAULTS_ROW: QUICK_DEFAULTS if quick else {},
                      PAPER_ROW: paper_params(PAPER_DATASETS[dataset])}  # fmt: skip
    fitted_models = {}
    for configuration, params in configurations.items():
        fitted, cost = crocs(X, y, groups, method=f"CROCS ({configuration})", **params)
        fitted_models[configuration] = fitted
        kinds = {f"CP CROCS ({configuration})": "learned", f"TP CROCS ({configuration})": "mean"}
        for method, values in prototype_rows(fitted, X_test, y_test, kinds).items():
            clustering, retrieval = split_scores(values)
            add("table1", method, clustering, cost)
            add("table2", method, retrieval)
        km_crocs = KMeansCROCS(FrozenEstimator(fitted), random_state=seed).fit(X, y)
        predicted = km_crocs.predict_attributes(X_test)
        add("table1", f"KM CROCS ({configuration})", clustering_scores(y_test, predicted), cost)
    model = fitted_models[DEFAULTS_ROW]  # also the default point of the sweeps
    add("table2", "Random retrieval", chance_scores(y_test, scores_queries(model)))

    # DTC: prototypes like CROCS's, so clustering and retrieval.
    dtc, cost = fit(DTC(**DTC_PARAMS, **epochs, random_state=seed), X, y, groups, method="DTC")
    clustering, retrieval = split_scores(
        prototype_rows(dtc, X_test, y_test, {"DTC": "learned"})["DTC"]
    )
    add("table1", "DTC", clustering, cost)
    add("table2", "DTC", retrieval)

    # Clustering baselines; y only names the clusters of the unsupervised ones.
    clusterers = {
        "KM raw": (KMeansRaw(n_clusters=n_combinations, random_state=seed), None),
        "DeepCluster": (
            DeepCluster(n_clusters=n_classes, **pseudo_epochs, random_state=seed), None
        ),
        "IIC": (IIC(n_clusters=n_combinations, **epochs, random_state=seed), groups),
        "SeLA": (SeLA(n_clusters=n_combinations, **pseudo_epochs, random_state=seed), None),
        "DTCR": (DTCR(n_clusters=n_combinations, **epochs, random_state=seed), groups),
        "KM EP": (KMeansEP(**epochs, random_state=seed), groups),
    }
    unsupervised = {}
    for method, (estimator, groups_fit) in clusterers.items():
        estimator, cost = fit(estimator, X, y, groups_fit, method=method)
        add("table1", method, clustering_scores(y_test, estimator.predict_attributes(X_test)), cost)
        if method != "KM EP":
            unsupervised[method] = estimator

    # Ablations of the loss, and their prototype maps (first seed).
    variants = {}
    for name, params in ABLATIONS.items():
        variants[name], cost = crocs(X, y, groups, method=name, **params)
        values = prototype_rows(variants[name], X_test, y_test, {name: "learned"})[name]
        add("table3", name, values, cost)
    if figures is not None:
        prototype_maps(variants, X_test, y_test, figures / f"prototypes_{slug(dataset)}.png")

    if dataset not in SWEEP_DATASETS:
        return rows
    defaults = CROCSClusterer().get_params()
    sweeps = QUICK_SWEEPS if quick else {"beta": BETAS, "embedding_dim": EMBEDDING_DIMS}
    for parameter, values in sweeps.items():
        experiment = "embedding" if parameter == "embedding_dim" else parameter
        for value in values:
            if value == defaults[parameter]:
                swept, cost = model, None  # the default fit above
            else:
                swept, cost = crocs(
                    X, y, groups, method=f"CROCS {parameter}={value}", **{parameter: value}
                )
            scores = prototype_rows(swept, X_test, y_test, {"CP CROCS": "learned"})["CP CROCS"]
            add(experiment, f"{parameter} = {value}", scores, cost)

    # 10 % of the labelled data: supervised models train on it; unsupervised
    # ones keep all training ECGs and name their clusters from the 10 %.
    subset = labelled_subset(groups, seed)
    X_l, y_l, groups_l = X[subset], y.iloc[subset], groups[subset]
    small, cost = crocs(X_l, y_l, groups_l, method="CROCS (10 % of the labels)")
    scores = prototype_rows(small, X_test, y_test, {"CP CROCS": "learned", "TP CROCS": "mean"})
    for method, values in scores.items():
        add("labels10", method, values, cost)
    km_crocs = KMeansCROCS(FrozenEstimator(small), random_state=seed).fit(X_l, y_l)
    add("labels10", "KM CROCS", clustering_scores(y_test, km_crocs.predict_attributes(X_test)))
    dtc, cost = fit(
        DTC(**DTC_PARAMS, **epochs, random_state=seed), X_l, y_l, groups_l,
        method="DTC (10 % of the labels)",
    )
    add("labels10", "DTC", prototype_rows(dtc, X_test, y_test, {"DTC": "learned"})["DTC"], cost)
    ep, cost = fit(
        KMeansEP(**epochs, random_state=seed), X_l, y_l, groups_l,
        method="KM EP (10 % of the labels)",
    )
    add("labels10", "KM EP", clustering_scores(y_test, ep.predict_attributes(X_test)), cost)
    for method, estimator in unsupervised.items():
        n_clusters = len(estimator.cluster_attributes_)
        names = map_clusters(estimator.predict(X_l), y_l, n_clusters=n_clusters)
        add("labels10", method, clustering_scores(y_test, names.iloc[estimator.predict(X_test)]))
    return rows


def scores_queries(model):
    """Attribute combinations of the learned prototypes (every combination): the queries."""
    _, attributes = model.get_prototypes("learned")
    return pd.DataFrame(attributes, columns=model.attribute_names_)


def slug(name):
    return name.lower().replace(" ", "_").replace("-", "")


def prototype_maps(models, X_test, y_test, path):
    """The paper's Figs. 3-4: one prototype map per variant of the loss."""
    import matplotlib.pyplot as plt

    from sklearn_crocs.plotting import PrototypeDisplay

    projection = "umap" if importlib.util.find_spec("umap") else "pca"
    fig, axes = plt.subplots(1, len(models), figsize=(5 * len(models), 4.5))
    for ax, (name, model) in zip(np.atleast_1d(axes), models.items()):
        PrototypeDisplay.from_estimator(model, X_test, y_test, projection=projection, ax=ax)
        ax.set_title(name)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)


# ---------------------------------------------------------------------- tables
REFERENCE_ROWS = ("Majority", "Random retrieval",
                  *(f"{kind} CROCS ({UNTRAINED_ROW})" for kind in ("CP", "TP", "KM")))  # fmt: skip


def summarise(table, attributes):
    """Mean and std over the seeds of each method's scores, methods in first-seen order
    after the reference rows.

    Columns: the scores of ``attributes`` in their order, then retrieval, then fit time.
    """
    used = [c for c in table.columns if table[c].notna().any()]
    ordered = [c for a in attributes for c in (f"{a} Acc", f"{a} AMI") if c in used]
    ordered += [c for c in used if c.startswith("P@")]
    ordered += [c for c in ("fit (s)", "epochs") if c in used]
    grouped = table.groupby("method", sort=False)[ordered]
    mean, std = grouped.mean(), grouped.std(ddof=1)
    # The reference rows first, as what every method must beat.
    rank = {method: i for i, method in enumerate(REFERENCE_ROWS)}
    methods = sorted(mean.index, key=lambda method: rank.get(method, len(rank)))
    return mean.loc[methods], std.loc[methods]


def format_table(mean, std):
    """'mean (std)' cells, the best mean of each score column in bold, as the paper does."""
    columns = [c for c in mean.columns if mean[c].notna().any()]
    mean, std = mean[columns], std[columns]
    text = pd.DataFrame(index=mean.index, columns=columns, dtype=object)
    for column in columns:
        best = mean[column].max()
        for method in mean.index:
            value = mean.loc[method, column]
            if pd.isna(value):
                text.loc[method, column] = ""
                continue
            spread = std.loc[method, column]
            cell = f"{value:.1f}" + ("" if pd.isna(spread) else f" ({spread:.1f})")
            score = column not in ("fit (s)", "epochs")
            bold = score and np.isclose(value, best) and mean[column].count() > 1
            text.loc[method, column] = f"**{cell}**" if bold else cell
    return text


def markdown(table):
    """A GitHub-flavoured Markdown table of a DataFrame of strings (index: method)."""
    header = ["Method", *map(str, table.columns)]
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join(["---"] * len(header)) + "|"]
    for method, row in table.iterrows():
        lines.append("| " + " | ".join([str(method), *row.tolist()]) + " |")
    return "\n".join(lines)


def run_row(quick, seconds, n_jobs):
    """The raw results' description of the run itself, for the tables' first line."""
    return {"experiment": "run", "method": "quick" if quick else "results",
            "time (s)": seconds, "machine": machine_summary(), "processes": n_jobs}  # fmt: skip


RUN_KINDS = {"results": "results", "quick": "a `--quick` smoke run, not results"}


def tables_from_raw(raw):
    """The Markdown tables and the per-table summaries of the raw results: a pure function.

    ``raw`` is ``raw.csv`` as read by :func:`pandas.read_csv`: one row per
    dataset, experiment, method and seed, a ``data`` row per dataset and seed,
    and a ``run`` row. Returns the Markdown and ``{name: mean and std}``.
    """
    run = raw[raw["experiment"] == "run"].iloc[0]
    seeds = sorted(int(seed) for seed in raw["seed"].dropna().unique())
    seconds = run["time (s)"]
    took = f"{seconds:.0f} s" if seconds < 120 else f"{seconds / 60:.0f} min"
    parts = [
        f"Generated by `benchmarks/paper_tables.py` ({RUN_KINDS[run['method']]}): seeds {seeds}, "
        f"{took} on {run['machine']}, {int(run['processes'])} "
        "process(es). Mean (std) over the seeds; the best mean of each column in bold."
    ]
    summaries = {}
    for dataset in raw["dataset"].dropna().unique():
        rows = raw[raw["dataset"] == dataset]
        d = rows[rows["experiment"] == "data"].iloc[0]
        parts.append(
            f"{dataset} (first seed): {d['train ECGs']:.0f} training ECGs of "
            f"{d['train patients']:.0f} patients, {d['test ECGs']:.0f} test ECGs of "
            f"{d['test patients']:.0f} patients, {d['combinations']:.0f} attribute combinations."
        )
        for experiment, title in TABLES.items():
            table = rows[rows["experiment"] == experiment]
            if table.empty:
                continue
            mean, std = summarise(table, d["attributes"].split(", "))
            summary = pd.concat({"mean": mean, "std": std}, axis=1)
            summaries[f"{experiment}_{slug(dataset)}"] = summary
            n = table["seed"].nunique()
            parts.append(f"**{title}, {dataset} ({n} seed{'s' if n > 1 else ''})**")
            parts.append(markdown(format_table(mean, std)))
    return "\n\n".join(parts) + "\n", summaries


def write_tables(raw, output_dir, docs=None):
    """Write tables.md and one CSV per table from the raw results (and the Markdown to
    ``docs``); return the Markdown."""
    text, summaries = tables_from_raw(raw)
    output_dir.mkdir(parents=True, exist_ok=True)
    for name, summary in summaries.items():
        summary.to_csv(output_dir / f"{name}.csv")
    (output_dir / "tables.md").write_text(text, encoding="utf-8")
    if docs is not None:
        docs.write_text(text, encoding="utf-8")
    return text


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    parser.add_argument(
        "--dataset", choices=["sample", *FULL_DATASETS], default="sample",
        help="sample: the bundled PTB-XL sample and LUDB; ptbxl, chapman: the paper's "
        "datasets, read from --data-home with the paper's protocol",
    )  # fmt: skip
    parser.add_argument("--datasets", nargs="+", choices=list(LOADERS), default=None,
                        help="with --dataset sample: which bundled datasets (default: both; "
                        "with --quick, the PTB-XL sample)")  # fmt: skip
    parser.add_argument("--data-home", type=Path, default=None,
                        help="the PTB-XL or Chapman folder, or the data_home of fetch_ptbxl "
                        "or fetch_chapman")  # fmt: skip
    parser.add_argument("--cache-dir", type=Path, default=None,
                        help="cache of the decoded signals (load_ptbxl, load_chapman), so "
                        "that later seeds do not read the records again")  # fmt: skip
    parser.add_argument("--output-dir", type=Path, default=Path("paper_tables"))
    parser.add_argument("--docs", type=Path, default=None, help="also write the Markdown here")
    parser.add_argument("--n-jobs", type=int, default=1,
                        help="cores: one process per task (dataset and seed) up to this many, "
                        "each with an equal share of the cores as torch threads")  # fmt: skip
    parser.add_argument("--quick", action="store_true",
                        help="a smoke test of a few minutes that shows learning: the PTB-XL "
                        "sample, one seed, a few epochs, one value per sweep")  # fmt: skip
    parser.add_argument("--from-raw", type=Path, default=None, metavar="RAW",
                        help="run nothing: rebuild the tables from the raw results RAW (a "
                        "raw.csv) into --output-dir and --docs")  # fmt: skip
    parser.add_argument("--max-ecgs", type=int, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.from_raw is not None:
        print(write_tables(pd.read_csv(args.from_raw), args.output_dir, args.docs))
        return 0
    seeds = args.seeds[:1] if args.quick else args.seeds
    if args.dataset == "sample":
        datasets = args.datasets or (QUICK_DATASETS if args.quick else list(LOADERS))
        loaders = {name: LOADERS[name] for name in datasets}
    else:
        if args.data_home is None:
            parser.error(f"--dataset {args.dataset} needs --data-home")
        name, load = FULL_DATASETS[args.dataset]
        loaders = {name: partial(load, args.data_home, cache_dir=args.cache_dir)}
    start = time.perf_counter()
    tasks = [(dataset, seed) for seed in seeds for dataset in loaders]
    figures = args.output_dir / "figures"

    processes, threads = task_cores(args.n_jobs, len(tasks))

    def task(i, dataset, seed):
        began = time.perf_counter()
        progress = FitProgress(dataset, seed, n_fits(dataset, args.quick), task=(i, len(tasks)),
                               n_jobs=processes)  # fmt: skip
        run = partial(run_task, dataset, loaders[dataset], seed, args.quick, args.max_ecgs)
        figures_dir = figures if seed == seeds[0] else None
        if args.n_jobs == 1:
            rows = run(figures_dir, progress)
        else:
            # The allowed cores shared out, no more: more threads than cores would only
            # contend (OpenMP spin-waits made a k-means 25 times slower on a busy 2-core
            # machine); one task alone gets them all.
            torch.set_num_threads(threads)
            with threadpool_limits(limits=threads):
                rows = run(figures_dir, progress)
        seconds = time.perf_counter() - began
        print(f"[{i}/{len(tasks)}] {dataset}, seed {seed}: {seconds:.0f} s", file=sys.stderr)
        return rows

    results = Parallel(n_jobs=processes)(
        delayed(task)(i, dataset, seed) for i, (dataset, seed) in enumerate(tasks, 1)
    )
    rows = [row for task_rows in results for row in task_rows]
    if args.n_jobs > 1:
        torch.set_num_threads(threads)  # as in the workers, for the summary line
    elapsed = time.perf_counter() - start
    rows.append(run_row(args.quick, elapsed, args.n_jobs))
    args.output_dir.mkdir(parents=True, exist_ok=True)
    raw = args.output_dir / "raw.csv"
    pd.DataFrame(rows).to_csv(raw, index=False)
    # The tables from the file, as --from-raw builds them.
    print(write_tables(pd.read_csv(raw), args.output_dir, args.docs))
    print(f"Written to {args.output_dir}/; total time {elapsed:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
