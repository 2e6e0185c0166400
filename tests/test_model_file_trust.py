"""Model files describe and never direct: no path, no size, no dtype from a file is trusted.

Every crafted file here is built in the test from a genuine one, with the
document's SHA-256 recomputed (as anyone who edits a file can), and must be
refused before it allocates or opens anything it names.
"""

import hashlib
import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import make_synthetic_ecgs
from safetensors import safe_open
from safetensors.torch import save_file
from sklearn.frozen import FrozenEstimator
from test_common import FAST_CNN

from sklearn_crocs import CROCSClusterer, InvalidModelFileError, PrototypeRetriever
from sklearn_crocs._persistence._format import _digest
from sklearn_crocs.nn import CNNEncoder

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def data():
    X, y, groups = make_synthetic_ecgs(n_patients=12, frames_per_patient=2, length=200, seed=1)
    return X, y, groups


@pytest.fixture(scope="module")
def model(data):
    X, y, _ = data
    return CROCSClusterer(
        encoder="cnn",
        encoder_params=FAST_CNN, embedding_dim=8, max_epochs=2, validation_fraction=None,
        random_state=0,
    ).fit(X, y)  # fmt: skip


def _forge(path, *, document=None, tensors=None, manifest=True):
    """Rewrite a model file as an attacker can: the tensor manifest and the
    document's SHA-256 recomputed, so that only the checks of content remain."""
    with safe_open(path, framework="pt") as fh:
        meta = json.loads(fh.metadata()["sklearn_crocs"])
        stored = {name: fh.get_tensor(name).clone() for name in fh.keys()}
    meta.update(document or {})
    stored.update(tensors or {})
    if manifest:
        meta["tensors"] = {
            name: {
                "dtype": str(t.dtype).removeprefix("torch."),
                "shape": list(t.shape),
                "sha256": _digest(t),
            }
            for name, t in stored.items()
        }
    text = json.dumps(meta)
    digest = hashlib.sha256(text.encode()).hexdigest()
    save_file(stored, path, metadata={"sklearn_crocs": text, "sklearn_crocs_sha256": digest})


def _document(path):
    with safe_open(path, framework="pt") as fh:
        return json.loads(fh.metadata()["sklearn_crocs"])


def _tensor(path, name):
    with safe_open(path, framework="pt") as fh:
        return fh.get_tensor(name).clone()


# ---------------------------------------------- finding 1: no path from a file
@pytest.mark.bad_input(
    "Model file", "a path (embeddings_path) set by an edited file", "InvalidModelFileError"
)
def test_model_file_cannot_make_fit_write(model, data, tmp_path):
    X, _, _ = data
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    own = tmp_path / "own.npy"
    retriever = PrototypeRetriever(model, embeddings_path=own).fit(X)
    path = tmp_path / "retriever.safetensors"
    retriever.save(path)
    # A genuine file carries no path to the machines it is sent to.
    assert "embeddings_path" not in _document(path)["params"]
    assert PrototypeRetriever.load(path).embeddings_path is None
    # An edited file that names one is refused; nothing is written there.
    params = {**_document(path)["params"], "embeddings_path": os.fspath(victim)}
    _forge(path, document={"params": params})
    with pytest.raises(InvalidModelFileError, match="'embeddings_path', which a model file never"):
        PrototypeRetriever.load(path).fit(X)
    assert victim.read_text() == "precious"


# -------------------------------- finding 3: sizes, dtypes and values from a file
def _edit_params(path, **changes):
    params = _document(path)["params"]
    params.update(changes)
    _forge(path, document={"params": params})


