"""Model files: no training data in fitted models, safe save/load, refusal of bad files."""

import hashlib
import io
import json
import pickle
import sys
import warnings
from datetime import timedelta

import joblib
import numpy as np
import pandas as pd
import pytest
import torch
from conftest import make_synthetic_ecgs
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from safetensors import safe_open
from safetensors.torch import save_file
from sklearn.base import clone
from sklearn.frozen import FrozenEstimator
from sklearn.pipeline import make_pipeline
from skorch.callbacks import LRScheduler
from test_common import FAST_CNN, _fast_estimators
from torch import nn

from sklearn_crocs import (
    ContrastivePretrainer,
    CROCSClusterer,
    InvalidModelFileError,
    PrototypeRetriever,
)
from sklearn_crocs._persistence._format import FORMAT_VERSION
from sklearn_crocs.nn import CNNEncoder
from sklearn_crocs.preprocessing import FrameNormalizer, SignalConditioner

CONFIGS = list(_fast_estimators())
CONFIG_IDS = ["cnn-soft-learned", "cnn-hard-mean-early-stopping", "resnet"]


@pytest.fixture(scope="module")
def data():
    X, y, groups = make_synthetic_ecgs(n_patients=24, frames_per_patient=2, length=200, seed=3)
    return X, y, groups


@pytest.fixture(scope="module")
def fitted_models(data):
    X, y, groups = data
    return [clone(estimator).fit(X, y, groups=groups) for estimator in CONFIGS]


def _training_ecgs_found(blob, X):
    """How many training ECGs occur in ``blob``, whole or by their first 64 bytes."""
    found = 0
    for row in X:
        for array in (row.astype(np.float32), row.astype(np.float64)):
            data = array.tobytes()
            if data in blob or data[:64] in blob:
                found += 1
                break
    return found


def _dumps(model):
    buffer = io.BytesIO()
    joblib.dump(model, buffer)
    return buffer.getvalue()


# ------------------------------------------------------- no training data kept
@pytest.mark.parametrize("index", range(len(CONFIGS)), ids=CONFIG_IDS)
def test_fitted_model_holds_no_training_ecg(fitted_models, data, tmp_path, index):
    # Reproduction 1: the early-stopping split kept the validation ECGs in
    # net_.train_split, so joblib.dump wrote them verbatim.
    X, _, _ = data
    model = fitted_models[index]
    assert _training_ecgs_found(_dumps(model), X) == 0
    assert _training_ecgs_found(pickle.dumps(model), X) == 0
    model.save(tmp_path / "model.safetensors")
    assert _training_ecgs_found((tmp_path / "model.safetensors").read_bytes(), X) == 0
    retriever = PrototypeRetriever(FrozenEstimator(model)).fit(X)
    retriever.save(tmp_path / "retriever.safetensors", include_embeddings=True)
    assert _training_ecgs_found((tmp_path / "retriever.safetensors").read_bytes(), X) == 0
    assert _training_ecgs_found(_dumps(retriever), X) == 0


def test_the_search_for_training_ecgs_finds_them(data):
    # The detector above is not vacuous: a pickled array of the signals is found.
    X, _, _ = data
    assert _training_ecgs_found(_dumps({"kept": X[:5]}), X) == 5


# ---------------------------------------------------------------- round trips
def _assert_same_model(loaded, model, X, y):
    np.testing.assert_array_equal(loaded.transform(X), model.transform(X))
    np.testing.assert_array_equal(loaded.predict_proba(X), model.predict_proba(X))
    predicted = model.predict(X)
    if isinstance(predicted, pd.DataFrame):
        pd.testing.assert_frame_equal(loaded.predict(X), predicted)
    else:
        np.testing.assert_array_equal(loaded.predict(X), predicted)
    assert loaded.score(X, y) == model.score(X, y)
    np.testing.assert_array_equal(loaded.labels_, model.labels_)
    np.testing.assert_array_equal(loaded.prototypes_, model.prototypes_)
    np.testing.assert_array_equal(loaded.prototype_attributes_, model.prototype_attributes_)
    np.testing.assert_array_equal(loaded.prototype_counts_, model.prototype_counts_)
    for kind in ("learned", "mean"):
        for got, expected in zip(loaded.get_prototypes(kind), model.get_prototypes(kind)):
            np.testing.assert_array_equal(got, expected)
    assert loaded.attribute_names_ == model.attribute_names_
    for got, expected in zip(loaded.categories_, model.categories_):
        np.testing.assert_array_equal(got, expected)
        assert got.dtype == expected.dtype
    assert loaded.input_shape_ == model.input_shape_
    assert loaded.n_iter_ == model.n_iter_
    assert loaded.net_.history.to_list() == model.net_.history.to_list()
    loaded_params, params = _comparable(loaded.get_params()), _comparable(model.get_params())
    if isinstance(params["random_state"], np.random.RandomState):
        assert loaded_params.pop("random_state").get_state()[1].tolist() == (
            params.pop("random_state").get_state()[1].tolist()
        )
    assert loaded_params == params


