"""Clinical prototypes (CROCS) for attribute-specific clustering and retrieval of ECGs.

scikit-learn compatible implementation of CROCS (Kiyasseh, Zhu & Clifton,
NeurIPS 2021).
"""

import importlib

from ._config import config_context, get_config, set_config
from ._paper import paper_params

__version__ = "0.1.0.dev0"

# The estimators import torch, which takes seconds; they are imported on first
# access (PEP 562) so that ``sklearn-crocs --help`` and light submodules stay fast.
_LAZY = {
    "CROCSClusterer": "._clusterer",
    "ContrastivePretrainer": "._pretraining",
    "InvalidModelFileError": "._persistence",
    "PrototypeRetriever": "._retrieval",
    "clocs_loss": "._pretraining",
    "pretrained_info": "._persistence._pretrained",
}

__all__ = [
    "CROCSClusterer",
    "ContrastivePretrainer",
    "InvalidModelFileError",
    "PrototypeRetriever",
    "__version__",
    "clocs_loss",
    "config_context",
    "get_config",
    "paper_params",
    "pretrained_info",
    "set_config",
]


def __getattr__(name):
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name], __name__), name)
        globals()[name] = value  # later accesses skip this function
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(__all__))
