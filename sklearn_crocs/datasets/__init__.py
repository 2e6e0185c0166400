"""Datasets: the bundled LUDB records, loaders and preprocessing for ECG databases."""

__all__ = []
