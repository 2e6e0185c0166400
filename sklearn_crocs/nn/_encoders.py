"""ECG encoders: the CROCS paper's small CNN and a 1-D ResNet18 with one block per stage.

Every encoder follows one constructor contract so that
:class:`~sklearn_crocs.CROCSClusterer` can build it from the shape of the
training data::

    Encoder(in_channels, n_timepoints, embedding_dim, **encoder_params)

and maps a batch of shape ``(batch, in_channels, n_timepoints)`` to
``(batch, embedding_dim)``. Users may pass their own ``nn.Module`` subclass
with the same contract.
"""

import torch
import torch.nn.functional as F
from torch import nn

from ._layers import (
    ReLUMaxPoolDropout,
    _BatchNormReLUMaxPoolDropoutFunction,
    _Conv1d,
    _phase_grad_applies,
    _PhaseGradConv2dFunction,
    _phases,
    _polyphase_applies,
    _polyphase_training_applies,
    _polyphase_weight,
    _PolyphaseConv1dFunction,
)

__all__ = ["CNNEncoder", "ResNet1dEncoder"]


def _conv_output_length(length, kernel_size, stride=1, padding=0):
    """Output length of a Conv1d/MaxPool1d (dilation 1, floor mode)."""
    return (length + 2 * padding - kernel_size) // stride + 1


def _output_length(length, steps):
    """Length after a sequence of ``(kernel, stride, padding)`` steps, or 0 if too short."""
    for kernel_size, stride, padding in steps:
        length = _conv_output_length(length, kernel_size, stride, padding)
        if length < 1:
            return 0
    return length


def _min_input_length(steps, limit=10**7):
    """Smallest input length for which every step yields at least one sample."""
    low, high = 1, 1
    while _output_length(high, steps) < 1:
        high *= 2
        if high > limit:  # pragma: no cover - only for absurd parameters
            raise ValueError("The encoder parameters admit no input length.")
    while low < high:  # the output length is non-decreasing in the input length
        mid = (low + high) // 2
        if _output_length(mid, steps) >= 1:
            high = mid
        else:
            low = mid + 1
    return low


def _check_length(encoder_name, n_timepoints, steps, hint):
    minimum = _min_input_length(steps)
    if n_timepoints < minimum:
        raise ValueError(
            f"{encoder_name} needs at least {minimum} time points per lead "
            f"with these parameters; got {n_timepoints}. Use longer frames or {hint}."
        )
    return _output_length(n_timepoints, steps)