def _comparable(params):
    """``params`` with estimators (a conditioning step) as their class and parameters."""
    return {
        k: (type(v), v.get_params()) if hasattr(v, "get_params") else v for k, v in params.items()
    }


@pytest.mark.parametrize("index", range(len(CONFIGS)), ids=CONFIG_IDS)
def test_loaded_model_predicts_as_saved(fitted_models, data, tmp_path, index):
    X, y, _ = data
    model = fitted_models[index]
    path = tmp_path / "model.safetensors"
    assert model.save(path) is model
    loaded = CROCSClusterer.load(path)
    _assert_same_model(loaded, model, X, y)
    # A loaded model trains again like the original.
    refit = clone(loaded).fit(X, y)
    np.testing.assert_array_equal(refit.transform(X), clone(model).fit(X, y).transform(X))


def test_a_loaded_net_predicts_and_does_not_train(fitted_models, data, tmp_path):
    # A rebuilt net gets no torch optimizer (whose first construction in a process
    # imports torch's compiler stack); training it says what to do instead.
    X, y, _ = data
    path = tmp_path / "model.safetensors"
    loaded = CROCSClusterer.load(fitted_models[0].save(path) and path)
    # (The learning-rate schedule refuses it first, by name.)
    with pytest.raises((RuntimeError, TypeError), match="PredictionOnly|rebuilt from a model"):
        loaded.net_.partial_fit(X[:8], np.zeros(8, dtype=np.int64))
    with pytest.raises(RuntimeError, match="rebuilt from a model file to predict"):
        loaded.net_.optimizer_.step()
    assert loaded.transform(X[:2]).shape[0] == 2


def test_the_checked_tensors_do_not_change_with_the_file(fitted_models, tmp_path):
    # Older safetensors map the file's tensors into memory: the tensors load
    # checks against the document must not change if the file is rewritten in
    # place afterwards (save itself replaces the file instead).
    from sklearn_crocs._persistence._format import read_model_file

    path = tmp_path / "model.safetensors"
    fitted_models[0].save(path)
    _, tensors = read_model_file(path, "CROCSClusterer")
    expected = {name: tensor.clone() for name, tensor in tensors.items()}
    with safe_open(path, framework="pt") as fh:
        metadata = fh.metadata()
    save_file({n: torch.zeros_like(t) for n, t in tensors.items()}, path, metadata=metadata)
    for name, tensor in tensors.items():
        torch.testing.assert_close(tensor, expected[name], rtol=0, atol=0, equal_nan=True)


@pytest.mark.parametrize(
    "make_y",
    [
        lambda y: y["rhythm"].to_numpy(),  # 1-D strings
        lambda y: np.column_stack([y["rhythm"] == "SR", (y["sex"] == "M").astype(int)]),
        lambda y: y.astype({"age_group": pd.CategoricalDtype([">=60", "<60", "none"])}),
        lambda y: y.assign(sex=(y["sex"] == "M").astype(float)),  # a float column
    ],
    ids=["1d", "2d-numeric", "frame-categorical", "frame-float"],
)
def test_round_trip_keeps_attribute_layouts(data, tmp_path, make_y):
    X, y, _ = data
    target = make_y(y)
    model = CROCSClusterer(
        encoder="cnn",
        encoder_params=FAST_CNN, embedding_dim=8, max_epochs=2, validation_fraction=None,
        prototypes="mean", random_state=np.random.RandomState(5),
    ).fit(X[:, 0, :], target)  # fmt: skip
    model.save(tmp_path / "m.safetensors")
    _assert_same_model(CROCSClusterer.load(tmp_path / "m.safetensors"), model, X[:, 0, :], target)


