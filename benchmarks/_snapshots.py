"""Score a CROCS fit at several epoch budgets from one run (Adam at a constant rate, so
the first E epochs of a longer run are the fit with max_epochs=E)."""

import copy

import numpy as np
import torch
import torch.nn.functional as F
from skorch.callbacks import Callback


class Snapshots(Callback):
    """Keep the encoder's and the prototypes' parameters after the listed epochs."""

    def __init__(self, epochs):
        self.epochs = epochs

    def initialize(self):
        self.states_ = {}
        return self

    def on_epoch_end(self, net, **kwargs):
        epoch = len(net.history)
        if epoch in self.epochs:
            self.states_[epoch] = (
                copy.deepcopy(net.module_.state_dict()),
                F.normalize(net.criterion_.prototypes.detach().float(), dim=1).numpy().copy(),
            )


def embed(module, X, batch=512):
    """Unit embeddings of X by ``module`` in inference."""
    module.eval()
    out = []
    with torch.no_grad():
        for start in range(0, len(X), batch):
            out.append(F.normalize(module(torch.as_tensor(X[start:start + batch])), dim=1).numpy())
    return np.concatenate(out)


def at_epochs(model, snapshots, X):
    """{epoch: (embeddings of X, learned unit prototypes)} of a fitted model's snapshots."""
    module = copy.deepcopy(model.net_.module_)
    out = {}
    for epoch, (state, prototypes) in sorted(snapshots.states_.items()):
        module.load_state_dict(state)
        out[epoch] = (embed(module, X), prototypes)
    return out