class CNNEncoder(nn.Module):
    """The CROCS paper's 1-D CNN (Appendix B, Table 5), for any lead count and length.

    Three stages of ``Conv1d(kernel_size, stride) -> BatchNorm1d -> ReLU ->
    MaxPool1d(pool_size) -> Dropout(dropout)`` with ``channels`` output
    channels, then ``Linear -> ReLU`` to ``embedding_dim``. The input size of
    the linear layer is derived from ``n_timepoints`` (320 for the paper's
    2500-sample single-lead frames).

    ``ReLU -> MaxPool1d -> Dropout`` run as one fused step
    (:class:`ReLUMaxPoolDropout`), the first convolution computes no gradient
    for the input signal (on CPU with one lead, it runs as a stride-1
    convolution over the signal's phases: rows of ``stride`` samples, or
    ``2 * stride`` for two outputs per row, read as channels, and in
    training the batch norm after it joins the fused step when pooling over
    2), and the stages after the first run as 2-D operations on a ``(batch,
    channels, 1, time)`` view in the channels-last layout, where oneDNN's
    convolutions, their backward passes and batch norms are faster on CPU
    (with few input channels, a convolution's input gradient runs as a
    stride-1 convolution over phases). In evaluation mode without autograd
    (``torch.inference_mode`` or ``torch.no_grad``, as in ``transform``) each
    batch norm is folded into its convolution and a single-lead first stage
    runs as one polyphase convolution. All compute the same function with
    less work; :meth:`reference_layers` returns the plain torch layers with
    the same parameters. Layers replaced or edited in :attr:`features`
    (other types, subclasses) run through the modules as they are.

    Parameters
    ----------
    in_channels : int
        Number of leads.
    n_timepoints : int
        Samples per lead; must be at least the minimum length that the
        kernels, strides and pools allow (388 with the defaults).
    embedding_dim : int
        Output dimension.
    channels : tuple of int, default=(4, 16, 32)
        Output channels of the convolutional stages.
    kernel_size : int, default=7
        Kernel size of every convolution.
    stride : int, default=3
        Stride of every convolution.
    pool_size : int, default=2
        Kernel and stride of every max-pooling step.
    dropout : float, default=0.1
        Dropout probability after every stage.
    output_relu : bool, default=True
        End with a ReLU, as in the paper. Embeddings are then non-negative,
        so after L2 normalisation they all lie in one orthant of the sphere;
        ``False`` lets them use the whole sphere.

    Attributes
    ----------
    features : torch.nn.Sequential
        The convolutional stages: ``Conv1d``, ``BatchNorm1d`` and
        ``ReLUMaxPoolDropout`` per stage. :meth:`forward` reads their
        parameters but calls only the first stage's convolution and batch
        norm modules (and none in inference, nor in training on CPU with one
        lead, where the first stage runs as one fused step), so forward hooks
        on the others do not run; the modules of :meth:`reference_layers`
        all run.
    head : torch.nn.Sequential
        ``Flatten -> Linear -> ReLU``.
    n_flat_features : int
        Input size of the linear layer.
    max_activation_size : int
        Elements per frame of the largest tensor in a forward pass (input
        or convolution output; 3328 for the paper's frames);
        :class:`~sklearn_crocs.CROCSClusterer` sizes its inference batches
        by it.

    Examples
    --------
    >>> import torch
    >>> from sklearn_crocs.nn import CNNEncoder
    >>> encoder = CNNEncoder(in_channels=1, n_timepoints=2500, embedding_dim=128)
    >>> encoder.n_flat_features
    320
    >>> encoder(torch.zeros(2, 1, 2500)).shape
    torch.Size([2, 128])
    """

    def __init__(
        self,
        in_channels,
        n_timepoints,
        embedding_dim,
        *,
        channels=(4, 16, 32),
        kernel_size=7,
        stride=3,
        pool_size=2,
        dropout=0.1,
        output_relu=True,
    ):
        super().__init__()
        channels = tuple(channels)
        steps = [(kernel_size, stride, 0), (pool_size, pool_size, 0)] * len(channels)
        length = _check_length(
            type(self).__name__,
            n_timepoints,
            steps,
            "smaller kernel_size, stride or pool_size in encoder_params",
        )
        layers = []
        for c_in, c_out in zip((in_channels, *channels[:-1]), channels):
            layers += [
                _Conv1d(c_in, c_out, kernel_size, stride=stride),
                nn.BatchNorm1d(c_out),
                ReLUMaxPoolDropout(pool_size, p=dropout),
            ]
        self.features = nn.Sequential(*layers)
        self.n_flat_features = channels[-1] * length
        self.max_activation_size = max(  # the input or a convolution's output
            in_channels * n_timepoints,
            *(c * _output_length(n_timepoints, steps[: 2 * i + 1]) for i, c in enumerate(channels)),
        )
        self.head = nn.Sequential(
            nn.Flatten(),
            nn.Linear(self.n_flat_features, embedding_dim),
            nn.ReLU() if output_relu else nn.Identity(),
        )

    def forward(self, x):
        """Embed a batch of shape (batch, in_channels, n_timepoints)."""
        stages = self._standard_stages()
        if stages is None:
            return self.head(self.features(x))
        if (
            not self.training
            and not torch.is_grad_enabled()
            and all(_has_running_stats(bn) for _, bn, _ in stages)
        ):
            return self._forward_inference(x, stages)
        return self._forward_stages(x, stages)

    def _standard_stages(self):
        """``(conv, bn, pool)`` per stage if the layers are this class's own, else None.

        :meth:`forward` reads these layers' parameters and runs them in its
        own layout; a ``features`` replaced or edited by the user (other layer
        types, a subclass) runs through the modules instead.
        """
        stages = list(self.features)  # a list: slicing a Sequential builds new modules
        if len(stages) % 3:
            return None
        triples = list(zip(stages[0::3], stages[1::3], stages[2::3]))
        for conv, bn, pool in triples:
            standard = (
                type(conv) in (_Conv1d, nn.Conv1d)
                and conv.padding_mode == "zeros"
                and isinstance(conv.padding, tuple)
                and type(bn) is nn.BatchNorm1d
                and type(pool) is ReLUMaxPoolDropout
            )
            if not standard:
                return None
        return triples

    def _forward_stages(self, x, stages):
        """The stages with autograd (training, or evaluation with gradients).

        The first stage runs in the input's layout (its convolution computes
        no gradient for the signal, and with one lead on CPU runs over the
        signal's phases, see :class:`_Conv1d`); its pooling step writes the
        output as ``(batch, channels, 1, time)`` in the channels-last
        layout, where oneDNN's convolutions, their backward passes and the
        batch norms of the later stages run faster on CPU (2-D operations with
        the same parameters; :func:`_batch_norm_nhwc` keeps the running
        statistics as ``BatchNorm1d`` does). On CPU with one lead, the
        first stage's batch norm, ReLU, pooling over 2 and dropout run as
        one step on the convolution's channels-last output
        (:func:`_fused_first_stage`). A later strided convolution whose input
        has few channels (the second, 4 channels in) gets its input gradient
        from a stride-1 convolution over phases
        (:class:`_PhaseGradConv2dFunction`), faster than oneDNN's there.
        """
        (conv, bn, pool), *rest = stages
        if not rest:
            return self.head(pool(bn(conv(x))))
        if _fused_first_stage_applies(x, conv, bn, pool):
            h = _fused_first_stage(x, conv, bn, pool)
        else:
            # The pooling step writes its output (and reads its gradient) in
            # the channels-last layout of the later stages: no separate copy.
            h = pool._forward_channels_last(bn(conv(x)))
        for conv, bn, pool in rest:
            h = pool(_batch_norm_nhwc(_conv_nhwc(h, conv), bn))
        return self.head(h.squeeze(2))

    def _forward_inference(self, x, stages):
        """The evaluation-mode function with fewer, cheaper steps (no autograd).

        Each batch norm (running statistics) is folded into the convolution
        before it, and the maximum is taken before the ReLU, which commutes
        with it. A single-lead first stage runs as one polyphase convolution
        (:func:`_first_stage_polyphase`); the later stages, as in
        :meth:`_forward_stages`, as 2-D operations in the channels-last layout.
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
        return self.head(h.squeeze(2))

    def reference_layers(self):
        """The same network as a plain ``nn.Sequential`` of standard torch layers.

        Shares this encoder's modules and parameters. The encoder computes the
        same function faster (see the class description); the plain form is
        the paper's Table 5 layer by layer, for inspection or export.

        Returns
        -------
        model : torch.nn.Sequential
            ``Conv1d -> BatchNorm1d -> ReLU -> MaxPool1d -> Dropout`` per
            stage, then ``Flatten -> Linear -> ReLU``.

        Examples
        --------
        >>> import torch
        >>> from sklearn_crocs.nn import CNNEncoder
        >>> encoder = CNNEncoder(1, 2500, 128).eval()
        >>> plain = encoder.reference_layers().eval()
        >>> x = torch.randn(4, 1, 2500)
        >>> torch.allclose(encoder(x), plain(x), atol=1e-5)
        True
        """
        layers = []
        stages = self.features
        for conv, bn, pool in zip(stages[0::3], stages[1::3], stages[2::3]):
            layers += [
                conv.plain(),
                bn,
                nn.ReLU(),
                nn.MaxPool1d(pool.kernel_size),
                nn.Dropout(pool.p),
            ]
        return nn.Sequential(*layers, *self.head)


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

    For channels-last ``(batch, channels, 1, time)`` tensors this is faster
    on CPU than ``max_pool2d`` (which takes 0.2 ms for 16 channels where the
    views take 0.05 ms, at batch 256). A trailing partial window is dropped.
    """
    n = x.shape[-1] // pool_size
    if pool_size == 1:
        return x[..., :n].clone()
    h = torch.maximum(x[..., 0 : n * pool_size : pool_size], x[..., 1 : n * pool_size : pool_size])
    for i in range(2, pool_size):
        torch.maximum(h, x[..., i : n * pool_size : pool_size], out=h)
    return h


