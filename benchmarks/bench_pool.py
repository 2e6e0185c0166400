"""Pretraining on a real unlabelled pool: the training patients of PTB-XL sample + ptbxl-more.

Protocol (the data, splits and scoring of ``bench_curve.py``):

- per split, a :class:`ContrastivePretrainer` is fitted on the whole 10-s
  records of the **training** patients only, their labels ignored (``groups``
  = patient ids, so that records of one patient are positives); the test
  patients (or, with ``--validation``, the validation fold) are never
  pretrained on. On 10-s records both ``"cmsc"`` (adjacent halves) and
  ``"augment"`` (``crop=0.5``) give 5-s views: the frames CROCS is fitted on;
  ``"masked"`` is masked reconstruction, not contrastive, and lives in this
  script only (it did not earn a place in the package): the default
  encoder's convolutional trunk and a 1x1-convolution decoder learn to
  restore the 0.25-s blocks hidden from the 5-s training frames (half of
  them, in every lead at once); a CROCS fit then starts from that trunk (a
  skorch callback loads it when training begins);
- then ``CROCSClusterer()`` (its defaults, ``random_state=seed``) from a random
  initialisation or from each pretrained encoder (``pretrained=`` the fitted
  pretrainer: one pretraining serves every fit of the split), on
  (a) 10 % of the training patients labelled alone,
  (b) those 10 % labelled and the other 90 % unlabelled (attributes missing),
  (c) every training ECG labelled;
- with ``--self-training KEEP``, also self-training from scratch: the model of
  (a) labels the other 90 % (its nearest learned prototype, a record's two
  frames averaged), each record keeps the teacher's class, and its sex and
  age only among the ``KEEP`` fraction of records where the teacher's best
  value leads the next by the widest margin (the others missing); then a
  new ``CROCSClusterer()`` is fitted on the 10 % and those pseudo-labels;
- gap closed, per attribute, on means over the splits:
  ``(row - 10 % from scratch) / (all labelled from scratch - 10 % from scratch)``;
- with ``--probe``, no fit from a pretrained encoder: instead a linear probe of
  each representation (the fits from scratch of the 10 % alone and of every
  label, and each pretrained encoder; of ``"masked"``, the trunk's output
  averaged over time): per attribute, a logistic regression
  on the standardised embeddings of the **10 % labelled** frames, its ``C``
  chosen by patient-grouped 5-fold cross-validation inside them, scored on the
  scored part's frames. What a representation holds of an attribute that 10 %
  of the labels can read.

Usage::

    python benchmarks/bench_pool.py --validation --seeds 0 1   # choose the recipe
    python benchmarks/bench_pool.py --validation --seeds 0 1 --methods --self-training 0.3 \
        --settings "10% labelled alone" "all labelled"   # self-training, no pretraining
    python benchmarks/bench_pool.py --seeds 0 1 2 --methods cmsc   # judge it on the test patients
    python benchmarks/bench_pool.py --seeds 0 --methods cmsc \
        --curve benchmarks/results/learning_curve_seed0.csv   # scratch rows of bench_curve.py
    python benchmarks/bench_pool.py --combine pool_0.csv pool_1.csv pool_2.csv

``--curve`` takes the two full-size rows from scratch ("all labelled" and
"10 % + 90 % unlabelled") from a one-seed ``bench_curve.py`` output of the
same seed and test part (the same fits, which take most of the time) instead
of fitting them again; the 10 % alone is still fitted, and must come out as
bench_curve's (same seed, same thread count: the same numbers), which is
checked.
    python benchmarks/bench_pool.py --validation --seeds 0 1 --probe   # what each one holds
    python benchmarks/bench_pool.py --validation --seeds 0 1 --methods masked [--probe]
    python benchmarks/bench_pool.py --quick   # one seed, 2 epochs: a smoke test
"""

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from skorch.callbacks import Callback

sys.path.insert(0, str(Path(__file__).parent))
from _ptbxl_all import frames, load_records  # noqa: E402
from bench_accuracy import mean_std  # noqa: E402
from bench_curve import parts, scored  # noqa: E402
from sklearn.linear_model import LogisticRegression  # noqa: E402
from sklearn.model_selection import GridSearchCV, GroupKFold  # noqa: E402
from sklearn.pipeline import make_pipeline  # noqa: E402
from sklearn.preprocessing import StandardScaler  # noqa: E402

