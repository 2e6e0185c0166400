"""Crafted model files and settings.json files against genuine ones: what loads, and whether
what loads gives finite, consistent output on real records.

Four kinds of file are written from small models fitted on real records
(``../shared/data/ptbxl-sample``, 12 leads, 5-s frames at 100 Hz): a
``CROCSClusterer``, a ``PrototypeRetriever``, a ``ContrastivePretrainer`` and
the command line's ``settings.json``. Each variant changes one field of the
document (or of the settings) or one tensor, as an attacker who edits a file
can: the tensor manifest and the document's SHA-256 are recomputed. One variant
in four of the tensors scales the weights of two or three consecutive layers on
one unit, each value within the file's bound (1e18), so that ordinary frames may
stay finite while one with a sharp spike overflows; the held-out frames include
such a frame (one sample at 10,000 standard deviations). A variant
is then

- ``refused``: ``load`` raises ``InvalidModelFileError`` (the command line:
  exit status 1 with one error line);
- ``refused at use``: loads, and using it on the frames raises a ``ValueError``
  that says the embeddings are "not finite" (a clear refusal);
- ``unclear``: refused with another exception type or a traceback;
- ``loaded, good``: loads, and its outputs on held-out real frames are finite
  and consistent (probabilities in [0, 1] summing to 1, unit embeddings,
  predictions among the categories; the command line: a CSV with one row per
  record);
- ``loaded, BAD``: loads, then fails at use or gives non-finite or
  inconsistent output: the case the load checks exist to prevent.

Usage::

    OMP_NUM_THREADS=1 python benchmarks/fuzz_model_files.py [--variants 200] [--seed 0]

Prints the counts per kind and the first variants of each outcome but
"refused"; exits 1 if any variant is ``loaded, BAD``.
"""

import argparse
import contextlib
import copy
import hashlib
import io
import json
import shutil
import sys
import tempfile
import traceback
import warnings
from collections import Counter, defaultdict
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from safetensors import safe_open
from safetensors.torch import save_file
from sklearn.frozen import FrozenEstimator

from sklearn_crocs import (
    ContrastivePretrainer,
    CROCSClusterer,
    InvalidModelFileError,
    PrototypeRetriever,
)
from sklearn_crocs.cli import main as cli_main

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "ptbxl-sample"
SMALL_CNN = {"channels": (4, 8), "kernel_size": 5, "stride": 1, "pool_size": 2}

# Values a mutated field takes: wrong types, limits, duplicates, non-finite.
_ODD = [0, -1, 1, 2, 7, 2**31, 2**62, 1e308, -1e308, 1e-9, float("nan"), float("inf"), "",
        "x", None, True, False, [], {}, [1, 1], ["A", "A"], [True, 1], {"tuple": []}]  # fmt: skip


def _digest(tensor):
    data = tensor.contiguous().reshape(-1).view(torch.uint8).numpy()
    return hashlib.sha256(data.tobytes()).hexdigest()


def _read(path):
    with safe_open(path, framework="pt") as fh:
        document = json.loads(fh.metadata()["sklearn_crocs"])
        tensors = {name: fh.get_tensor(name).clone() for name in fh.keys()}
    return document, tensors


def _write(path, document, tensors):
    """The file an attacker writes: manifest and document SHA-256 recomputed."""
    document = copy.deepcopy(document)
    document["tensors"] = {
        name: {"dtype": str(t.dtype).removeprefix("torch."), "shape": list(t.shape),
               "sha256": _digest(t)}
        for name, t in tensors.items()
    }  # fmt: skip
    text = json.dumps(document)
    digest = hashlib.sha256(text.encode()).hexdigest()
    save_file(tensors, path, metadata={"sklearn_crocs": text, "sklearn_crocs_sha256": digest})


def _leaves(value, path=()):
    """``(path, value)`` of every leaf and container of a JSON value."""
    yield path, value
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _leaves(item, (*path, key))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from _leaves(item, (*path, i))


def _set(document, path, value):
    target = document
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value


