"""Evaluation of clustering and retrieval by patient attributes, as in the CROCS paper."""

from ._clustering import attribute_accuracy_score, attribute_ami_score, clustering_report
from ._evaluation import evaluate_prototypes
from ._retrieval import (
    chance_precision_at_k,
    matchable_queries,
    precision_at_k,
    retrieval_report,
)
from ._scorers import make_ami_scorer, make_precision_at_k_scorer

__all__ = [
    "attribute_accuracy_score",
    "attribute_ami_score",
    "chance_precision_at_k",
    "clustering_report",
    "evaluate_prototypes",
    "make_ami_scorer",
    "make_precision_at_k_scorer",
    "matchable_queries",
    "precision_at_k",
    "retrieval_report",
]
