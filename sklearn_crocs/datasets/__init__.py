"""Datasets: the bundled LUDB records and PTB-XL sample, loaders, fetchers and splits.

Loaders (WFDB; EDF/EDF+ with the ``edf`` extra) return a
:class:`sklearn.utils.Bunch` with float32 signals of shape
(n_records, n_leads, n_samples) in mV, a DataFrame of patient attributes,
patient ids (``groups``) and a description. The splits keep every patient's
records on one side. The preprocessing of the paper (frames, resampling,
normalisation, leads as instances, age quartiles) is in
:mod:`sklearn_crocs.preprocessing`.
"""

from .._split import patient_split, ptbxl_fold_split
from ._base import InvalidRecordError, clear_data_home, get_data_home
from ._chapman import fetch_chapman, load_chapman
from ._class_maps import map_classes
from ._edf import load_edf
from ._ludb import load_ludb, load_ludb_instances
from ._ptbxl import fetch_ptbxl, load_ptbxl
from ._ptbxl_sample import load_ptbxl_sample, load_ptbxl_sample_frames
from ._wfdb import load_wfdb

__all__ = [
    "InvalidRecordError",
    "clear_data_home",
    "fetch_chapman",
    "fetch_ptbxl",
    "get_data_home",
    "load_chapman",
    "load_edf",
    "load_ludb",
    "load_ludb_instances",
    "load_ptbxl",
    "load_ptbxl_sample",
    "load_ptbxl_sample_frames",
    "load_wfdb",
    "map_classes",
    "patient_split",
    "ptbxl_fold_split",
]