def _odd_value(rng, old):
    """A value for a field: from _ODD, or the old value changed (numbers scaled, lists cut
    or repeated, strings altered)."""
    choice = rng.randint(4)
    if choice == 0 or old is None:
        return copy.deepcopy(_ODD[rng.randint(len(_ODD))])
    if isinstance(old, bool):
        return not old
    if isinstance(old, (int, float)):
        return type(old)(old * rng.choice([-1, 0.5, 2, 10, 1e6]))
    if isinstance(old, list) and old:
        return old[:-1] if choice == 1 else old + old[-1:]
    if isinstance(old, str):
        return old + old if choice == 1 else old[:1]
    return copy.deepcopy(_ODD[rng.randint(len(_ODD))])


def mutate_document(rng, document):
    document = copy.deepcopy(document)
    paths = [p for p, _ in _leaves(document) if p and p[0] not in ("tensors", "versions")]
    path = paths[rng.randint(len(paths))]
    old = document
    for key in path:
        old = old[key]
    _set(document, path, _odd_value(rng, old))
    return document, "field " + "/".join(map(str, path))


def mutate_tensor(rng, tensors):
    tensors = {k: v.clone() for k, v in tensors.items()}
    floats = [k for k, v in tensors.items() if v.is_floating_point() and v.numel()]
    name = floats[rng.randint(len(floats))]
    running_vars = [k for k in floats if k.endswith("running_var")]
    t = tensors[name]
    how = rng.choice(["3e38", "x1e30", "negate", "zeros", "one-huge", "neg-var", "x1e-30"])
    if how == "3e38":
        t.fill_(3e38)
    elif how == "x1e30":
        t.mul_(1e30)
    elif how == "negate":
        t.neg_()
    elif how == "zeros":
        t.zero_()
    elif how == "one-huge":
        t.view(-1)[rng.randint(t.numel())] = 3e38
    elif how == "x1e-30":
        t.mul_(1e-30)
    elif running_vars:
        name = running_vars[rng.randint(len(running_vars))]
        tensors[name] = -tensors[name].abs() - 1
    return tensors, f"tensor {name} {how}"


def _natural(name):
    return [int(part) if part.isdigit() else part for part in name.split(".")]


def mutate_spike_chain(rng, tensors):
    """Two or three consecutive layers scaled on one unit (its output row, then the next
    layers' input columns), each value kept within the file's bound of 1e18."""
    tensors = {k: v.clone() for k, v in tensors.items()}
    weights = sorted((k for k, v in tensors.items() if k.endswith("weight") and v.ndim >= 2
                      and "prototypes" not in k), key=_natural)  # fmt: skip
    # Consecutive layers: the outputs of one are the inputs of the next.
    starts = [i for i in range(len(weights) - 1)
              if tensors[weights[i]].shape[0] == tensors[weights[i + 1]].shape[1]]  # fmt: skip
    i = starts[rng.randint(len(starts))]
    chain, unit = [weights[i]], rng.randint(tensors[weights[i]].shape[0])
    while len(chain) < rng.choice([2, 3]) and i + 1 < len(weights):
        if tensors[weights[i]].shape[0] != tensors[weights[i + 1]].shape[1]:
            break
        i += 1
        chain.append(weights[i])
    # A gain of 10**18.5 to 10**20.5 in all: near where ordinary frames overflow, so that
    # one with a spike (sqrt(n) after scaling each frame) may cross it.
    total, scales = rng.uniform(18.5, 20.5), []
    for j, name in enumerate(chain):
        w = tensors[name]
        part = w[unit] if j == 0 else w[:, unit]
        power = total / len(chain) + rng.uniform(-2, 2) if j < len(chain) - 1 else total
        total -= power
        scale = min(10**power, 1e18 / max(float(part.abs().max()), 1e-30))
        part.mul_(scale)
        bias = tensors.get(name.removesuffix("weight") + "bias")
        if j == 0 and bias is not None:
            bias[unit] = max(min(float(bias[unit]) * scale, 1e18), -1e18)
        scales.append(f"{scale:.0e}")
    return tensors, f"unit {unit} of {', '.join(chain)} x {', '.join(scales)}"


# ----------------------------------------------------------- use on real frames
# The frames' rate, stated as a user who knows it does: a file whose parameters declare
# another input rate (a configuration fit allows) then resamples them, and only a model
# that cannot take 5-s frames at its own rate fails at use.
RATE = 100