def _craft(path, case):
    """Turn the genuine model file ``path`` into the crafted file ``case``."""
    document = _document(path)
    if case == "wide-string-categories":
        categories = document["categories"]
        categories[0]["dtype"] = "<U100000000"  # 3 values x 400 MB
        _forge(path, document={"categories": categories})
    elif case == "categories-2d":
        categories = document["categories"]
        categories[0]["values"] = [["AFIB", "SB"], ["SR", "X"]]
        _forge(path, document={"categories": categories})
    elif case == "void-dtype-categories":
        categories = document["categories"]
        categories[0]["dtype"] = "V100000000"
        _forge(path, document={"categories": categories})
    elif case == "timezone-dtype":
        dtypes = document["attribute_dtypes"]
        dtypes[1] = {"name": f"datetime64[ns, dateutil/{path.parent / 'zoneinfo-probe'}]"}
        _forge(path, document={"attribute_dtypes": dtypes})
    elif case == "extension-dtype":
        dtypes = document["attribute_dtypes"]
        dtypes[1] = {"name": "period[D]"}
        _forge(path, document={"attribute_dtypes": dtypes})
    elif case == "huge-encoder-channels":
        encoder_params = {"dict": {**document["params"]["encoder_params"]["dict"]}}
        encoder_params["dict"]["channels"] = {"tuple": [10350, 10350]}
        _edit_params(path, encoder_params=encoder_params)
    elif case == "long-input-shape":
        # The CNN's linear layer grows with the input: about 1.3 GB of weights.
        _forge(path, document={"input_shape": [1, 10_000_000], "n_features_in": 10_000_000})
    elif case == "input-shape-420-million":
        _forge(path, document={"input_shape": [1, 420_000_000], "n_features_in": 420_000_000})
    elif case == "input-shape-beyond-limits":
        _forge(path, document={"input_shape": [10**6, 10**9], "n_features_in": 10**15})
    elif case == "many-combinations":
        categories = document["categories"]
        categories[0] = {"dtype": "<i8", "values": list(range(100_000))}
        _forge(path, document={"categories": categories})
    elif case == "nan-prototypes":
        prototypes = _tensor(path, "learned_prototypes").clone()
        prototypes[0, 0] = float("nan")
        _forge(path, tensors={"learned_prototypes": prototypes})
    elif case == "nan-mean-prototype":
        means = _tensor(path, "mean_prototypes").clone()
        counts = _tensor(path, "prototype_counts")
        means[int(counts.argmax()), 0] = float("nan")
        _forge(path, tensors={"mean_prototypes": means})
    elif case == "inf-weights":
        name = next(k for k in _document(path)["tensors"] if k.startswith("encoder."))
        weights = _tensor(path, name).clone()
        weights.view(-1)[0] = float("inf")
        _forge(path, tensors={name: weights})
    elif case == "manifest-shape-negative":
        manifest = document["tensors"]
        manifest["labels"]["shape"] = [-1]
        _forge(path, document={"tensors": manifest}, manifest=False)
    elif case == "manifest-unknown-dtype":
        manifest = document["tensors"]
        manifest["labels"]["dtype"] = "complex128"
        _forge(path, document={"tensors": manifest}, manifest=False)
    elif case == "history-not-epochs":
        _forge(path, document={"history": [1, 2, 3]})
    elif case == "class-index-bool":
        _forge(path, document={"class_index": True})
    else:
        raise AssertionError(case)


# Each crafted file, and what its refusal must name.
CRAFTED = {
    "wide-string-categories": "wider than their longest value",
    "categories-2d": "not a list of numbers, strings and booleans",
    "void-dtype-categories": "dtype 'V100000000', which a model file cannot use",
    "timezone-dtype": "a model file may name only",
    "extension-dtype": "a model file may name only",
    "huge-encoder-channels": "parameters build",
    "long-input-shape": "'input_shape' is not",
    "input-shape-420-million": "'input_shape' is not",
    "input-shape-beyond-limits": "'input_shape' is not",
    "many-combinations": "400000 attribute combinations",
    "nan-prototypes": "'learned_prototypes' holds NaN",
    "nan-mean-prototype": "'mean_prototypes' holds NaN or infinite values for attribute",
    "inf-weights": "holds NaN or infinite values",
    "manifest-shape-negative": "no valid tensor manifest",
    "manifest-unknown-dtype": "no valid tensor manifest",
    "history-not-epochs": "'history' is not a list of epochs",
    "class-index-bool": "'class_index' is not",
}


@pytest.mark.bad_input(
    "Model file",
    "declared size, dtype or value not borne out by the tensors",
    "InvalidModelFileError",
)
@pytest.mark.parametrize("case", list(CRAFTED))
def test_crafted_file_is_refused(model, tmp_path, case):
    path = tmp_path / "model.safetensors"
    model.save(path)
    _craft(path, case)
    opened = []

    def audit(event, args):
        if event == "open" and "zoneinfo-probe" in str(args[0]):
            opened.append(args[0])

    sys.addaudithook(audit)  # hooks cannot be removed; this one only records the probe
    with pytest.raises(InvalidModelFileError, match=CRAFTED[case]):
        CROCSClusterer.load(path)
    assert opened == []  # no file named by the document is opened


