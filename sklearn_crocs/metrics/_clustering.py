"""Clustering metrics of CROCS: accuracy and AMI per attribute (paper, Eq. 4, Table 1)."""

import pandas as pd
from sklearn.metrics import accuracy_score, adjusted_mutual_info_score

from .._attributes import COMBINATION, joint_codes, paired_frames, select_attribute

__all__ = ["attribute_accuracy_score", "attribute_ami_score", "clustering_report"]


def _per_attribute(metric, name, y_true, y_pred, attribute):
    true, pred = paired_frames(y_true, y_pred)

    def score(a):
        return float(metric(*joint_codes(select_attribute(true, a), select_attribute(pred, a))))

    if attribute != "all":
        return score(attribute)
    names = [*true.columns, COMBINATION]
    return pd.Series([score(a) for a in names], index=names, name=name)


def attribute_accuracy_score(y_true, y_pred, *, attribute="all"):
    """Accuracy of assigned attributes, per attribute or for the full combination.

    ``Acc = 1/N sum_i 1(assigned_i == true_i)`` (paper, Eq. 4).

    Read more in the :ref:`User Guide <evaluation>`.

    Parameters
    ----------
    y_true : array-like of shape (n_samples,) or (n_samples, n_attributes), or DataFrame
        True attributes.
    y_pred : array-like or DataFrame of the same shape
        Assigned attributes, for example ``CROCSClusterer.predict(X)``.
    attribute : "all", "combination", str or int, default="all"
        An attribute name (DataFrame columns) or position; ``"combination"``
        scores the full combination (all attributes right); ``"all"`` returns
        every attribute and the combination.

    Returns
    -------
    score : float or pandas.Series
        A float, or for ``"all"`` a Series indexed by attribute name and
        ``"combination"``.

    Examples
    --------
    >>> import pandas as pd
    >>> from sklearn_crocs.metrics import attribute_accuracy_score
    >>> y_true = pd.DataFrame({"rhythm": ["SR", "SR", "AFIB", "SB"],
    ...                        "sex": ["F", "M", "M", "F"]})
    >>> y_pred = pd.DataFrame({"rhythm": ["SR", "SB", "AFIB", "SB"],
    ...                        "sex": ["F", "F", "M", "M"]})
    >>> attribute_accuracy_score(y_true, y_pred)
    rhythm         0.75
    sex            0.50
    combination    0.50
    Name: accuracy, dtype: float64
    >>> attribute_accuracy_score(y_true, y_pred, attribute="sex")
    0.5
    """
    return _per_attribute(accuracy_score, "accuracy", y_true, y_pred, attribute)


def attribute_ami_score(y_true, y_pred, *, attribute="all"):
    """Adjusted mutual information between true and assigned attributes.

    Uses :func:`sklearn.metrics.adjusted_mutual_info_score` on each attribute
    (and on the full combination), as in the paper's Eq. 4. AMI is 1 for a
    perfect assignment up to relabelling and about 0 for a random one.

    Read more in the :ref:`User Guide <evaluation>`.

    Parameters
    ----------
    y_true : array-like of shape (n_samples,) or (n_samples, n_attributes), or DataFrame
        True attributes.
    y_pred : array-like or DataFrame of the same shape
        Assigned attributes.
    attribute : "all", "combination", str or int, default="all"
        As in :func:`attribute_accuracy_score`.

    Returns
    -------
    score : float or pandas.Series
        A float, or for ``"all"`` a Series indexed by attribute name and
        ``"combination"``.

    Examples
    --------
    >>> from sklearn_crocs.metrics import attribute_ami_score
    >>> y_true = [["SR", "F"], ["SR", "M"], ["AFIB", "M"], ["AFIB", "F"]]
    >>> y_pred = [["SB", "F"], ["SB", "F"], ["AFIB", "M"], ["AFIB", "M"]]
    >>> attribute_ami_score(y_true, y_pred).round(3)
    attribute_0    1.0
    attribute_1   -0.5
    combination   -0.0
    Name: ami, dtype: float64
    """
    return _per_attribute(adjusted_mutual_info_score, "ami", y_true, y_pred, attribute)


def clustering_report(y_true, predictions, *, percent=True, decimals=1):
    """Table of accuracy and AMI per attribute, one row per method (paper, Table 1).

    Read more in the :ref:`User Guide <evaluation>`.

    Parameters
    ----------
    y_true : array-like of shape (n_samples,) or (n_samples, n_attributes), or DataFrame
        True attributes of the held-out ECGs.
    predictions : dict of str to array-like, or array-like
        Assigned attributes per method name (for example ``{"CP CROCS": ...,
        "TP CROCS": ...}``), or a single assignment (row ``"model"``).
    percent : bool, default=True
        Report in percent, as the paper does.
    decimals : int or None, default=1
        Rounding; ``None`` keeps full precision.

    Returns
    -------
    report : pandas.DataFrame
        Rows: methods. Columns: a MultiIndex ``(attribute, metric)`` with
        metrics ``"Acc"`` and ``"AMI"`` for each attribute and for
        ``"combination"``.

    Examples
    --------
    >>> import pandas as pd
    >>> from sklearn_crocs.metrics import clustering_report
    >>> y_true = pd.DataFrame({"rhythm": ["SR", "SR", "AFIB", "AFIB"],
    ...                        "sex": ["F", "M", "M", "F"]})
    >>> perfect = y_true.copy()
    >>> swapped = y_true.assign(sex=["M", "F", "F", "M"])
    >>> clustering_report(y_true, {"perfect": perfect, "swapped": swapped})
    attribute rhythm           sex        combination
    metric       Acc    AMI    Acc    AMI         Acc    AMI
    perfect    100.0  100.0  100.0  100.0       100.0  100.0
    swapped    100.0  100.0    0.0  100.0         0.0  100.0
    """
    if not isinstance(predictions, dict):
        predictions = {"model": predictions}
    if not predictions:
        raise ValueError("predictions is empty; pass at least one method's assignments.")
    rows = {}
    for method, y_pred in predictions.items():
        accuracy = attribute_accuracy_score(y_true, y_pred)
        ami = attribute_ami_score(y_true, y_pred)
        rows[method] = {
            (name, metric): value
            for name in accuracy.index
            for metric, value in (("Acc", accuracy[name]), ("AMI", ami[name]))
        }
    report = pd.DataFrame.from_dict(rows, orient="index")
    report.columns = pd.MultiIndex.from_tuples(report.columns, names=["attribute", "metric"])
    if percent:
        report = 100 * report
    if decimals is not None:
        report = report.round(decimals)
    return report
