"""A model file must describe a model that works (issue 45, items 1-4 and 11).

Each crafted file is built from a genuine one with the document's SHA-256
recomputed, as anyone who edits a file can. It must be refused at load, not
at use: a model that loads predicts, and a wrong prediction is not an error.
"""

import json

import numpy as np
import pandas as pd
import pytest
import torch
from conftest import make_synthetic_ecgs
from sklearn.frozen import FrozenEstimator
from test_cli import error_line, run
from test_common import FAST_CNN
from test_model_file_trust import _document, _forge, _tensor

from sklearn_crocs import (
    ContrastivePretrainer,
    CROCSClusterer,
    InvalidModelFileError,
    PrototypeRetriever,
)


@pytest.fixture(scope="module")
def data():
    return make_synthetic_ecgs(n_patients=12, frames_per_patient=2, length=200, seed=1)


@pytest.fixture(scope="module")
def model(data):
    X, y, _ = data
    return CROCSClusterer(
        encoder="cnn", encoder_params=FAST_CNN, embedding_dim=8, max_epochs=2,
        validation_fraction=None, sampling_rate=100, working_rate=100, random_state=0,
    ).fit(X, y)  # fmt: skip


@pytest.fixture(scope="module")
def resnet(data):
    X, y, _ = data
    return CROCSClusterer(
        encoder="resnet", encoder_params={"channels": (4,)}, embedding_dim=8, max_epochs=1,
        validation_fraction=None, random_state=0,
    ).fit(X, y)  # fmt: skip


@pytest.fixture(scope="module")
def pretrainer(data):
    X, _, _ = data
    return ContrastivePretrainer(
        encoder="cnn", encoder_params=FAST_CNN, embedding_dim=8, max_epochs=1, random_state=0
    ).fit(X)


def _save(kind, model, pretrainer, data, path):
    if kind == "clusterer":
        model.save(path)
    elif kind == "retriever":
        PrototypeRetriever(FrozenEstimator(model)).fit(data[0]).save(path)
    else:
        pretrainer.save(path)


_LOADERS = {
    "clusterer": CROCSClusterer.load,
    "retriever": PrototypeRetriever.load,
    "pretrainer": ContrastivePretrainer.load,
}


# ------------------------------------ item 2: finite weights, non-finite outputs
def _break_weights(path, case):
    """Finite weights, within the bound on stored values, whose every output is NaN: a
    negative BatchNorm variance, or large weights in every layer."""
    names = list(_document(path)["tensors"])
    if case == "negative-running-var":
        name = next(n for n in names if n.endswith("running_var"))
        _forge(path, tensors={name: -_tensor(path, name).abs() - 1})
    else:
        weights = [n for n in names if n.endswith("weight") and "encoder." in n]
        _forge(path, tensors={n: torch.full_like(_tensor(path, n), 1e17) for n in weights})


@pytest.mark.bad_input(
    "Model file", "finite weights whose outputs are NaN", "InvalidModelFileError"
)
@pytest.mark.parametrize("case", ["negative-running-var", "every-weight-1e17"])
@pytest.mark.parametrize("kind", ["clusterer", "retriever", "pretrainer"])
def test_weights_that_give_nan_outputs_are_refused(model, pretrainer, data, tmp_path, kind, case):
    path = tmp_path / "model.safetensors"
    _save(kind, model, pretrainer, data, path)
    _LOADERS[kind](path)  # the genuine file loads: the probe passes working models
    _break_weights(path, case)
    with pytest.raises(
        InvalidModelFileError, match="outputs on ECG-like signals are NaN, infinite or too large"
    ):
        _LOADERS[kind](path)


# ------------------------------------ item 1: no allocation from a declared shape
@pytest.mark.bad_input(
    "Model file", "input_shape far beyond any ECG (length-free ResNet)", "InvalidModelFileError"
)
@pytest.mark.parametrize(
    ("shape", "message"),
    [
        ([2, 2**31], "'input_shape' is not"),  # 16 GiB for the command line's blank frame
        ([1, 2**21], "values in one tensor, more than"),  # the stem's output, not the input
    ],
)
def test_input_shape_is_bounded_for_length_free_encoders(resnet, tmp_path, shape, message):
    path = tmp_path / "model.safetensors"
    resnet.save(path)
    # The ResNet's weights do not depend on the length: only the limits refuse it.
    _forge(path, document={"input_shape": shape, "n_features_in": shape[0] * shape[1]})
    with pytest.raises(InvalidModelFileError, match=message):
        CROCSClusterer.load(path)


