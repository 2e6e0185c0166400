"""The fast layers compute the same functions as the standard torch layers."""

import copy

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from sklearn_crocs.nn import CNNEncoder, ReLUMaxPoolDropout, ResNet1dEncoder
from sklearn_crocs.nn._layers import _Conv1d


@pytest.mark.parametrize("kernel_size", [1, 2, 3])
@pytest.mark.parametrize("length", [100, 101])
def test_relu_pool_dropout_equals_standard_layers_without_dropout(kernel_size, length):
    torch.manual_seed(0)
    fused = ReLUMaxPoolDropout(kernel_size, p=0.0)
    reference = nn.Sequential(nn.ReLU(), nn.MaxPool1d(kernel_size), nn.Dropout(0.0))
    x = torch.randn(4, 3, length, dtype=torch.float64)
    x[0, 0, :6] = 0.0  # ties at zero, as after a ReLU
    x[1, 1, :4] = 1.5  # positive ties: the first element gets the gradient
    for train in (True, False):
        fused.train(train)
        reference.train(train)
        a = x.clone().requires_grad_()
        b = x.clone().requires_grad_()
        out, expected = fused(a), reference(b)
        assert torch.equal(out, expected)
        grad = torch.randn_like(out)
        out.backward(grad)
        expected.backward(grad)
        assert torch.equal(a.grad, b.grad)


def test_relu_pool_dropout_drops_at_rate_p_and_rescales():
    layer = ReLUMaxPoolDropout(2, p=0.3)
    x = torch.rand(200, 10, 200) + 0.1  # positive, so only dropout zeroes outputs
    torch.manual_seed(1)
    out = layer(x)
    pooled = F.max_pool1d(x, 2)
    dropped = out == 0
    assert abs(dropped.float().mean().item() - 0.3) < 0.005
    torch.testing.assert_close(out[~dropped], pooled[~dropped] / 0.7)
    torch.manual_seed(1)
    assert torch.equal(layer(x), out)  # masks come from torch's global generator
    # The gradient flows exactly where the output was kept.
    x.requires_grad_()
    torch.manual_seed(2)
    out = layer(x)
    out.sum().backward()
    kept_inputs = x.grad != 0
    assert kept_inputs.sum() == (out != 0).sum()
    with pytest.raises(ValueError, match="dropout probability"):
        ReLUMaxPoolDropout(2, p=1.0)


def _assert_equal_in_evaluation(encoder, reference, x):
    """Outputs agree in evaluation mode, with and without inference mode."""
    encoder.eval()
    reference.eval()
    torch.testing.assert_close(encoder(x), reference(x))
    with torch.inference_mode():
        torch.testing.assert_close(encoder(x), reference(x))


@pytest.mark.parametrize(
    ("leads", "length", "params"),
    [(1, 2500, {}), (12, 2500, {}), (3, 1000, {"kernel_size": 5, "stride": 2, "pool_size": 3})],
)
def test_cnn_encoder_equals_its_reference_layers(leads, length, params):
    torch.manual_seed(0)
    encoder = CNNEncoder(leads, length, 32, **params).double()
    reference = encoder.reference_layers()
    x = torch.randn(16, leads, length, dtype=torch.float64)
    # Training mode (batch statistics) without dropout: outputs and every gradient agree.
    for module in [*encoder.modules(), *reference.modules()]:
        if isinstance(module, (nn.Dropout, ReLUMaxPoolDropout)):
            module.p = 0.0
    encoder.train()
    reference.train()
    out = encoder(x)
    torch.testing.assert_close(out, reference(x))
    grads = torch.autograd.grad(out.square().sum(), list(encoder.parameters()))
    encoder.zero_grad()
    ref_grads = torch.autograd.grad(reference(x).square().sum(), list(reference.parameters()))
    for g, r in zip(grads, ref_grads):
        torch.testing.assert_close(g, r)
    # Evaluation mode (running statistics, no dropout).
    _assert_equal_in_evaluation(encoder, reference, x)


