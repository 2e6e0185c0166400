"""Patient attributes (y): the fitted codec of the estimators, and the metrics' conversions."""

import math

import numpy as np
import pandas as pd
from sklearn.preprocessing import OrdinalEncoder
from sklearn.utils.validation import check_consistent_length

from ._utils import _python_value, _warn
from .preprocessing import AgeGroupEncoder

COMBINATION = "combination"

# Above this many attribute combinations the M x M weight table alone takes
# 800 MB; such a count almost always means an attribute was not discretised.
MAX_COMBINATIONS = 10_000
# How y came: 1-D array, 2-D array or DataFrame.
LAYOUTS = ("1d", "2d", "frame")
# A numeric attribute with more distinct values than this is most likely a
# measurement (age, heart rate) given as is: each value would become a group.
MANY_VALUES = 20


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


def joint_codes(labels_true, labels_pred):
    """Integer codes for two label sequences over their joint set of values.

    Combinations are tuples and attribute values may be of any hashable type,
    which scikit-learn's label checks do not all accept; equal values get
    equal codes on both sides.
    """
    n = len(labels_true)
    codes, _ = pd.factorize(pd.Series([*labels_true, *labels_pred], dtype=object))
    return codes[:n], codes[n:]


def _read(y, n_samples=None, names=None, *, allow_missing=False):
    """``(frame, layout)``: ``y`` checked, one column per attribute, named ``names`` if given.

    Missing values (NaN, None, pd.NA) raise a ValueError unless ``allow_missing``.
    """
    if y is None:
        raise ValueError(
            "CROCS requires y to be passed, but the target y is None. Pass the attributes "
            "of each ECG: an array of shape (n_samples,) or (n_samples, n_attributes), or "
            "a DataFrame."
        )
    if isinstance(y, (list, tuple)):
        y = np.asarray(y, dtype=object)  # keep mixed-type rows' values as they are
    elif not isinstance(y, (pd.DataFrame, pd.Series)):
        y = np.asarray(y)
    layout = "frame" if isinstance(y, pd.DataFrame) else "1d" if y.ndim == 1 else "2d"
    # Arrays take the fitted names when they have as many columns.
    positional = layout != "frame" and names is not None and y.ndim in (1, 2)
    positional = positional and (1 if y.ndim == 1 else y.shape[1]) == len(names)
    frame = as_attribute_frame(y, names if positional else None)
    if n_samples is not None and len(frame) != n_samples:
        check_consistent_length(np.empty(n_samples), frame)
    missing = frame.isna().sum()
    if missing.any() and not allow_missing:
        bad = ", ".join(f"{k!r} ({v})" for k, v in missing[missing > 0].items())
        raise ValueError(
            f"y contains missing values (NaN or None) in attribute(s) {bad}. "
            "Remove those ECGs or fill in the attributes."
        )
    if names is not None and list(frame.columns) != names:
        raise ValueError(
            f"y has attributes {list(frame.columns)}, but the model was fitted on {names}."
        )
    return frame, layout