def test_save_refuses_a_model_that_load_would_refuse(resnet, tmp_path, monkeypatch):
    """Frames long enough to pass the activation limit (over 10 minutes at 100 Hz) fit, but
    their model's file would not load: save says so and writes nothing."""
    from sklearn_crocs._persistence import _format

    monkeypatch.setattr(_format, "MAX_ACTIVATION", 100)  # the resnet's frames are over it
    path = tmp_path / "model.safetensors"
    with pytest.raises(ValueError, match="cannot be saved.*more than the 100 a model file"):
        resnet.save(path)
    assert not path.exists()


# ------------------------------------ item 4: the rate fields agree
@pytest.mark.bad_input(
    "Model file", "sampling_rate not the rate of its parameters, or absurd",
    "InvalidModelFileError",
)  # fmt: skip
@pytest.mark.parametrize(
    ("document", "params", "message"),
    [
        # 250-sample frames at working_rate=100 declared at 50 Hz.
        ({"sampling_rate": 50.0}, {}, "sampling_rate 50.0 is not the rate the parameters"),
        ({"sampling_rate": 1e308}, {"sampling_rate": 1e308, "working_rate": None},
         "'sampling_rate' parameter"),
        ({"sampling_rate": 1e-9}, {"sampling_rate": 1e-9, "working_rate": None},
         "'sampling_rate' parameter"),
        ({"sampling_rate": 100.0}, {"working_rate": 1e-9}, "'working_rate' parameter"),
        # 200 samples at 10 kHz: frames of 0.02 s.
        ({"sampling_rate": 10000.0}, {"sampling_rate": 10000.0, "working_rate": None},
         "too short for an ECG"),
    ],
)  # fmt: skip
def test_rate_fields_are_cross_checked(model, tmp_path, document, params, message):
    path = tmp_path / "model.safetensors"
    model.save(path)
    _forge(path, document={**document, "params": {**_document(path)["params"], **params}})
    with pytest.raises(InvalidModelFileError, match=message):
        CROCSClusterer.load(path)


# ------------------------------------ item 11: pretrainer n_features_in
@pytest.mark.bad_input(
    "Model file", "pretrainer n_features_in not the views' leads", "InvalidModelFileError"
)
@pytest.mark.parametrize("n_features_in", [2, 4096])
def test_pretrainer_leads_agree_with_input_shape(pretrainer, tmp_path, n_features_in):
    path = tmp_path / "pretrainer.safetensors"
    pretrainer.save(path)
    _forge(path, document={"n_features_in": n_features_in})
    with pytest.raises(InvalidModelFileError, match="is not the views method="):
        ContrastivePretrainer.load(path)


# ------------------------------------ item 3: settings.json against the model
def fit_cli_model(folder):
    """``folder`` with two.npz (two leads of the bundled LUDB records) and a command-line
    model fitted on them at 100 Hz (folder/model)."""
    from sklearn_crocs.datasets import load_ludb

    ludb = load_ludb()
    ids = np.array([f"L{name}" for name in ludb.record_names])
    np.savez(folder / "two.npz", X=ludb.data[:, :2], record_ids=ids, lead_names=["I", "II"])
    ludb.attributes[["sex"]].to_csv(folder / "labels.csv", index=False)
    argv = ["fit", folder / "two.npz", "--sampling-rate", 500, "--labels"]
    argv += [folder / "labels.csv", "--attributes", "sex", "--model", folder / "model"]
    argv += ["--working-rate", 100, "--encoder", "cnn", "--embedding-dim", "8"]
    argv += ["--max-epochs", "1", "--random-state", "0", "--quiet"]
    status, _, err = run(*argv)
    assert status == 0, err
    return folder


@pytest.fixture(scope="module")
def cli_model(tmp_path_factory):
    return fit_cli_model(tmp_path_factory.mktemp("cli"))


