"""Evaluation of clustering and retrieval by patient attributes, as in the CROCS paper."""

from ._clustering import attribute_accuracy_score, attribute_ami_score, clustering_report
from ._evaluation import evaluate_prototypes

__all__ = [
    "attribute_accuracy_score",
    "attribute_ami_score",
    "clustering_report",
    "evaluate_prototypes",
]
