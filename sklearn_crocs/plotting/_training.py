"""TrainingCurveDisplay: the loss and its two parts per epoch, from a fitted estimator's history."""

import numpy as np
from sklearn.utils.validation import check_is_fitted

from ._base import FIGURE_WIDTH, check_matplotlib

__all__ = ["TrainingCurveDisplay"]

#: Loss parts recorded in ``net_.history`` and their titles.
_PARTS = {
    "loss": "Total loss",
    "nce": "Contrastive term (NCE)",
    "reg": "Arrangement regulariser",
}


class TrainingCurveDisplay:
    """Training curves of a CROCSClusterer: total loss, NCE term and regulariser.

    One panel per loss part, with the training curve and, when the estimator
    held out validation patients, the validation curve. The epoch whose
    encoder and prototypes were kept (the best validation NCE under early
    stopping) is marked by a dotted vertical line. Build it with
    :meth:`from_estimator` rather than directly.

    Read more in the :ref:`User Guide <visualisation_training_curves>`.

    Parameters
    ----------
    epochs : ndarray of shape (n_epochs,)
        Epoch numbers (starting at 1).
    train : dict of str to ndarray of shape (n_epochs,)
        Training value per epoch of each part (``"loss"``, ``"nce"``, ``"reg"``).
    valid : dict of str to ndarray of shape (n_epochs,), default=None
        Validation values of the same parts; ``None`` without validation data.
    best_epoch : int, default=None
        Epoch whose model was kept; ``None`` when the last one was.

    Attributes
    ----------
    axes_ : ndarray of matplotlib Axes
        One axes per loss part, in the order of ``parts``.
    figure_ : matplotlib Figure
        Figure containing the axes.
    lines_ : dict of (str, str) to matplotlib Line2D
        Curves keyed by ``(split, part)``, e.g. ``("valid", "nce")``.
    best_epoch_lines_ : list of matplotlib Line2D
        The vertical markers of ``best_epoch`` (empty without it).

    See Also
    --------
    sklearn_crocs.CROCSClusterer : ``net_.history`` holds the per-epoch losses.

    Examples
    --------
    >>> import matplotlib
    >>> matplotlib.use("Agg")
    >>> import numpy as np
    >>> from sklearn_crocs import CROCSClusterer
    >>> from sklearn_crocs.plotting import TrainingCurveDisplay
    >>> rng = np.random.RandomState(0)
    >>> X, y, groups = rng.randn(60, 400), rng.choice(["SR", "SB"], 60), np.arange(60) // 2
    >>> model = CROCSClusterer(embedding_dim=8, max_epochs=4, validation_fraction=0.2,
    ...                        random_state=0)
    >>> model = model.fit(X, y, groups=groups)
    >>> display = TrainingCurveDisplay.from_estimator(model)
    >>> len(display.axes_), len(display.lines_)
    (3, 6)
    >>> len(display.lines_["train", "loss"].get_xdata()) == model.n_iter_
    True
    """

    def __init__(self, epochs, train, valid=None, best_epoch=None):
        self.epochs = epochs
        self.train = train
        self.valid = valid
        self.best_epoch = best_epoch

    @classmethod
    def from_estimator(cls, estimator, *, parts=("loss", "nce", "reg"), ax=None, yscale="linear"):
        """Plot the training history of a fitted CROCSClusterer.

        Parameters
        ----------
        estimator : CROCSClusterer
            Fitted estimator; its ``net_.history`` is read.
        parts : sequence of {"loss", "nce", "reg"}, default=("loss", "nce", "reg")
            Loss parts to draw, one panel each.
        ax : sequence of matplotlib Axes, default=None
            One axes per part; by default a new figure, one panel per part, stacked.
        yscale : {"linear", "log"}, default="linear"
            Scale of the y axes (the regulariser often falls by orders of
            magnitude).

        Returns
        -------
        display : TrainingCurveDisplay
            Object that stores the matplotlib artists.
        """
        check_is_fitted(estimator, "net_")
        rows = estimator.net_.history.to_list()
        epochs = np.array([row["epoch"] for row in rows])

        def column(key):
            values = [row.get(key) for row in rows]
            if any(v is None for v in values):
                return None
            return np.asarray(values, dtype=float)

        train = {part: column(f"train_{part}") for part in _PARTS}
        valid = {part: column(f"valid_{part}") for part in _PARTS}
        if any(v is None for v in valid.values()):
            valid = None
        best = [row["epoch"] for row in rows if row.get("valid_nce_best")]
        best_epoch = best[-1] if valid is not None and best else None
        display = cls(epochs=epochs, train=train, valid=valid, best_epoch=best_epoch)
        return display.plot(ax=ax, parts=parts, yscale=yscale)

    def plot(self, ax=None, *, parts=("loss", "nce", "reg"), yscale="linear"):
        """Draw the curves.

        Parameters
        ----------
        ax : sequence of matplotlib Axes, default=None
            One axes per part; by default a new figure, one panel per part, stacked.
        parts : sequence of {"loss", "nce", "reg"}, default=("loss", "nce", "reg")
            Loss parts to draw, one panel each.
        yscale : {"linear", "log"}, default="linear"
            Scale of the y axes.

        Returns
        -------
        display : TrainingCurveDisplay
            Object that stores the matplotlib artists.
        """
        plt = check_matplotlib("TrainingCurveDisplay")
        parts = list(parts)
        unknown = [p for p in parts if p not in _PARTS]
        if unknown or not parts:
            raise ValueError(f"parts must be a non-empty subset of {list(_PARTS)}; got {parts!r}.")
        if ax is None:
            # Stacked, sharing the epoch axis, so that the figure fits a text column.
            _, ax = plt.subplots(
                len(parts),
                1,
                figsize=(FIGURE_WIDTH, 0.6 + 2.2 * len(parts)),
                sharex=True,
                squeeze=False,
                layout="constrained",
            )
        axes = np.ravel(np.asarray(ax, dtype=object))
        if len(axes) != len(parts):
            raise ValueError(f"ax must hold one Axes per part ({len(parts)}); got {len(axes)}.")
        self.lines_ = {}
        self.best_epoch_lines_ = []
        splits = [("train", self.train, "tab:blue")]
        if self.valid is not None:
            splits.append(("valid", self.valid, "tab:orange"))
        for part, axis in zip(parts, axes):
            for split, values, color in splits:
                (line,) = axis.plot(self.epochs, values[part], color=color, label=f"{split} {part}")
                self.lines_[split, part] = line
            if self.best_epoch is not None:
                self.best_epoch_lines_.append(
                    axis.axvline(self.best_epoch, color="0.3", linestyle=":", label="kept epoch")
                )
            axis.set_yscale(yscale)
            axis.set_title(_PARTS[part])
            axis.set_xlabel("epoch")
            axis.legend(fontsize="small")
        axes[0].set_ylabel("loss (mean over batches)")
        self.axes_ = axes
        self.figure_ = axes[0].figure
        return self
