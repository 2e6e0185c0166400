"""Preprocessing: raw-recording conditioning, frames, resampling, normalisation, age groups.

Functions and transformers that turn loaded records (see
:mod:`sklearn_crocs.datasets`) into CROCS's inputs: frames of 2500 samples,
resampling, per-frame normalisation, leads as single-lead instances, and age
quartiles learned on the training patients. Attributes and patient ids travel
along with every frame or instance, so that splits stay at the patient level.
"""

from ._age_groups import AgeGroupEncoder
from ._conditioner import SignalConditioner
from ._signals import (
    FrameNormalizer,
    check_signal_layout,
    leads_as_instances,
    make_frames,
    normalize_frames,
    resample_signals,
)

__all__ = [
    "AgeGroupEncoder",
    "FrameNormalizer",
    "SignalConditioner",
    "check_signal_layout",
    "leads_as_instances",
    "make_frames",
    "normalize_frames",
    "resample_signals",
]
