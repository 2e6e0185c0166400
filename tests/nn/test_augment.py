"""RandomWindow, and CROCSNet applying augmentation to training batches only."""

import numpy as np
import pytest
import torch
from conftest import make_small_net

from sklearn_crocs.nn import RandomWindow


def test_windows_are_slices_shared_by_the_leads_of_an_ecg():
    X = torch.randn(64, 3, 50, dtype=torch.float64)
    out = RandomWindow(crop=0.8, amplitude_jitter=0.0)(X, torch.Generator().manual_seed(0))
    assert out.shape == (64, 3, 40) and out.dtype == X.dtype
    offsets = []
    for x, o in zip(X, out):
        matches = [s for s in range(11) if torch.equal(x[:, s : s + 40], o)]
        assert len(matches) == 1  # one offset, the same for every lead
        offsets.append(matches[0])
    assert set(offsets) == set(range(11))  # every offset can be drawn
    whole = RandomWindow(crop=1.0, amplitude_jitter=0.0)(X, torch.Generator())
    assert torch.equal(whole, X)


def test_amplitude_factors_per_ecg_and_reproducible_draws():
    X = torch.ones(2000, 2, 10)
    augment = RandomWindow(crop=1.0, amplitude_jitter=0.1)
    out = augment(X, torch.Generator().manual_seed(1))
    factors = out[:, 0, 0]
    assert torch.equal(out, factors[:, None, None].expand_as(out))  # one factor per ECG
    assert abs(factors.mean().item() - 1) < 0.01
    assert abs(factors.std().item() - 0.1) < 0.01
    again = augment(X, torch.Generator().manual_seed(1))
    assert torch.equal(out, again)
    assert not torch.equal(out, augment(X, torch.Generator().manual_seed(2)))


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"crop": 0}, r"crop must be in \(0, 1\]"),
    ({"crop": 1.5}, r"crop must be in \(0, 1\]"),
    ({"amplitude_jitter": -0.1}, "amplitude_jitter must be non-negative"),
])  # fmt: skip
def test_invalid_arguments(kwargs, message):
    with pytest.raises(ValueError, match=message):
        RandomWindow(**kwargs)


def test_net_augments_training_batches_only():
    seen = []

    def augment(X, generator):
        seen.append(X.shape[0])
        return X + torch.randn(X.shape, generator=generator)

    rng = np.random.RandomState(0)
    X = rng.randn(40, 1, 64).astype(np.float32)
    y = rng.randint(0, 4, 40)
    torch.manual_seed(0)
    net = make_small_net(max_epochs=2, batch_size=16, train_split=None, augment=augment)
    net.fit(X, y)
    assert seen == [16, 16, 8] * 2  # every training batch, nothing else
    assert not hasattr(net, "_augment_generator")  # not kept with the fitted net
    before = len(seen)
    net.forward(X)
    assert len(seen) == before
    torch.manual_seed(0)
    again = make_small_net(max_epochs=2, batch_size=16, train_split=None, augment=augment).fit(X, y)
    torch.testing.assert_close(again.forward(X), net.forward(X))  # draws seeded by shuffle_seed