@pytest.mark.bad_input("Model file", "NaN database embeddings", "InvalidModelFileError")
def test_nan_embeddings_are_refused(model, data, tmp_path):
    X, _, _ = data
    path = tmp_path / "retriever.safetensors"
    PrototypeRetriever(FrozenEstimator(model), n_neighbors=2).fit(X).save(
        path, include_embeddings=True
    )
    embeddings = _tensor(path, "embeddings").clone()
    embeddings[3] = float("nan")
    _forge(path, tensors={"embeddings": embeddings})
    with pytest.raises(InvalidModelFileError, match="'embeddings' holds NaN"):
        PrototypeRetriever.load(path)


_PEAK_SCRIPT = textwrap.dedent(
    """
    import resource, sys, warnings
    import torch
    from sklearn_crocs import CROCSClusterer, InvalidModelFileError

    torch.set_num_threads(1)
    genuine, crafted = sys.argv[1], sys.argv[2:]
    CROCSClusterer.load(genuine)  # every code path warmed up
    baseline = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    for path in crafted:
        try:
            CROCSClusterer.load(path)
            outcome = "loaded"
        except InvalidModelFileError:
            outcome = "refused"
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - baseline
        print(path, outcome, peak)
    """
)


def test_crafted_files_allocate_nothing_they_declare(model, tmp_path, record_property):
    # Peak resident memory (ru_maxrss, KiB on Linux) of loading every crafted
    # file in one fresh process, above that of loading a genuine file.
    resource = pytest.importorskip("resource")
    del resource
    genuine = tmp_path / "genuine.safetensors"
    model.save(genuine)
    paths = []
    for case in CRAFTED:
        path = tmp_path / f"{case}.safetensors"
        model.save(path)
        _craft(path, case)
        paths.append(os.fspath(path))
    files_before = {p: p.stat().st_mtime_ns for p in tmp_path.rglob("*")}
    result = subprocess.run(
        [sys.executable, "-c", _PEAK_SCRIPT, os.fspath(genuine), *paths],
        capture_output=True, text=True, timeout=600, cwd=ROOT,
        env={**os.environ, "PYTHONPATH": os.fspath(ROOT)},
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    lines = [line.rsplit(" ", 2) for line in result.stdout.strip().splitlines()]
    peak_kib = max(int(peak) for _, _, peak in lines)
    record_property("peak_kib", peak_kib)
    print(f"peak memory above a genuine load: {peak_kib / 1024:.1f} MiB")
    assert [outcome for _, outcome, _ in lines] == ["refused"] * len(CRAFTED), result.stdout
    # Loading wrote nothing: no file created or changed next to the files.
    assert {p: p.stat().st_mtime_ns for p in tmp_path.rglob("*")} == files_before
    assert peak_kib < 64 * 1024, result.stdout  # 64 MiB


# --------------------------------------------------- the caller's hash (pip-style)
@pytest.mark.bad_input(
    "Load", "edited file (document hash recomputed) against sha256=", "InvalidModelFileError"
)
def test_expected_sha256_authenticates_the_file(model, tmp_path):
    import hashlib

    path = tmp_path / "model.safetensors"
    model.save(path)
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    assert CROCSClusterer.load(path, sha256=digest.upper()).labels_.tolist() == (
        model.labels_.tolist()
    )
    # An edit with the document's own hash recomputed passes that check ...
    _forge(path, document={"history": []})
    CROCSClusterer.load(path)
    # ... but not the hash published with the genuine file.
    with pytest.raises(InvalidModelFileError, match="not the expected sha256="):
        CROCSClusterer.load(path, sha256=digest)
    with pytest.raises(ValueError, match="64 hexadecimal digits"):
        CROCSClusterer.load(path, sha256="abc")


# ------------------------------------ finding 5: the caller's errors are told apart
@pytest.mark.bad_input("Load", "device= that torch cannot use here", "ValueError")
@pytest.mark.parametrize("device", ["cuda", "cuda:7", "gpu", "mps"])
def test_load_device_argument_is_a_clear_error(model, tmp_path, monkeypatch, device):
    path = tmp_path / "model.safetensors"
    model.save(path)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: False)
    for load in (CROCSClusterer.load, PrototypeRetriever.load):
        with pytest.raises(ValueError, match=r"load\(device=.*Pass device='cpu'") as info:
            load(path, device=device)
        assert not isinstance(info.value, InvalidModelFileError)


@pytest.mark.bad_input("Load", "encoder= for a model with a built-in encoder", "ValueError")
@pytest.mark.parametrize("encoder", [CNNEncoder, "cnn"])
def test_load_encoder_argument_is_not_an_altered_file(model, tmp_path, encoder):
    path = tmp_path / "model.safetensors"
    model.save(path)
    with pytest.raises((ValueError, TypeError), match="encoder") as info:
        CROCSClusterer.load(path, encoder=encoder)
    assert not isinstance(info.value, InvalidModelFileError)
    assert "altered" not in str(info.value)


