"""Random perturbations of training batches: windows of the signal and amplitude scales."""

import torch

__all__ = ["RandomWindow"]


class RandomWindow:
    """Cut a random window out of each ECG of a batch and scale its amplitude at random.

    Called by :class:`~sklearn_crocs.nn.CROCSNet` on every training batch
    (never in inference): each ECG keeps ``round(crop * n_timepoints)``
    consecutive samples starting at a random offset, the same for all its
    leads, and is multiplied by a factor drawn from ``N(1, amplitude_jitter^2)``.
    New draws on every pass make a small training set look larger; the
    encoder then sees whole signals in ``transform``, so it must accept both
    lengths (:class:`~sklearn_crocs.nn.ResNet1dEncoder` pools over time and
    does; the paper's CNN, whose linear layer has a fixed input size, does
    not: use ``crop=1``).

    Read more in the :ref:`User Guide <method>`.

    Parameters
    ----------
    crop : float, default=0.8
        Fraction of the samples kept, in (0, 1]; 1 keeps the whole signal.
    amplitude_jitter : float, default=0.1
        Standard deviation of the amplitude factor; 0 leaves amplitudes as
        they are.

    Examples
    --------
    >>> import torch
    >>> from sklearn_crocs.nn import RandomWindow
    >>> augment = RandomWindow(crop=0.8, amplitude_jitter=0.0)
    >>> X = torch.arange(10.0).repeat(2, 1, 1)  # 2 ECGs, 1 lead, 10 samples
    >>> out = augment(X, torch.Generator().manual_seed(0))
    >>> out.shape
    torch.Size([2, 1, 8])
    >>> bool((out.diff(dim=2) == 1).all())  # consecutive samples
    True
    """

    def __init__(self, crop=0.8, amplitude_jitter=0.1):
        if not 0 < crop <= 1:
            raise ValueError(f"crop must be in (0, 1]; got {crop!r}.")
        if not amplitude_jitter >= 0:
            raise ValueError(f"amplitude_jitter must be non-negative; got {amplitude_jitter!r}.")
        self.crop = crop
        self.amplitude_jitter = amplitude_jitter

    def __call__(self, X, generator):
        """Perturbed copy of ``X`` (batch, leads, time), drawn from ``generator``."""
        n, n_leads, length = X.shape
        window = max(1, round(self.crop * length))
        if window < length:
            offsets = torch.randint(length - window + 1, (n, 1), generator=generator)
            index = (offsets + torch.arange(window)).to(X.device)
            X = X.gather(2, index[:, None, :].expand(n, n_leads, window))
        if self.amplitude_jitter:
            factors = 1 + self.amplitude_jitter * torch.randn(n, 1, 1, generator=generator)
            X = X * factors.to(device=X.device, dtype=X.dtype)
        return X

    def __repr__(self):
        return f"RandomWindow(crop={self.crop}, amplitude_jitter={self.amplitude_jitter})"
