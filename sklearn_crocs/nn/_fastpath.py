"""The encoders' fast path on CPU: every custom autograd step, and the rule that picks it.

:class:`~sklearn_crocs.nn.CNNEncoder` and
:class:`~sklearn_crocs.nn.ResNet1dEncoder` are plain networks of standard
torch layers; with ``fast_path=True`` (their default) their ``forward``
calls :func:`cnn_forward` or :func:`resnet_forward` here, which compute the
same function with less work:

- ``ReLU -> MaxPool1d -> Dropout`` as one step (:class:`ReLUMaxPoolDropout`):
  float masks instead of int64 pooling indices, 16-bit dropout draws;
- the layers after the CNN's first stage, and all of the ResNet's, as 2-D
  operations on a ``(batch, channels, 1, time)`` view in the channels-last
  memory layout, where oneDNN's convolutions, their backward passes and
  batch norms are faster on CPU;
- in the CNN's evaluation mode without autograd (``transform``,
  ``predict``), each batch norm folded into its convolution, the maximum
  taken before the ReLU, and a single-lead first stage run as one stride-1
  convolution over the signal's phases.

Each piece stays because removing it made a whole ``fit`` or ``transform``
at least 10 % slower in fresh-process A/B runs (the Performance page has
the figures); pieces that gained less were removed. ``fast_path=False``
runs the encoders' :meth:`reference_layers` instead, and the tests compare
every output and gradient with them.
"""

import torch
import torch.nn.functional as F
from torch import nn

__all__ = ["ReLUMaxPoolDropout", "cnn_forward", "resnet_forward"]

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
    one, as the encoders' fast path runs its later stages in the
    channels-last layout); pooling runs over the last axis, and masks and
    gradients keep the input's memory layout.

    It is public because the encoders' ``features`` hold it (one per
    :class:`CNNEncoder` stage): code that inspects or edits an encoder meets
    it, and :meth:`plain` gives its standard-layer form.

    Read more in the :ref:`User Guide <method>`.

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

    def plain(self):
        """The same step as the three standard torch layers (no parameters to share)."""
        return [nn.ReLU(), nn.MaxPool1d(self.kernel_size), nn.Dropout(self.p)]

    def extra_repr(self):
        return f"ReLU -> MaxPool1d({self.kernel_size}) -> Dropout(p={self.p})"


def _standard_conv(conv):
    """Whether ``conv`` is a plain ``nn.Conv1d`` that :func:`_conv_nhwc` computes."""
    return (
        type(conv) is nn.Conv1d and conv.padding_mode == "zeros" and isinstance(conv.padding, tuple)
    )


def _standard_stages(encoder):
    """``(conv, bn, pool)`` per stage if the CNN's layers are its own, else None.

    The fast path reads these layers' parameters and runs them in its own
    layout; ``features`` replaced or edited by the user (other layer types,
    subclasses) run through the modules instead.
    """
    stages = list(encoder.features)  # a list: slicing a Sequential builds new modules
    if len(stages) % 3:
        return None
    triples = list(zip(stages[0::3], stages[1::3], stages[2::3]))
    for conv, bn, pool in triples:
        standard = (
            _standard_conv(conv) and type(bn) is nn.BatchNorm1d and type(pool) is ReLUMaxPoolDropout
        )
        if not standard:
            return None
    return triples


def cnn_forward(encoder, x):
    """:class:`~sklearn_crocs.nn.CNNEncoder`'s function on ``x``, by the fast path.

    In evaluation mode without autograd, the inference steps (batch norms
    folded, polyphase first stage); otherwise the first stage in the input's
    layout, its pooling step writing the channels-last layout of the later
    stages (and reading its gradient from there: no copy either way), the
    later stages as 2-D operations. Forward hooks of the stages' modules do
    not run.
    """
    stages = _standard_stages(encoder)
    if stages is None:
        return encoder.head(encoder.features(x))
    (conv, bn, pool), *rest = stages
    if not rest:
        return encoder.head(pool(bn(conv(x))))
    if (
        not encoder.training
        and not torch.is_grad_enabled()
        and all(_has_running_stats(bn) for _, bn, _ in stages)
    ):
        return _cnn_inference(encoder, x, stages)
    h = pool._forward_channels_last(bn(conv(x)))
    for conv, bn, pool in rest:
        h = pool(_batch_norm_nhwc(_conv_nhwc(h, conv), bn))
    return encoder.head(h.squeeze(2))


