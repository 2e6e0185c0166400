"""Visualisations in scikit-learn's Display style (matplotlib is an optional dependency)."""

from ._prototypes import PrototypeDisplay

__all__ = ["PrototypeDisplay"]
