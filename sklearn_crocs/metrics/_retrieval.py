"""Retrieval metrics of CROCS: precision at K by number of matched attributes (Eq. 5, Table 2)."""

from numbers import Integral

import numpy as np
import pandas as pd
from scipy.stats import hypergeom
from sklearn.exceptions import UndefinedMetricWarning
from sklearn.utils._param_validation import Interval, StrOptions, validate_params

from .._attributes import as_attribute_frame, joint_codes
from .._utils import _warn

__all__ = ["chance_precision_at_k", "matchable_queries", "precision_at_k", "retrieval_report"]


def _attribute_codes(y_true, query_attributes):
    """Integer codes of the searched set's and the queries' attributes, column by column."""
    if isinstance(query_attributes, pd.DataFrame) and not isinstance(y_true, pd.DataFrame):
        # Positional y_true takes the names of the queries' columns.
        names = [str(c) for c in query_attributes.columns]
        if np.ndim(y_true) == 2 and np.shape(y_true)[1] != len(names):
            raise ValueError(
                f"y_true has {np.shape(y_true)[1]} attribute(s) but query_attributes has "
                f"{len(names)}: {names}."
            )
        true = as_attribute_frame(y_true, names, name="y_true")
    else:
        true = as_attribute_frame(y_true, name="y_true")
    names = None if isinstance(query_attributes, pd.DataFrame) else list(true.columns)
    queries = as_attribute_frame(query_attributes, names, name="query_attributes")
    if isinstance(query_attributes, pd.DataFrame):
        if sorted(queries.columns) != sorted(true.columns):
            raise ValueError(
                f"y_true has attributes {list(true.columns)} but query_attributes has "
                f"{list(queries.columns)}."
            )
        queries = queries[list(true.columns)]
    if len(true) == 0:
        raise ValueError("y_true is empty: there is nothing to retrieve from.")
    if len(queries) == 0:
        raise ValueError("query_attributes is empty: pass at least one query.")
    true_codes = np.empty(true.shape, dtype=np.intp)
    query_codes = np.empty(queries.shape, dtype=np.intp)
    for i, name in enumerate(true.columns):
        true_codes[:, i], query_codes[:, i] = joint_codes(true[name], queries[name])
    return true_codes, query_codes


def _check_min_matches(min_matches, n_attributes):
    if min_matches is None:
        return n_attributes
    if min_matches > n_attributes:
        raise ValueError(
            f"min_matches={min_matches} exceeds the number of attributes, {n_attributes}."
        )
    return int(min_matches)


def _matchable(true_codes, query_codes, min_matches):
    """Whether any item matches each query on at least ``min_matches`` attributes."""
    combinations = np.unique(true_codes, axis=0)  # few: one per attribute combination
    shared = (query_codes[:, None, :] == combinations[None, :, :]).sum(axis=2)
    return (shared >= min_matches).any(axis=1)


@validate_params(
    {
        "y_true": ["array-like"],
        "query_attributes": ["array-like"],
        "min_matches": [Interval(Integral, 1, None, closed="left"), None],
    },
    prefer_skip_nested_validation=True,
)
def matchable_queries(y_true, query_attributes, *, min_matches=None):
    """Whether each query can be matched at all by an item of the searched set.

    A query is matchable when at least one item of the searched set shares at
    least ``min_matches`` attribute values with it. Whatever is retrieved, a
    query that is not matchable gets 0 in the paper's Eq. 5; see
    ``no_match`` in :func:`precision_at_k`.

    Read more in the :ref:`User Guide <evaluation>`.

    Parameters
    ----------
    y_true : array-like of shape (n_samples,) or (n_samples, n_attributes), or DataFrame
        True attributes of the searched set (the database).
    query_attributes : array-like of shape (n_queries, n_attributes), or DataFrame
        Attributes of each query, in the column order of ``y_true`` (a
        DataFrame is matched by column name).
    min_matches : int, default=None
        Number of attribute values an item must share with a query to be
        relevant; ``None`` means all attributes (an exact match).

    Returns
    -------
    matchable : ndarray of shape (n_queries,), dtype bool
        ``True`` for queries with at least one relevant item in ``y_true``.

    Examples
    --------
    >>> from sklearn_crocs.metrics import matchable_queries
    >>> y_true = [["SR", "F"], ["SR", "M"], ["AFIB", "M"]]
    >>> queries = [["SR", "F"], ["AFIB", "F"]]
    >>> matchable_queries(y_true, queries)
    array([ True, False])
    >>> matchable_queries(y_true, queries, min_matches=1)
    array([ True,  True])
    """
    true_codes, query_codes = _attribute_codes(y_true, query_attributes)
    min_matches = _check_min_matches(min_matches, true_codes.shape[1])
    return _matchable(true_codes, query_codes, min_matches)