def _first_stage_polyphase(x, weight, bias, stride, pool_size):
    """``relu(max_pool1d(conv1d(x, weight, bias, stride), pool_size))`` for one input channel.

    Returns shape ``(batch, channels, 1, n_out)`` in the channels-last layout.

    The strided single-channel convolution is the slowest step of the paper's
    CNN on CPU (oneDNN reaches about 17 GFLOP/s on it). Cutting the signal
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
    # torch.cat repeats it in 2 us per call where Tensor.repeat takes 14.
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


def _conv_bn_nhwc(x, conv, bn):
    """``bn(conv(x))`` for ``x`` of shape (N, C, 1, L), channels-last.

    In evaluation mode without autograd the batch norm is folded into the
    convolution (one pass over the output instead of two).
    """
    if not bn.training and _has_running_stats(bn) and not torch.is_grad_enabled():
        return _conv_nhwc(x, conv, *_fold_batch_norm(conv, bn))
    return _batch_norm_nhwc(_conv_nhwc(x, conv), bn)


def _conv_nhwc(x, conv, weight=None, bias=None):
    """``conv`` (an ``nn.Conv1d``) applied to ``x`` of shape (N, C, 1, L) as a 2-D convolution.

    ``weight`` and ``bias``, if given, replace the layer's own.
    """
    if weight is None:
        if _phase_grad_applies(conv, x):
            return _PhaseGradConv2dFunction.apply(x, conv.weight, conv.bias, conv.stride[0])
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


def _fused_first_stage_applies(x, conv, bn, pool):
    """Whether :func:`_fused_first_stage` computes this first stage (see there)."""
    conv_output = (x.shape[-1] - conv.kernel_size[0]) // conv.stride[0] + 1
    return (
        bn.training
        and x.dim() == 3
        and _polyphase_training_applies(conv, x)
        and bn.affine
        and pool.kernel_size == 2
        and x.shape[0] * conv_output > 1  # else batch_norm raises its error
    )


def _fused_first_stage(x, conv, bn, pool):
    """A single-lead first stage in training on CPU, as two autograd steps.

    The convolution over the signal's phases (:class:`_PolyphaseConv1dFunction`),
    its output left in the channels-last layout, then batch norm, ReLU,
    pooling and dropout as one step
    (:class:`_BatchNormReLUMaxPoolDropoutFunction`) whose output is in the
    layout of the later stages; the running statistics are updated as
    ``BatchNorm1d`` does (unbiased variance). Same function as the modules.
    """
    conv_out = _PolyphaseConv1dFunction.apply(x, conv.weight, conv.bias, conv.stride[0], True)
    factor = _running_stats_factor(bn)
    out, mean, var = _BatchNormReLUMaxPoolDropoutFunction.apply(
        conv_out, bn.weight, bn.bias, bn.eps, pool.p
    )
    if bn.track_running_stats and bn.running_mean is not None:
        count = conv_out.shape[0] * conv_out.shape[-1]
        with torch.no_grad():
            bn.running_mean.mul_(1 - factor).add_(mean, alpha=factor)
            bn.running_var.mul_(1 - factor).add_(var, alpha=factor * count / (count - 1))
    return out


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


class _BasicBlock1d(nn.Module):
    """ResNet basic block: two convolutions with batch norm and a shortcut."""

    def __init__(self, c_in, c_out, kernel_size, stride):
        super().__init__()
        padding = kernel_size // 2
        self.conv1 = nn.Conv1d(c_in, c_out, kernel_size, stride=stride, padding=padding, bias=False)
        self.bn1 = nn.BatchNorm1d(c_out)
        self.conv2 = nn.Conv1d(c_out, c_out, kernel_size, padding=padding, bias=False)
        self.bn2 = nn.BatchNorm1d(c_out)
        self.relu = nn.ReLU()
        if stride != 1 or c_in != c_out:
            self.shortcut = nn.Sequential(
                nn.Conv1d(c_in, c_out, 1, stride=stride, bias=False),
                nn.BatchNorm1d(c_out),
            )
        else:
            self.shortcut = nn.Identity()

    def forward(self, x):
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return self.relu(out + self.shortcut(x))

    def forward_nhwc(self, x):
        """The same block on ``x`` of shape (N, C, 1, L), channels-last."""
        out = F.relu(_conv_bn_nhwc(x, self.conv1, self.bn1))
        out = _conv_bn_nhwc(out, self.conv2, self.bn2)
        if isinstance(self.shortcut, nn.Identity):
            shortcut = x
        else:
            shortcut = _conv_bn_nhwc(x, *self.shortcut)
        return F.relu(out + shortcut)


class _PlainResNet1d(nn.Module):
    """A ResNet1dEncoder's layers called as plain 1-D torch modules."""

    def __init__(self, stem, blocks, head):
        super().__init__()
        self.stem, self.blocks, self.head = stem, blocks, head

    def forward(self, x):
        return self.head(self.blocks(self.stem(x)))


