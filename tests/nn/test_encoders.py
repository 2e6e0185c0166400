"""Encoders: shapes for any lead count and length, minimum lengths and their errors."""

import pytest
import torch
from torch import nn

from sklearn_crocs.nn import CNNEncoder, ResNet1dEncoder
from sklearn_crocs.nn._encoders import _min_input_length, _output_length


def test_cnn_matches_paper_architecture():
    encoder = CNNEncoder(in_channels=1, n_timepoints=2500, embedding_dim=128).reference_layers()
    convs = [m for m in encoder.modules() if isinstance(m, nn.Conv1d)]
    assert [(c.in_channels, c.out_channels, c.kernel_size[0], c.stride[0]) for c in convs] == [
        (1, 4, 7, 3),
        (4, 16, 7, 3),
        (16, 32, 7, 3),
    ]
    assert sum(isinstance(m, nn.BatchNorm1d) for m in encoder.modules()) == 3
    pools = [m for m in encoder.modules() if isinstance(m, nn.MaxPool1d)]
    assert [p.kernel_size for p in pools] == [2, 2, 2]
    dropouts = [m for m in encoder.modules() if isinstance(m, nn.Dropout)]
    assert [d.p for d in dropouts] == [0.1, 0.1, 0.1]
    linear = encoder[-2]
    assert (linear.in_features, linear.out_features) == (320, 128)
    assert isinstance(encoder[-1], nn.ReLU)


@pytest.mark.parametrize("encoder_cls", [CNNEncoder, ResNet1dEncoder])
@pytest.mark.parametrize(("leads", "length"), [(1, 2500), (12, 2500), (3, 1000), (2, 5000)])
def test_any_lead_count_and_length(encoder_cls, leads, length):
    encoder = encoder_cls(in_channels=leads, n_timepoints=length, embedding_dim=16).eval()
    out = encoder(torch.randn(3, leads, length))
    assert out.shape == (3, 16)
    assert torch.isfinite(out).all()


def test_cnn_flat_size_is_derived_from_length():
    assert CNNEncoder(1, 2500, 8).n_flat_features == 320
    assert CNNEncoder(1, 5000, 8).n_flat_features == 32 * 22
    assert CNNEncoder(1, 1250, 8, channels=(4, 8)).n_flat_features == 8 * 33


@pytest.mark.parametrize(
    ("encoder_cls", "kwargs", "minimum"),
    [
        (CNNEncoder, {}, 388),
        (CNNEncoder, {"kernel_size": 1, "stride": 1, "pool_size": 1}, 1),
        (CNNEncoder, {"channels": (4,)}, 10),
    ],
)
def test_cnn_minimum_length_and_error(encoder_cls, kwargs, minimum):
    encoder_cls(1, minimum, 4, **kwargs).eval()(torch.randn(2, 1, minimum))
    with pytest.raises(ValueError, match=f"needs at least {minimum} time points per lead"):
        encoder_cls(1, minimum - 1, 4, **kwargs)


def test_resnet_pads_so_any_length_works():
    encoder = ResNet1dEncoder(2, 1, 4).eval()
    assert encoder(torch.randn(3, 2, 1)).shape == (3, 4)
    with pytest.raises(ValueError, match="needs at least 1 time points"):
        ResNet1dEncoder(2, 0, 4)


def test_min_input_length_is_exact():
    steps = [(7, 3, 0), (2, 2, 0)] * 3
    minimum = _min_input_length(steps)
    assert _output_length(minimum, steps) >= 1
    assert _output_length(minimum - 1, steps) == 0


def test_resnet_has_one_block_per_stage():
    encoder = ResNet1dEncoder(12, 2500, 256, channels=(64, 128, 256, 512))
    assert len(encoder.blocks) == 4
    widths = [block.conv2.out_channels for block in encoder.blocks]
    assert widths == [64, 128, 256, 512]
    n_params = sum(p.numel() for p in encoder.parameters())
    # ResNet18 in 1-D with two blocks per stage has about twice as many parameters.
    assert 1.5e6 < n_params < 2.5e6
    # The default halves the widths: about a quarter of the parameters.
    default = ResNet1dEncoder(12, 2500, 256)
    assert [block.conv2.out_channels for block in default.blocks] == [32, 64, 128, 256]
    assert 0.2 < sum(p.numel() for p in default.parameters()) / n_params < 0.3


def test_resnet_rejects_even_kernel():
    with pytest.raises(ValueError, match="kernel_size must be odd"):
        ResNet1dEncoder(1, 2500, 8, kernel_size=4)


def test_cnn_output_relu_option():
    x = torch.randn(8, 1, 500)
    torch.manual_seed(0)
    paper = CNNEncoder(1, 500, 16).eval()
    torch.manual_seed(0)
    linear = CNNEncoder(1, 500, 16, output_relu=False).eval()
    assert (paper(x) >= 0).all()
    assert (linear(x) < 0).any()
    torch.testing.assert_close(paper(x), torch.relu(linear(x)))


@pytest.mark.parametrize(
    ("encoder_class", "leads", "length", "params"),
    [
        (CNNEncoder, 1, 2500, {}),
        (CNNEncoder, 12, 2500, {}),  # the input is the largest tensor
        (CNNEncoder, 1, 1000, {"channels": (2, 64), "kernel_size": 3, "stride": 1}),
        (ResNet1dEncoder, 12, 2500, {}),
        (ResNet1dEncoder, 1, 500, {"channels": (4, 64), "stem_kernel_size": 3}),
    ],
)
def test_max_activation_size_is_the_largest_tensor_per_frame(encoder_class, leads, length, params):
    encoder = encoder_class(leads, length, 16, **params).eval()
    sizes = []
    reference = encoder.reference_layers()
    for module in reference.modules():
        if not list(module.children()):  # leaf layers
            module.register_forward_hook(lambda m, args, out: sizes.append(out.numel()))
    x = torch.randn(1, leads, length)
    with torch.no_grad():
        reference(x)
    assert encoder.max_activation_size == max(x.numel(), *sizes)
