"""PyTorch building blocks of CROCS: loss and prototypes, encoders, data and the skorch net."""

from ._augment import RandomWindow
from ._data import ArrayDataset
from ._encoders import CNNEncoder, ResNet1dEncoder
from ._fastpath import ReLUMaxPoolDropout
from ._loss import CROCSLoss, attribute_weight_table
from ._net import AcceleratedCROCSNet, CROCSNet

__all__ = [
    "AcceleratedCROCSNet",
    "ArrayDataset",
    "CNNEncoder",
    "CROCSLoss",
    "CROCSNet",
    "RandomWindow",
    "ReLUMaxPoolDropout",
    "ResNet1dEncoder",
    "attribute_weight_table",
]