def _cnn_inference(encoder, x, stages):
    """The evaluation-mode function with fewer, cheaper steps (no autograd).

    Each batch norm (running statistics) is folded into the convolution
    before it, and the maximum is taken before the ReLU, which commutes
    with it. A single-lead first stage runs as one polyphase convolution
    (:func:`_first_stage_polyphase`); the later stages as 2-D operations in
    the channels-last layout.
    """
    (conv, bn, pool), *rest = stages
    weight, bias = _fold_batch_norm(conv, bn)
    if _polyphase_applies(conv):
        h = _first_stage_polyphase(x, weight, bias, conv.stride[0], pool.kernel_size)
    else:
        out = F.conv1d(x, weight, bias, conv.stride, conv.padding, conv.dilation, conv.groups)
        h = F.relu_(F.max_pool1d(out, pool.kernel_size))
        h = h.unsqueeze(2).contiguous(memory_format=torch.channels_last)
    for conv, bn, pool in rest:
        out = _conv_nhwc(h, conv, *_fold_batch_norm(conv, bn))
        h = _max_pool_last(out, pool.kernel_size).relu_()
    return encoder.head(h.squeeze(2))


def _has_running_stats(bn):
    """Whether ``bn`` normalises with running statistics in evaluation mode (torch's rule)."""
    return bn.running_mean is not None and bn.running_var is not None


def _fold_batch_norm(conv, bn):
    """Weight and bias of ``conv`` followed by ``bn`` in evaluation mode, as one convolution."""
    scale = torch.rsqrt(bn.running_var + bn.eps)
    if bn.affine:
        scale = scale * bn.weight
    bias = -bn.running_mean if conv.bias is None else conv.bias - bn.running_mean
    bias = torch.addcmul(bn.bias, bias, scale) if bn.affine else bias * scale
    return conv.weight * scale[:, None, None], bias


def _max_pool_last(x, pool_size):
    """Max pooling (kernel = stride = ``pool_size``) over the last axis, as maxima of strided views.

    For channels-last ``(batch, channels, 1, time)`` tensors this is several
    times faster on CPU than ``max_pool2d``. A trailing partial window is dropped.
    """
    n = x.shape[-1] // pool_size
    if pool_size == 1:
        return x[..., :n].clone()
    h = torch.maximum(x[..., 0 : n * pool_size : pool_size], x[..., 1 : n * pool_size : pool_size])
    for i in range(2, pool_size):
        torch.maximum(h, x[..., i : n * pool_size : pool_size], out=h)
    return h


