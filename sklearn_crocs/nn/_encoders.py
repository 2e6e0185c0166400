"""ECG encoders: the CROCS paper's small CNN and a 1-D ResNet18 with one block per stage.

Every encoder follows one constructor contract so that
:class:`~sklearn_crocs.CROCSClusterer` can build it from the shape of the
training data::

    Encoder(in_channels, n_timepoints, embedding_dim, **encoder_params)

and maps a batch of shape ``(batch, in_channels, n_timepoints)`` to
``(batch, embedding_dim)``. Users may pass their own ``nn.Module`` subclass
with the same contract.
"""

from torch import nn

from . import _fastpath
from ._fastpath import ReLUMaxPoolDropout

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

    With ``fast_path=True`` :meth:`forward` computes the same function with
    less work (``ReLU -> MaxPool1d -> Dropout`` as one step, the later stages
    in the channels-last layout, batch norms folded in inference; see
    ``sklearn_crocs/nn/_fastpath.py``); :meth:`reference_layers` returns the
    plain torch layers with the same parameters, which ``fast_path=False``
    runs. Layers replaced or edited in :attr:`features` (other types,
    subclasses) run through the modules as they are.

    Read more in the :ref:`User Guide <method>`.

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
    fast_path : bool, default=True
        Compute :meth:`forward` by the fast path (same function, up to float
        rounding); ``False`` runs :meth:`reference_layers`.

    Attributes
    ----------
    features : torch.nn.Sequential
        The convolutional stages: ``Conv1d``, ``BatchNorm1d`` and
        ``ReLUMaxPoolDropout`` per stage. The fast path reads their
        parameters but calls only the first stage's modules (none in
        inference), so forward hooks on the others do not run; the modules
        of :meth:`reference_layers` all run.
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

    #: Parameter-name prefixes of the layers that a fine-tune keeps (``freeze``): the
    #: first stage.
    early_layers = ("features.0.", "features.1.")

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
        fast_path=True,
    ):
        super().__init__()
        self.fast_path = fast_path
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
                nn.Conv1d(c_in, c_out, kernel_size, stride=stride),
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
        if self.fast_path:
            return _fastpath.cnn_forward(self, x)
        return self.reference_layers()(x)

    def reference_layers(self):
        """The same network as a plain ``nn.Sequential`` of standard torch layers.

        Shares this encoder's modules and parameters. The fast path computes
        the same function with less work (see the class description); the
        plain form is the paper's Table 5 layer by layer, for inspection or
        export. Modules of :attr:`features` other than
        :class:`ReLUMaxPoolDropout` are kept as they are.

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
        for module in self.features:
            layers += module.plain() if isinstance(module, ReLUMaxPoolDropout) else [module]
        return nn.Sequential(*layers, *self.head)


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
    ``channels=(64, 128, 256, 512)`` gives ResNet18's; the user guide's "Defaults"
    page has the training times).

    With ``fast_path=True`` :meth:`forward` runs these 1-D layers as 2-D ones
    on a ``(batch, channels, 1, time)`` view in the channels-last memory
    layout, which computes the same function faster on CPU (see
    ``sklearn_crocs/nn/_fastpath.py``); :meth:`reference_layers` returns the
    plain 1-D modules with the same parameters, which ``fast_path=False``
    runs. If a layer of ``stem`` or ``blocks`` is replaced or edited
    (another activation for a block's ``relu``, other layer types,
    subclasses), the modules run as they are.

    Read more in the :ref:`User Guide <method>`.

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
    fast_path : bool, default=True
        Compute :meth:`forward` by the fast path (same function, up to float
        rounding); ``False`` runs :meth:`reference_layers`.

    Attributes
    ----------
    stem : torch.nn.Sequential
        ``Conv1d -> BatchNorm1d -> ReLU -> MaxPool1d``.
    blocks : torch.nn.Sequential
        One residual block per stage, with modules ``conv1``, ``bn1``,
        ``conv2``, ``bn2``, ``relu`` (after each half) and ``shortcut``.
    head : torch.nn.Sequential
        ``AdaptiveAvgPool1d -> Flatten -> Linear``.
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

    #: Parameter-name prefixes of the layers that a fine-tune keeps (``freeze``): the
    #: stem and the first three of the four stages.
    early_layers = ("stem.", "blocks.0.", "blocks.1.", "blocks.2.")

    def __init__(
        self,
        in_channels,
        n_timepoints,
        embedding_dim,
        *,
        channels=(32, 64, 128, 256),
        stem_kernel_size=7,
        kernel_size=3,
        fast_path=True,
    ):
        super().__init__()
        self.fast_path = fast_path
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
        if self.fast_path:
            return _fastpath.resnet_forward(self, x, _BasicBlock1d)
        return self.reference_layers()(x)

    def reference_layers(self):
        """The same network as plain 1-D torch modules.

        Shares this encoder's modules and parameters. The fast path runs the
        same layers as 2-D operations in the channels-last memory layout;
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


# The encoders that estimators accept by name (``encoder="cnn"``).
ENCODERS = {"cnn": CNNEncoder, "resnet": ResNet1dEncoder}


def encoder_class(encoder):
    """The class an estimator's ``encoder`` parameter names: "cnn", "resnet" or a
    torch.nn.Module subclass itself."""
    if isinstance(encoder, str):
        return ENCODERS[encoder]
    if issubclass(encoder, nn.Module):  # parameter validation let only classes through
        return encoder
    raise TypeError(
        "encoder must be 'cnn', 'resnet' or a torch.nn.Module subclass; "
        f"got the class {encoder.__name__}."
    )
