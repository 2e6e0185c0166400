"""TrainingCurveDisplay draws the estimator's history: one curve per split and loss part."""

import matplotlib.pyplot as plt
import numpy as np
import pytest

from sklearn_crocs.plotting import TrainingCurveDisplay


def history_column(model, key):
    return np.asarray(model.net_.history[:, key], dtype=float)


def test_curves_are_the_history(model):
    display = TrainingCurveDisplay.from_estimator(model)
    assert len(display.axes_) == 3
    assert set(display.lines_) == {
        (split, part) for split in ("train", "valid") for part in ("loss", "nce", "reg")
    }
    epochs = np.arange(1, model.n_iter_ + 1)
    for (split, part), line in display.lines_.items():
        np.testing.assert_array_equal(line.get_xdata(), epochs)
        np.testing.assert_allclose(line.get_ydata(), history_column(model, f"{split}_{part}"))
    # Each panel holds exactly its two curves plus the kept-epoch marker.
    for axis, part in zip(display.axes_, ("loss", "nce", "reg")):
        assert len(axis.get_lines()) == 3
        assert display.lines_["train", part] in axis.get_lines()
    assert display.figure_ is display.axes_[0].figure


def test_kept_epoch_is_the_best_validation_nce(model):
    display = TrainingCurveDisplay.from_estimator(model)
    flags = model.net_.history[:, "valid_nce_best"]
    expected = max(epoch for epoch, best in zip(range(1, len(flags) + 1), flags) if best)
    assert display.best_epoch == expected
    assert len(display.best_epoch_lines_) == 3
    for line in display.best_epoch_lines_:
        assert line.get_xdata()[0] == expected


def test_without_validation_only_training_curves(model_without_validation):
    display = TrainingCurveDisplay.from_estimator(model_without_validation)
    assert display.valid is None
    assert set(display.lines_) == {("train", part) for part in ("loss", "nce", "reg")}
    assert display.best_epoch_lines_ == []
    for axis in display.axes_:
        assert len(axis.get_lines()) == 1


def test_parts_ax_and_scale(model):
    fig, axes = plt.subplots(1, 2)
    display = TrainingCurveDisplay.from_estimator(
        model, parts=("reg", "nce"), ax=axes, yscale="log"
    )
    assert list(display.axes_) == list(axes)
    assert display.figure_ is fig
    assert display.lines_["train", "reg"] in axes[0].get_lines()
    assert display.lines_["valid", "nce"] in axes[1].get_lines()
    assert all(axis.get_yscale() == "log" for axis in axes)
    assert axes[0].get_title() == "Arrangement regulariser"


def test_bad_parts_and_axes(model):
    with pytest.raises(ValueError, match="parts must be a non-empty subset"):
        TrainingCurveDisplay.from_estimator(model, parts=("accuracy",))
    _, axes = plt.subplots(1, 2)
    with pytest.raises(ValueError, match="one Axes per part"):
        TrainingCurveDisplay.from_estimator(model, ax=axes)


def test_unfitted_estimator_is_rejected():
    from sklearn.exceptions import NotFittedError

    from sklearn_crocs import CROCSClusterer

    with pytest.raises(NotFittedError):
        TrainingCurveDisplay.from_estimator(CROCSClusterer())