SETTINGS_CASES = {
    "working-rate-200": ({"working_rate": 200.0}, "working_rate 200 Hz, but the model was"),
    "working-rate-0": ({"working_rate": 0}, "working_rate must be a number of Hz"),
    "frame-length": ({"frame_length": 250}, "frames of 250 samples, but the model takes 500"),
    "duplicate-leads": ({"lead_names": ["I", "I"]}, "not 2 distinct names"),
    "empty-leads": ({"lead_names": []}, "not 2 distinct names"),
    "missing-normalize": ({"normalize": None}, "(no 'normalize')"),
    "conditioning-without-notch": (
        {"conditioning": {"bandpass": [0.5, 40.0], "normalize": "zscore"}},
        "conditioning that is not",
    ),
    "nan-band-edge": (
        {"conditioning": {"bandpass": [0.5, float("nan")], "notch": None, "normalize": None}},
        "bandpass must be",
    ),
    "edge-above-nyquist": (
        {"conditioning": {"bandpass": [60.0, None], "notch": None, "normalize": None}},
        "not below half the rate",
    ),
    "class-map-as-a-path": ({"class_map": "/etc/passwd"}, "class_map that is not"),
    "class-map-empty-class": ({"class_map": {"164889003": ""}}, "empty codes or classes"),
    # Issue 57, point 9: what names and bins the predictions is the model's.
    "attributes-renamed": ({"attributes": ["gender"]}, "attributes ['gender'], not the model's"),
    "class-attribute": ({"class_attribute": "age"}, "class_attribute 'age', not the model's"),
    "age-groups-of-no-attribute": (
        {"age_groups": {"age": {"labels": ["a", "b"], "edges": [50]}}},
        "age_groups that are not a table of the model's attributes",
    ),
    "age-groups-permuted": (
        {"age_groups": {"sex": {"labels": ["M", "F"], "edges": [50]}}},
        "not the model's ['F', 'M'] in age order",
    ),
    "age-groups-edges-decreasing": (
        {"age_groups": {"sex": {"labels": ["F", "M", "X"], "edges": [60, 50]}}},
        "not increasing edges",
    ),
    "age-groups-edge-moved": (
        {"age_groups": {"sex": {"labels": ["F", "M"], "edges": [50]}}},
        "edges [50] that its labels do not name",
    ),
}


@pytest.mark.bad_input(
    "Command line", "settings.json that does not fit the model beside it", "CommandError"
)
@pytest.mark.parametrize("case", list(SETTINGS_CASES))
def test_settings_are_checked_against_the_model(cli_model, tmp_path, case):
    import shutil

    changes, message = SETTINGS_CASES[case]
    model_dir = tmp_path / "model"
    shutil.copytree(cli_model / "model", model_dir)
    settings = json.loads((model_dir / "settings.json").read_text())
    settings.update(changes)
    settings = {k: v for k, v in settings.items() if v is not None or k == "conditioning"}
    (model_dir / "settings.json").write_text(json.dumps(settings))
    argv = ["predict", cli_model / "two.npz", "--sampling-rate", 500, "--model", model_dir]
    status, _, err = run(*argv, "--out", tmp_path / "out.csv", "--quiet")
    assert status == 1
    line = error_line(err)
    assert "settings.json" in line and message in line, line
    assert not (tmp_path / "out.csv").exists()


# ------------------------------------ item 9: the bytes hashed are the bytes parsed
@pytest.mark.bad_input(
    "Load", "file swapped between the sha256= check and the parse", "(the hashed file read)"
)
def test_sha256_covers_the_bytes_that_are_parsed(model, data, tmp_path, monkeypatch):
    import hashlib
    import os

    path, other = tmp_path / "model.safetensors", tmp_path / "other.safetensors"
    model.save(path)
    model.save(other)
    _forge(other, document={"history": []})  # a valid file, told apart by its history
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    size = path.stat().st_size
    real = hashlib.sha256

    class SwapAfterHashing:
        """hashlib.sha256 that, once a whole file's bytes are hashed, swaps the file:
        as another process replacing it between the check and the parse."""

        def __init__(self, data=b""):
            self._hash, self._n = real(data), len(data)

        def update(self, data):
            self._hash.update(data)
            self._n += len(data)

        def hexdigest(self):
            if self._n == size and other.exists():
                os.replace(other, path)
            return self._hash.hexdigest()

    monkeypatch.setattr(hashlib, "sha256", SwapAfterHashing)
    loaded = CROCSClusterer.load(path, sha256=digest)
    monkeypatch.undo()
    assert not other.exists()  # the swap happened, after the hash
    assert len(loaded.net_.history) == len(model.net_.history) > 0  # the hashed file


# ------------------------------------ item 11: invalid metadata refused at load
def _categories(values, dtype="object"):
    return {"dtype": dtype, "values": values}


