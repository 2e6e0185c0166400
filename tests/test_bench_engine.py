"""benchmarks/bench_engine.py: its plain loop is the default job, and each switch takes effect."""

import pytest
import torch
from conftest import load_benchmark
from torch.utils.data import DataLoader

from sklearn_crocs import CROCSClusterer
from sklearn_crocs.nn import ArrayDataset, ResNet1dEncoder

SMALL = {"channels": (8, 16)}  # a fast encoder with the default's layers


@pytest.fixture(scope="module")
def bench():
    yield from load_benchmark("bench_engine")


@pytest.fixture(scope="module")
def data(bench):
    return bench._data(quick=True)


@pytest.mark.slow  # a default fit on real ECGs
def test_plain_loop_is_the_default_job(bench, data):
    X, y, X_test = data
    model = CROCSClusterer(max_epochs=1, ensemble_size=1, random_state=0).fit(X, y)  # one net
    bench._check_same_job(model, X, y, X_test[:64])  # asserts
    _, labels, losses = bench.plain_fit(X[:128], y.iloc[:128], 2)
    assert losses[1] < losses[0]
    assert labels.shape == (128,)


def _conv_inputs_channels_last(monkeypatch):
    seen = []
    conv2d = torch.nn.functional.conv2d

    def recording(x, *args, **kwargs):
        seen.append(x.is_contiguous(memory_format=torch.channels_last))
        return conv2d(x, *args, **kwargs)

    with monkeypatch.context() as patch:
        patch.setattr(torch.nn.functional, "conv2d", recording)
        ResNet1dEncoder(12, 500, 8, **SMALL)(torch.randn(4, 12, 500)).sum().backward()
    return set(seen)


def _probe(case, monkeypatch, data):
    """What ``case`` switches off, as the library does it now."""
    if case == "channels-last off":
        return _conv_inputs_channels_last(monkeypatch)
    X, y, X_test = data
    model = CROCSClusterer(max_epochs=1, random_state=0, encoder_params=SMALL).fit(X, y)
    if case == "batch slicing off":
        return type(model.net_.get_iterator(ArrayDataset(X), training=True))
    return len(model.net_.get_iterator(ArrayDataset(X_test)))  # auto inference batch off


@pytest.mark.parametrize("case", ["channels-last off", "batch slicing off",
                                  "auto inference batch off"])  # fmt: skip
def test_each_switch_takes_effect(bench, data, monkeypatch, case):
    assert case in bench.CASES
    before = _probe(case, monkeypatch, data)
    bench._switch_off(case, monkeypatch.setattr)
    after = _probe(case, monkeypatch, data)
    assert after != before
    if case == "batch slicing off":
        assert after is DataLoader
    if case == "auto inference batch off":
        assert after == -(-len(data[2]) // CROCSClusterer().batch_size)
