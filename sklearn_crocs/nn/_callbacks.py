"""skorch callbacks of the package's nets: early stopping that keeps the best prototypes too."""

from copy import deepcopy

from skorch.callbacks import Callback, EarlyStopping

__all__ = ["KeepBestState", "early_stopping_callbacks"]


class KeepBestState(Callback):
    """Restore the encoder *and* the prototypes of the epoch with the best monitored score.

    skorch's ``EarlyStopping(load_best=True)`` restores only ``module_``; the
    prototypes live in ``criterion_`` and must be restored with it.

    Parameters
    ----------
    monitor : str, default="valid_loss"
        History key whose ``<monitor>_best`` flag (set by skorch's scoring
        callbacks) marks the best epoch.
    """

    def __init__(self, monitor="valid_loss"):
        self.monitor = monitor

    def initialize(self):
        self.best_state_ = None
        self.best_epoch_ = None
        return self

    def on_epoch_end(self, net, **kwargs):
        if net.history[-1].get(f"{self.monitor}_best"):
            self.best_epoch_ = net.history[-1, "epoch"]
            self.best_state_ = {
                "module": deepcopy(net.module_.state_dict()),
                "criterion": deepcopy(net.criterion_.state_dict()),
            }

    def on_train_end(self, net, **kwargs):
        if self.best_state_ is not None:
            if self.best_epoch_ != net.history[-1, "epoch"]:
                net.module_.load_state_dict(self.best_state_["module"])
                net.criterion_.load_state_dict(self.best_state_["criterion"])
            self.best_state_ = None  # do not carry a second copy into pickles


def early_stopping_callbacks(monitor, patience, sink):
    """Named skorch callbacks: stop when ``monitor`` has not improved by a relative
    1e-4 for ``patience`` epochs, and keep the weights of the best epoch."""
    stop = EarlyStopping(
        monitor=monitor, patience=patience, threshold=1e-4, threshold_mode="rel", sink=sink
    )
    return [("early_stopping", stop), ("keep_best", KeepBestState(monitor=monitor))]
