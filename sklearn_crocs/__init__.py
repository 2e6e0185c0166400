"""Clinical prototypes (CROCS) for attribute-specific clustering and retrieval of ECGs.

scikit-learn compatible implementation of CROCS (Kiyasseh, Zhu & Clifton,
NeurIPS 2021).
"""

from ._clusterer import CROCSClusterer
from ._persistence import InvalidModelFileError
from ._retrieval import PrototypeRetriever

__version__ = "0.1.0.dev0"

__all__ = ["CROCSClusterer", "InvalidModelFileError", "PrototypeRetriever", "__version__"]
