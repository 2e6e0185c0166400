"""The CROCS paper's baselines as scikit-learn clusterers, on the package's encoders.

Supervised like :class:`~sklearn_crocs.CROCSClusterer` (``fit(X, y)``):
:class:`DTC` (one prototype per attribute combination), :class:`KMeansCROCS`
and :class:`KMeansEP`. Unsupervised (``fit(X)``; a ``y`` only names the
clusters): :class:`KMeansRaw`, :class:`DeepCluster`, :class:`IIC`,
:class:`SeLA` and :class:`DTCR`. Every clusterer whose clusters are not
attribute combinations names them from the training ECGs' attributes with
:func:`map_clusters` and offers ``predict_attributes``.
"""

from ._base import map_clusters
from ._deepcluster import DeepCluster
from ._dtc import DTC
from ._dtcr import DTCR
from ._ep import KMeansEP
from ._iic import IIC
from ._kmeans import KMeansCROCS, KMeansRaw
from ._sela import SeLA

__all__ = [
    "DTC",
    "DTCR",
    "IIC",
    "DeepCluster",
    "KMeansCROCS",
    "KMeansEP",
    "KMeansRaw",
    "SeLA",
    "map_clusters",
]