def test_round_trip_with_dataframe_input(data, tmp_path):
    X, y, _ = data
    frame = pd.DataFrame(X[:, 0, :], columns=[f"t{i}" for i in range(X.shape[2])])
    model = CROCSClusterer(
        encoder="cnn",
        encoder_params=FAST_CNN, embedding_dim=8, max_epochs=2, validation_fraction=None,
        tau_w=float("inf"), random_state=0,
    ).fit(frame, y)  # fmt: skip
    model.save(tmp_path / "m.safetensors")
    loaded = CROCSClusterer.load(tmp_path / "m.safetensors")
    np.testing.assert_array_equal(loaded.feature_names_in_, model.feature_names_in_)
    _assert_same_model(loaded, model, frame, y)
    with pytest.warns(UserWarning, match="X does not have valid feature names"):
        loaded.transform(X[:, 0, :])


def test_callbacks_are_not_saved(data, tmp_path):
    X, y, _ = data
    model = CROCSClusterer(
        encoder="cnn",
        encoder_params=FAST_CNN, embedding_dim=8, max_epochs=2, validation_fraction=None,
        random_state=0, callbacks=[("lr", LRScheduler(policy="StepLR", step_size=1))],
    ).fit(X, y)  # fmt: skip
    model.save(tmp_path / "m.safetensors")
    loaded = CROCSClusterer.load(tmp_path / "m.safetensors")
    assert loaded.get_params() == {**model.get_params(), "callbacks": None}
    np.testing.assert_array_equal(loaded.transform(X), model.transform(X))
    assert loaded.net_.history.to_list() == model.net_.history.to_list()  # with event_lr
    PrototypeRetriever(model).fit(X).save(tmp_path / "r.safetensors")
    assert PrototypeRetriever.load(tmp_path / "r.safetensors").estimator.callbacks is None


def test_custom_encoder_class_must_be_passed(data, tmp_path):
    class TinyEncoder(nn.Module):
        def __init__(self, in_channels, n_timepoints, embedding_dim):
            super().__init__()
            self.linear = nn.Linear(in_channels * n_timepoints, embedding_dim)

        def forward(self, x):
            return self.linear(x.flatten(1))

    X, y, _ = data
    model = CROCSClusterer(
        encoder=TinyEncoder, embedding_dim=4, max_epochs=1, validation_fraction=None,
        random_state=0,
    ).fit(X, y)  # fmt: skip
    path = tmp_path / "m.safetensors"
    model.save(path)
    with pytest.raises(
        InvalidModelFileError, match=r"encoder class .*TinyEncoder; pass that class"
    ):
        CROCSClusterer.load(path)
    with pytest.raises(InvalidModelFileError, match="pass that class"):
        CROCSClusterer.load(path, encoder=CNNEncoder)
    np.testing.assert_array_equal(
        CROCSClusterer.load(path, encoder=TinyEncoder).transform(X), model.transform(X)
    )


def test_model_saved_for_a_gpu_loads_on_the_cpu(fitted_models, data, tmp_path, monkeypatch):
    # A model fitted with device="cuda" records that device; on a machine
    # without CUDA (simulated here) it loads on the CPU with a warning.
    X, y, _ = data
    model = pickle.loads(pickle.dumps(fitted_models[0])).set_params(device="cuda")
    path = tmp_path / "gpu.safetensors"
    model.save(path)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.warns(UserWarning, match=r"saved with device='cuda'.*loading it on the CPU"):
        loaded = CROCSClusterer.load(path)
    assert loaded.device == "cpu"
    assert {p.device.type for p in loaded.net_.module_.parameters()} == {"cpu"}
    np.testing.assert_array_equal(loaded.transform(X), fitted_models[0].transform(X))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert CROCSClusterer.load(path, device="cpu").device == "cpu"


