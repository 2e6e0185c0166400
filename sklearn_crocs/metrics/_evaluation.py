"""Evaluate a fitted CROCSClusterer the way the paper does: CP and TP CROCS side by side."""

import warnings
from numbers import Integral

import numpy as np
import pandas as pd
from sklearn.utils import Bunch
from sklearn.utils._param_validation import Interval, StrOptions, validate_params
from sklearn.utils.validation import check_consistent_length, check_is_fitted

from .._display import escape
from .._search import top_k
from .._utils import _crocs_step, _nearest
from ._clustering import clustering_report
from ._retrieval import chance_precision_at_k, match_label, matchable_queries, retrieval_report

__all__ = ["evaluate_prototypes"]

#: What the clustering table's majority row is, printed below it.
MAJORITY = (
    "The majority row: each attribute's most frequent value among the training ECGs, not "
    "the held-out ones."
)
#: Method names of the paper for the two prototype sets.
PROTOTYPE_KINDS = {"CP CROCS": "learned", "TP CROCS": "mean"}


@validate_params(
    {
        "estimator": "no_validation",
        "X": "no_validation",
        "y": ["array-like"],
        "k": ["array-like", Interval(Integral, 1, None, closed="left")],
        "no_match": [StrOptions({"exclude", "zero"})],
        "percent": ["boolean"],
        "decimals": [Interval(Integral, 0, None, closed="left"), None],
        "baselines": ["boolean"],
        "file": "no_validation",
    },
    prefer_skip_nested_validation=True,
)
def evaluate_prototypes(
    estimator,
    X,
    y,
    *,
    k=(1, 5, 10),
    no_match="zero",
    percent=True,
    decimals=1,
    baselines=True,
    file=None,
):
    """Clustering and retrieval tables of a fitted CROCSClusterer for CP and TP CROCS.

    The held-out ECGs are embedded once. Clustering (paper, Table 1): each
    ECG is assigned the attributes of its nearest learned prototype (CP
    CROCS) and of its nearest mean training embedding (TP CROCS), and both
    assignments are scored with :func:`clustering_report`. Retrieval (paper,
    Table 2): every prototype of each set retrieves its ``K`` nearest
    held-out ECGs, scored with :func:`retrieval_report` for every number of
    matched attributes. With ``baselines``, the tables also show what a
    model that learned nothing scores: the majority predictor (each
    attribute's most frequent value among the training ECGs) and random
    retrieval (:func:`chance_precision_at_k` of the learned prototypes).

    Read more in the :ref:`User Guide <evaluation>`.

    Parameters
    ----------
    estimator : CROCSClusterer or Pipeline ending in one
        Fitted estimator.
    X : array-like of ECG signals
        Held-out ECGs (patients not seen in training), at least ``max(k)``.
    y : array-like or DataFrame
        Their true attributes, in the layout used in ``fit``.
    k : int or sequence of int, default=(1, 5, 10)
        Numbers of retrieved ECGs per query (the paper's K).
    no_match : {"zero", "exclude"}, default="zero"
        Rule for queries that no held-out ECG matches on the required number
        of attributes, see :func:`precision_at_k`; how many queries have a
        possible match is in ``retrieval_queries`` and printed below the
        table.
    percent : bool, default=True
        Report in percent.
    decimals : int or None, default=1
        Rounding of the tables.
    baselines : bool, default=True
        Add the rows "Majority" to the clustering table and "Random" to
        the retrieval table.
    file : file-like, default=None
        Where to print the tables, with control characters in attribute names
        and values shown as escapes (``\\x1b``); ``None`` prints nothing.

    Returns
    -------
    result : sklearn.utils.Bunch
        ``clustering``: DataFrame with one row per method ("CP CROCS",
        "TP CROCS") and ``(attribute, "Acc" | "AMI")`` columns;
        ``retrieval``: DataFrame of P@K with the same rows and
        ``(K, "# matches")`` columns;
        ``retrieval_queries``: DataFrame of the number of queries that at
        least one held-out ECG matches, per method and number of matches
        (the queries scored with ``no_match="exclude"``), with a column
        ``"total"``;
        ``predictions``: dict of method name to assigned attributes
        (DataFrame);
        ``neighbors``: dict of method name to ``(query_attributes, indices)``,
        the prototypes' attributes and the rows of X they retrieved.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_crocs import CROCSClusterer
    >>> from sklearn_crocs.metrics import evaluate_prototypes
    >>> rng = np.random.RandomState(0)
    >>> y = np.column_stack([rng.choice(["SR", "SB"], 60), rng.choice(["F", "M"], 60)])
    >>> X = rng.randn(60, 400)
    >>> model = CROCSClusterer(embedding_dim=8, max_epochs=2, validation_fraction=None,
    ...                        random_state=0).fit(X[:40], y[:40])
    >>> result = evaluate_prototypes(model, X[40:], y[40:])
    >>> result.clustering.index.tolist()
    ['CP CROCS', 'TP CROCS', 'Majority']
    >>> result.retrieval.index.tolist()
    ['CP CROCS', 'TP CROCS', 'Random']
    >>> result.clustering.columns.get_level_values(0).unique().tolist()
    ['attribute_0', 'attribute_1', 'combination']
    >>> result.retrieval.columns.tolist()
    [(1, '>=1'), (1, '=2'), (5, '>=1'), (5, '=2'), (10, '>=1'), (10, '=2')]
    """
    check_is_fitted(estimator)
    crocs = _crocs_step(estimator)
    y_true = crocs.attribute_codec_.read(y)
    embeddings = np.asarray(estimator.transform(X), dtype=np.float32)
    check_consistent_length(embeddings, y_true)
    ks = sorted({int(v) for v in np.atleast_1d(k)})
    if ks[-1] > len(embeddings):
        raise ValueError(
            f"k={ks[-1]} exceeds the {len(embeddings)} held-out ECG(s); pass smaller k or "
            "more ECGs."
        )
    n_attributes = y_true.shape[1]
    predictions, neighbors, scored = {}, {}, {}
    for method, kind in PROTOTYPE_KINDS.items():
        prototypes, attributes = crocs.get_prototypes(kind)
        counts = crocs.combination_counts_
        if kind == "mean":  # that set leaves out combinations without training ECGs
            counts = counts[counts > 0]
        predictions[method] = pd.DataFrame(
            attributes[_nearest(embeddings, prototypes, counts)], columns=list(y_true.columns)
        )
        queries = pd.DataFrame(attributes, columns=crocs.attribute_names_)
        neighbors[method] = (queries, top_k(prototypes, embeddings, ks[-1])[1])
        scored[method] = {
            match_label(m, n_attributes): int(
                matchable_queries(y_true, queries, min_matches=m).sum()
            )
            for m in range(1, n_attributes + 1)
        }
        scored[method]["total"] = len(queries)
    if baselines:
        # Each attribute's most frequent value among the training ECGs.
        counts = pd.Series(crocs.prototype_counts_)
        training = pd.DataFrame(crocs.get_prototypes()[1], columns=list(y_true.columns))
        modes = [counts.groupby(training[c].to_numpy()).sum().idxmax() for c in training]
        predictions["Majority"] = pd.DataFrame([modes] * len(y_true), columns=list(y_true.columns))
    clustering = clustering_report(y_true, predictions, percent=percent, decimals=decimals)
    with warnings.catch_warnings():
        # The counts of excluded queries are in retrieval_queries (and printed).
        warnings.filterwarnings("ignore", "precision_at_k excluded", UserWarning)
        retrieval = retrieval_report(
            y_true, neighbors, k=ks, no_match=no_match, percent=percent, decimals=decimals
        )
    if baselines:
        queries = neighbors["CP CROCS"][0]
        chance = {
            (kk, match_label(m, n_attributes)): chance_precision_at_k(
                y_true, queries, k=kk, min_matches=m, no_match=no_match
            )
            for kk in ks
            for m in range(1, n_attributes + 1)
        }
        chance = pd.DataFrame([chance], index=["Random"]) * (100 if percent else 1)
        chance.columns = retrieval.columns
        retrieval = pd.concat([retrieval, chance if decimals is None else chance.round(decimals)])
    retrieval_queries = pd.DataFrame.from_dict(scored, orient="index")
    retrieval_queries.columns.name = "# matches"
    if file is not None:
        # Attribute names and values come from the user's data: escaped for a terminal.
        unit = " (%)" if percent else ""
        print(f"Clustering of {len(y_true)} held-out ECGs{unit}:", file=file)
        print(escape(clustering.to_string(), lines=True), file=file)
        if baselines:
            print(MAJORITY, file=file)
        print(file=file)
        print(
            f"Retrieval of the K nearest of {len(y_true)} held-out ECGs per prototype, P@K{unit}:",
            file=file,
        )
        print(escape(retrieval.to_string(), lines=True), file=file)
        rule = "only these are scored" if no_match == "exclude" else "the others count as misses"
        print(
            f"Queries that at least one held-out ECG matches on that many attributes ({rule}):",
            file=file,
        )
        print(escape(retrieval_queries.to_string(), lines=True), file=file)
    return Bunch(
        clustering=clustering,
        retrieval=retrieval,
        retrieval_queries=retrieval_queries,
        predictions=predictions,
        neighbors=neighbors,
    )