# ------------------------------------------- finding 4: saves, repeated and interrupted
@pytest.mark.bad_input("Save", "path of a file that is not a model", "FileExistsError")
@pytest.mark.parametrize("kind", ["clusterer", "retriever"])
def test_save_refuses_to_replace_another_file(model, data, tmp_path, kind):
    X, _, _ = data
    estimator = model if kind == "clusterer" else PrototypeRetriever(model).fit(X)
    results = tmp_path / "results.csv"
    results.write_text("a,b\n1,2\n")
    with pytest.raises(FileExistsError, match="overwrite=True"):
        estimator.save(results)
    assert results.read_text() == "a,b\n1,2\n"
    # A model file of this package is replaced, as saving again should.
    path = tmp_path / "model.safetensors"
    estimator.save(path)
    estimator.save(path)
    estimator.save(results, overwrite=True)
    type(estimator).load(results)


@pytest.mark.bad_input(
    "Save", "refit interrupted while writing embeddings_path", "(previous file kept)"
)
def test_interrupted_embedding_keeps_the_previous_file(model, data, tmp_path, monkeypatch):
    X, _, _ = data
    path = tmp_path / "embeddings.npy"
    retriever = PrototypeRetriever(model, batch_size=5, embeddings_path=path).fit(X)
    before = path.read_bytes()
    calls = []

    def failing_transform(self, rows):
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return np.zeros((len(rows), 8), dtype=np.float32)

    monkeypatch.setattr(CROCSClusterer, "transform", failing_transform)
    with pytest.raises(KeyboardInterrupt):
        retriever.fit(X)
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["embeddings.npy"]


_KILLED_SAVE = textwrap.dedent(
    """
    import os, signal, sys
    from sklearn_crocs import CROCSClusterer
    from sklearn_crocs._persistence import _format as _persistence

    original = _persistence.save_file

    def save_then_die(tensors, path, metadata):
        original(tensors, path, metadata=metadata)
        os.kill(os.getpid(), signal.SIGKILL)  # as a kill -9 before the rename

    _persistence.save_file = save_then_die
    CROCSClusterer.load(sys.argv[1]).save(sys.argv[1])
    """
)


@pytest.mark.bad_input("Save", "save killed before its rename", "(copy removed by the next save)")
def test_killed_save_leaves_no_copy_behind(model, tmp_path):
    path = tmp_path / "model.safetensors"
    model.save(path)
    result = subprocess.run(
        [sys.executable, "-c", _KILLED_SAVE, os.fspath(path)],
        capture_output=True, timeout=300, cwd=ROOT,
        env={**os.environ, "PYTHONPATH": os.fspath(ROOT)},
    )  # fmt: skip
    assert result.returncode == -signal.SIGKILL, result.stderr
    stale = [p for p in tmp_path.iterdir() if p != path]
    assert len(stale) == 1  # the killed process's copy of the model
    # The next save of that path recognises the copy as stale and removes it;
    # loading ignores it.
    CROCSClusterer.load(path)
    model.save(path)
    assert list(tmp_path.iterdir()) == [path]


def test_only_this_machines_dead_writers_temporaries_are_removed(tmp_path):
    from sklearn_crocs._utils import _HOST, _atomic_path

    finished = subprocess.Popen([sys.executable, "-c", "pass"])
    finished.wait()  # its pid names no running process (unless reused at once)
    path = tmp_path / "model.safetensors"
    hexes = iter(f"{i:032x}" for i in range(10))
    stale = tmp_path / f".{path.name}.{_HOST}-{finished.pid}-{next(hexes)}.tmp"
    kept = [
        tmp_path / f".{path.name}.{_HOST}-{os.getpid()}-{next(hexes)}.tmp",  # a live writer
        tmp_path / f".{path.name}.{'0' * 8 if _HOST != '0' * 8 else '1' * 8}-{finished.pid}-"
        f"{next(hexes)}.tmp",  # another machine's, on a shared folder
        tmp_path / f".other.safetensors.{_HOST}-{finished.pid}-{next(hexes)}.tmp",  # another path
    ]
    for temporary in [stale, *kept]:
        temporary.write_bytes(b"partial copy")
    with _atomic_path(path) as tmp:
        tmp.write_bytes(b"model")
    assert sorted(tmp_path.iterdir()) == sorted([path, *kept])