# ------------------------------------------------------------------ retriever
@pytest.mark.parametrize("wrap", ["plain", "frozen", "frozen-pipeline"])
def test_retriever_round_trip(fitted_models, data, tmp_path, wrap):
    X, y, groups = data
    model = fitted_models[1]
    if wrap == "plain":
        estimator = model
    elif wrap == "frozen":
        estimator = FrozenEstimator(model)
    else:
        # any of normalize_frames' methods is saved and read back
        pipeline = make_pipeline(FrameNormalizer(method="zscore-joint"), clone(model)).fit(X, y)
        estimator = FrozenEstimator(pipeline)
    retriever = PrototypeRetriever(estimator, n_neighbors=4, prototypes="mean").fit(X[:30])
    queries = [
        ("query", None),
        ("query", {"rhythm": "SR", "sex": "F", "age_group": "<60"}),
        ("kneighbors", X[:3]),
    ]
    expected = [getattr(retriever, search)(q) for search, q in queries]

    retriever.save(tmp_path / "indexed.safetensors", include_embeddings=True)
    loaded = PrototypeRetriever.load(tmp_path / "indexed.safetensors")
    assert type(loaded.estimator) is type(estimator)
    assert loaded.prototypes == "mean"
    for (search, q), (distances, indices) in zip(queries, expected):
        got_distances, got_indices = getattr(loaded, search)(q)
        np.testing.assert_array_equal(got_indices, indices)
        np.testing.assert_array_equal(got_distances, distances)
    pd.testing.assert_frame_equal(loaded.query_attributes_, retriever.query_attributes_)

    # Without the embeddings the file holds no database information: the
    # loaded retriever indexes the database again.
    retriever.save(tmp_path / "model-only.safetensors")
    with safe_open(tmp_path / "model-only.safetensors", framework="pt") as fh:
        assert "embeddings" not in fh.keys()
    bare = PrototypeRetriever.load(tmp_path / "model-only.safetensors")
    with pytest.raises(Exception, match="not fitted"):
        bare.query()
    np.testing.assert_array_equal(bare.fit(X[:30]).query()[1], expected[0][1])


def test_retriever_longer_signals_round_trips_and_defaults_to_auto(
    fitted_models, data, tmp_path
):
    X, _, _ = data
    model = fitted_models[0]
    records = np.concatenate([X[0::2], X[1::2]], axis=-1)[:10]  # twice the frames' length
    strict = PrototypeRetriever(model, n_neighbors=3, longer_signals="error").fit(X)
    path = tmp_path / "strict.safetensors"
    strict.save(path, include_embeddings=True)
    loaded = PrototypeRetriever.load(path)
    assert loaded.longer_signals == "error"
    with pytest.raises(ValueError, match='longer_signals="average"'):
        loaded.kneighbors(records[:1])
    # A file written before the parameter: the documented default, "auto".
    with safe_open(path, framework="pt") as fh:
        params = json.loads(fh.metadata()["sklearn_crocs"])["params"]
    del params["longer_signals"]
    _rewrite(path, document={"params": params})
    old = PrototypeRetriever.load(path)
    assert old.longer_signals == "auto"
    expected = PrototypeRetriever(model, n_neighbors=3).fit(X).kneighbors(X[:2])
    for got, want in zip(old.kneighbors(X[:2]), expected):
        np.testing.assert_array_equal(got, want)


def test_loaded_model_works_in_a_retriever(fitted_models, data, tmp_path):
    X, _, _ = data
    fitted_models[0].save(tmp_path / "m.safetensors")
    loaded = CROCSClusterer.load(tmp_path / "m.safetensors")
    expected = PrototypeRetriever(fitted_models[0], n_neighbors=3).fit(X).query()
    got = PrototypeRetriever(FrozenEstimator(loaded), n_neighbors=3).fit(X).query()
    np.testing.assert_array_equal(got[1], expected[1])


# ------------------------------------------------------- pickle and the safe path
_CALLS = []


def _record_call(message):
    _CALLS.append(message)


class _Payload:
    """An object whose unpickling calls a function: a stand-in for a shell command."""

    def __reduce__(self):
        return (_record_call, ("ran on load",))


