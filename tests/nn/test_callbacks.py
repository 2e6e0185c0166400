"""The nets' callbacks: the best epoch's encoder and prototypes are restored together."""

import numpy as np
import torch
from conftest import make_small_net
from skorch.helper import predefined_split

from sklearn_crocs.nn import ArrayDataset
from sklearn_crocs.nn._callbacks import KeepBestState


def test_keep_best_state_restores_module_and_prototypes():
    rng = np.random.RandomState(0)
    X = rng.randn(30, 1, 64).astype(np.float32)
    y = rng.randint(4, size=30)

    class Recorder(KeepBestState):
        def on_epoch_end(self, net, **kwargs):
            super().on_epoch_end(net, **kwargs)
            if self.best_epoch_ == net.history[-1, "epoch"]:
                self.snapshot = net.criterion_.prototypes.detach().clone()

    recorder = Recorder()
    net = make_small_net(
        batch_size=8,
        max_epochs=8,
        lr=0.05,  # this data overfits after epoch 2, so the best epoch is not the last
        train_split=predefined_split(ArrayDataset(X[:10], y[:10])),
        callbacks=[recorder],
    )
    torch.manual_seed(0)
    net.fit(X[10:], y[10:])
    valid = net.history[:, "valid_loss"]
    best_epoch = int(np.argmin(valid)) + 1
    assert best_epoch < len(valid), "the test needs a best epoch before the last one"
    assert recorder.best_epoch_ == best_epoch
    torch.testing.assert_close(net.criterion_.prototypes.detach(), recorder.snapshot)
    assert recorder.best_state_ is None  # no second copy kept after training