@validate_params(
    {
        "y_true": ["array-like"],
        "query_attributes": ["array-like"],
        "k": [Interval(Integral, 1, None, closed="left")],
        "min_matches": [Interval(Integral, 1, None, closed="left"), None],
        "no_match": [StrOptions({"exclude", "zero"})],
    },
    prefer_skip_nested_validation=True,
)
def chance_precision_at_k(y_true, query_attributes, *, k, min_matches=None, no_match="zero"):
    """Expected P@K of a retrieval that returns ``k`` items of ``y_true`` at random.

    The baseline that a search must beat. For a query that ``n`` of the
    ``N`` items match on ``min_matches`` attributes, ``k`` items drawn
    without replacement include none of them with the hypergeometric
    probability ``C(N - n, k) / C(N, k)``; the result averages ``1`` minus
    that over the queries as :func:`precision_at_k` does.

    Read more in the :ref:`User Guide <evaluation>`.

    Parameters
    ----------
    y_true : array-like of shape (n_samples,) or (n_samples, n_attributes), or DataFrame
        True attributes of the searched set.
    query_attributes : array-like of shape (n_queries, n_attributes), or DataFrame
        Attributes of each query, as for :func:`precision_at_k`.
    k : int
        Number of retrieved items, at most ``n_samples``.
    min_matches : int, default=None
        Number of attribute values a retrieved item must share with the
        query; ``None`` means all attributes (exact match).
    no_match : {"zero", "exclude"}, default="zero"
        Average over all queries (those without any match score 0), or over
        the queries that some item matches, as in :func:`precision_at_k`.

    Returns
    -------
    precision : float
        In [0, 1]; NaN with ``no_match="exclude"`` when no query can be
        matched.

    Examples
    --------
    One query that two of four ECGs match: a random pair misses both with
    probability C(2, 2) / C(4, 2) = 1/6.

    >>> from sklearn_crocs.metrics import chance_precision_at_k
    >>> y_true = [["SR", "F"], ["SR", "M"], ["AFIB", "M"], ["SR", "M"]]
    >>> round(chance_precision_at_k(y_true, [["SR", "M"]], k=2), 4)
    0.8333
    """
    true_codes, query_codes = _attribute_codes(y_true, query_attributes)
    min_matches = _check_min_matches(min_matches, true_codes.shape[1])
    n_samples = len(true_codes)
    if k > n_samples:
        raise ValueError(f"k={k} exceeds the {n_samples} item(s) of y_true.")
    combinations, counts = np.unique(true_codes, axis=0, return_counts=True)
    shared = (query_codes[:, None, :] == combinations[None, :, :]).sum(axis=2)
    n_relevant = (shared >= min_matches) @ counts
    if no_match == "exclude":
        n_relevant = n_relevant[n_relevant > 0]
        if not len(n_relevant):
            return float("nan")
    return float(np.mean(1 - hypergeom.pmf(0, n_samples, n_relevant, k)))


def _hits(true_codes, query_codes, indices, k, min_matches):
    """Whether one of the first ``k`` retrieved items of each query is relevant."""
    shared = (true_codes[indices[:, :k]] == query_codes[:, None, :]).sum(axis=2)
    return (shared >= min_matches).any(axis=1)


def _check_indices(indices, n_samples, n_queries, k):
    indices = np.asarray(indices)
    if indices.ndim != 2 or indices.dtype.kind not in "iu":
        raise ValueError(
            "indices must be an integer array of shape (n_queries, n_neighbors), such as "
            f"the second output of PrototypeRetriever.query; got dtype {indices.dtype} and shape "
            f"{indices.shape}."
        )
    if len(indices) != n_queries:
        raise ValueError(
            f"indices has {len(indices)} row(s) but there are {n_queries} queries; "
            "row i of indices must hold the items retrieved for query i."
        )
    if indices.size and (indices.min() < 0 or indices.max() >= n_samples):
        raise ValueError(
            f"indices must lie in [0, {n_samples}), the rows of y_true; got values from "
            f"{indices.min()} to {indices.max()}."
        )
    if k is None:
        k = indices.shape[1]
    if k > indices.shape[1]:
        raise ValueError(
            f"k={k} but only {indices.shape[1]} item(s) were retrieved per query; "
            f"retrieve at least {k} (n_neighbors={k})."
        )
    return indices, k