def check_clusterer(model, X):
    proba = model.predict_proba(X, sampling_rate=RATE)
    embeddings = model.transform(X, sampling_rate=RATE)
    predicted = model.predict(X, sampling_rate=RATE)
    problems = []
    if not (np.isfinite(proba).all() and np.allclose(proba.sum(axis=1), 1, atol=1e-4)):
        problems.append("probabilities not finite or not summing to 1")
    norms = np.linalg.norm(embeddings, axis=1)
    if not np.isfinite(embeddings).all() or not np.all((np.abs(norms - 1) < 1e-3) | (norms == 0)):
        problems.append("embeddings not finite unit vectors")
    for j, categories in enumerate(model.categories_):
        column = predicted.iloc[:, j] if hasattr(predicted, "iloc") else predicted
        if not set(np.asarray(column).tolist()) <= set(np.asarray(categories).tolist()):
            problems.append(f"predictions outside the categories of attribute {j}")
    if np.all(norms == 0):
        problems.append("every embedding is zero")
    return problems


def check_retriever(retriever, X):
    problems = []
    distances, indices = retriever.query(n_neighbors=3)
    if not np.isfinite(distances).all():
        problems.append("query distances not finite")
    _, indices = retriever.kneighbors(X[-8:], n_neighbors=2, sampling_rate=RATE)
    if indices.min() < 0 or indices.max() >= retriever.n_samples_fit_:
        problems.append("neighbour indices out of range")
    return problems + check_clusterer(retriever.estimator_, X)


def check_pretrainer(pretrainer, X):
    leads = pretrainer.input_shape_[0]
    views = X[:, :leads, : pretrainer.input_shape_[1]]
    out = pretrainer.transform(views)
    norms = np.linalg.norm(out, axis=1)
    ok = np.isfinite(out).all() and np.all(np.abs(norms - 1) < 1e-3)
    return [] if ok else ["embeddings not finite unit vectors"]