def test_pickle_runs_code_on_load_the_model_file_cannot(fitted_models, tmp_path):
    # Reproduction 2: an object planted in net_.history runs code on
    # joblib.load, and the model still works. The safe format refuses to save
    # it and never unpickles, imports or calls anything named in a file.
    model = pickle.loads(pickle.dumps(fitted_models[0]))
    model.net_.history.record("note", _Payload())
    _CALLS.clear()
    loaded = joblib.load(io.BytesIO(_dumps(model)))
    assert _CALLS == ["ran on load"]
    assert loaded.predict(np.zeros((2, *model.input_shape_))).shape == (2, 3)
    with pytest.raises(TypeError, match="cannot store a _Payload"):
        model.save(tmp_path / "m.safetensors")
    assert not (tmp_path / "m.safetensors").exists()

    # A document that names a class: the class is not imported.
    fitted_models[0].save(tmp_path / "m.safetensors")
    _rewrite(tmp_path / "m.safetensors", document={"encoder": {"class": "evil_module.Encoder"}})
    with pytest.raises(InvalidModelFileError, match="encoder class evil_module.Encoder"):
        CROCSClusterer.load(tmp_path / "m.safetensors")
    assert "evil_module" not in sys.modules


# ------------------------------------------------------------- damaged files
def _rewrite(path, *, document=None, header=None, tensors=None, drop=()):
    """Rewrite a model file with changed document fields and tensors."""
    with safe_open(path, framework="pt") as fh:
        meta = json.loads(fh.metadata()["sklearn_crocs"])
        stored = {name: fh.get_tensor(name).clone() for name in fh.keys()}
    meta.update(header or {})
    meta.update(document or {})
    stored.update(tensors or {})
    for name in drop:
        stored.pop(name)
    text = json.dumps(meta)  # altered deliberately: with a matching document hash
    digest = hashlib.sha256(text.encode()).hexdigest()
    save_file(stored, path, metadata={"sklearn_crocs": text, "sklearn_crocs_sha256": digest})


@pytest.fixture
def saved(fitted_models, tmp_path):
    path = tmp_path / "model.safetensors"
    fitted_models[0].save(path)
    return path


@pytest.mark.bad_input("Model file", "written in another format version", "InvalidModelFileError")
@pytest.mark.parametrize("version", [FORMAT_VERSION + 1, 0, "1", None])
def test_incompatible_format_version(saved, version):
    _rewrite(saved, header={"format_version": version})
    with pytest.raises(InvalidModelFileError, match=r"format version .* reads format version 1"):
        CROCSClusterer.load(saved)


@pytest.mark.bad_input("Model file", "truncated", "InvalidModelFileError")
@pytest.mark.parametrize("keep", [0, 7, 100, 0.5, -1])
def test_truncated_file(saved, keep):
    data = saved.read_bytes()
    n = int(len(data) * keep) if isinstance(keep, float) else keep % len(data)
    saved.write_bytes(data[:n])
    with pytest.raises(InvalidModelFileError, match="not a complete safetensors file"):
        CROCSClusterer.load(saved)


@pytest.mark.bad_input("Model file", "tensor bytes changed", "InvalidModelFileError")
@pytest.mark.parametrize("offset", [-1, -1000, -5000])
def test_flipped_tensor_bytes(saved, offset):
    data = bytearray(saved.read_bytes())
    data[offset] ^= 0x01
    saved.write_bytes(bytes(data))
    with pytest.raises(InvalidModelFileError, match="sha256 .* but the model document says"):
        CROCSClusterer.load(saved)


@pytest.mark.bad_input("Model file", "document bytes changed", "InvalidModelFileError")
@pytest.mark.parametrize(
    ("old", "new"), [(b'tau_s\\": 0.1', b'tau_s\\": 0.3'), (b'verbose\\": 0', b'verbose\\": 1')]
)
def test_changed_document_bytes(saved, old, new):
    data = saved.read_bytes()
    assert data.count(old) == 1
    saved.write_bytes(data.replace(old, new))
    with pytest.raises(InvalidModelFileError, match="does not match its SHA-256"):
        CROCSClusterer.load(saved)


