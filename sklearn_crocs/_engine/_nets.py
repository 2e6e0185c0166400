"""The nets of a prototype clusterer: how many (an ensemble) and where they run.

Components of ``CROCSClusterer``, built from its parameters; ``DTC`` trains
one net on its ``device``, the components' plain form.
"""

import math

import torch
import torch.nn.functional as F

from ..nn import AcceleratedCROCSNet, CROCSNet

__all__ = ["Ensemble", "Placement", "unit_rows"]


class Ensemble:
    """Nets trained from consecutive seeds, whose embeddings are joined into one.

    ``CROCSClusterer`` builds one from its ``ensemble_size``; with one net
    (this class's default; the clusterer's is two) the model is a single net
    and its embeddings are that net's, normalised.

    Parameters
    ----------
    size : int, default=1
        Number of nets.
    """

    def __init__(self, size=1):
        self.size = size

    def seeds(self, seed):
        """The seed of each net: net ``k`` starts from ``seed + k``, so that the first is the
        single model's."""
        return [seed + k for k in range(self.size)]

    def width(self, embedding_dim):
        """Width of the joined embeddings: ``embedding_dim`` per net."""
        return embedding_dim * self.size

    def fit(self, fit_one, seed):
        """The fitted nets, ``fit_one(s, k)`` for each net ``k`` and its seed ``s`` of
        :meth:`seeds` ``(seed)``, in order."""
        return [fit_one(s, k) for k, s in enumerate(self.seeds(seed))]

    @staticmethod
    def join(outputs):
        """Unit rows of each net's outputs side by side, divided by sqrt(number of nets).

        The rows are unit vectors whose cosine similarity is the mean of the
        nets'; with one net, its normalised outputs. ``outputs`` is a list of
        tensors of shape ``(n, embedding_dim)``; the result is an ndarray.
        """
        if len(outputs) == 1:
            return unit_rows(outputs[0]).numpy()
        joined = torch.cat([unit_rows(out) for out in outputs], dim=1)
        return (joined / math.sqrt(len(outputs))).numpy()


def unit_rows(outputs):
    """The rows of a net's ``outputs`` scaled to unit length, whatever their size.

    Each row is first divided by its largest absolute value: the squared
    norm of finite float32 values beyond about 1e19 overflows, and
    ``F.normalize`` would then return a zero row, a silent non-answer. A row
    holding NaN or infinity stays non-finite, for the callers' checks.
    """
    scale = outputs.abs().amax(dim=1, keepdim=True)
    return F.normalize(outputs / torch.where(scale > 0, scale, 1), dim=1)


class Placement:
    """Where a net trains and runs: a torch device, or an Accelerate accelerator's.

    ``CROCSClusterer`` builds one from its ``device`` and ``accelerator``;
    without an accelerator (``DTC``) the net is a
    :class:`~sklearn_crocs.nn.CROCSNet` on ``device``.

    Parameters
    ----------
    device : str or torch.device
        Torch device of the net, when the accelerator does not place it.
    accelerator : accelerate.Accelerator, default=None
        Accelerator that prepares the net (an
        :class:`~sklearn_crocs.nn.AcceleratedCROCSNet`) and, with
        ``device_placement``, places it.
    """

    def __init__(self, device, accelerator=None):
        self.device = device
        self.accelerator = accelerator

    @property
    def net_class(self):
        """The skorch net class."""
        return CROCSNet if self.accelerator is None else AcceleratedCROCSNet

    @property
    def net_params(self):
        """The placement parameters of :attr:`net_class`."""
        if self.accelerator is None:
            return {"device": self.device}
        # With device placement, skorch's AccelerateMixin requires device=None.
        return {
            "accelerator": self.accelerator,
            "device": None if self.accelerator.device_placement else self.device,
        }

    @property
    def training_device(self):
        """The device training runs on: the accelerator's, if there is one."""
        return self.device if self.accelerator is None else self.accelerator.device