@validate_params(
    {
        "y_true": ["array-like"],
        "indices": ["array-like"],
        "query_attributes": ["array-like"],
        "k": [Interval(Integral, 1, None, closed="left"), None],
        "min_matches": [Interval(Integral, 1, None, closed="left"), None],
        "no_match": [StrOptions({"exclude", "zero"})],
    },
    prefer_skip_nested_validation=True,
)
def precision_at_k(y_true, indices, query_attributes, *, k=None, min_matches=None, no_match="zero"):
    """Precision at K of attribute retrieval, the paper's Eq. 5.

    For query ``j`` with attributes ``A_j`` and retrieved items ``i = 1..K``
    with true attributes ``A_i``::

        P@K = 1/M sum_j 1( sum_{i<=K} 1(#{a : A_i[a] == A_j[a]} >= min_matches) >= 1 )

    that is, the fraction of queries for which at least one of the first
    ``K`` retrieved items shares at least ``min_matches`` attribute values
    with the query. ``min_matches=1, 2, ...`` give the paper's ">=1", ">=2"
    rows; ``min_matches`` equal to the number of attributes gives the exact
    match of Eq. 5 (the "=3" row for three attributes).

    Read more in the :ref:`User Guide <evaluation>`.

    Parameters
    ----------
    y_true : array-like of shape (n_samples,) or (n_samples, n_attributes), or DataFrame
        True attributes of the searched set (the database).
    indices : array-like of int, shape (n_queries, n_neighbors)
        Rows of ``y_true`` retrieved for each query, best first, such as the
        second output of :meth:`PrototypeRetriever.query
        <sklearn_crocs.PrototypeRetriever.query>`. The first ``k``
        columns are used as given: ties in distance are resolved by the
        search (``PrototypeRetriever`` orders equal distances by increasing
        index), not here.
    query_attributes : array-like of shape (n_queries, n_attributes), or DataFrame
        Attributes of each query, for example
        ``PrototypeRetriever.query_attributes_``, in the column order of
        ``y_true`` (a DataFrame is matched by column name).
    k : int, default=None
        Number of retrieved items that count; ``None`` uses every column of
        ``indices``.
    min_matches : int, default=None
        Number of attribute values a retrieved item must share with the query
        to be relevant; ``None`` means all attributes (exact match, Eq. 5).
    no_match : {"zero", "exclude"}, default="zero"
        Queries that no item of ``y_true`` matches on ``min_matches``
        attributes (see :func:`matchable_queries`) cannot be hit whatever
        the search does. ``"zero"`` counts them as misses and averages over
        all queries: Eq. 5 as written. ``"exclude"`` averages over the
        other queries only and warns how many it left out (the result is
        NaN, with an ``UndefinedMetricWarning``, if none is left). The two
        agree when every query is matchable.

    Returns
    -------
    precision : float
        In [0, 1].

    See Also
    --------
    matchable_queries : Which queries have a possible match.
    retrieval_report : P@K for several K and numbers of matches (Table 2).

    Examples
    --------
    Two queries over four ECGs; the first retrieves an exact match second,
    the second retrieves ECGs that share only the rhythm.

    >>> from sklearn_crocs.metrics import precision_at_k
    >>> y_true = [["SR", "F"], ["SR", "M"], ["AFIB", "M"], ["AFIB", "M"]]
    >>> queries = [["SR", "M"], ["AFIB", "F"]]
    >>> indices = [[0, 1], [2, 3]]
    >>> precision_at_k(y_true, indices, queries, k=2)  # query 2 has no exact match
    0.5
    >>> import warnings
    >>> with warnings.catch_warnings():
    ...     warnings.simplefilter("ignore")  # "excluded 1 of 2 queries ..."
    ...     precision_at_k(y_true, indices, queries, k=2, no_match="exclude")
    1.0
    >>> precision_at_k(y_true, indices, queries, k=1, min_matches=1)
    1.0
    """
    true_codes, query_codes = _attribute_codes(y_true, query_attributes)
    return _precision(true_codes, query_codes, indices, k, min_matches, no_match)


def _precision(true_codes, query_codes, indices, k, min_matches, no_match):
    """precision_at_k on attribute codes."""
    indices, k = _check_indices(indices, len(true_codes), len(query_codes), k)
    min_matches = _check_min_matches(min_matches, true_codes.shape[1])
    hits = _hits(true_codes, query_codes, indices, k, min_matches)
    if no_match == "zero":
        return float(np.mean(hits))
    matchable = _matchable(true_codes, query_codes, min_matches)
    if not matchable.all():
        _warn(
            f"precision_at_k excluded {int((~matchable).sum())} of {len(matchable)} "
            f"queries that no item in y_true matches on {min_matches} or more "
            "attributes (no_match='exclude').",
            UserWarning,
        )
    if not matchable.any():
        _warn(
            f"No query has an item in y_true that matches it on {min_matches} or more "
            "attributes, so precision_at_k with no_match='exclude' is undefined; "
            "returning NaN. Use no_match='zero' to count such queries as misses.",
            UndefinedMetricWarning,
        )
        return float("nan")
    return float(np.mean(hits[matchable]))