@pytest.mark.bad_input(
    "Model file", "tensors that do not match the document", "InvalidModelFileError"
)
@pytest.mark.parametrize(
    ("change", "match"),
    [
        ({"drop": ["labels"]}, r"missing \['labels'\]"),
        ({"tensors": {"extra": torch.zeros(2)}}, r"unexpected \['extra'\]"),
        ({"tensors": {"labels": torch.zeros(3, dtype=torch.int64)}}, "tensor 'labels' has shape"),
        ({"tensors": {"prototype_counts": torch.zeros(12)}}, "tensor 'prototype_counts' has dtype"),
    ],
    ids=["missing", "unexpected", "shape", "dtype"],
)
def test_tensors_not_matching_the_manifest(saved, change, match):
    _rewrite(saved, **change)
    with pytest.raises(InvalidModelFileError, match=match):
        CROCSClusterer.load(saved)


@pytest.mark.bad_input(
    "Model file", "document inconsistent with its tensors", "InvalidModelFileError"
)
@pytest.mark.parametrize(
    "document",
    [
        {"params": {"embedding_dim": 9}},
        {"params": {"tau_s": -1.0}},
        {"params": {"no_such_parameter": 1}},
        {"categories": [{"dtype": "object", "values": ["A"]}]},
        {"input_shape": [1, 7]},
        {"y_kind": "bogus"},
        {"history": "not a list"},
        {"encoder": "transformer"},
        {"params": [1, 2]},
        {"tensors": {"labels": 5}},
        {"params": {"ensemble_size": 3}},
        {"ensemble_histories": [[], []]},
        {"ensemble_histories": "not a list"},
    ],
    ids=["embedding-dim", "invalid-param", "unknown-param", "categories", "input-shape",
         "y-kind", "history", "encoder", "params-list", "manifest-entry", "ensemble-size",
         "ensemble-histories", "ensemble-histories-type"],
)  # fmt: skip
def test_document_not_matching_the_tensors(saved, document):
    with safe_open(saved, framework="pt") as fh:
        meta = json.loads(fh.metadata()["sklearn_crocs"])
    for key, value in document.items():
        if key == "params" and isinstance(value, dict):
            params = meta["params"]
            params.update(value)
            value = params
        meta[key] = value
    _rewrite(saved, document=meta)
    with pytest.raises(
        InvalidModelFileError,
        match="do not describe a valid CROCSClusterer|no valid tensor manifest",
    ):
        CROCSClusterer.load(saved)


# Every option that changes what a model file holds, through every kind of file.
OPTIONS = {
    "ensemble": {"ensemble_size": 2},
    # Whole-signal views: the CNN takes one length only.
    "pretrained": {"pretrained": ContrastivePretrainer(
        method="augment", crop=1.0, max_epochs=1, random_state=0
    )},
    "sampling-rate": {"sampling_rate": 100.0},
    "working-rate": {"sampling_rate": 200.0, "working_rate": 100.0},
    "encoder-rate": {"sampling_rate": 100.0, "working_rate": None},
    "conditioning": {"sampling_rate": 100.0, "conditioning": SignalConditioner()},
    "ensemble-conditioning": {
        "ensemble_size": 2, "sampling_rate": 100.0, "conditioning": SignalConditioner()
    },
}  # fmt: skip


@pytest.mark.parametrize("kind", ["estimator", "retriever", "indexed-retriever"])
@pytest.mark.parametrize("option", list(OPTIONS))
def test_every_option_round_trips_through_every_file_kind(data, tmp_path, option, kind):
    X, y, groups = data
    model = clone(CONFIGS[0]).set_params(**OPTIONS[option]).fit(X, y, groups=groups)
    model.set_params(pretrained=None)  # not stored: a loaded model has None
    path = tmp_path / "model.safetensors"
    if kind == "estimator":
        model.save(path)
        _assert_same_model(CROCSClusterer.load(path), model, X, y)
        return
    retriever = PrototypeRetriever(model).fit(X)
    retriever.save(path, include_embeddings=kind == "indexed-retriever")
    loaded = PrototypeRetriever.load(path)
    if kind == "retriever":  # the database is not in the file: index it again
        loaded.fit(X)
    _assert_same_model(loaded.estimator_, model, X, y)
    for got, expected in zip(loaded.kneighbors(X[:5], 3), retriever.kneighbors(X[:5], 3)):
        np.testing.assert_array_equal(got, expected)


