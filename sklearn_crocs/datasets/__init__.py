"""Datasets: the bundled LUDB records, loaders and preprocessing for ECG databases."""

from ._base import InvalidRecordError, clear_data_home, get_data_home
from ._ludb import load_ludb

__all__ = [
    "InvalidRecordError",
    "clear_data_home",
    "get_data_home",
    "load_ludb",
]
