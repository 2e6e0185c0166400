"""Age groups learned on the training patients: the paper's age quartiles."""

import math
import numbers
import warnings

import numpy as np
from sklearn.base import BaseEstimator, OneToOneFeatureMixin, TransformerMixin
from sklearn.preprocessing import KBinsDiscretizer
from sklearn.utils.validation import check_is_fitted, validate_data

from .._display import DocLinkMixin
from .._utils import _warn


class AgeGroupEncoder(DocLinkMixin, OneToOneFeatureMixin, TransformerMixin, BaseEstimator):
    """Discretise age into quantile groups learned on the training data.

    The paper turns age into quartiles. The bin edges are the quantiles of the
    ages passed to ``fit`` (scikit-learn's
    :class:`~sklearn.preprocessing.KBinsDiscretizer` with
    ``strategy="quantile"``), so fit it on the training split only and reuse
    it for validation and test data. Ages outside the training range fall
    into the first or last group.

    Read more in the :ref:`User Guide <datasets>`.

    Parameters
    ----------
    n_groups : int, default=4
        Number of groups (4: quartiles); at most the number of distinct
        training ages (more is a ``ValueError``). Fewer are produced, with a
        warning, when ties make quantile edges coincide.
    output : {"label", "ordinal"}, default="label"
        ``"label"``: readable labels such as ``"<=48"``, ``"49-59"``,
        ``">=70"`` (object dtype); ``"ordinal"``: the group index as float.

    Attributes
    ----------
    bin_edges_ : ndarray of shape (`n_groups_` + 1,)
        Edges of the groups; group ``k`` holds ``bin_edges_[k] <= age <
        bin_edges_[k + 1]`` (the last group also holds its upper edge).
    labels_ : list of str
        Label of each group. When all training ages are whole numbers the
        labels are whole-year ranges (``"49-59"`` holds 49 to 59 inclusive);
        otherwise they are half-open intervals.
    discretizer_ : KBinsDiscretizer
        The fitted discretiser.
    n_features_in_ : int
        Always 1 (a single age column).
    feature_names_in_ : ndarray of shape (1,)
        Defined when ``X`` had a string column name.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_crocs.preprocessing import AgeGroupEncoder
    >>> ages = np.array([[25], [40], [49], [55], [60], [66], [71], [85]])
    >>> encoder = AgeGroupEncoder().fit(ages)
    >>> encoder.labels_
    ['<=44', '45-57', '58-68', '>=69']
    >>> encoder.transform([[30], [58], [90]]).ravel().tolist()
    ['<=44', '58-68', '>=69']
    """

    def __init__(self, *, n_groups=4, output="label"):
        self.n_groups = n_groups
        self.output = output

    def fit(self, X, y=None):
        """Learn the group edges from the training ages.

        Parameters
        ----------
        X : array-like of shape (n_samples, 1)
            Ages in years (e.g. ``attributes[["age"]]``). NaN is not allowed.
        y : None
            Ignored.

        Returns
        -------
        self : AgeGroupEncoder
        """
        if self.output not in ("label", "ordinal"):
            raise ValueError(f"output must be 'label' or 'ordinal', got {self.output!r}.")
        if (
            not isinstance(self.n_groups, numbers.Integral)
            or isinstance(self.n_groups, bool)
            or self.n_groups < 2
        ):
            raise ValueError(f"n_groups must be an int >= 2, got {self.n_groups!r}.")
        X = self._check_ages(X, reset=True)
        n_distinct = len(np.unique(X))
        if self.n_groups > n_distinct:
            raise ValueError(
                f"n_groups={self.n_groups} age groups cannot be made from {len(X)} ages "
                f"that take {n_distinct} distinct value(s): each group needs an age of its "
                f"own. Pass n_groups={n_distinct} or fewer (at least 2), or more data."
            )
        params = {"n_bins": self.n_groups, "encode": "ordinal", "strategy": "quantile"}
        if "quantile_method" in KBinsDiscretizer().get_params():
            params["quantile_method"] = "averaged_inverted_cdf"
        params["subsample"] = None
        with warnings.catch_warnings():
            # Replaced by the warning below, which names the number of groups made.
            warnings.filterwarnings("ignore", "Bins whose width are too small", UserWarning)
            self.discretizer_ = KBinsDiscretizer(**params).fit(X)
        self.bin_edges_ = np.asarray(self.discretizer_.bin_edges_[0], dtype=float)
        integral = bool(np.all(X == np.round(X)))
        self.labels_ = group_labels(self.bin_edges_, integral)
        if len(self.labels_) < self.n_groups:
            _warn(
                f"AgeGroupEncoder made {len(self.labels_)} age groups, not n_groups="
                f"{self.n_groups}: ties among the ages make quantile edges coincide. Pass "
                f"n_groups={len(self.labels_)} to ask for the groups that were made.",
                UserWarning,
            )
        return self

    def transform(self, X):
        """Map ages to their group.

        Parameters
        ----------
        X : array-like of shape (n_samples, 1)
            Ages in years.

        Returns
        -------
        groups : ndarray of shape (n_samples, 1)
            Labels (object dtype) or group indices (float), see ``output``.
        """
        check_is_fitted(self)
        X = self._check_ages(X, reset=False)
        index = self.discretizer_.transform(X)
        if self.output == "ordinal":
            return index
        return np.asarray(self.labels_, dtype=object)[index.astype(int)]

    def _check_ages(self, X, reset):
        X = validate_data(self, X, reset=reset, dtype=np.float64, ensure_all_finite=False)
        if X.shape[1] != 1:
            raise ValueError(
                f"AgeGroupEncoder takes a single column of ages, got {X.shape[1]} "
                f"columns; pass e.g. attributes[['age']]."
            )
        if not np.all(np.isfinite(X)):
            raise ValueError(
                "the ages contain NaN or infinite values; drop or impute the "
                "records with unknown age before encoding age groups."
            )
        return X


def group_labels(edges, integral):
    """The labels of the age groups between ``edges`` (outer ones included), in order.

    ``integral``: the ages are whole years, so that a group is named by the
    years it holds. The labels name the edges: the command line checks a
    model folder's age groups with them.
    """
    inner = edges[1:-1]
    n = len(edges) - 1
    if n == 1:
        return ["all"]
    if integral:
        # With whole-number ages, age < e  <=>  age <= ceil(e) - 1.
        starts = [None] + [math.ceil(e) for e in inner]
        stops = [math.ceil(e) - 1 for e in inner] + [None]
        labels = []
        for start, stop in zip(starts, stops):
            if start is None:
                labels.append(f"<={stop}")
            elif stop is None:
                labels.append(f">={start}")
            elif start == stop:
                labels.append(f"{start}")
            else:
                labels.append(f"{start}-{stop}")
        return labels
    labels = [f"<{inner[0]:g}"]
    labels += [f"[{a:g}, {b:g})" for a, b in zip(inner[:-1], inner[1:])]
    labels.append(f">={inner[-1]:g}")
    return labels
