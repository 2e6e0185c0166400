"""Datasets: the bundled LUDB records and PTB-XL sample, loaders and preprocessing.

Loaders return a :class:`sklearn.utils.Bunch` with float32 signals of shape
(n_records, n_leads, n_samples) in mV, a DataFrame of patient attributes,
patient ids (``groups``) and a description. The preprocessing functions
reproduce the paper's pipeline: frames of 2500 samples, resampling, per-frame
normalisation, leads as instances, age quartiles and patient-level splits.
"""

from ._base import InvalidRecordError, clear_data_home, get_data_home
from ._chapman import load_chapman
from ._fetch import fetch_chapman, fetch_ptbxl
from ._ludb import load_ludb, load_ludb_instances
from ._preprocessing import (
    AgeGroupEncoder,
    FrameNormalizer,
    leads_as_instances,
    make_frames,
    normalize_frames,
    resample_signals,
)
from ._ptbxl import load_ptbxl
from ._ptbxl_sample import load_ptbxl_sample, load_ptbxl_sample_frames
from ._split import patient_split, ptbxl_fold_split
from ._wfdb import load_wfdb

__all__ = [
    "AgeGroupEncoder",
    "FrameNormalizer",
    "InvalidRecordError",
    "clear_data_home",
    "fetch_chapman",
    "fetch_ptbxl",
    "get_data_home",
    "leads_as_instances",
    "load_chapman",
    "load_ludb",
    "load_ludb_instances",
    "load_ptbxl",
    "load_ptbxl_sample",
    "load_ptbxl_sample_frames",
    "load_wfdb",
    "make_frames",
    "normalize_frames",
    "patient_split",
    "ptbxl_fold_split",
    "resample_signals",
]