def test_cnn_encoder_float32_matches_reference_within_tolerance():
    torch.manual_seed(0)
    encoder = CNNEncoder(1, 2500, 128)
    x = torch.randn(64, 1, 2500)
    for _ in range(3):  # give the batch norms non-trivial running statistics
        encoder(x)
    encoder.eval()
    reference = encoder.reference_layers().eval()
    torch.testing.assert_close(encoder(x), reference(x), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("input_grad", [False, True])
@pytest.mark.parametrize(
    "params",
    [
        {"in_channels": 1, "out_channels": 4, "kernel_size": 7, "stride": 3},
        {"in_channels": 4, "out_channels": 6, "kernel_size": 5, "padding": 2, "bias": False},
        {"in_channels": 4, "out_channels": 8, "kernel_size": 3, "dilation": 2, "groups": 2},
        {"in_channels": 2, "out_channels": 3, "kernel_size": 3, "padding": "same"},
    ],
)
def test_conv1d_computes_the_gradients_of_nn_conv1d(params, input_grad, dtype):
    torch.manual_seed(0)
    conv = _Conv1d(**params).to(dtype)
    plain = conv.plain()
    assert type(plain) is nn.Conv1d
    assert plain.weight is conv.weight and plain.bias is conv.bias
    assert conv.state_dict().keys() == plain.state_dict().keys()
    x = torch.randn(5, params["in_channels"], 200, dtype=dtype, requires_grad=input_grad)
    out = conv(x)
    torch.testing.assert_close(out, plain(x))
    upstream = torch.randn_like(out)
    inputs = [*conv.parameters(), *([x] if input_grad else [])]
    grads = torch.autograd.grad(out, inputs, upstream)
    ref_grads = torch.autograd.grad(plain(x), inputs, upstream)
    for g, r in zip(grads, ref_grads):
        torch.testing.assert_close(g, r)
    with torch.no_grad():
        torch.testing.assert_close(conv(x), plain(x))


@pytest.mark.parametrize(
    ("leads", "length", "params"),
    [
        (12, 500, {"channels": (8, 16, 16)}),
        (1, 301, {"channels": (4, 8), "stem_kernel_size": 15, "kernel_size": 5}),
        (3, 1, {"channels": (4,)}),
    ],
)
@pytest.mark.parametrize("momentum", [0.1, None], ids=["momentum", "cumulative"])
def test_resnet_channels_last_forward_equals_its_reference_layers(leads, length, params, momentum):
    torch.manual_seed(0)
    encoder = ResNet1dEncoder(leads, length, 16, **params).double()
    for module in encoder.modules():
        if isinstance(module, nn.BatchNorm1d):
            module.momentum = momentum
    twin = copy.deepcopy(encoder)
    reference = twin.reference_layers()
    assert {type(m) for m in reference.modules()} >= {nn.Conv1d, nn.BatchNorm1d, nn.MaxPool1d}
    x = torch.randn(6, leads, length, dtype=torch.float64)
    for _ in range(2):  # training mode: batch statistics, running statistics updated
        out, ref = encoder(x), reference(x)
        torch.testing.assert_close(out, ref)
        grads = torch.autograd.grad(out.square().sum(), list(encoder.parameters()))
        ref_grads = torch.autograd.grad(ref.square().sum(), list(twin.parameters()))
        for g, r in zip(grads, ref_grads):
            torch.testing.assert_close(g, r)
    for (name, buffer), ref_buffer in zip(encoder.named_buffers(), twin.buffers()):
        torch.testing.assert_close(buffer, ref_buffer, msg=name)
    _assert_equal_in_evaluation(encoder, reference, x)


def test_resnet_batch_norm_without_running_statistics():
    torch.manual_seed(0)
    encoder = ResNet1dEncoder(2, 200, 8, channels=(4, 8)).double()
    for module in encoder.modules():
        if isinstance(module, nn.BatchNorm1d):
            module.track_running_stats = False
            module.running_mean = module.running_var = module.num_batches_tracked = None
    x = torch.randn(5, 2, 200, dtype=torch.float64)
    for mode in (True, False):  # batch statistics in both modes
        encoder.train(mode)
        torch.testing.assert_close(encoder(x), encoder.reference_layers()(x))
