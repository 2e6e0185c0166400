"""Layers of the paper's CNN computed with fewer passes over memory.

Profiling the paper's CNN on single-lead 2500-sample frames showed a training
step dominated not by arithmetic but by memory traffic and slow kernels:
dropout's float Bernoulli draws, ``max_pool1d_with_indices`` and the backward
pass of strided convolutions. These layers compute the same functions as the
standard ones (same parameters, outputs and gradients up to float rounding,
the same masks' distribution for dropout) in fewer, faster steps:

- :class:`PolyphaseConv1d` rewrites a strided convolution as a stride-1
  convolution over the ``stride`` phases of the input, whose kernels are
  much faster, in particular for the backward pass;
- :class:`ReLUMaxPoolDropout` fuses ``ReLU -> MaxPool1d(k) -> Dropout(p)``
  into one autograd function that keeps two boolean masks at the pooled
  resolution instead of an index tensor and two full-size intermediates.
"""

import math

import torch
import torch.nn.functional as F
from torch import nn

__all__ = ["PolyphaseConv1d", "ReLUMaxPoolDropout"]

# Dropout masks are drawn as 15-bit integers (one int16 per element) instead
# of float32 Bernoulli draws. The drop probability is realised as
# round(p * 2**15) / 2**15, within 2**-16 of p (0.1 -> 0.100006).
_MASK_LEVELS = 2**15


class PolyphaseConv1d(nn.Conv1d):
    """``nn.Conv1d`` that evaluates a strided convolution as a stride-1 one.

    With stride ``s`` and kernel ``k``, output ``t`` only reads input samples
    ``s * t + i``. Splitting the input into its ``s`` phases
    ``x_r[n] = x[s * n + r]`` turns the convolution into a stride-1
    convolution over ``C_in * s`` channels with kernels of length
    ``ceil(k / s)`` (zero-padded). The layer stores the usual
    ``(C_out, C_in, k)`` weight, so its state dict, initialisation and
    ``repr`` are those of ``nn.Conv1d``; other configurations (padding,
    dilation, groups) fall back to ``nn.Conv1d``.

    Parameters
    ----------
    in_channels, out_channels, kernel_size, stride, padding, dilation, groups, bias, \
padding_mode, device, dtype
        As in :class:`torch.nn.Conv1d`.

    Examples
    --------
    >>> import torch
    >>> from sklearn_crocs.nn import PolyphaseConv1d
    >>> conv = PolyphaseConv1d(1, 4, kernel_size=7, stride=3)
    >>> x = torch.randn(2, 1, 2500)
    >>> reference = torch.nn.functional.conv1d(x, conv.weight, conv.bias, stride=3)
    >>> torch.allclose(conv(x), reference, atol=1e-5)
    True
    """

    def _polyphase(self):
        return (
            self.stride[0] > 1
            and self.padding == (0,)
            and self.dilation == (1,)
            and self.groups == 1
        )

    def _conv_forward(self, x, weight, bias):
        # nn.Conv1d.forward calls this with the layer's own parameters;
        # callers may pass others (e.g. weights with batch norm folded in).
        if not self._polyphase() or x.shape[-1] < self.kernel_size[0]:
            return super()._conv_forward(x, weight, bias)  # incl. torch's errors
        s, k = self.stride[0], self.kernel_size[0]
        batch, channels, length = x.shape
        n_out = (length - k) // s + 1
        taps = math.ceil(k / s)
        n = n_out + taps - 1
        x = x[..., : s * n] if length >= s * n else F.pad(x, (0, s * n - length))
        phases = x.reshape(batch, channels, n, s).transpose(2, 3).reshape(batch, channels * s, n)
        out_channels = weight.shape[0]
        weight = (
            F.pad(weight, (0, s * taps - k))
            .reshape(out_channels, channels, taps, s)
            .transpose(2, 3)
            .reshape(out_channels, channels * s, taps)
        )
        return F.conv1d(phases, weight, bias)


class _ReLUMaxPoolDropoutFunction(torch.autograd.Function):
    """relu(max over windows of k) * dropout mask, with a fused backward pass.

    ``relu(maxpool(x)) == maxpool(relu(x))`` because ReLU is monotone; the
    gradient goes to the first maximum of each window (as in max_pool1d) when
    that maximum is positive (as in ReLU) and the element was kept.
    """

    @staticmethod
    def forward(ctx, x, kernel_size, p, training):
        n = x.shape[-1] // kernel_size
        windows = x[..., : n * kernel_size].unflatten(-1, (n, kernel_size))
        maxima, argmax = windows.max(dim=-1)
        keep = maxima > 0
        scale = 1.0
        if training and p > 0:
            draws = torch.randint(0, _MASK_LEVELS, maxima.shape, dtype=torch.int16, device=x.device)
            keep &= draws >= round(p * _MASK_LEVELS)
            scale = 1.0 / (1.0 - p)
        ctx.save_for_backward(argmax, keep)
        ctx.kernel_size, ctx.scale, ctx.length = kernel_size, scale, x.shape[-1]
        return torch.where(keep, maxima * scale if scale != 1.0 else maxima, 0.0)

    @staticmethod
    def backward(ctx, grad_output):
        argmax, keep = ctx.saved_tensors
        grad = torch.where(keep, grad_output * ctx.scale if ctx.scale != 1.0 else grad_output, 0.0)
        grad_windows = grad.new_zeros(*grad.shape, ctx.kernel_size)
        grad_windows.scatter_(-1, argmax.unsqueeze(-1), grad.unsqueeze(-1))
        grad_input = grad_windows.flatten(-2)
        if grad_input.shape[-1] != ctx.length:
            grad_input = F.pad(grad_input, (0, ctx.length - grad_input.shape[-1]))
        return grad_input, None, None, None


class ReLUMaxPoolDropout(nn.Module):
    """``ReLU -> MaxPool1d(kernel_size) -> Dropout(p)`` as one fused step.

    Equal to ``nn.Sequential(nn.ReLU(), nn.MaxPool1d(kernel_size),
    nn.Dropout(p))``: identical outputs and gradients in evaluation mode and
    without dropout; in training mode elements are dropped with probability
    ``round(p * 2**15) / 2**15`` (within ``2**-16`` of ``p``) from torch's
    global generator, and the kept ones are scaled by ``1 / (1 - p)``.

    Parameters
    ----------
    kernel_size : int
        Window (and stride) of the max pooling; a trailing partial window is
        dropped, as by ``nn.MaxPool1d``.
    p : float, default=0.1
        Dropout probability.

    Examples
    --------
    >>> import torch
    >>> from torch import nn
    >>> from sklearn_crocs.nn import ReLUMaxPoolDropout
    >>> fused = ReLUMaxPoolDropout(2, p=0.1).eval()
    >>> reference = nn.Sequential(nn.ReLU(), nn.MaxPool1d(2), nn.Dropout(0.1)).eval()
    >>> x = torch.randn(3, 4, 101)
    >>> torch.equal(fused(x), reference(x))
    True
    """

    def __init__(self, kernel_size, p=0.1):
        super().__init__()
        if not 0 <= p < 1:
            raise ValueError(f"dropout probability must be in [0, 1); got {p}.")
        self.kernel_size = int(kernel_size)
        self.p = float(p)

    def forward(self, x):
        if not self.training:  # dropout is the identity; pooling needs no indices
            return F.max_pool1d(F.relu(x), self.kernel_size)
        return _ReLUMaxPoolDropoutFunction.apply(x, self.kernel_size, self.p, True)

    def extra_repr(self):
        return f"ReLU -> MaxPool1d({self.kernel_size}) -> Dropout(p={self.p})"