def classify(load, check, path, X):
    """``(outcome, detail)`` of loading ``path`` and using the model on ``X``."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model = load(path)
    except InvalidModelFileError as exc:
        return "refused", str(exc).splitlines()[0][-160:]
    except Exception as exc:  # noqa: BLE001 - what the fuzz looks for
        return "unclear", f"{type(exc).__name__}: {str(exc)[:160]}"
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            problems = check(model, X)
    except ValueError as exc:
        if "not finite" in str(exc):
            return "refused at use", str(exc).splitlines()[0][-160:]
        return "loaded, BAD", f"fails at use: ValueError: {str(exc)[:160]}"
    except Exception as exc:  # noqa: BLE001
        return "loaded, BAD", f"fails at use: {type(exc).__name__}: {str(exc)[:160]}"
    return ("loaded, BAD", "; ".join(problems)) if problems else ("loaded, good", "")


# ----------------------------------------------------------- the command line
def run_cli(*argv):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            status = cli_main([str(a) for a in argv])
        except SystemExit as exc:
            status = exc.code
        except Exception:  # noqa: BLE001
            status = "crash:" + traceback.format_exc(limit=1).splitlines()[-1]
    return status, err.getvalue()


def classify_settings(model_dir, records, n_records):
    out = model_dir.parent / "out.csv"
    status, err = run_cli("predict", records, "--sampling-rate", 100, "--model", model_dir,
                          "--out", out, "--quiet", "--force")  # fmt: skip
    lines = [line for line in err.splitlines() if line.startswith("sklearn-crocs: error:")]
    if status == 1 and len(lines) == 1 and "Traceback" not in err:
        return "refused", lines[0][-160:]
    if status != 0:
        return "unclear", f"status {status}: {err.strip()[-160:]}"
    table = pd.read_csv(out)
    if len(table) != n_records or table.isna().any().any():
        return "loaded, BAD", f"{len(table)} rows for {n_records} records, or empty cells"
    return "loaded, good", ""


# ----------------------------------------------------------------- main
def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--variants", type=int, default=200, help="per kind (default 200)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    rng = np.random.RandomState(args.seed)

    signals = np.load(DATA / "signals.npz")
    table = pd.read_csv(DATA / "records.csv")
    X = signals["X"][:160, :, :500].astype(np.float32)  # 5-s frames
    y = table[["label", "sex"]].iloc[:160].reset_index(drop=True)
    train, held_out = X[:128], X[128:]
    spike = held_out[:1].copy()
    spike[0, 1, 250] = 1e4  # one sharp spike on lead II of a real frame
    held_out = np.concatenate([held_out, spike])
    model = CROCSClusterer(
        encoder="cnn", encoder_params=SMALL_CNN, embedding_dim=16, max_epochs=2,
        validation_fraction=None, sampling_rate=100, working_rate=100, random_state=0,
    ).fit(train, y.iloc[:128])  # fmt: skip
    retriever = PrototypeRetriever(FrozenEstimator(model), n_neighbors=3).fit(train)
    pretrainer = ContrastivePretrainer(
        encoder="cnn", encoder_params=SMALL_CNN, embedding_dim=16, max_epochs=1, random_state=0
    ).fit(train)

    counts = defaultdict(Counter)
    examples = defaultdict(list)
    with tempfile.TemporaryDirectory() as folder:
        folder = Path(folder)
        kinds = {
            "clusterer": (model.save, CROCSClusterer.load, check_clusterer),
            "retriever": (lambda p: retriever.save(p, include_embeddings=True),
                          PrototypeRetriever.load, check_retriever),
            "pretrainer": (pretrainer.save, ContrastivePretrainer.load, check_pretrainer),
        }  # fmt: skip
        for kind, (save, load, check) in kinds.items():
            genuine = folder / f"{kind}.safetensors"
            save(genuine)
            assert classify(load, check, genuine, held_out)[0] == "loaded, good", kind
            document, tensors = _read(genuine)
            for i in range(args.variants):
                if i % 2 == 0:
                    variant, what = mutate_document(rng, document)
                    variant_tensors = tensors
                elif i % 4 == 3:
                    variant = document
                    variant_tensors, what = mutate_spike_chain(rng, tensors)
                else:
                    variant, what = document, None
                    variant_tensors, what = mutate_tensor(rng, tensors)
                path = folder / f"{kind}-{i}.safetensors"
                try:
                    _write(path, variant, variant_tensors)
                except (TypeError, ValueError) as exc:  # e.g. NaN not JSON: not a file
                    counts[kind]["not writable"] += 1
                    examples[(kind, "not writable")].append(f"{what}: {exc}")
                    continue
                outcome, detail = classify(load, check, path, held_out)
                counts[kind][outcome] += 1
                examples[(kind, outcome)].append(f"{what}: {detail}")
                path.unlink()

        # settings.json beside a command-line model fitted on the same frames.
        records = folder / "frames.npz"
        ids = np.array([f"r{i}" for i in range(len(X))])
        np.savez(records, X=X, record_ids=ids)
        y.assign(id=ids).to_csv(folder / "labels.csv", index=False)
        model_dir = folder / "cli-model"
        status, err = run_cli("fit", records, "--sampling-rate", 100, "--labels",
                              folder / "labels.csv", "--record-column", "id", "--attributes",
                              "label,sex", "--model", model_dir, "--working-rate", 100,
                              "--encoder", "cnn", "--embedding-dim", 8, "--max-epochs", 1,
                              "--random-state", 0, "--quiet")  # fmt: skip
        assert status == 0, err
        settings = json.loads((model_dir / "settings.json").read_text())
        assert classify_settings(model_dir, records, len(X))[0] == "loaded, good"
        for _ in range(args.variants):
            variant, what = mutate_document(rng, settings)
            variant_dir = folder / "variant"
            shutil.rmtree(variant_dir, ignore_errors=True)
            shutil.copytree(model_dir, variant_dir)
            (variant_dir / "settings.json").write_text(json.dumps(variant))
            outcome, detail = classify_settings(variant_dir, records, len(X))
            counts["settings.json"][outcome] += 1
            examples[("settings.json", outcome)].append(f"{what}: {detail}")

    order = ["refused", "refused at use", "unclear", "loaded, good", "loaded, BAD",
             "not writable"]  # fmt: skip
    print(f"{'kind':<14}" + "".join(f"{o:>15}" for o in order))
    for kind, counter in counts.items():
        print(f"{kind:<14}" + "".join(f"{counter[o]:>15}" for o in order))
    for (kind, outcome), items in sorted(examples.items()):
        if outcome in ("refused at use", "unclear", "loaded, BAD", "loaded, good"):
            print(f"\n{kind}, {outcome} (first 8 of {len(items)}):")
            for item in items[:8]:
                print(f"  {item}")
    return 1 if any(c["loaded, BAD"] for c in counts.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