@pytest.mark.bad_input(
    "Model file", "duplicate categories or attribute names", "InvalidModelFileError"
)
@pytest.mark.parametrize(
    ("field", "index", "value", "message"),
    [
        ("categories", 0, _categories(["AFIB", "AFIB", "SR"], "<U4"), "not distinct values"),
        ("categories", 1, _categories([True, 1]), "not distinct values"),  # True == 1
        ("categories", 1, _categories([1, "1"]), "of one type"),
        ("attribute_names", 1, "rhythm", "attribute names .* are not distinct"),
    ],
)
def test_duplicate_categories_and_names_are_refused(model, tmp_path, field, index, value, message):
    path = tmp_path / "model.safetensors"
    model.save(path)
    values = _document(path)[field]
    values[index] = value
    _forge(path, document={field: values})
    with pytest.raises(InvalidModelFileError, match=message):
        CROCSClusterer.load(path)


@pytest.mark.bad_input(
    "Model file", "retriever pipeline: two clusterers, or a FrameNormalizer of 1e308 features",
    "InvalidModelFileError",
)  # fmt: skip
@pytest.mark.parametrize(
    ("case", "message"),
    [
        ("two-clusterers", "before the clusterer is not a FrameNormalizer"),
        ("normalizer-1e308", "n_features_in 1e\\+308 is not a count"),
        ("normalizer-7", "fitted on 7 features, but the clusterer on 1 lead"),
        ("normalizer-1", None),  # genuine: the lead count of 3-D X
    ],
)
def test_retriever_pipeline_is_what_save_writes(model, data, tmp_path, case, message):
    path = tmp_path / "retriever.safetensors"
    PrototypeRetriever(FrozenEstimator(model)).fit(data[0]).save(path)
    crocs = _document(path)["estimator"]["FrozenEstimator"]
    if case == "two-clusterers":
        steps = [["first", crocs], ["second", crocs]]
    else:
        width = {"normalizer-1e308": 1e308, "normalizer-7": 7, "normalizer-1": 1}[case]
        normalizer = {"FrameNormalizer": {"method": "zscore", "n_features_in": width}}
        steps = [["norm", normalizer], ["crocs", crocs]]
    _forge(path, document={"estimator": {"Pipeline": {"steps": steps, "verbose": False}}})
    if message is None:
        PrototypeRetriever.load(path)
        return
    with pytest.raises(InvalidModelFileError, match=message):
        PrototypeRetriever.load(path)


# ------------------------------------ found by benchmarks/fuzz_model_files.py
@pytest.mark.bad_input(
    "Model file", "prototypes not unit vectors, 'indexed' flipped, a zero stride",
    "InvalidModelFileError",
)  # fmt: skip
@pytest.mark.parametrize("case", ["one-huge-prototype", "zero-prototypes", "indexed", "stride"])
def test_fuzz_findings_are_refused(model, pretrainer, data, tmp_path, case):
    path = tmp_path / "model.safetensors"
    if case == "indexed":  # the file holds the embeddings but says it does not
        PrototypeRetriever(FrozenEstimator(model)).fit(data[0]).save(path, include_embeddings=True)
        _forge(path, document={"indexed": False})
        with pytest.raises(InvalidModelFileError, match="'indexed' does not say"):
            PrototypeRetriever.load(path)
        return
    if case == "stride":  # was a raw ZeroDivisionError
        pretrainer.save(path)
        params = _document(path)["params"]
        params["encoder_params"]["dict"]["stride"] = 0
        _forge(path, document={"params": params})
        with pytest.raises(InvalidModelFileError, match="ZeroDivisionError"):
            ContrastivePretrainer.load(path)
        return
    model.save(path)
    prototypes = _tensor(path, "learned_prototypes").clone()
    if case == "one-huge-prototype":  # predict_proba was NaN
        prototypes[0, 0] = 1e17
    else:
        prototypes.zero_()
    _forge(path, tensors={"learned_prototypes": prototypes})
    with pytest.raises(InvalidModelFileError, match="'learned_prototypes' holds rows that are not"):
        CROCSClusterer.load(path)


