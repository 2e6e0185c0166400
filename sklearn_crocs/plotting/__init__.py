"""Visualisations in scikit-learn's Display style (matplotlib is an optional dependency)."""

from ._dendrogram import PrototypeDendrogramDisplay
from ._prototypes import PrototypeDisplay
from ._retrieval import RetrievalDisplay
from ._training import TrainingCurveDisplay

__all__ = [
    "PrototypeDendrogramDisplay",
    "PrototypeDisplay",
    "RetrievalDisplay",
    "TrainingCurveDisplay",
]
