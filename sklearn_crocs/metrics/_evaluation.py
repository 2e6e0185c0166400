"""Evaluate a fitted CROCSClusterer the way the paper does: CP and TP CROCS side by side."""

import numpy as np
import pandas as pd
from sklearn.utils import Bunch
from sklearn.utils.validation import check_consistent_length, check_is_fitted

from .._attributes import as_attribute_frame
from ._clustering import clustering_report

__all__ = ["evaluate_prototypes"]

#: Method names of the paper for the two prototype sets.
PROTOTYPE_KINDS = {"CP CROCS": "learned", "TP CROCS": "mean"}


def _assign(embeddings, prototypes, attributes):
    """Attributes of the nearest prototype of each embedding (cosine on unit vectors)."""
    return attributes[np.argmax(embeddings @ prototypes.T, axis=1)]


def evaluate_prototypes(estimator, X, y, *, percent=True, decimals=1, file=None):
    """Clustering table of a fitted CROCSClusterer for CP and TP CROCS (paper, Table 1).

    The held-out ECGs are embedded once; each is then assigned the attributes
    of its nearest learned prototype (CP CROCS) and of its nearest mean
    training embedding (TP CROCS), and both assignments are scored with
    :func:`clustering_report`.

    Parameters
    ----------
    estimator : CROCSClusterer
        Fitted estimator.
    X : array-like of ECG signals
        Held-out ECGs (patients not seen in training).
    y : array-like or DataFrame
        Their true attributes, in the layout used in ``fit``.
    percent : bool, default=True
        Report in percent.
    decimals : int or None, default=1
        Rounding of the tables.
    file : file-like, default=None
        Where to print the tables; ``None`` prints nothing.

    Returns
    -------
    result : sklearn.utils.Bunch
        ``clustering``: DataFrame with one row per method ("CP CROCS",
        "TP CROCS") and ``(attribute, "Acc" | "AMI")`` columns;
        ``predictions``: dict of method name to assigned attributes
        (DataFrame).

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
    ['CP CROCS', 'TP CROCS']
    >>> result.clustering.columns.get_level_values(0).unique().tolist()
    ['attribute_0', 'attribute_1', 'combination']
    """
    check_is_fitted(estimator, "net_")
    names = None if isinstance(y, pd.DataFrame) else estimator.attribute_names_
    y_true = as_attribute_frame(y, names)
    embeddings = estimator.transform(X)
    check_consistent_length(embeddings, y_true)
    predictions = {}
    for method, kind in PROTOTYPE_KINDS.items():
        prototypes, attributes = estimator.get_prototypes(kind)
        predictions[method] = pd.DataFrame(
            _assign(embeddings, prototypes, attributes), columns=list(y_true.columns)
        )
    clustering = clustering_report(y_true, predictions, percent=percent, decimals=decimals)
    if file is not None:
        unit = " (%)" if percent else ""
        print(f"Clustering of {len(y_true)} held-out ECGs{unit}:", file=file)
        print(clustering.to_string(), file=file)
    return Bunch(clustering=clustering, predictions=predictions)
