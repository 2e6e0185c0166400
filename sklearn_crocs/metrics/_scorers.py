"""Scorers for model selection: AMI of the assigned attributes and P@K of prototype retrieval.

scikit-learn's ``make_scorer(adjusted_mutual_info_score)`` cannot take the
2-D attribute tables that CROCS is fitted on; these scorers can, and plug into
``GridSearchCV``, ``cross_validate`` and multi-metric ``scoring`` dicts.
"""

from numbers import Integral

import numpy as np
import pandas as pd
from sklearn.utils._param_validation import Interval, StrOptions, validate_params

from .._search import top_k
from .._utils import _crocs_step
from ._clustering import attribute_ami_score
from ._retrieval import precision_at_k

__all__ = ["make_ami_scorer", "make_precision_at_k_scorer"]


class _AMIScorer:
    """AMI between the true attributes and ``estimator.predict(X)``."""

    def __init__(self, attribute):
        self.attribute = attribute

    def __call__(self, estimator, X, y):
        y_pred = estimator.predict(X)
        if self.attribute == "mean":
            scores = attribute_ami_score(y, y_pred, attribute="all")
            return float(scores.drop("combination").mean())
        return attribute_ami_score(y, y_pred, attribute=self.attribute)

    def __repr__(self):
        return f"make_ami_scorer(attribute={self.attribute!r})"


class _PrecisionAtKScorer:
    """P@K of the estimator's prototypes as queries over the embeddings of X."""

    def __init__(self, k, min_matches, prototypes, no_match):
        self.k = k
        self.min_matches = min_matches
        self.prototypes = prototypes
        self.no_match = no_match

    def __call__(self, estimator, X, y):
        crocs = _crocs_step(estimator)
        embeddings = np.asarray(estimator.transform(X), dtype=np.float32)
        if self.k > len(embeddings):
            raise ValueError(
                f"make_precision_at_k_scorer(k={self.k}) cannot score {len(embeddings)} "
                f"ECG(s): at least k={self.k} are needed. Use larger test folds or a smaller k."
            )
        prototypes, attributes = crocs.get_prototypes(self.prototypes)
        y_true = crocs.attribute_codec_.read(y)
        queries = pd.DataFrame(attributes, columns=crocs.attribute_names_)
        _, indices = top_k(prototypes, embeddings, self.k)
        return precision_at_k(
            y_true,
            indices,
            queries,
            k=self.k,
            min_matches=self.min_matches,
            no_match=self.no_match,
        )

    def __repr__(self):
        return (
            f"make_precision_at_k_scorer(k={self.k}, min_matches={self.min_matches!r}, "
            f"prototypes={self.prototypes!r}, no_match={self.no_match!r})"
        )


@validate_params(
    {"attribute": [str, Interval(Integral, 0, None, closed="left")]},
    prefer_skip_nested_validation=True,
)
def make_ami_scorer(*, attribute="combination"):
    """Scorer of the adjusted mutual information of the assigned attributes.

    The scorer calls ``estimator.predict(X)`` (the attributes of the nearest
    prototype) and returns :func:`attribute_ami_score` against ``y``. Unlike
    ``make_scorer(adjusted_mutual_info_score)`` it accepts ``y`` of shape
    (n_samples, n_attributes) or a DataFrame.

    Read more in the :ref:`User Guide <scorers>`.

    Parameters
    ----------
    attribute : str or int, default="combination"
        Attribute to score: a name (DataFrame columns), a position,
        ``"combination"`` (the full attribute combination) or ``"mean"``
        (the mean of the per-attribute AMIs).

    Returns
    -------
    scorer : callable
        ``scorer(estimator, X, y) -> float`` for a fitted
        :class:`~sklearn_crocs.CROCSClusterer` or a Pipeline ending in one;
        greater is better.

    See Also
    --------
    make_precision_at_k_scorer : Scorer of prototype retrieval.

    Examples
    --------
    >>> import numpy as np
    >>> import pandas as pd
    >>> from sklearn.model_selection import cross_validate
    >>> from sklearn_crocs import CROCSClusterer
    >>> from sklearn_crocs.metrics import make_ami_scorer, make_precision_at_k_scorer
    >>> rng = np.random.RandomState(0)
    >>> y = pd.DataFrame({"rhythm": rng.choice(["AFIB", "SR"], 60),
    ...                   "sex": rng.choice(["F", "M"], 60)})
    >>> X = rng.randn(60, 400)
    >>> model = CROCSClusterer(embedding_dim=8, max_epochs=2, validation_fraction=None,
    ...                        random_state=0)
    >>> scoring = {"ami": make_ami_scorer(attribute="rhythm"),
    ...            "p_at_5": make_precision_at_k_scorer(k=5, min_matches=1)}
    >>> result = cross_validate(model, X, y, cv=2, scoring=scoring)
    >>> sorted(result)
    ['fit_time', 'score_time', 'test_ami', 'test_p_at_5']
    """
    return _AMIScorer(attribute)


@validate_params(
    {
        "k": [Interval(Integral, 1, None, closed="left")],
        "min_matches": [Interval(Integral, 1, None, closed="left"), None],
        "prototypes": [StrOptions({"learned", "mean"})],
        "no_match": [StrOptions({"exclude", "zero"})],
    },
    prefer_skip_nested_validation=True,
)
def make_precision_at_k_scorer(*, k=10, min_matches=None, prototypes="learned", no_match="zero"):
    """Scorer of the precision at K of retrieval with the estimator's prototypes.

    The scorer embeds ``X`` with ``estimator.transform``, uses every
    prototype as a query, retrieves its ``k`` nearest ECGs of ``X`` and
    returns :func:`precision_at_k` against ``y`` (the paper's retrieval
    setting, Eq. 5).

    Read more in the :ref:`User Guide <scorers>`.

    Parameters
    ----------
    k : int, default=10
        Number of ECGs retrieved per prototype (the paper's K); the scored
        set must hold at least ``k`` ECGs.
    min_matches : int, default=None
        Number of attribute values a retrieved ECG must share with the
        prototype to be relevant; ``None`` means all (exact match).
    prototypes : {"learned", "mean"}, default="learned"
        Learned prototypes (CP CROCS) or mean training embeddings (TP CROCS),
        as ``PrototypeRetriever(prototypes=...)``.
    no_match : {"zero", "exclude"}, default="zero"
        Rule for prototypes that no ECG of ``X`` matches on ``min_matches``
        attributes, see :func:`precision_at_k`.

    Returns
    -------
    scorer : callable
        ``scorer(estimator, X, y) -> float`` for a fitted
        :class:`~sklearn_crocs.CROCSClusterer` or a Pipeline ending in one;
        greater is better.

    See Also
    --------
    make_ami_scorer : Scorer of the clustering.

    Examples
    --------
    >>> from sklearn_crocs.metrics import make_precision_at_k_scorer
    >>> make_precision_at_k_scorer(k=10, min_matches=2)
    make_precision_at_k_scorer(k=10, min_matches=2, prototypes='learned', no_match='zero')
    """
    return _PrecisionAtKScorer(k, min_matches, prototypes, no_match)