def match_label(min_matches, n_attributes):
    """Column label of a number of matched attributes, as in the paper: ">=1", ..., "=3"."""
    return f"={min_matches}" if min_matches == n_attributes else f">={min_matches}"


@validate_params(
    {
        "y_true": ["array-like"],
        "neighbors": [dict, tuple],
        "k": ["array-like", Interval(Integral, 1, None, closed="left")],
        "min_matches": ["array-like", Interval(Integral, 1, None, closed="left"), None],
        "no_match": [StrOptions({"exclude", "zero"})],
        "percent": ["boolean"],
        "decimals": [Interval(Integral, 0, None, closed="left"), None],
    },
    prefer_skip_nested_validation=True,
)
def retrieval_report(
    y_true,
    neighbors,
    *,
    k=(1, 5, 10),
    min_matches=None,
    no_match="zero",
    percent=True,
    decimals=1,
):
    """Table of P@K by K and number of matched attributes, one row per method (Table 2).

    Read more in the :ref:`User Guide <evaluation>`.

    Parameters
    ----------
    y_true : array-like of shape (n_samples,) or (n_samples, n_attributes), or DataFrame
        True attributes of the searched set.
    neighbors : dict of str to tuple, or tuple
        Per method name (for example ``"CP CROCS"``), a tuple
        ``(query_attributes, indices)``: the attributes of its queries and the
        rows of ``y_true`` retrieved for them, as for :func:`precision_at_k`.
        A single tuple is reported as method ``"model"``.
    k : int or sequence of int, default=(1, 5, 10)
        Numbers of retrieved items (the paper's K).
    min_matches : int or sequence of int, default=None
        Numbers of matched attributes; ``None`` means ``1, 2, ...,
        n_attributes``, labelled ">=1", ">=2", ..., "=n_attributes".
    no_match : {"zero", "exclude"}, default="zero"
        Rule for queries without any possible match, see
        :func:`precision_at_k`; :func:`matchable_queries` counts them.
    percent : bool, default=True
        Report in percent, as the paper does.
    decimals : int or None, default=1
        Rounding; ``None`` keeps full precision.

    Returns
    -------
    report : pandas.DataFrame
        Rows: methods. Columns: a MultiIndex ``(K, "# matches")``.

    Examples
    --------
    >>> from sklearn_crocs.metrics import retrieval_report
    >>> y_true = [["SR", "F"], ["SR", "M"], ["AFIB", "M"], ["AFIB", "M"]]
    >>> queries = [["SR", "M"], ["AFIB", "M"]]
    >>> retrieval_report(y_true, {"good": (queries, [[1, 0], [2, 3]]),
    ...                           "poor": (queries, [[0, 1], [0, 1]])}, k=(1, 2))
    K             1           2
    # matches   >=1    =2   >=1    =2
    good      100.0 100.0 100.0 100.0
    poor       50.0   0.0 100.0  50.0
    """
    if isinstance(neighbors, tuple):
        neighbors = {"model": neighbors}
    if not neighbors:
        raise ValueError("neighbors is empty; pass at least one method's retrieval.")
    ks = [int(v) for v in np.atleast_1d(k)]
    n_attributes = as_attribute_frame(y_true, name="y_true").shape[1]
    if min_matches is None:
        matches = list(range(1, n_attributes + 1))
    else:
        matches = [_check_min_matches(int(m), n_attributes) for m in np.atleast_1d(min_matches)]
    rows = {}
    for method, pair in neighbors.items():
        if not (isinstance(pair, tuple) and len(pair) == 2):
            raise ValueError(
                f"neighbors[{method!r}] must be a tuple (query_attributes, indices); "
                f"got {type(pair).__name__}."
            )
        query_attributes, indices = pair
        true_codes, query_codes = _attribute_codes(y_true, query_attributes)
        rows[method] = {
            (kk, match_label(m, n_attributes)): _precision(
                true_codes, query_codes, indices, kk, m, no_match
            )
            for kk in ks
            for m in matches
        }
    report = pd.DataFrame.from_dict(rows, orient="index")
    report.columns = pd.MultiIndex.from_tuples(report.columns, names=["K", "# matches"])
    if percent:
        report = 100 * report
    if decimals is not None:
        report = report.round(decimals)
    return report