def test_an_ensemble_round_trips(data, tmp_path):
    X, y, groups = data
    model = clone(CONFIGS[0]).set_params(ensemble_size=2).fit(X, y, groups=groups)
    model.save(tmp_path / "ensemble.safetensors")
    loaded = CROCSClusterer.load(tmp_path / "ensemble.safetensors")
    _assert_same_model(loaded, model, X, y)
    assert [net.history.to_list() for net in loaded.nets_] == [
        net.history.to_list() for net in model.nets_
    ]
    # The second net's tensors are needed: without them the file is refused.
    names = [n for n in safe_open(tmp_path / "ensemble.safetensors", "pt").keys()
             if n.startswith("ensemble.1.")]  # fmt: skip
    assert "ensemble.1.criterion.prototypes" in names
    _rewrite(tmp_path / "ensemble.safetensors", drop=names)
    with pytest.raises(InvalidModelFileError):
        CROCSClusterer.load(tmp_path / "ensemble.safetensors")
    # A retriever over it, with its database (two nets' embeddings side by side).
    retriever = PrototypeRetriever(FrozenEstimator(model)).fit(X)
    retriever.save(tmp_path / "indexed.safetensors", include_embeddings=True)
    reloaded = PrototypeRetriever.load(tmp_path / "indexed.safetensors")
    np.testing.assert_array_equal(reloaded.embeddings_, retriever.embeddings_)
    assert reloaded.embeddings_.shape[1] == 2 * model.embedding_dim


@pytest.mark.bad_input("Model file", "not a model file", "InvalidModelFileError")
@pytest.mark.parametrize("content", ["pickle", "plain-safetensors", "json-garbage", "retriever"])
def test_not_a_model_file(fitted_models, data, tmp_path, content):
    path = tmp_path / "file"
    if content == "pickle":
        joblib.dump(fitted_models[0], path)
        match = "not a complete safetensors file"
    elif content == "plain-safetensors":
        save_file({"w": torch.zeros(2)}, path)
        match = "not an sklearn-crocs model"
    elif content == "json-garbage":
        digest = hashlib.sha256(b"{not json").hexdigest()
        metadata = {"sklearn_crocs": "{not json", "sklearn_crocs_sha256": digest}
        save_file({"w": torch.zeros(2)}, path, metadata=metadata)
        match = "not valid JSON"
    else:
        PrototypeRetriever(fitted_models[0]).fit(data[0]).save(path)
        match = "holds a PrototypeRetriever, not a CROCSClusterer"
    with pytest.raises(InvalidModelFileError, match=match):
        CROCSClusterer.load(path)


def test_save_refuses_unfitted_and_load_a_missing_file(tmp_path):
    with pytest.raises(Exception, match="not fitted"):
        CROCSClusterer().save(tmp_path / "m.safetensors")
    with pytest.raises(Exception, match="not fitted"):
        PrototypeRetriever(CROCSClusterer()).save(tmp_path / "m.safetensors")
    with pytest.raises(FileNotFoundError, match="No model file"):
        CROCSClusterer.load(tmp_path / "missing.safetensors")


_FUZZ_CASES = []


@pytest.mark.bad_input(
    "Model file (fuzz)", "random byte flips and truncations", "InvalidModelFileError"
)
def test_fuzz_model_file(fitted_models, tmp_path, record_property):
    # Every changed byte is in the length prefix, the header (JSON with its
    # own SHA-256, or padding) or a tensor (with its SHA-256): none loads.
    path = tmp_path / "model.safetensors"
    fitted_models[0].save(path)
    original = path.read_bytes()

    @settings(max_examples=200, deadline=timedelta(seconds=10), derandomize=True, database=None)
    @given(
        flips=st.lists(
            st.tuples(st.integers(0, 2**31), st.integers(1, 255)), min_size=1, max_size=3
        ),
        cut=st.one_of(st.none(), st.integers(0, 2**31)),
    )
    def check(flips, cut):
        data = bytearray(original)
        for position, mask in flips:
            data[position % len(data)] ^= mask
        if cut is not None:
            data = data[: cut % len(data)]
        assume(bytes(data) != original)  # flips of one byte can cancel out
        path.write_bytes(bytes(data))
        with pytest.raises(InvalidModelFileError):
            CROCSClusterer.load(path)
        _FUZZ_CASES.append(1)

    _FUZZ_CASES.clear()
    check()
    record_property("bad_input_cases", len(_FUZZ_CASES))


