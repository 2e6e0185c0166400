"""Every warning of the package goes through ``_utils._warn`` and points at the caller's line.

``TRIGGERS`` calls the public API so that each call of ``_warn`` in the
package fires; the test checks that every call site fired (the list of
sites is read from the source, so a new warning without a trigger fails)
and that each warning's file and line are those of the trigger below.
"""

import ast
import contextlib
import os
import sys
import warnings
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

import sklearn_crocs
from sklearn_crocs import CROCSClusterer, PrototypeRetriever
from sklearn_crocs._utils import _warn
from sklearn_crocs.datasets import load_chapman, load_wfdb
from sklearn_crocs.metrics import precision_at_k
from sklearn_crocs.preprocessing import AgeGroupEncoder, SignalConditioner, make_frames

PACKAGE = Path(sklearn_crocs.__file__).parent
FAST = {"embedding_dim": 8, "max_epochs": 1, "random_state": 0}


def warn_calls():
    """``{(module path, first line, last line)}`` of every call of ``_warn`` in the package."""
    calls = set()
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "_warn":
                calls.add((str(path.relative_to(PACKAGE)), node.lineno, node.end_lineno))
    return calls


def test_no_warning_bypasses_the_helper():
    direct = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (
                isinstance(node, ast.Call)
                and getattr(node.func, "attr", None) == "warn"
                and getattr(node.func.value, "id", None) == "warnings"
                and path.name != "_utils.py"  # _warn's own call
            ):
                direct.append(f"{path.relative_to(PACKAGE)}:{node.lineno}")
    assert direct == []
    assert len(warn_calls()) >= 16  # guards the parsing: today's number of sites


# One line each: the line a warning must point at. ``c`` holds the data.
TRIGGERS = [
    lambda c: CROCSClusterer(**FAST, validation_fraction=0.25).fit(c.X, c.y),
    lambda c: CROCSClusterer(**FAST).fit(c.X, c.many_classes),
    lambda c: CROCSClusterer(**FAST, prototypes="mean").fit(c.X, c.one_missing),
    lambda c: CROCSClusterer(**FAST).fit(c.X, c.numeric),
    lambda c: CROCSClusterer(**FAST, tau_s=1e-30).fit(c.X, c.y),
    lambda c: c.model.transform(c.X * 1000),
    lambda c: c.model.predict(c.X * 1000),
    lambda c: CROCSClusterer.load(c.cuda_file),
    lambda c: PrototypeRetriever(c.model, index="ivf_pq").fit(c.X),
    lambda c: precision_at_k(c.Y, [[0], [1]], c.queries, min_matches=3, no_match="exclude"),
    lambda c: make_frames([np.zeros((1, 500)), np.zeros((1, 50))], 100, on_short="skip"),
    lambda c: SignalConditioner(sampling_rate=100, normalize=None).transform(c.X * 1e4),
    lambda c: AgeGroupEncoder(n_groups=11).fit(c.ages),
    lambda c: load_wfdb(c.cinc, signal_length=5000),
    lambda c: load_wfdb(c.cinc, repair_headers=False, signal_length=5000, on_error="skip"),
    lambda c: load_chapman(c.cinc, on_error="skip", signal_length=5000),
]


class _Built(Exception):
    """Stops a FAISS build once its warning is out: the index itself is not the point."""


@pytest.fixture(scope="module")
def data(tmp_path_factory, shared_data):
    rng = np.random.RandomState(0)
    X = rng.randn(40, 400).astype(np.float32)
    y = np.repeat(["A", "B"], 20)
    model = CROCSClusterer(**FAST).fit(X, y)
    cuda_file = tmp_path_factory.mktemp("warnings") / "cuda.safetensors"
    model.set_params(device="cuda:99").save(cuda_file)  # a device no machine has
    model.set_params(device="cpu")
    ages = np.arange(40, 52).reshape(-1, 1)
    ages[-1] = ages[-2]  # a tie merges two quantile groups
    return SimpleNamespace(
        X=X,
        y=y,
        model=model,
        cuda_file=cuda_file,
        many_classes=np.arange(40) % 25,
        # No ECG of class B is "x": mean prototypes have none for that combination.
        one_missing=pd.DataFrame({"c": y, "s": np.where(y == "A", np.tile(["x", "z"], 20), "z")}),
        numeric=pd.DataFrame({"c": y, "n": np.arange(40)}),
        Y=pd.DataFrame({"a": ["MI", "NORM"], "b": ["F", "M"], "c": ["old", "young"]}),
        queries=[("HYP", "M", "old"), ("HYP", "F", "young")],
        ages=ages,
        cinc=shared_data / "cinc2021",
    )


def test_every_warning_points_at_its_caller(data, monkeypatch):
    faiss = pytest.importorskip("faiss")

    def build(*args):
        raise _Built

    monkeypatch.setattr(faiss, "index_factory", build)
    original = warnings.warn
    fired = []  # (file, line) of the call of _warn, message

    def recording(message, category=None, stacklevel=1, **kwargs):
        if sys._getframe(1).f_code is _warn.__code__:
            site = sys._getframe(2)
            fired.append(((site.f_code.co_filename, site.f_lineno), str(message)))
        return original(message, category, stacklevel=stacklevel + 1, **kwargs)

    monkeypatch.setattr(warnings, "warn", recording)
    misplaced = []
    for trigger in TRIGGERS:
        line = trigger.__code__.co_firstlineno
        before = len(fired)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            with contextlib.suppress(_Built):
                trigger(data)
        messages = {message for _, message in fired[before:]}
        assert messages, f"the trigger on line {line} made the package warn nothing"
        misplaced += [
            f"line {line}: {w.category.__name__} at {w.filename}:{w.lineno}: {w.message}"
            for w in caught
            if str(w.message) in messages
            and (os.path.abspath(w.filename), w.lineno) != (os.path.abspath(__file__), line)
        ]
    assert misplaced == []
    hit = set()
    for (filename, lineno), _ in fired:
        for module, first, last in warn_calls():
            if os.path.abspath(filename) == str(PACKAGE / module) and first <= lineno <= last:
                hit.add((module, first, last))
    assert sorted(warn_calls() - hit) == []
