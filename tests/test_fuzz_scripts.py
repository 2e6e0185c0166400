"""Smoke tests of the fuzzers in benchmarks/: their pieces that judge and craft inputs,
without running the command line (the fuzzers themselves take minutes)."""

import io
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
fuzz_cli = pytest.importorskip("fuzz_cli_inputs")
fuzz_models = pytest.importorskip("fuzz_model_files")


def _result(status=0, out="", err="", why=None):
    return {"status": status, "out": out, "err": err, "mb": 0, "why": why}


@pytest.mark.parametrize(
    ("result", "check", "outcome"),
    [
        (_result(), lambda: [], "correct"),
        (_result(), lambda: ["2 rows for 3 records"], "silent"),
        (_result(out="record \x1b[2J"), lambda: [], "silent"),
        (_result(1, err="sklearn-crocs: error: no such file\n"), lambda: [], "refused"),
        (_result(1, err="Traceback (most recent call last):\nKeyError\n"), lambda: [], "crash"),
        (_result(-9, why="hang"), lambda: [], "hang"),
        (_result(-9, why="killed at 2048 MB above the baseline"), lambda: [], "crash"),
        (_result(0, err="sklearn-crocs: bell\x07"), lambda: [], "silent"),
    ],
)
def test_classify(result, check, outcome):
    assert fuzz_cli.classify(result, check)[0] == outcome


def test_refusal_that_wrote_through_a_link_is_silent():
    result = _result(1, err="sklearn-crocs: error: --out exists\n")
    assert fuzz_cli.classify(result, invariant=lambda: ["wrote through a link"])[0] == "silent"


def test_genuine_npy_bytes_load_and_mutations_are_seeded():
    X = np.random.default_rng(0).normal(size=(2, 12, 1000)).astype(np.float32)
    header, data, what = fuzz_cli.npy_bytes(None, X, mutate=False)
    assert what == "genuine"
    np.testing.assert_array_equal(np.load(io.BytesIO(header + data)), X)
    made = [fuzz_cli.npy_bytes(np.random.default_rng([0, 1, i]), X) for i in range(2)]
    again = [fuzz_cli.npy_bytes(np.random.default_rng([0, 1, i]), X) for i in range(2)]
    assert made == again


def test_spike_chain_scales_consecutive_layers_within_the_bound():
    torch = pytest.importorskip("torch")
    tensors = {
        "encoder.features.0.weight": torch.ones(4, 12, 7),
        "encoder.features.0.bias": torch.ones(4),
        "encoder.features.3.weight": torch.ones(16, 4, 7),
        "encoder.head.1.weight": torch.ones(8, 16),
    }
    changed, what = fuzz_models.mutate_spike_chain(np.random.RandomState(0), tensors)
    assert what.startswith("unit ")
    assert all(float(t.abs().max()) <= 1e18 for t in changed.values())
    assert max(float(t.abs().max()) for t in changed.values()) > 1e6
    assert torch.equal(tensors["encoder.features.0.weight"], torch.ones(4, 12, 7))