# ------------------------------------------------------------ sampling rates
def test_a_saved_model_keeps_its_rate_and_conditioning(tmp_path):
    from test_clusterer import _model, _sines

    from sklearn_crocs.preprocessing import SignalConditioner, resample_signals

    X, y = _sines(500)
    model = _model(
        encoder="resnet", sampling_rate=500, conditioning=SignalConditioner(notch=50)
    ).fit(X, y)
    path = tmp_path / "model.safetensors"
    model.save(path)
    loaded = CROCSClusterer.load(path)
    assert loaded.sampling_rate_ == 100.0 and loaded.sampling_rate == 500
    assert loaded.signal_scale_ == pytest.approx(model.signal_scale_)
    assert loaded.conditioning.get_params() == SignalConditioner(notch=50).get_params()
    np.testing.assert_array_equal(loaded.transform(X), model.transform(X))
    # Queried at another rate, the loaded model behaves as the saved one.
    X_250 = resample_signals(X, 500, 250)
    np.testing.assert_array_equal(
        loaded.predict(X_250, sampling_rate=250), model.predict(X_250, sampling_rate=250)
    )
    with pytest.raises(
        ValueError,
        match=r"1 s at 500 Hz, but CROCSClusterer was fitted on "
        r"frames of 5 s \(500 samples at 100 Hz\)",
    ):
        loaded.predict(X[..., :500])


@pytest.mark.parametrize("augment", ["window", "auto", None])
def test_a_saved_model_keeps_its_augmentation(tmp_path, augment):
    from test_clusterer import _model, _sines

    from sklearn_crocs.nn import RandomWindow

    X, y = _sines(100)
    window = RandomWindow(crop=0.5, amplitude_jitter=0.2)
    model = _model(
        encoder="resnet",
        encoder_params={"channels": (4, 8)},
        max_epochs=1,
        augment=window if augment == "window" else augment,
    ).fit(X, y)
    path = tmp_path / "model.safetensors"
    model.save(path)
    with safe_open(path, "pt") as f:
        saved = json.loads(f.metadata()["sklearn_crocs"])["params"]["augment"]
    loaded = CROCSClusterer.load(path)
    if augment == "window":
        assert saved == {"RandomWindow": {"dict": {"crop": 0.5, "amplitude_jitter": 0.2}}}
        assert isinstance(loaded.augment, RandomWindow)
        assert repr(loaded.augment) == repr(window)
    else:
        assert saved == loaded.augment == augment
    np.testing.assert_array_equal(loaded.transform(X), model.transform(X))


@pytest.mark.bad_input(
    "Model file", "a negative or non-numeric sampling rate", "InvalidModelFileError"
)
def test_a_file_with_a_bad_rate_is_refused(tmp_path):
    from test_clusterer import _model, _sines

    X, y = _sines(500)
    model = _model(encoder="resnet", max_epochs=1, sampling_rate=500).fit(X, y)
    path = tmp_path / "model.safetensors"
    model.save(path)
    with safe_open(path, framework="pt") as fh:
        metadata = fh.metadata()
        tensors = {name: fh.get_tensor(name).clone() for name in fh.keys()}
    document = json.loads(metadata["sklearn_crocs"])
    for bad in (-100, 0, "100", float("nan"), float("inf")):
        document["sampling_rate"] = bad
        text = json.dumps(document)
        metadata = {
            "sklearn_crocs": text,
            "sklearn_crocs_sha256": hashlib.sha256(text.encode()).hexdigest(),
        }
        save_file(tensors, path, metadata=metadata)
        with pytest.raises(
            InvalidModelFileError, match=r"'sampling_rate' is not null or a finite number > 0"
        ):
            CROCSClusterer.load(path)