class ResNet1dEncoder(nn.Module):
    """1-D ResNet18 with one basic block per stage (the paper's PTB-XL encoder).

    A stem ``Conv1d(stem_kernel_size, stride 2) -> BatchNorm -> ReLU ->
    MaxPool1d(3, stride 2)`` is followed by one residual basic block per
    entry of ``channels`` (stride 2 from the second stage on), global average
    pooling over time and a linear layer to ``embedding_dim``. Halving the
    blocks of ResNet18 roughly halves its parameters, as in the paper; the
    default widths are half of ResNet18's as well (a quarter of the work:
    ``channels=(64, 128, 256, 512)`` gives ResNet18's), which on the
    bundled PTB-XL sample trains in well under two minutes on 2 CPU cores
    (the user guide's "Defaults" page has the figures).

    :meth:`forward` runs these 1-D layers as 2-D ones on a ``(batch,
    channels, 1, time)`` view in the channels-last memory layout, which
    computes the same function faster on CPU, and in evaluation mode
    without autograd (as in ``transform``) folds each batch norm into the
    convolution before it; :meth:`reference_layers` returns the plain 1-D
    modules with the same parameters.

    Parameters
    ----------
    in_channels : int
        Number of leads.
    n_timepoints : int
        Samples per lead; any length works (every stage pads its input), and
        the network pools over time, so it also embeds signals of other
        lengths than the one it was built for.
    embedding_dim : int
        Output dimension.
    channels : tuple of int, default=(32, 64, 128, 256)
        Width of each stage.
    stem_kernel_size : int, default=7
        Kernel size of the stem convolution.
    kernel_size : int, default=3
        Kernel size of the convolutions in the residual blocks (odd).

    Attributes
    ----------
    max_activation_size : int
        Elements per frame of the largest tensor in a forward pass (input,
        stem or block output; 40,000 for 12-lead 2500-sample frames: the stem
        convolution's output); :class:`~sklearn_crocs.CROCSClusterer` sizes
        its inference batches by it.

    Examples
    --------
    >>> import torch
    >>> from sklearn_crocs.nn import ResNet1dEncoder
    >>> encoder = ResNet1dEncoder(in_channels=12, n_timepoints=2500, embedding_dim=256)
    >>> encoder(torch.zeros(2, 12, 2500)).shape
    torch.Size([2, 256])
    """

    def __init__(
        self,
        in_channels,
        n_timepoints,
        embedding_dim,
        *,
        channels=(32, 64, 128, 256),
        stem_kernel_size=7,
        kernel_size=3,
    ):
        super().__init__()
        channels = tuple(channels)
        if kernel_size % 2 != 1:
            raise ValueError(f"kernel_size must be odd; got {kernel_size}.")
        block = (kernel_size, 2, kernel_size // 2)
        steps = [(stem_kernel_size, 2, stem_kernel_size // 2), (3, 2, 1)]
        steps += [block] * (len(channels) - 1)
        _check_length(
            type(self).__name__,
            n_timepoints,
            steps,
            "fewer stages in encoder_params['channels']",
        )
        self.max_activation_size = max(
            in_channels * n_timepoints,
            channels[0] * _output_length(n_timepoints, steps[:1]),  # the stem convolution
            *(c * _output_length(n_timepoints, steps[: 2 + i]) for i, c in enumerate(channels)),
        )
        self.stem = nn.Sequential(
            nn.Conv1d(
                in_channels,
                channels[0],
                stem_kernel_size,
                stride=2,
                padding=stem_kernel_size // 2,
                bias=False,
            ),
            nn.BatchNorm1d(channels[0]),
            nn.ReLU(),
            nn.MaxPool1d(3, stride=2, padding=1),
        )
        blocks = [_BasicBlock1d(channels[0], channels[0], kernel_size, 1)]
        for c_in, c_out in zip(channels[:-1], channels[1:]):
            blocks.append(_BasicBlock1d(c_in, c_out, kernel_size, 2))
        self.blocks = nn.Sequential(*blocks)
        self.head = nn.Sequential(
            nn.AdaptiveAvgPool1d(1), nn.Flatten(), nn.Linear(channels[-1], embedding_dim)
        )

    def forward(self, x):
        """Embed a batch of shape (batch, in_channels, n_timepoints)."""
        # The 1-D layers run as 2-D ones on (batch, channels, 1, time) in the
        # channels-last layout, where oneDNN's convolutions are faster.
        h = x.unsqueeze(2).contiguous(memory_format=torch.channels_last)
        conv, bn, _, pool = self.stem
        h = F.relu(_conv_bn_nhwc(h, conv, bn))
        h = F.max_pool2d(h, (1, pool.kernel_size), (1, pool.stride), (0, pool.padding))
        for block in self.blocks:
            h = block.forward_nhwc(h)
        return self.head(h.squeeze(2))

    def reference_layers(self):
        """The same network as plain 1-D torch modules.

        Shares this encoder's modules and parameters. :meth:`forward` runs
        the same layers as 2-D operations on a ``(batch, channels, 1, time)``
        view in the channels-last memory layout, which oneDNN computes
        faster on CPU (``benchmarks/bench_training.py`` compares the two);
        the plain form calls the ``Conv1d``, ``BatchNorm1d`` and pooling
        modules themselves.

        Returns
        -------
        model : torch.nn.Module
            ``stem -> blocks -> head`` with the modules' own ``forward``.

        Examples
        --------
        >>> import torch
        >>> from sklearn_crocs.nn import ResNet1dEncoder
        >>> encoder = ResNet1dEncoder(12, 500, 16, channels=(8, 16)).eval()
        >>> plain = encoder.reference_layers().eval()
        >>> x = torch.randn(4, 12, 500)
        >>> torch.allclose(encoder(x), plain(x), atol=1e-5)
        True
        """
        return _PlainResNet1d(self.stem, self.blocks, self.head)