from sklearn_crocs import ContrastivePretrainer, CROCSClusterer  # noqa: E402
from sklearn_crocs.nn import ResNet1dEncoder  # noqa: E402

from _utils import machine_summary  # noqa: E402

SCRATCH = "scratch"
MASKED = "masked"
SETTINGS = ("10% labelled alone", "10% labelled + 90% unlabelled", "all labelled")
SELF_TRAINED = "10% labelled + 90% pseudo-labelled"
SCORES = [("class", "Acc"), ("sex", "Acc"), ("age", "Acc"), ("combination", "Acc"),
          ("class", "AMI"), ("P@10", "=3")]  # fmt: skip


def run_seed(records, seed, args):
    train, scored_part = parts(records, seed, args.validation)
    (X, y, g), (X_test, y_test, _) = frames(records, train, [train, scored_part])
    y = y.reset_index(drop=True)
    rng = np.random.RandomState(seed)  # the draw of bench_curve.py's 10 % rows
    patients = np.unique(g)
    labelled = np.isin(g, rng.choice(patients, round(0.1 * len(patients)), replace=False))
    y_semi = y.mask(np.broadcast_to(~labelled[:, None], y.shape))
    data = {
        SETTINGS[0]: (X[labelled], y[labelled].reset_index(drop=True), g[labelled]),
        SETTINGS[1]: (X, y_semi, g),
        SETTINGS[2]: (X, y, g),
    }
    quick = {"max_epochs": 2} if args.quick else {}
    inits = {SCRATCH: (None, 0.0)}
    for method in args.methods:
        start = time.perf_counter()
        epochs = 2 if args.quick else args.pretrain_epochs
        if method == MASKED:
            pretrainer = MaskedTrunk(X.shape[1], X.shape[2], seed).fit(X, epochs)
        else:
            pretrainer = ContrastivePretrainer(
                method=method, max_epochs=epochs, random_state=seed, **args.views,
            ).fit(records.X[train], groups=records.groups[train])  # fmt: skip
        inits[method] = (pretrainer, time.perf_counter() - start)
        print(f"seed {seed}: {method} pretrained in {inits[method][1]:.0f} s, "
              f"loss {pretrainer.loss_curve_[0]:.3f} -> {pretrainer.loss_curve_[-1]:.3f}",
              flush=True)  # fmt: skip
    rows, reused = {}, {}
    if args.curve is not None:
        curve = pd.read_csv(args.curve, header=[0, 1, 2], index_col=0)["mean"]
        reused = {f"{SETTINGS[1]}, {SCRATCH}": curve.loc["10% labelled + 90% unlabelled"],
                  f"{SETTINGS[2]}, {SCRATCH}": curve.loc["CROCS, all records"]}  # fmt: skip
    probed = {}
    for setting in args.settings:
        X_fit, y_fit, g_fit = data[setting]
        for name, (pretrainer, pretrain_seconds) in inits.items():
            if args.probe and name != SCRATCH:
                continue
            if f"{setting}, {name}" in reused:
                rows[f"{setting}, {name}"] = reused[f"{setting}, {name}"].to_dict()
                continue
            start = time.perf_counter()
            if isinstance(pretrainer, MaskedTrunk):
                start_from = {"callbacks": [("masked_trunk", StartFrom(pretrainer.trunk_state()))]}
            else:
                start_from = {"pretrained": pretrainer}
            model = CROCSClusterer(**quick, **start_from, random_state=seed)
            model.fit(X_fit, y_fit, groups=g_fit)
            rows[f"{setting}, {name}"] = {
                **scored(model, X_test, y_test, X, y)[""],
                ("fit", "s"): time.perf_counter() - start,
                ("pretraining", "s"): pretrain_seconds,
            }
            print(f"seed {seed}: {setting}, {name} done", flush=True)
            if args.probe:
                probed[f"CROCS, {setting}"] = (model, rows[f"{setting}, {name}"][("fit", "s")])
            if (setting, name) == (SETTINGS[0], SCRATCH):
                teacher = model
            if reused and (setting, name) == (SETTINGS[0], SCRATCH):
                check_reusable(rows[f"{setting}, {name}"], curve, args.curve)
    if args.self_training is not None:
        keep = args.self_training
        pool = pseudo_labels(teacher, X[~labelled], y, keep)
        y_self = y.copy()
        for column in y.columns:
            known = pool[column].notna().to_numpy()
            truth = y.loc[~labelled, column].astype(str).to_numpy()[known]
            right = np.mean(pool[column].to_numpy()[known].astype(str) == truth)
            print(f"seed {seed}: {column} pseudo-labels on {known.mean():.0%} of the pool, "
                  f"{right:.1%} right", flush=True)  # fmt: skip
            y_self.loc[~labelled, column] = pool[column].to_numpy()
        start = time.perf_counter()
        model = CROCSClusterer(**quick, random_state=seed).fit(X, y_self, groups=g)
        # TP prototypes from the labelled 10 % only (pseudo-labels are partly missing)
        rows[f"{SELF_TRAINED} (top {keep:.0%}), {SCRATCH}"] = {
            **scored(model, X_test, y_test, X[labelled], y[labelled])[""],
            ("fit", "s"): time.perf_counter() - start,
            ("pretraining", "s"): 0.0,
        }
        print(f"seed {seed}: self-training done", flush=True)
    if args.probe:
        probed.update({f"pretrained, {name}": init for name, init in inits.items() if init[0]})
        rows = {name: linear_probe(model, seconds, (X, y, g), labelled, (X_test, y_test))
                for name, (model, seconds) in probed.items()}  # fmt: skip
    table = pd.DataFrame.from_dict(rows, orient="index")
    table.columns = pd.MultiIndex.from_tuples(table.columns)
    return table


