"""``ReLU -> MaxPool1d -> Dropout`` of the paper's CNN as one cheaper step.

Profiling a training step of the paper's CNN on single-lead 2500-sample
frames (2 CPU cores, batch 256) showed a third of the time in these three
layers: ``max_pool1d`` keeps an int64 index per output to route the gradient
(5 ms forward on the first stage's 852k values, against 0.2 ms without
indices), and dropout draws one float Bernoulli variable per value (2.5 ms).
:class:`ReLUMaxPoolDropout` computes the same function with cheap
element-wise float steps: for the paper's window of 2 the maximum of two
strided views and a 0/1 float mask of which of the two won; dropout masks from
64-bit random words split into four 16-bit draws; and the ReLU, dropout and
arg-max masks applied by multiplications in the backward pass. (On CPU,
boolean masks, comparisons and ``torch.where`` cost several times more than
float products, so none is used.)
"""

import torch
import torch.nn.functional as F
from torch import nn

__all__ = ["ReLUMaxPoolDropout"]

# Dropout draws are 16-bit integers, four per 64-bit random word; an element
# is dropped when its draw is below round(p * 2**16) - 2**15, so the realised
# drop probability is round(p * 2**16) / 2**16, within 2**-17 of p.
_LEVELS = 2**16


def _dropout_scale(like, p):
    """Float dropout mask shaped and laid out like ``like``.

    ``1 / (1 - p)`` with probability ``1 - p`` (to within 2**-17), else 0.
    """
    n = like.numel()
    # The full signed range: random_() without bounds leaves the top bit at 0.
    words = torch.empty((n + 3) // 4, dtype=torch.int64, device=like.device)
    words.random_(-(2**63), 2**63 - 1)
    draws = words.view(torch.int16)[:n].to(like.dtype)
    # The draws in the memory order of ``like`` (channels-last, for instance), so
    # that the products with it run over contiguous memory.
    dense = like.is_contiguous() or like.is_contiguous(memory_format=torch.channels_last)
    draws = draws.as_strided(like.shape, like.stride()) if dense else draws.view(like.shape)
    threshold = round(p * _LEVELS) - _LEVELS // 2 - 0.5  # halfway between integers
    # sign(relu(.)) is 1 above the threshold and 0 below; float ops throughout,
    # since comparisons and boolean masks cost several times more on CPU.
    # In place on the fresh ``draws``: fewer new buffers, hence fewer page faults.
    return draws.sub_(threshold).relu_().sign_().mul_(1.0 / (1.0 - p))


def _step(t):
    """1.0 where ``t > 0``, else 0.0 (float), in a new tensor."""
    return F.relu(t).sign_()


class _ReLUMaxPoolDropoutFunction(torch.autograd.Function):
    """relu(max over windows) * dropout mask / (1 - p), with a mask-based backward pass.

    ``relu(maxpool(x)) == maxpool(relu(x))`` since ReLU is monotone. The
    gradient goes to the first maximum of each window (as in
    ``max_pool1d``) when that maximum is positive (as in ReLU) and the output
    was kept by dropout. All masks are float tensors of 0 and 1 (or the
    dropout scale): on CPU, element-wise float products are several times
    faster than boolean masks, ``torch.where`` or comparisons.

    With ``to_channels_last``, a 3-D input ``(N, C, L)`` gives its output as
    ``(N, C, 1, L')`` in the channels-last layout: the last product writes
    it there, and the backward pass reads its gradient from there, in place
    of a separate copy each way (the layout :class:`CNNEncoder` runs its
    later stages in).
    """

    @staticmethod
    def forward(ctx, x, kernel_size, p, to_channels_last=False):
        n = x.shape[-1] // kernel_size
        channels_last = x.dim() == 4 and x.is_contiguous(memory_format=torch.channels_last)
        layout = torch.channels_last if channels_last else torch.contiguous_format
        if kernel_size == 2:  # element-wise steps keep the input's layout
            first, second = x[..., 0 : 2 * n : 2], x[..., 1 : 2 * n : 2]
            maxima = torch.maximum(first, second)
            winner = (second - first).relu_().sign_()  # 1 where the second wins; ties: first
        else:
            maxima, winner = x[..., : n * kernel_size].unflatten(-1, (n, kernel_size)).max(-1)
            maxima = maxima.contiguous(memory_format=layout)
        # Gradient mask of ReLU (maxima > 0) times the dropout mask and scale.
        mask = _step(maxima)
        if p > 0:
            mask.mul_(_dropout_scale(maxima, p))
        ctx.save_for_backward(winner, mask)
        ctx.kernel_size, ctx.length, ctx.memory_format = kernel_size, x.shape[-1], layout
        ctx.to_channels_last = to_channels_last
        if not to_channels_last:
            return maxima.mul_(mask)
        batch, channels, n_out = maxima.shape
        out = torch.empty(
            (batch, channels, 1, n_out),
            dtype=maxima.dtype,
            device=maxima.device,
            memory_format=torch.channels_last,
        )
        torch.mul(maxima, mask, out=out.squeeze(2))
        return out

    @staticmethod
    def backward(ctx, grad_output):
        winner, mask = ctx.saved_tensors
        k = ctx.kernel_size
        if ctx.to_channels_last:  # (N, C, 1, L') in, the masks' layout out
            grad = torch.mul(grad_output.squeeze(2), mask, out=torch.empty_like(mask))
        else:
            grad = grad_output * mask
        # The gradient in the input's memory layout; every element is written below.
        grad_input = torch.empty(
            (*grad.shape[:-1], ctx.length),
            dtype=grad.dtype,
            device=grad.device,
            memory_format=ctx.memory_format,
        )
        n = grad.shape[-1]
        grad_input[..., n * k :] = 0  # a trailing partial window
        if k == 2:
            to_second = grad * winner
            grad_input[..., 1 : 2 * n : 2] = to_second
            grad_input[..., 0 : 2 * n : 2] = grad.sub_(to_second)
        else:
            grad_input[..., : n * k] = 0
            windows = grad_input[..., : n * k].unflatten(-1, (n, k))
            windows.scatter_(-1, winner.unsqueeze(-1), grad.unsqueeze(-1))
        return grad_input, None, None, None


class ReLUMaxPoolDropout(nn.Module):
    """``ReLU -> MaxPool1d(kernel_size) -> Dropout(p)`` as one fused step.

    Equal to ``nn.Sequential(nn.ReLU(), nn.MaxPool1d(kernel_size),
    nn.Dropout(p))``: identical outputs and gradients in evaluation mode and
    without dropout. In training mode elements are dropped with probability
    ``round(p * 2**16) / 2**16`` (within ``2**-17`` of ``p``), drawn from
    torch's global generator, and the kept ones are scaled by ``1 / (1 - p)``.

    Input of shape ``(N, C, L)``, or ``(N, C, 1, L)`` (a 1-D signal as a 2-D
    one, as :class:`~sklearn_crocs.nn.CNNEncoder` runs its later stages in the
    channels-last layout); pooling runs over the last axis, and masks and
    gradients keep the input's memory layout.

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
        if not self.training:  # dropout is the identity; pooling needs no masks
            if x.dim() == 4:
                return F.max_pool2d(F.relu(x), (1, self.kernel_size))
            return F.max_pool1d(F.relu(x), self.kernel_size)
        return _ReLUMaxPoolDropoutFunction.apply(x, self.kernel_size, self.p)

    def _forward_channels_last(self, x):
        """:meth:`forward` of a 3-D input ``(N, C, L)``, as ``(N, C, 1, L')`` in channels-last.

        Equal to ``self(x).unsqueeze(2).contiguous(memory_format=torch.channels_last)``
        (same dropout draws for the same random state), with one pass over
        the output fewer each way in training. Module hooks do not run.
        """
        if not self.training:  # no masks to write: the plain step, then the copy
            return self.forward(x).unsqueeze(2).contiguous(memory_format=torch.channels_last)
        return _ReLUMaxPoolDropoutFunction.apply(x, self.kernel_size, self.p, True)

    def extra_repr(self):
        return f"ReLU -> MaxPool1d({self.kernel_size}) -> Dropout(p={self.p})"


class _Conv1dFunction(torch.autograd.Function):
    """``conv1d`` whose backward pass computes only the gradients needed.

    Measured on CPU (torch 2.13, oneDNN): for the paper's first convolution
    (one input channel, batch 256, 2500 samples) autograd's convolution
    backward costs as much as computing the input gradient too, which the
    input signal never needs (3.3 ms); asking ``convolution_backward`` for
    the weight gradient alone takes 0.45 ms, and the bias gradient is a sum
    over batch and time (0.05 ms).
    """

    @staticmethod
    def forward(ctx, x, weight, bias, stride, padding, dilation, groups):
        ctx.save_for_backward(x, weight)
        ctx.settings = stride, padding, dilation, groups
        return F.conv1d(x, weight, bias, stride, padding, dilation, groups)

    @staticmethod
    def backward(ctx, grad_output):
        x, weight = ctx.saved_tensors
        stride, padding, dilation, groups = ctx.settings
        needs_input, needs_weight, needs_bias = ctx.needs_input_grad[:3]
        grad_input, grad_weight, _ = torch.ops.aten.convolution_backward(
            grad_output,
            x,
            weight,
            None,
            stride,
            padding,
            dilation,
            False,
            [0],
            groups,
            [needs_input, needs_weight, False],
        )
        grad_bias = grad_output.sum((0, 2)) if needs_bias else None
        return grad_input, grad_weight, grad_bias, None, None, None, None


def _polyphase_applies(conv):
    """Whether ``conv`` (an ``nn.Conv1d``) suits the polyphase form (one input channel)."""
    return (
        conv.in_channels == 1
        and conv.groups == 1
        and conv.dilation == (1,)
        and conv.padding == (0,)
    )


def _polyphase_training_applies(conv, x):
    """Whether ``conv`` runs over the phases of ``x`` with autograd; see _PolyphaseConv1dFunction.

    On CPU, with autograd on, for a strided one-channel convolution of a
    signal that needs no gradient.
    """
    return (
        torch.is_grad_enabled()
        and conv.stride[0] > 1
        and _polyphase_applies(conv)
        and x.device.type == "cpu"
        and not x.requires_grad
    )


def _polyphase_weight(weight, stride, pool_size=1):
    """2-D weight of a one-channel strided convolution over phases, and its width ``q``.

    With period ``R = stride * pool_size``, the signal is cut into rows of
    ``R`` samples (:func:`_phases`); output ``i`` of pooling window ``j``
    (convolution output ``j * pool_size + i``) starts at sample
    ``j * R + i * stride``, so it is a product of the weight shifted by
    ``i * stride`` with rows ``j`` to ``j + q - 1``. Output channel
    ``i * C + c`` of the returned weight, shape ``(pool_size * C, R, 1, q)``,
    tap ``r``, holds output channel ``c``'s kernel shifted by ``i * stride``
    and cut to row ``r``: its input channel ``p`` is phase ``p`` of the row.
    With ``pool_size=1`` this is the convolution alone: a stride-1
    convolution of width ``q`` over ``stride`` phase channels.
    """
    channels, _, kernel_size = weight.shape
    period = stride * pool_size
    width = -(-((pool_size - 1) * stride + kernel_size) // period)
    shifted = weight.new_zeros(pool_size, channels, width * period)
    for i in range(pool_size):
        shifted[i, :, i * stride : i * stride + kernel_size] = weight[:, 0]
    shifted = shifted.view(pool_size * channels, width, period).transpose(1, 2)
    return shifted.unsqueeze(2), width


def _phases(x, period, rows):
    """One-channel signals ``(N, 1, L)`` cut into ``rows`` rows of ``period`` samples.

    Returns the phases as a 2-D input ``(N, period, 1, rows)`` in the
    channels-last layout (phase ``p`` of row ``r`` is sample
    ``r * period + p``), over a copy zero-padded or cropped to
    ``rows * period`` samples.
    """
    batch, _, length = x.shape
    # Copy, then zero the tail alone: F.pad would fill the whole buffer first.
    kept = min(length, rows * period)
    signal = x.new_empty(batch, rows * period)
    signal[:, :kept] = x.reshape(batch, length)[:, :kept]
    signal[:, kept:] = 0
    return signal.view(batch, rows, period).transpose(1, 2).unsqueeze(2)


class _PolyphaseConv1dFunction(torch.autograd.Function):
    """One-channel strided ``conv1d`` as a stride-1 convolution over the signal's phases.

    Cut into rows of ``stride`` samples (:func:`_phases`), the signal
    becomes ``stride`` channels read in place in the channels-last layout,
    and the same products run as a stride-1 convolution of width
    ``ceil(kernel_size / stride)``. Measured on CPU (torch 2.13, oneDNN, 2
    cores) for the paper's first convolution (batch 256, 2500 samples, 4
    output channels, kernel 7, stride 3): forward and weight gradient take
    2.0 ms this way, with the copies to and from the channels-first layout,
    against 2.5-2.9 ms for oneDNN's strided one-channel convolution, whose
    weight gradient alone varied from 1.2 to 4 ms within training steps.

    With at most 8 output channels and an even number of outputs, each row
    holds ``2 * stride`` samples and gives two consecutive outputs as twice
    the channels (:func:`_polyphase_weight` with ``pool_size=2``), which
    fills oneDNN's vectors better: for the paper's first convolution 0.25
    ms against 0.37 ms forward, 0.27 ms against 0.37 ms for the weight
    gradient. The output's channels-last memory, ``(N, n_out, C)``, is the
    same either way. Same outputs and gradients; no gradient for the input
    signal. With ``channels_last`` the output is given as ``(N, C, 1,
    n_out)`` in the channels-last layout, else as ``conv1d`` gives it.
    """

    @staticmethod
    def forward(ctx, x, weight, bias, stride, channels_last=False):
        channels, _, kernel_size = weight.shape
        n_out = (x.shape[-1] - kernel_size) // stride + 1
        group = 2 if 2 * channels <= _POLYPHASE_MAX_CHANNELS and n_out % 2 == 0 else 1
        shifted, width = _polyphase_weight(weight, stride, group)
        phases = _phases(x, stride * group, n_out // group + width - 1)
        ctx.save_for_backward(phases, shifted)
        ctx.kernel_size, ctx.stride, ctx.group = kernel_size, stride, group
        if bias is not None and group > 1:
            bias = bias.repeat(group)
        out = F.conv2d(phases, shifted, bias)  # (N, group * C, 1, n_out / group), channels-last
        out = _from_channel_rows(_channel_rows(out), channels)  # (N, C, 1, n_out), the same memory
        # As it comes with ``channels_last``, else in the (N, C, n_out) layout of conv1d.
        return out if channels_last else out.squeeze(2).contiguous()

    @staticmethod
    def backward(ctx, grad_output):
        phases, shifted = ctx.saved_tensors
        kernel_size, stride, group = ctx.kernel_size, ctx.stride, ctx.group
        grad_weight = grad_bias = None
        grad = grad_output if grad_output.dim() == 4 else grad_output.unsqueeze(2)
        grad = grad.contiguous(memory_format=torch.channels_last)
        channels = grad.shape[1]
        if ctx.needs_input_grad[1]:
            grouped = _from_channel_rows(_channel_rows(grad), group * channels)
            grad_shifted = torch.nn.grad.conv2d_weight(phases, shifted.shape, grouped)
            # (group * C, R, 1, q) -> taps r * R + p of output i, kernel shifted by i * stride
            taps = grad_shifted.squeeze(2).transpose(1, 2).reshape(group, channels, -1)
            grad_weight = sum(
                taps[i, :, i * stride : i * stride + kernel_size] for i in range(group)
            ).unsqueeze(1)
        if ctx.needs_input_grad[2]:
            grad_bias = _channel_sums(grad)
        return None, grad_weight, grad_bias, None, None


# Output channels up to which one oneDNN vector of 16 floats is filled: where
# a one-channel convolution has at most half that, _PolyphaseConv1dFunction
# computes two outputs per row.
_POLYPHASE_MAX_CHANNELS = 16


def _input_grad_phase_weight(weight, stride):
    """Weight of the stride-1 convolution that gives a strided convolution's input gradient.

    For a convolution of weight ``(C_out, C_in, K)`` and stride ``S``,
    returns ``(S * C_in, C_out, 1, q)`` with ``q = ceil(K / S)``: output
    channel ``p * C_in + c`` of the returned weight is input channel ``c``
    at phase ``p`` (the input samples ``S * r + p``). Sample ``S * r + p``
    receives the output gradient at ``l = r - m`` through tap ``S * m + p``;
    over the output gradient zero-padded by ``q - 1`` on both sides,
    position ``r + j`` is ``l`` for ``m = q - 1 - j``: tap ``j`` of the
    returned weight is the kernel's tap ``S * (q - 1 - j) + p``, zero
    beyond ``K``.
    """
    out_channels, in_channels, kernel_size = weight.shape
    width = -(-kernel_size // stride)
    taps = weight.new_zeros(out_channels, in_channels, width * stride)
    taps[..., :kernel_size] = weight
    # taps[o, c, S * m + p] as [p, c, o, j] with j = q - 1 - m
    phased = taps.view(out_channels, in_channels, width, stride).flip(2).permute(3, 1, 0, 2)
    return phased.reshape(stride * in_channels, out_channels, 1, width), width


class _PhaseGradConv2dFunction(torch.autograd.Function):
    """Strided ``conv2d`` over ``(N, C, 1, L)`` channels-last whose input gradient runs over phases.

    The input gradient of a convolution of stride ``S`` (a transposed
    convolution) is, at the input samples ``S * r + p`` of each phase
    ``p``, a stride-1 convolution of the output gradient: one ``conv2d``
    with ``S * C_in`` output channels (:func:`_input_grad_phase_weight`),
    whose channels-last output ``(N, q', S, C_in)`` is already the input
    gradient's channels-last memory ``(N, L, C_in)``. Measured on CPU
    (torch 2.13, oneDNN, 2 cores, batch 256) for the paper's second
    convolution (4 to 16 channels, kernel 7, stride 3, 416 input samples):
    0.38-0.41 ms against 0.75-0.92 ms for oneDNN's backward-data
    convolution, which is slow when the input has few channels (1.4-2.7x
    for 1 to 8 input channels; with 16 or more input channels and short
    signals oneDNN's is faster). The weight gradient is oneDNN's alone, the
    bias gradient a sum. Same outputs and gradients up to float rounding.
    """

    @staticmethod
    def forward(ctx, x, weight, bias, stride):
        ctx.save_for_backward(x, weight)
        ctx.stride = stride
        return F.conv2d(x, weight.unsqueeze(2), bias, stride=(1, stride))

    @staticmethod
    def backward(ctx, grad_output):
        x, weight = ctx.saved_tensors
        stride = ctx.stride
        grad = grad_output.contiguous(memory_format=torch.channels_last)
        grad_input = grad_weight = grad_bias = None
        if ctx.needs_input_grad[0]:
            phase_weight, width = _input_grad_phase_weight(weight, stride)
            phased = F.conv2d(grad, phase_weight, None, padding=(0, width - 1))
            batch, channels, _, length = x.shape
            rows = _channel_rows(phased)  # (N, S * (L_out + q - 1) * C_in)
            size = length * channels
            if rows.shape[1] >= size:
                rows = rows[:, :size]  # a view: samples past the last window get nothing
            else:  # the last samples lie in no window: zero gradient
                rows = F.pad(rows, (0, size - rows.shape[1]))
            grad_input = _from_channel_rows(rows, channels)
        if ctx.needs_input_grad[1]:
            weight_size = (*weight.shape[:2], 1, weight.shape[2])
            grad_weight = torch.nn.grad.conv2d_weight(x, weight_size, grad, stride=(1, stride))
            grad_weight = grad_weight.squeeze(2)
        if ctx.needs_input_grad[2]:
            grad_bias = _channel_sums(grad)
        return grad_input, grad_weight, grad_bias, None


# Input channels up to which _PhaseGradConv2dFunction's input gradient beats oneDNN's.
_PHASE_GRAD_MAX_CHANNELS = 8


def _phase_grad_applies(conv, x):
    """Whether ``conv`` on ``x`` (N, C, 1, L) runs as :class:`_PhaseGradConv2dFunction`.

    On CPU, with autograd on and an input that needs its gradient, for a
    strided convolution without padding, dilation or groups whose input has
    at most 8 channels.
    """
    return (
        torch.is_grad_enabled()
        and x.requires_grad
        and x.device.type == "cpu"
        and conv.stride[0] > 1
        and conv.padding == (0,)
        and conv.dilation == (1,)
        and conv.groups == 1
        and conv.in_channels <= _PHASE_GRAD_MAX_CHANNELS
    )


def _channel_rows(x):
    """A channels-last ``(N, C, 1, L)`` tensor as its memory, a ``(N, L * C)`` view."""
    batch, channels, _, length = x.shape
    return x.permute(0, 2, 3, 1).reshape(batch, length * channels)


def _channel_sums(x):
    """Per-channel sums of a channels-last ``(N, C, 1, L)`` tensor.

    Summed down the ``(N, L * C)`` rows of its memory, then over positions:
    on CPU about twice as fast as ``x.sum((0, 2, 3))`` for 4 to 16 channels.
    """
    return _channel_rows(x).sum(0).view(-1, x.shape[1]).sum(0)


def _from_channel_rows(rows, channels):
    """The inverse of :func:`_channel_rows`: ``(N, L * C)`` as ``(N, C, 1, L)`` channels-last."""
    batch, size = rows.shape
    return rows.view(batch, 1, size // channels, channels).permute(0, 3, 1, 2)


class _BatchNormReLUMaxPoolDropoutFunction(torch.autograd.Function):
    """Batch norm (batch statistics), ReLU, max pooling over 2 and dropout as one step.

    For a channels-last ``(N, C, 1, L)`` input, as a single-lead first
    convolution over phases leaves it (:class:`_PolyphaseConv1dFunction`),
    this is ``BatchNorm -> ReLU -> MaxPool(2) -> Dropout`` in training mode,
    output ``(N, C, 1, L // 2)`` in the channels-last layout of the later
    stages, without the full-size normalised tensor: per channel the batch
    norm is ``a * (x - mean) + beta`` with ``a = gamma / std``, and the
    maximum of a window of such values is ``|a|`` times the maximum of
    ``sign(a) * (x - mean)`` plus ``beta``, so the pooling runs on the
    centred input and the affine step on the half-size maxima. The backward
    pass uses batch norm's gradient, ``a * (G - mean(G) - x_hat *
    mean(G * x_hat))`` for the full-size gradient ``G`` that pooling routes
    to the winners: its two means are sums over the half-size gradient, so
    it is one affine function of the centred input plus the routed
    gradient. Steps that broadcast per-channel values run over the
    ``(N, L * C)`` rows of memory with the values repeated along them (on
    CPU several times faster than broadcasting a ``(1, C, 1, 1)`` tensor
    over 4 channels).

    Measured on CPU (torch 2.13, 2 cores) for the paper's first stage (batch
    256, 4 channels, 832 convolution outputs), convolution included, forward
    and backward: 1.16-1.26x faster than the convolution's output copied to
    the channels-first layout, ``batch_norm``, and
    :class:`_ReLUMaxPoolDropoutFunction` writing channels-last (its gradient
    copied back), in three interleaved runs; whole training steps of the
    paper's CNN 0.98-1.05x (median 1.03x) in 8 pairs of fresh processes,
    with the heap kept (:func:`~sklearn_crocs.nn._heap.retained_heap`;
    without it, this step's allocations faulted in more pages and it ran
    slower).

    Returns the output, the batch mean and the biased batch variance (for
    the running statistics, which the caller updates).
    """

    @staticmethod
    def forward(ctx, x, weight, bias, eps, p):
        batch, channels, _, length = x.shape
        n, count = length // 2, batch * length
        mean = _channel_sums(x).div_(count)
        # Centred and, where a < 0, negated (exact): windows pick their maximum.
        sign = 1.0 - 2.0 * (weight < 0).to(x.dtype)
        centred_rows = torch.addcmul(
            (-mean * sign).repeat(length), _channel_rows(x), sign.repeat(length)
        )
        centred = _from_channel_rows(centred_rows, channels)
        squares = torch.mul(centred_rows, centred_rows).sum(0)
        var = squares.view(length, channels).sum(0).div_(count)
        invstd = (var + eps).rsqrt_()
        scale = weight * invstd
        first, second = centred[..., 0 : 2 * n : 2], centred[..., 1 : 2 * n : 2]
        maxima = torch.empty(
            (batch, channels, 1, n),
            dtype=x.dtype,
            device=x.device,
            memory_format=torch.channels_last,
        )
        torch.maximum(first, second, out=maxima)
        # 1 where the second wins; ties: the first.
        winner = torch.sub(second, first, out=torch.empty_like(maxima)).relu_().sign_()
        zero = weight == 0
        if zero.any():
            # Zero scale: a window's values tie, and max pooling takes the first
            # (whose normalised value enters the weight's gradient).
            maxima = torch.where(
                zero.view(1, -1, 1, 1), first, maxima, out=torch.empty_like(maxima)
            )
        normalised = torch.addcmul(bias.repeat(n), _channel_rows(maxima), scale.abs().repeat(n))
        normalised = _from_channel_rows(normalised, channels)
        mask = _step(normalised)
        if p > 0:
            mask.mul_(_dropout_scale(normalised, p))
        ctx.save_for_backward(centred, maxima, winner, mask, scale, invstd, sign)
        ctx.mark_non_differentiable(mean, var)
        return normalised.mul_(mask), mean, var

    @staticmethod
    def backward(ctx, grad_output, _grad_mean, _grad_var):
        centred, maxima, winner, mask, scale, invstd, sign = ctx.saved_tensors
        batch, channels, _, length = centred.shape
        n, count = maxima.shape[-1], batch * length
        # Gradient of the normalised maxima, and batch norm's per-channel sums.
        grad = torch.mul(grad_output, mask, out=torch.empty_like(mask))
        grad_bias = _channel_sums(grad)
        grad_weight = _channel_sums(grad * maxima).mul_(invstd * sign)
        # scale * (G - grad_bias / count - x_hat * grad_weight / count) with
        # x_hat = sign * centred * invstd: an affine function of the centred input...
        slope = scale.abs() * invstd * grad_weight / count
        offset = -scale * grad_bias / count
        grad_input = torch.addcmul(
            offset.repeat(length), _channel_rows(centred), (-slope).repeat(length)
        )
        grad_input = _from_channel_rows(grad_input, channels)
        # ... plus scale * G, the gradient routed to each window's winner.
        routed = _from_channel_rows(_channel_rows(grad).mul_(scale.repeat(n)), channels)
        to_second = routed * winner
        grad_input[..., 1 : 2 * n : 2].add_(to_second)
        grad_input[..., 0 : 2 * n : 2].add_(routed.sub_(to_second))
        return grad_input, grad_weight, grad_bias, None, None


class _Conv1d(nn.Conv1d):
    """``nn.Conv1d`` (zero padding) that computes only the gradients needed in training.

    Same parameters, state dict and outputs as ``nn.Conv1d``; see
    :class:`_Conv1dFunction` for why. On CPU, a one-channel strided
    convolution of a signal that needs no gradient runs over the signal's
    phases (:class:`_PolyphaseConv1dFunction`). Outside autograd it is
    ``nn.Conv1d``.
    """

    def forward(self, x):
        plain = self.padding_mode != "zeros" or isinstance(self.padding, str)
        if plain or not torch.is_grad_enabled():
            return super().forward(x)
        if _polyphase_training_applies(self, x):
            return _PolyphaseConv1dFunction.apply(x, self.weight, self.bias, self.stride[0])
        return _Conv1dFunction.apply(
            x, self.weight, self.bias, self.stride, self.padding, self.dilation, self.groups
        )

    def plain(self):
        """An ``nn.Conv1d`` sharing this layer's parameters."""
        conv = nn.Conv1d(
            self.in_channels,
            self.out_channels,
            self.kernel_size,
            stride=self.stride,
            padding=self.padding,
            dilation=self.dilation,
            groups=self.groups,
            bias=self.bias is not None,
            padding_mode=self.padding_mode,
        )
        conv.weight = self.weight
        conv.bias = self.bias
        return conv
