"""Attribute tables (y): conversion to DataFrames, shared by the estimators and the metrics."""

import numpy as np
import pandas as pd

COMBINATION = "combination"


def as_attribute_frame(y, names=None, *, name="y"):
    """Return attributes as a DataFrame with one column per attribute.

    Parameters
    ----------
    y : array-like of shape (n_samples,) or (n_samples, n_attributes), or DataFrame
        Attribute values.
    names : list of str, default=None
        Column names for array input; defaults to the DataFrame's columns, a
        Series' name or ``attribute_0``, ``attribute_1``, ...
    name : str, default="y"
        Name of the argument, for error messages.
    """
    if isinstance(y, pd.DataFrame):
        frame = y.reset_index(drop=True)
        frame.columns = [str(c) for c in frame.columns]
        return frame
    if isinstance(y, pd.Series):
        column = names[0] if names else ("attribute_0" if y.name is None else str(y.name))
        return y.reset_index(drop=True).to_frame(column)
    # Lists of rows may mix types ([("MI", 0), ...]); numpy would turn every
    # value into a string, so keep them as objects and infer column dtypes below.
    array = np.asarray(y, dtype=object) if isinstance(y, (list, tuple)) else np.asarray(y)
    if array.ndim not in (1, 2):
        raise ValueError(
            f"{name} must have shape (n_samples,) or (n_samples, n_attributes); "
            f"got shape {array.shape}."
        )
    array = array.reshape(len(array), -1)
    if names is None:
        names = [f"attribute_{i}" for i in range(array.shape[1])]
    if len(names) != array.shape[1]:
        raise ValueError(f"{name} has {array.shape[1]} attribute(s) but {len(names)} names.")
    frame = pd.DataFrame({n: array[:, i] for i, n in enumerate(names)})
    return frame.infer_objects() if array.dtype == object else frame


def paired_frames(y_true, y_pred):
    """Align true and predicted attributes: same length, same columns."""
    true = as_attribute_frame(y_true, name="y_true")
    pred = as_attribute_frame(
        y_pred,
        names=None if isinstance(y_pred, pd.DataFrame) else list(true.columns),
        name="y_pred",
    )
    if len(true) != len(pred):
        raise ValueError(
            f"y_true and y_pred have different numbers of samples: {len(true)} and {len(pred)}."
        )
    if len(true) == 0:
        raise ValueError("y_true and y_pred are empty.")
    if list(true.columns) != list(pred.columns):
        raise ValueError(
            f"y_true has attributes {list(true.columns)} but y_pred has {list(pred.columns)}."
        )
    return true, pred


def combination_labels(frame):
    """One hashable label per row for the full attribute combination."""
    return pd.Series(list(map(tuple, frame.astype(object).to_numpy())), dtype=object)


def select_attribute(frame, attribute):
    """Column of ``frame`` named or indexed by ``attribute``, or the combination."""
    if attribute == COMBINATION:
        return combination_labels(frame)
    if isinstance(attribute, (int, np.integer)) and not isinstance(attribute, bool):
        if not 0 <= attribute < frame.shape[1]:
            raise ValueError(
                f"attribute={attribute} is out of range for {frame.shape[1]} attribute(s)."
            )
        return frame.iloc[:, attribute]
    if attribute not in frame.columns:
        raise ValueError(
            f"attribute={attribute!r} is not one of {list(frame.columns)} or {COMBINATION!r}."
        )
    return frame[attribute]