@pytest.mark.bad_input(
    "Model file", "one huge weight on a unit that the load's probe leaves at 0",
    "InvalidModelFileError",
)  # fmt: skip
@pytest.mark.parametrize("kind", ["clusterer", "retriever", "pretrainer"])
def test_a_huge_weight_the_probe_misses_is_refused(model, pretrainer, data, tmp_path, kind):
    """Found by the fuzz in a pretrainer's head: a value of 3e38 on an input that is 0 for
    every probe frame passed the probe, and real ECGs, which reach it, embedded as NaN."""
    from sklearn_crocs._persistence._format import probe_signals

    path = tmp_path / "model.safetensors"
    _save(kind, model, pretrainer, data, path)
    if kind == "pretrainer":
        encoder, probe = pretrainer.encoder_, probe_signals(*pretrainer.input_shape_)
    else:
        encoder = model.net_.module_
        probe = probe_signals(*model.input_shape_, model.sampling_rate_, model.signal_scale_)
    seen = []
    handle = encoder.head[1].register_forward_hook(lambda m, inputs, out: seen.append(inputs[0]))
    with torch.no_grad():
        encoder.eval()(torch.from_numpy(probe))
    handle.remove()
    unreached = int(torch.nonzero((seen[0] == 0).all(dim=0))[0, 0])
    name = next(n for n in _document(path)["tensors"] if n.endswith("head.1.weight"))
    weight = _tensor(path, name).clone()
    weight[0, unreached] = 3e38
    _forge(path, tensors={name: weight})
    with pytest.raises(InvalidModelFileError, match="values beyond 1e"):
        _LOADERS[kind](path)


# ------------------------------------ peak memory: the probe at the limit
def test_crafted_shapes_cost_at_most_200_mb_above_a_genuine_load(resnet, tmp_path):
    """In a fresh process: the largest input shape a file may declare loads and is probed
    within 200 MB of a genuine load; larger ones are refused before any allocation."""
    import os
    import subprocess
    import sys

    from test_model_file_trust import _PEAK_SCRIPT, ROOT

    genuine = tmp_path / "genuine.safetensors"
    resnet.save(genuine)
    shapes = {"at-limit": [1, 2**20], "stem-over": [1, 2**21], "input-over": [2, 2**31]}
    paths = []
    for name, shape in shapes.items():
        path = tmp_path / f"{name}.safetensors"
        resnet.save(path)
        _forge(path, document={"input_shape": shape, "n_features_in": shape[0] * shape[1]})
        paths.append(os.fspath(path))
    result = subprocess.run(
        [sys.executable, "-c", _PEAK_SCRIPT, os.fspath(genuine), *paths],
        capture_output=True, text=True, timeout=600, cwd=ROOT,
        env={**os.environ, "PYTHONPATH": os.fspath(ROOT)},
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    outcomes = [line.rsplit(" ", 2)[1:] for line in result.stdout.strip().splitlines()]
    print("peak memory above a genuine load (KiB):", outcomes)
    assert [o for o, _ in outcomes] == ["loaded", "refused", "refused"], result.stdout
    assert max(int(peak) for _, peak in outcomes) < 200 * 1024, result.stdout  # KiB


@pytest.mark.bad_input(
    "Command line", "an attribute named like another column of predict's CSV", "CommandError"
)
@pytest.mark.parametrize("names", [["record"], ["sex", "sex_proba"]])
def test_attribute_names_that_clash_with_output_columns_are_refused(cli_model, tmp_path, names):
    import shutil

    # At fit, before reading anything.
    argv = ["fit", cli_model / "two.npz", "--sampling-rate", 500, "--labels"]
    argv += [cli_model / "labels.csv", "--attributes", ",".join(names)]
    status, _, err = run(*argv, "--model", tmp_path / "new", "--quiet")
    assert status == 1
    assert "predict writes a column 'record'" in error_line(err)
    # On load: a model file (and its settings) whose attributes clash.
    y = pd.DataFrame({name: np.tile(["A", "B"], 10) for name in names})
    rng = np.random.RandomState(0)
    model = CROCSClusterer(
        encoder="cnn", embedding_dim=8, max_epochs=1, validation_fraction=None,
        sampling_rate=100, random_state=0,
    ).fit(rng.randn(20, 2, 500).astype(np.float32), y)  # fmt: skip
    model_dir = tmp_path / "model"
    shutil.copytree(cli_model / "model", model_dir)
    model.save(model_dir / "model.safetensors", overwrite=True)
    settings = json.loads((model_dir / "settings.json").read_text())
    settings.update(attributes=names, class_attribute=names[0])
    (model_dir / "settings.json").write_text(json.dumps(settings))
    argv = ["predict", cli_model / "two.npz", "--sampling-rate", 500, "--model", model_dir]
    status, _, err = run(*argv, "--out", tmp_path / "out.csv", "--quiet")
    assert status == 1
    line = error_line(err)
    assert f"--model {model_dir} has the attribute(s) {names[-1]}" in line, line
    assert not (tmp_path / "out.csv").exists()