def _polyphase_applies(conv):
    """Whether ``conv`` (an ``nn.Conv1d``) suits the polyphase form (one input channel)."""
    return (
        conv.in_channels == 1
        and conv.groups == 1
        and conv.dilation == (1,)
        and conv.padding == (0,)
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


def _first_stage_polyphase(x, weight, bias, stride, pool_size):
    """``relu(max_pool1d(conv1d(x, weight, bias, stride), pool_size))`` for one input channel.

    Returns shape ``(batch, channels, 1, n_out)`` in the channels-last layout.

    The strided single-channel convolution is the slowest step of the paper's
    CNN on CPU (oneDNN's slowest case). Cutting the signal
    into rows of ``R = stride * pool_size`` samples turns it into a
    stride-1 convolution of width ``q`` over ``R`` phase channels, read in
    place as a channels-last 2-D input, whose ``pool_size * C`` outputs per
    row are the convolution outputs of one pooling window: the pooling is
    then an element-wise maximum. Same function, up to float rounding.
    """
    batch, _, length = x.shape
    channels, _, kernel_size = weight.shape
    shifted, width = _polyphase_weight(weight, stride, pool_size)
    n_out = ((length - kernel_size) // stride + 1) // pool_size
    phases = _phases(x, stride * pool_size, n_out + width - 1)
    # Each pooling window's outputs share a bias: max(a + b, c + b) = max(a, c) + b,
    # so the convolution adds it (no pass over a broadcast bias afterwards);
    # (torch.cat repeats it faster than Tensor.repeat.)
    out = F.conv2d(phases, shifted, torch.cat([bias] * pool_size)).squeeze(2)
    # out: (batch, pool_size * C, n_out), channels-last
    h4 = torch.empty(
        batch,
        channels,
        1,
        n_out,
        dtype=out.dtype,
        device=out.device,
        memory_format=torch.channels_last,
    )
    h = h4.squeeze(2)  # a view: the maxima are written in the channels-last layout
    if pool_size == 1:
        h.copy_(out)
    else:
        torch.maximum(out[:, :channels], out[:, channels : 2 * channels], out=h)
    for i in range(2, pool_size):
        torch.maximum(h, out[:, i * channels : (i + 1) * channels], out=h)
    h.relu_()
    return h4


def _conv_nhwc(x, conv, weight=None, bias=None):
    """``conv`` (an ``nn.Conv1d``) applied to ``x`` of shape (N, C, 1, L) as a 2-D convolution.

    ``weight`` and ``bias``, if given, replace the layer's own.
    """
    if weight is None:
        weight, bias = conv.weight, conv.bias
    return F.conv2d(
        x,
        weight.unsqueeze(2),
        bias,
        stride=(1, conv.stride[0]),
        padding=(0, conv.padding[0]),
        dilation=(1, conv.dilation[0]),
        groups=conv.groups,
    )


def _running_stats_factor(bn):
    """The weight of this batch in ``bn``'s running statistics, as ``BatchNorm1d.forward`` sets it.

    Counts the batch in ``num_batches_tracked`` in training mode; the
    factor is the momentum, or ``1 / num_batches_tracked`` (a cumulative
    average) where the momentum is None.
    """
    factor = 0.0 if bn.momentum is None else bn.momentum
    if bn.training and bn.track_running_stats and bn.num_batches_tracked is not None:
        bn.num_batches_tracked.add_(1)
        if bn.momentum is None:
            factor = 1.0 / float(bn.num_batches_tracked)
    return factor


def _batch_norm_nhwc(x, bn):
    """``bn`` (an ``nn.BatchNorm1d``) applied to ``x`` of shape (N, C, 1, L).

    The same steps as ``torch.nn.BatchNorm1d.forward`` (running statistics,
    momentum or cumulative average, ``num_batches_tracked``) on a 4-D input,
    which the module itself does not accept.
    """
    factor = _running_stats_factor(bn)
    batch_stats = bn.training or (bn.running_mean is None and bn.running_var is None)
    keep_running = not bn.training or bn.track_running_stats
    return F.batch_norm(
        x,
        bn.running_mean if keep_running else None,
        bn.running_var if keep_running else None,
        bn.weight,
        bn.bias,
        batch_stats,
        factor,
        bn.eps,
    )


def _conv_bn_nhwc(x, conv, bn):
    """``bn(conv(x))`` for ``x`` of shape (N, C, 1, L), channels-last.

    Not folded in evaluation mode, unlike the CNN's: for the ResNet it moved
    neither ``fit`` nor ``transform`` by 10 % (``benchmarks/RESULTS.md``,
    2026-11-28).
    """
    return _batch_norm_nhwc(_conv_nhwc(x, conv), bn)


def _standard_resnet(encoder, block_type):
    """Whether the ResNet's layers are its own, as :func:`resnet_forward` computes them.

    The fast path reads the parameters of the convolutions and batch norms
    and applies ReLU and max pooling itself, so every block must be a
    ``block_type`` and every layer of the stem and the blocks of its
    standard type; otherwise (another activation in ``block.relu``, other
    layer types, subclasses) the modules run instead.
    """
    if type(encoder.stem) is not nn.Sequential or type(encoder.blocks) is not nn.Sequential:
        return False
    stem = list(encoder.stem)
    if len(stem) != 4:
        return False
    conv, bn, relu, pool = stem
    standard = (
        _standard_conv(conv)
        and type(bn) is nn.BatchNorm1d
        and type(relu) is nn.ReLU
        and type(pool) is nn.MaxPool1d
        and pool.dilation == 1
        and not pool.ceil_mode
        and not pool.return_indices
        and all(isinstance(v, int) for v in (pool.kernel_size, pool.stride, pool.padding))
    )
    if not standard:
        return False
    for block in encoder.blocks:
        if type(block) is not block_type:
            return False
        shortcut = block.shortcut
        standard = (
            _standard_conv(block.conv1)
            and _standard_conv(block.conv2)
            and type(block.bn1) is nn.BatchNorm1d
            and type(block.bn2) is nn.BatchNorm1d
            and type(block.relu) is nn.ReLU
            and (
                type(shortcut) is nn.Identity
                or (
                    type(shortcut) is nn.Sequential
                    and len(shortcut) == 2
                    and _standard_conv(shortcut[0])
                    and type(shortcut[1]) is nn.BatchNorm1d
                )
            )
        )
        if not standard:
            return False
    return True


def _block_nhwc(block, x):
    """A ResNet basic block on ``x`` of shape (N, C, 1, L), channels-last."""
    out = F.relu(_conv_bn_nhwc(x, block.conv1, block.bn1))
    out = _conv_bn_nhwc(out, block.conv2, block.bn2)
    if isinstance(block.shortcut, nn.Identity):
        shortcut = x
    else:
        shortcut = _conv_bn_nhwc(x, *block.shortcut)
    return F.relu(out + shortcut)


def resnet_forward(encoder, x, block_type):
    """:class:`~sklearn_crocs.nn.ResNet1dEncoder`'s function on ``x``, by the fast path.

    The 1-D layers run as 2-D ones on ``(batch, channels, 1, time)`` in the
    channels-last layout, where oneDNN's convolutions are faster on CPU.
    ``block_type`` is the encoder's own residual block class: if
    a block is of another type, or any layer was replaced or edited (see
    :func:`_standard_resnet`), the modules run as they are.
    """
    if not _standard_resnet(encoder, block_type):
        return encoder.head(encoder.blocks(encoder.stem(x)))
    h = x.unsqueeze(2).contiguous(memory_format=torch.channels_last)
    conv, bn, _, pool = encoder.stem
    h = F.relu(_conv_bn_nhwc(h, conv, bn))
    h = F.max_pool2d(h, (1, pool.kernel_size), (1, pool.stride), (0, pool.padding))
    for block in encoder.blocks:
        h = _block_nhwc(block, h)
    return encoder.head(h.squeeze(2))