class MaskedTrunk:
    """Masked reconstruction with the default encoder's trunk (``stem`` and ``blocks`` of
    ``ResNet1dEncoder``): a 1x1 convolution maps each of its output steps back to the
    samples it covers, and the loss is the squared error on the hidden samples only."""

    def __init__(self, n_leads, n_timepoints, seed, mask_ratio=0.5, block=25):
        self.n_timepoints, self.seed, self.mask_ratio, self.block = (
            n_timepoints, seed, mask_ratio, block)  # fmt: skip
        torch.manual_seed(seed)
        self.encoder = ResNet1dEncoder(n_leads, n_timepoints, 8, fast_path=False)
        self.trunk = torch.nn.Sequential(self.encoder.stem, self.encoder.blocks)  # no head
        with torch.no_grad():
            channels, steps = self.trunk(torch.zeros(1, n_leads, n_timepoints)).shape[1:]
        self.patch = -(-n_timepoints // steps)  # samples per output step, rounded up
        self.decoder = torch.nn.Conv1d(channels, n_leads * self.patch, 1)

    def reconstruct(self, x):
        out = self.decoder(self.trunk(x))  # (batch, leads * patch, steps)
        batch, _, steps = out.shape
        out = out.view(batch, x.shape[1], self.patch, steps).transpose(2, 3)
        return out.reshape(batch, x.shape[1], -1)[..., : x.shape[2]]

    def fit(self, X, epochs, batch_size=128):
        generator = torch.Generator().manual_seed(self.seed)
        X = torch.as_tensor(X)
        parameters = [*self.trunk.parameters(), *self.decoder.parameters()]
        optimizer = torch.optim.AdamW(parameters, lr=1e-3, weight_decay=1e-4)
        n_blocks = -(-X.shape[2] // self.block)
        self.loss_curve_ = []
        for _ in range(epochs):
            self.trunk.train()
            total = 0.0
            for batch in torch.randperm(len(X), generator=generator).split(batch_size):
                x = X[batch]
                hidden = torch.rand(len(x), 1, n_blocks, generator=generator) < self.mask_ratio
                hidden = hidden.repeat_interleave(self.block, -1)[..., : x.shape[2]]
                hidden = hidden.expand_as(x).float()
                error = (self.reconstruct(x * (1 - hidden)) - x) ** 2
                loss = (error * hidden).sum() / hidden.sum().clamp(min=1)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                total += loss.item() * len(x)
            self.loss_curve_.append(total / len(X))
        self.trunk.eval()
        return self

    def transform(self, X):
        """The trunk's output averaged over time (what the probe reads)."""
        with torch.no_grad():
            batches = torch.as_tensor(X).split(512)
            return torch.cat([self.trunk(x).mean(-1) for x in batches]).numpy()

    def trunk_state(self):
        """The trunk's weights, named as in a ResNet1dEncoder."""
        return {name: value.clone() for name, value in self.encoder.state_dict().items()
                if not name.startswith("head.")}  # fmt: skip


class StartFrom(Callback):
    """Load ``state`` (part of the encoder's weights) into the net's encoder as training begins."""

    def __init__(self, state):
        self.state = state

    def on_train_begin(self, net, X=None, y=None, **kwargs):
        missing, unexpected = net.module_.load_state_dict(self.state, strict=False)
        if unexpected or any(not key.startswith("head.") for key in missing):
            raise ValueError(f"not an encoder trunk: missing {missing}, unexpected {unexpected}")


def linear_probe(model, seconds, train, labelled, scored_part):
    """Accuracy per attribute of a logistic regression on ``model``'s embeddings of the
    labelled frames of ``train``, ``C`` chosen by patient-grouped cross-validation on them."""
    (X, y, g), (X_test, y_test) = train, scored_part
    embeddings, test = model.transform(X[labelled]), model.transform(X_test)
    row = {("time", "s"): seconds}
    for column in ("class", "sex", "age"):
        target = y.loc[labelled, column].astype(str).to_numpy()
        folds = list(GroupKFold(5).split(embeddings, target, g[labelled]))
        logistic = make_pipeline(StandardScaler(), LogisticRegression(max_iter=2000))
        probe = GridSearchCV(logistic, {"logisticregression__C": [1e-3, 1e-2, 1e-1, 1]}, cv=folds)
        probe.fit(embeddings, target)
        truth = y_test[column].astype(str).to_numpy()
        row[(column, "probe Acc")] = 100 * np.mean(probe.predict(test) == truth)
    return row


def pseudo_labels(teacher, X_pool, y, keep):
    """The teacher's attributes for the pool's frames (``make_frames`` puts a record's two
    frames in consecutive rows; they get the record's labels, from their mean embedding):
    the class for every record, the other attributes only on the ``keep`` fraction of records
    where the best value's prototype similarity leads the next value's the most."""
    embeddings = teacher.transform(X_pool)
    records = embeddings.reshape(-1, 2, embeddings.shape[1]).mean(axis=1)
    prototypes, attributes = teacher.get_prototypes("learned")
    similarity = records @ prototypes.T
    pool = {}
    for j, column in enumerate(y.columns):
        values = list(dict.fromkeys(attributes[:, j]))  # those with a prototype
        # per value, the similarity of its most similar prototype
        best = np.stack([similarity[:, attributes[:, j] == v].max(axis=1) for v in values], 1)
        top_two = np.sort(best, axis=1)[:, -2:]
        label = np.array(values, dtype=object)[best.argmax(axis=1)]
        if column != "class" and keep < 1:
            margin = top_two[:, 1] - top_two[:, 0]
            label[margin < np.quantile(margin, 1 - keep)] = np.nan
        pool[column] = np.repeat(label, 2)
    return pd.DataFrame(pool)


def check_reusable(row, curve, path):
    """Refuse ``--curve`` unless its 10 % alone is this script's: then so are its other fits."""
    mine = pd.Series(row)[SCORES].to_numpy(float)
    if not np.allclose(mine, curve.loc["10% labelled alone"][SCORES].to_numpy(float), atol=1e-6):
        raise RuntimeError(
            f"--curve: the 10 % alone differs from {path}'s; its scratch rows cannot be "
            "reused (another seed, test part or thread count?)."
        )


def gap_closed(mean):
    """Per attribute: (row - 10 % from scratch) / (all from scratch - 10 % from scratch)."""
    low, high = mean.loc[f"{SETTINGS[0]}, {SCRATCH}"], mean.loc[f"{SETTINGS[2]}, {SCRATCH}"]
    columns = [c for c in SCORES[:5] if c in mean.columns]
    closed = (mean[columns] - low[columns]) / (high[columns] - low[columns])
    return closed.drop(index=[f"{SETTINGS[0]}, {SCRATCH}", f"{SETTINGS[2]}, {SCRATCH}"])


def report(tables, output, part):
    mean, std, text = mean_std(tables)
    pd.concat({"mean": mean, "std": std}, axis=1).to_csv(output)
    probes = [(c, "probe Acc") for c in ("class", "sex", "age")] + [("time", "s")]
    columns = [c for c in SCORES + [("fit", "s"), ("pretraining", "s")] + probes
               if c in text.columns]  # fmt: skip
    with pd.option_context("display.width", 250, "display.max_columns", 50):
        print(f"\n% on the {part}: mean (std) over {len(tables)} split(s)")
        print(text[columns].to_string())
        if {f"{SETTINGS[0]}, {SCRATCH}", f"{SETTINGS[2]}, {SCRATCH}"} <= set(mean.index):
            print("\nGap closed between 10 % labelled alone and all labelled, from scratch "
                  "(on the means; 0.5 = half)")  # fmt: skip
            print(gap_closed(mean).round(2).to_string())
        diffs = {}
        for name in tables[0].index if len(tables) > 1 else []:
            setting, init = name.rsplit(", ", 1)
            if init != SCRATCH and f"{setting}, {SCRATCH}" in tables[0].index:
                d = pd.DataFrame([t.loc[name] - t.loc[f"{setting}, {SCRATCH}"]
                                  for t in tables])  # fmt: skip
                cols = [c for c in SCORES if c in d.columns]
                diffs[name] = d[cols].agg(lambda c: f"{c.mean():+.1f} ({c.std(ddof=1):.1f})")
        if diffs:
            print("\nMinus the random initialisation of the same setting, paired by split "
                  "(points): mean (std)")  # fmt: skip
            print(pd.DataFrame(diffs).T.to_string())
    print(f"\nWritten to {output}")
    return 0


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--methods", nargs="*", default=["cmsc", "augment"])
    parser.add_argument("--pretrain-epochs", type=int, default=30)
    for view in ("amplitude-jitter", "noise"):  # None: the pretrainer's own default
        parser.add_argument(f"--{view}", type=float, help="a ContrastivePretrainer parameter")
    parser.add_argument("--settings", nargs="+", default=list(SETTINGS), choices=SETTINGS)
    parser.add_argument(
        "--probe", action="store_true",
        help="a linear probe of each representation instead of the pretrained fits (with the "
        "settings '10%% labelled alone' and 'all labelled')",
    )  # fmt: skip
    parser.add_argument(
        "--self-training", type=float, metavar="KEEP",
        help="also self-train from scratch, keeping the teacher's sex and age on this fraction "
        "of the pool (needs the setting '10%% labelled alone')",
    )  # fmt: skip
    parser.add_argument("--output", type=Path, default=Path("pool.csv"))
    parser.add_argument(
        "--curve", type=Path, help="a one-seed bench_curve.py output: its full-size scratch rows"
    )
    parser.add_argument("--validation", action="store_true",
                        help="score a fold of the training patients")  # fmt: skip
    parser.add_argument("--quick", action="store_true", help="one seed, 2 epochs")
    parser.add_argument("--combine", type=Path, nargs="+",
                        help="join the --output files of one-seed runs")  # fmt: skip
    args = parser.parse_args(argv)
    if args.self_training is not None and SETTINGS[0] not in args.settings:
        parser.error(f"--self-training needs the setting {SETTINGS[0]!r}: its teacher")
    if args.probe and (args.self_training is not None or args.curve is not None):
        # --curve's rows come without their models, which the probe needs
        parser.error("--probe fits and probes its own models: no --self-training or --curve")
    if args.probe:
        args.settings = [SETTINGS[0], SETTINGS[2]]
    args.views = {name: value for name, value in [("amplitude_jitter", args.amplitude_jitter),
                                                  ("noise", args.noise)] if value is not None}
    part = "validation folds of the training patients" if args.validation else "test patients"
    if args.combine:
        tables = [pd.read_csv(f, header=[0, 1, 2], index_col=0)["mean"] for f in args.combine]
        return report(tables, args.output, part)
    seeds = args.seeds[:1] if args.quick else args.seeds
    print(f"Machine: {machine_summary()}; load average {os.getloadavg()[0]:.2f}")
    print(f"PTB-XL sample + ptbxl-more; seeds {seeds}; scored on {part}; pretraining "
          f"{args.methods}, {args.pretrain_epochs} epochs, views {args.views}")  # fmt: skip
    records = load_records()
    start = time.perf_counter()
    tables = []
    for seed in seeds:
        tables.append(run_seed(records, seed, args))
        print(f"seed {seed} done ({time.perf_counter() - start:.0f} s)", flush=True)
        mean, std, _ = mean_std(tables)
        pd.concat({"mean": mean, "std": std}, axis=1).to_csv(args.output)
    return report(tables, args.output, part)


if __name__ == "__main__":
    sys.exit(main())