class AttributeCodec:
    """The attributes ``y`` of a fit: reads, encodes and decodes others the same way.

    :meth:`fit` learns it from ``y``; the constructor rebuilds it from its
    description (a saved model). Attribute ``j`` takes the values
    ``categories[j]``, sorted, or in the declared order of a pandas
    categorical column (only those seen in ``y``). The combinations of
    values are numbered with the last attribute varying fastest:
    combination ``i`` has the value codes ``combinations[i]`` and the values
    ``values[i]``. A missing value (where a method allows one) has the code
    ``-1``: it is never a category, so no combination holds it.

    Parameters
    ----------
    names : list of str
        Attribute names: the columns of a DataFrame ``y``, the name of a
        Series, or ``"attribute_0"``, ``"attribute_1"``, ...
    categories : list of ndarray
        Values of each attribute, at least two each.
    dtypes : list of dtype
        pandas dtype of each attribute in ``y``, restored by :meth:`decode`
        for a DataFrame ``y``.
    layout : {"1d", "2d", "frame"}
        How ``y`` came: 1-D, 2-D or a DataFrame; :meth:`decode` answers alike.
    bin_edges : dict of str to ndarray, default=None
        Continuous attributes binned by :meth:`fit`: the edges of each one's
        bins (bin ``k`` holds ``edges[k] <= value < edges[k + 1]``, values
        outside fall into the first or last bin), whose labels are its
        ``categories``. Numbers in such a column of any ``y`` read later are
        binned the same way; labels pass as they are.
    """

    def __init__(self, names, categories, dtypes, layout, bin_edges=None):
        if not 0 < len(names) == len(categories) == len(dtypes) or layout not in LAYOUTS:
            raise ValueError("inconsistent description of the attributes")
        self.names = [str(n) for n in names]
        self.categories = list(categories)
        self.dtypes = list(dtypes)
        self.layout = layout
        self.bin_edges = {str(k): np.asarray(v, dtype=float) for k, v in (bin_edges or {}).items()}
        for name, edges in self.bin_edges.items():
            if name not in self.names or len(edges) != len(categories[self.names.index(name)]) + 1:
                raise ValueError("inconsistent description of the attributes")
        self.shape = tuple(len(c) for c in self.categories)
        for name, cats in zip(self.names, self.categories):
            if len(cats) < 2:
                raise ValueError(
                    f"Attribute {name!r} takes the single value {_python_value(cats[0])!r} "
                    "in y; CROCS needs at least two values per attribute. Drop that "
                    "attribute from y."
                )
        n_combinations = math.prod(self.shape)
        if n_combinations > MAX_COMBINATIONS:
            raise ValueError(
                f"y has {n_combinations} attribute combinations "
                f"({' x '.join(map(str, self.shape))} values for {self.names}), more than "
                f"{MAX_COMBINATIONS}. Bin continuous attributes such as age into a few groups "
                "first."
            )
        self.combinations = np.indices(self.shape).reshape(len(self.shape), -1).T
        columns = [cats[self.combinations[:, j]] for j, cats in enumerate(self.categories)]
        dtypes = {c.dtype for c in columns}
        dtype = dtypes.pop() if len(dtypes) == 1 else object
        self.values = np.empty(self.combinations.shape, dtype=dtype)
        for j, column in enumerate(columns):
            self.values[:, j] = column

    @property
    def ordinal(self):
        """Whether each attribute is ordinal: a pandas ordered categorical in ``y``."""
        return [isinstance(d, pd.CategoricalDtype) and bool(d.ordered) for d in self.dtypes]

    @classmethod
    def fit(cls, y, n_samples, *, allow_missing=False, continuous=None):
        """Learn the attributes of ``y``, the targets of ``n_samples`` ECGs.

        With ``allow_missing``, ``y`` may hold missing values (NaN, None,
        pd.NA); the categories are the values seen, never "missing".
        ``continuous`` maps names of numeric columns of a DataFrame ``y``
        to a number of bins: each becomes an ordered categorical of quantile
        bins of its known values (:class:`~sklearn_crocs.preprocessing.AgeGroupEncoder`).
        """
        frame, layout = _read(y, n_samples, allow_missing=allow_missing)
        bin_edges = {}
        for name, n_bins in (continuous or {}).items():
            if layout != "frame" or name not in frame.columns:
                raise ValueError(
                    f"continuous names {name!r}, which is not a column of y; continuous "
                    f"attributes are columns of a DataFrame y (columns: {list(frame.columns)})."
                )
            column = frame[name]
            if not pd.api.types.is_numeric_dtype(column.dtype):
                raise TypeError(
                    f"continuous attribute {name!r} must hold numbers; got dtype {column.dtype}."
                )
            known = column.notna().to_numpy()
            binner = AgeGroupEncoder(n_groups=n_bins).fit(column[known].to_numpy(float)[:, None])
            bin_edges[name] = binner.bin_edges_
            frame[name] = _bin(column, binner.bin_edges_, binner.labels_)
        observed = []
        for name in frame.columns:
            if not frame[name].notna().any():
                raise ValueError(
                    f"Attribute {name!r} has no known value in y: every value is missing. "
                    "Drop that attribute from y."
                )
            try:
                # One column at a time, without its missing values.
                seen = OrdinalEncoder().fit(frame[[name]].dropna()).categories_[0]
            except TypeError as exc:
                raise TypeError(
                    "Each attribute in y must hold values of one type (all strings or "
                    f"all numbers): {exc}"
                ) from exc
            observed.append(seen)
            column = frame[name]
            if (
                name not in bin_edges
                and len(seen) > MANY_VALUES
                and pd.api.types.is_numeric_dtype(column.dtype)
                and not pd.api.types.is_bool_dtype(column.dtype)
                and not isinstance(column.dtype, pd.CategoricalDtype)
            ):
                hint = (
                    f"bin it with continuous={{{name!r}: 4}}"
                    if layout == "frame"
                    else "pass y as a DataFrame and bin it with continuous={name: 4}"
                )
                _warn(
                    f"Attribute {name!r} is numeric with {len(seen)} distinct values, so "
                    f"each value becomes an attribute group of its own ({len(seen)} "
                    f"groups). If it is a measurement such as age, {hint} (quartiles); "
                    "if the numbers are codes of categories, make the column a pandas "
                    "Categorical (or strings) to silence this warning.",
                    UserWarning,
                )
        # Values are sorted, except in pandas categorical columns, whose declared
        # order (e.g. age groups from young to old) is kept.
        categories = [
            np.asarray([c for c in frame[n].cat.categories if c in set(seen)], dtype=seen.dtype)
            if isinstance(frame[n].dtype, pd.CategoricalDtype)
            else seen
            for n, seen in zip(frame.columns, observed)
        ]
        for name, edges in bin_edges.items():
            if len(categories[list(frame.columns).index(name)]) != len(edges) - 1:
                raise ValueError(
                    f"A quantile bin of continuous attribute {name!r} holds no known value "
                    "of y; use fewer bins."
                )
        return cls(frame.columns, categories, frame.dtypes, layout, bin_edges)

    def position(self, attribute, what="attribute"):
        """Column of ``attribute``, a name or a position; ``what`` names it in errors."""
        if isinstance(attribute, str):
            if attribute not in self.names:
                raise ValueError(
                    f"{what}={attribute!r} is not an attribute of y; attributes: {self.names}."
                )
            return self.names.index(attribute)
        if not isinstance(attribute, (int, np.integer)) or isinstance(attribute, bool):
            raise TypeError(f"{what} must be an attribute name or position; got {attribute!r}.")
        if not 0 <= attribute < len(self.names):
            raise ValueError(
                f"{what}={attribute} but y has only {len(self.names)} attribute(s): {self.names}."
            )
        return int(attribute)

    def read(self, y, n_samples=None, *, allow_missing=False):
        """``y`` as a DataFrame with the fitted attribute names; arrays are matched by position.

        Numbers in the columns of continuous attributes are binned as in fit.
        """
        frame = _read(y, n_samples, self.names, allow_missing=allow_missing)[0]
        for name, edges in self.bin_edges.items():
            if pd.api.types.is_numeric_dtype(frame[name].dtype):
                labels = self.categories[self.names.index(name)]
                frame[name] = _bin(frame[name], edges, labels)
        return frame

    def codes(self, y, n_samples=None, *, allow_missing=False):
        """Value code of each attribute of each row of ``y``: shape (n_samples, n_attributes).

        Code ``j`` of attribute ``a`` is ``categories[a][j]``; a missing value
        (allowed only with ``allow_missing``) gets ``-1``. Values not seen in
        fit raise a ValueError.
        """
        frame = self.read(y, n_samples, allow_missing=allow_missing)
        codes = np.empty(frame.shape, dtype=np.intp)
        for j, (name, cats) in enumerate(zip(self.names, self.categories)):
            column = np.asarray(frame[name], dtype=object)
            codes[:, j] = pd.Index(cats).get_indexer(column)
            missing = frame[name].isna().to_numpy()
            codes[missing, j] = -1
            unknown = sorted(set(column[(codes[:, j] < 0) & ~missing]), key=str)
            if unknown:
                raise ValueError(
                    f"Attribute {name!r} has values {[_python_value(v) for v in unknown]} "
                    "that were not seen in fit; known values: "
                    f"{[_python_value(v) for v in cats]}."
                )
        return codes

    def encode(self, y, n_samples=None):
        """Combination number of each row of ``y``; values not seen in fit raise a ValueError."""
        return np.ravel_multi_index(self.codes(y, n_samples).T, self.shape)

    def encode_partial(self, y, n_samples=None):
        """``(index, partial)``: the rows of ``y``, where values may be missing.

        ``index[i]`` is the combination number of row ``i`` when all its
        values are known, ``-1`` when none is (an unlabelled ECG), else
        ``len(combinations) + r``, where row ``r`` of ``partial`` (shape
        (n_partial, n_attributes), one row per distinct pattern) holds its
        value codes with ``-1`` for each missing value.
        """
        codes = self.codes(y, n_samples, allow_missing=True)
        known = (codes >= 0).all(axis=1)
        unlabelled = (codes < 0).all(axis=1)
        some = ~known & ~unlabelled
        index = np.full(len(codes), -1, dtype=np.intp)
        index[known] = np.ravel_multi_index(codes[known].T, self.shape)
        partial, inverse = np.unique(codes[some], axis=0, return_inverse=True)
        index[some] = len(self.combinations) + inverse.ravel()
        return index, partial

    def decode(self, index):
        """Values of the combinations ``index``, in the layout and dtypes of ``y``."""
        values = self.values[index]
        if self.layout == "1d":
            return values[:, 0]
        if self.layout == "frame":
            return pd.DataFrame(
                {
                    name: pd.Series(values[:, j]).astype(dtype)
                    for j, (name, dtype) in enumerate(zip(self.names, self.dtypes))
                }
            )
        return values

    def format(self, index, limit=10):
        """The combinations ``index`` for messages (``limit`` at most): ``"('SB', 'F'); ..."``."""
        listed = "; ".join(str(tuple(map(_python_value, self.values[i]))) for i in index[:limit])
        return listed + (f" and {len(index) - limit} more" if len(index) > limit else "")


def _bin(column, edges, labels):
    """Numbers of ``column`` as an ordered categorical of ``labels``, one per bin of ``edges``."""
    values = column.to_numpy(dtype=float, na_value=np.nan)
    # As KBinsDiscretizer: inner edges only, so outliers join the end bins.
    index = np.searchsorted(edges[1:-1], values, side="right")
    codes = np.where(np.isnan(values), -1, index)
    return pd.Categorical.from_codes(codes, categories=list(labels), ordered=True)
