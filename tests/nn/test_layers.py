"""The fast layers compute the same functions as the standard torch layers."""

import copy

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from sklearn_crocs.nn import CNNEncoder, ReLUMaxPoolDropout, ResNet1dEncoder
from sklearn_crocs.nn._encoders import _fold_batch_norm
from sklearn_crocs.nn._layers import (
    _BatchNormReLUMaxPoolDropoutFunction,
    _Conv1d,
    _dropout_scale,
    _PhaseGradConv2dFunction,
)


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


@pytest.mark.parametrize("kernel_size", [2, 3])
@pytest.mark.parametrize("p", [0.0, 0.5])
def test_relu_pool_dropout_on_channels_last_4d_input(kernel_size, p):
    # (N, C, 1, L) channels-last, as in CNNEncoder's later stages: the same function
    # as on (N, C, L), with masks, outputs and gradients in the input's layout.
    torch.manual_seed(0)
    layer = ReLUMaxPoolDropout(kernel_size, p=p)
    x3 = torch.randn(4, 16, 101, dtype=torch.float64)
    x4 = x3.unsqueeze(2).contiguous(memory_format=torch.channels_last).requires_grad_()
    x3.requires_grad_()
    for train in (True, False):
        layer.train(train)
        torch.manual_seed(1)
        out4 = layer(x4)
        assert out4.shape == (4, 16, 1, 101 // kernel_size)
        assert out4.is_contiguous(memory_format=torch.channels_last)
        grad = torch.randn(out4.shape, dtype=torch.float64)
        (g4,) = torch.autograd.grad(out4, x4, grad)
        assert g4.is_contiguous(memory_format=torch.channels_last)
        if p == 0.0 or not train:  # no random draws: equal to the 3-D result
            out3 = layer(x3)
            torch.testing.assert_close(out4.squeeze(2), out3, rtol=0, atol=0)
            (g3,) = torch.autograd.grad(out3, x3, grad.squeeze(2))
            torch.testing.assert_close(g4.squeeze(2), g3, rtol=0, atol=0)
        else:  # the gradient flows exactly where the output was kept
            kept = (out4 != 0).sum()
            assert 0.3 < kept.item() / out4.numel() < 0.6  # positive maxima, half dropped
            assert (g4 != 0).sum() == kept


@pytest.mark.parametrize("kernel_size", [2, 3])
@pytest.mark.parametrize("p", [0.0, 0.5])
@pytest.mark.parametrize("train", [True, False])
def test_relu_pool_dropout_channels_last_output_of_3d_input(kernel_size, p, train):
    # CNNEncoder's first stage: a (N, C, L) input, its output written as (N, C, 1, L')
    # channels-last. The same values (same dropout draws) and input gradient as the
    # layer followed by the copy to that layout.
    layer = ReLUMaxPoolDropout(kernel_size, p=p).train(train)
    x = torch.randn(4, 5, 101, dtype=torch.float64)
    x[0, 0, :6] = 0.0  # ties at zero
    a, b = x.clone().requires_grad_(), x.clone().requires_grad_()
    torch.manual_seed(1)
    out = layer._forward_channels_last(a)
    torch.manual_seed(1)
    expected = layer(b).unsqueeze(2).contiguous(memory_format=torch.channels_last)
    assert out.shape == (4, 5, 1, 101 // kernel_size)
    assert out.is_contiguous(memory_format=torch.channels_last)
    torch.testing.assert_close(out, expected, rtol=0, atol=0)
    grad = torch.randn(out.shape, dtype=torch.float64)
    (ga,) = torch.autograd.grad(out, a, grad)
    (gb,) = torch.autograd.grad(expected, b, grad)
    assert ga.is_contiguous()
    torch.testing.assert_close(ga, gb, rtol=0, atol=0)
    if train and p > 0:  # dropout drew a mask: some positive maxima were dropped
        assert (out == 0).sum() > (F.max_pool1d(x, kernel_size) <= 0).sum()


def _channels_last(x):
    return x.unsqueeze(2).contiguous(memory_format=torch.channels_last)


@pytest.mark.parametrize(
    ("batch", "length"),
    [(4, 40), (2, 41), (3, 41)],  # even and odd lengths, batches of 4, 2 and 3
)
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize("p", [0.0, 0.3])
def test_fused_batch_norm_relu_pool_dropout_equals_the_modules(batch, length, dtype, p):
    # The single-lead first stage in training: batch norm (batch statistics),
    # ReLU, max pooling over 2 and dropout in one step on a channels-last
    # (N, C, 1, L) input. Scales of both signs and zero; a trailing unpooled
    # sample for odd lengths; a large offset that would cancel in a variance
    # from uncentred sums.
    torch.manual_seed(0)
    channels = 5
    x = torch.randn(batch, channels, length, dtype=dtype) * 3 + 100
    weight = torch.tensor([1.5, -0.7, 0.0, 0.3, -2.0], dtype=dtype).requires_grad_()
    bias = torch.randn(channels, dtype=dtype).requires_grad_()
    a = _channels_last(x).requires_grad_()
    torch.manual_seed(1)
    out, mean, var = _BatchNormReLUMaxPoolDropoutFunction.apply(a, weight, bias, 1e-5, p)
    torch.manual_seed(1)  # the same draws, in the output's channels-last layout
    like = torch.empty((batch, channels, 1, length // 2), dtype=dtype)
    scale = _dropout_scale(like.contiguous(memory_format=torch.channels_last), p)
    b = x.clone().requires_grad_()
    w, c = weight.detach().clone().requires_grad_(), bias.detach().clone().requires_grad_()
    normalised = F.batch_norm(b, None, None, w, c, training=True, eps=1e-5)
    expected = _channels_last(F.max_pool1d(F.relu(normalised), 2))
    if p > 0:
        expected = expected * scale
    assert out.is_contiguous(memory_format=torch.channels_last)
    tolerance = {"rtol": 1e-10, "atol": 1e-10} if dtype == torch.float64 else {}
    torch.testing.assert_close(out, expected, **tolerance)
    reference_var, reference_mean = torch.var_mean(x, dim=(0, 2), correction=0)
    torch.testing.assert_close(mean, reference_mean, **tolerance)
    torch.testing.assert_close(var, reference_var, **tolerance)
    grad = torch.randn(out.shape, dtype=dtype)
    grads = torch.autograd.grad(out, (a, weight, bias), grad)
    reference_grads = torch.autograd.grad(expected, (b, w, c), grad)
    assert grads[0].is_contiguous(memory_format=torch.channels_last)
    if dtype == torch.float32:  # batch norm's input gradient cancels: absolute tolerance
        tolerance = {"rtol": 1e-4, "atol": 1e-4}
    torch.testing.assert_close(grads[0].squeeze(2), reference_grads[0], **tolerance)
    for g, r in zip(grads[1:], reference_grads[1:]):
        torch.testing.assert_close(g, r, **tolerance)
    if p > 0:
        assert (scale == 0).any() and (out[scale.expand_as(out) == 0] == 0).all()


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
    # ... and scaled by 1 / (1 - p), as through the standard layers with that mask.
    x = (torch.rand(20, 6, 50, dtype=torch.float64) + 0.1).requires_grad_()
    torch.manual_seed(3)
    out = layer(x)
    grad = torch.randn_like(out)
    out.backward(grad)
    mask = (out != 0).to(x.dtype) / 0.7
    reference = x.detach().clone().requires_grad_()
    (F.max_pool1d(F.relu(reference), 2) * mask).backward(grad)
    torch.testing.assert_close(x.grad, reference.grad, rtol=1e-14, atol=0)
    with pytest.raises(ValueError, match="dropout probability"):
        ReLUMaxPoolDropout(2, p=1.0)


def _assert_equal_in_training(encoder, twin, reference, x):
    """Two training steps agree: outputs, every gradient and the running statistics.

    ``twin`` is a deep copy of ``encoder`` (its own batch-norm buffers) and
    ``reference`` its reference layers.
    """
    for _ in range(2):
        out, ref = encoder(x), reference(x)
        torch.testing.assert_close(out, ref)
        grads = torch.autograd.grad(out.square().sum(), list(encoder.parameters()))
        ref_grads = torch.autograd.grad(ref.square().sum(), list(twin.parameters()))
        for g, r in zip(grads, ref_grads):
            torch.testing.assert_close(g, r)
    for (name, buffer), ref_buffer in zip(encoder.named_buffers(), twin.buffers()):
        torch.testing.assert_close(buffer, ref_buffer, msg=name)


def _assert_equal_in_evaluation(encoder, reference, x):
    """Outputs agree in evaluation mode, with and without inference mode."""
    encoder.eval()
    reference.eval()
    torch.testing.assert_close(encoder(x), reference(x))
    with torch.inference_mode():
        torch.testing.assert_close(encoder(x), reference(x))


@pytest.mark.parametrize(
    ("leads", "length", "params"),
    [
        (1, 2500, {}),
        (1, 2501, {}),  # polyphase input padded by one sample
        (1, 2503, {}),  # 833 convolution outputs, the last not pooled; one sample cropped
        (1, 1000, {"kernel_size": 5, "stride": 2, "pool_size": 3}),
        (1, 600, {"kernel_size": 3, "stride": 4, "pool_size": 2}),
        (12, 2500, {}),
        (3, 1000, {"kernel_size": 5, "stride": 2, "pool_size": 3}),
        (1, 500, {"channels": (6,)}),  # one stage: no channels-last stages
        (3, 500, {"channels": (6,)}),
    ],
)
@pytest.mark.parametrize("momentum", [0.1, None], ids=["momentum", "cumulative"])
def test_cnn_encoder_equals_its_reference_layers(leads, length, params, momentum):
    torch.manual_seed(0)
    encoder = CNNEncoder(leads, length, 32, **params).double()
    for module in encoder.modules():
        if isinstance(module, nn.BatchNorm1d):
            module.momentum = momentum
        if isinstance(module, ReLUMaxPoolDropout):
            module.p = 0.0
    twin = copy.deepcopy(encoder)  # its own batch-norm buffers
    reference = twin.reference_layers()
    for module in reference.modules():
        if isinstance(module, nn.Dropout):
            module.p = 0.0
    x = torch.randn(16, leads, length, dtype=torch.float64)
    # Training mode (batch statistics) without dropout, then evaluation mode.
    _assert_equal_in_training(encoder, twin, reference, x)
    _assert_equal_in_evaluation(encoder, reference, x)


@pytest.mark.parametrize(
    ("leads", "first"),
    [
        # over the 6 phases of rows of 6 samples (two outputs of the stride-3 convolution)
        (1, ("conv2d", 6, True)),
        (2, ("conv1d", 2, False)),  # as it comes
    ],
)
def test_cnn_later_stages_run_channels_last(monkeypatch, leads, first):
    # What makes training fast: after the first stage, the convolutions (forward
    # and backward) and batch norms run on channels-last (batch, C, 1, time)
    # tensors; a single-lead first convolution, over the signal's phases, too.
    torch.manual_seed(0)
    encoder = CNNEncoder(leads, 1000, 8)
    layouts = []
    conv2d, conv1d = F.conv2d, F.conv1d

    def recording(name, conv):
        def record(x, *args, **kwargs):
            channels_last = x.dim() == 4 and x.is_contiguous(memory_format=torch.channels_last)
            layouts.append((name, x.shape[1], channels_last))
            return conv(x, *args, **kwargs)

        return record

    monkeypatch.setattr(F, "conv2d", recording("conv2d", conv2d))
    monkeypatch.setattr(F, "conv1d", recording("conv1d", conv1d))
    x = torch.randn(6, leads, 1000)
    out = encoder(x)
    assert layouts == [first, ("conv2d", 4, True), ("conv2d", 16, True)]
    # Backward: the 4-channel input of the second convolution gets its gradient
    # from a stride-1 convolution of the 16-channel output gradient, over phases
    # (_PhaseGradConv2dFunction); the 16-channel input of the third, from oneDNN.
    layouts.clear()
    out.sum().backward()
    assert layouts == [("conv2d", 16, True)]
    assert all(p.grad is not None for p in encoder.parameters())


@pytest.mark.parametrize(
    ("leads", "params", "train", "fused"),
    [
        (1, {}, True, True),
        (1, {"pool_size": 3}, True, False),  # the fused step pools over 2 only
        (2, {}, True, False),
        (1, {}, False, False),  # evaluation mode: running statistics
    ],
)
def test_cnn_single_lead_first_stage_fuses_batch_norm_in_training(
    monkeypatch, leads, params, train, fused
):
    # Where the fused first stage applies, it computes what the modules do:
    # outputs, gradients and running statistics over two steps, with batch-norm
    # scales of both signs (float64, no dropout).
    torch.manual_seed(0)
    encoder = CNNEncoder(leads, 1200, 16, **params).double().train(train)
    _randomise_batch_norms(encoder)
    for module in encoder.modules():
        if isinstance(module, ReLUMaxPoolDropout):
            module.p = 0.0
    twin = copy.deepcopy(encoder)
    reference = twin.reference_layers().train(train)
    for module in reference.modules():
        if isinstance(module, nn.Dropout):
            module.p = 0.0
    calls = []
    apply = _BatchNormReLUMaxPoolDropoutFunction.apply
    monkeypatch.setattr(
        _BatchNormReLUMaxPoolDropoutFunction,
        "apply",
        lambda *args: calls.append(1) or apply(*args),
    )
    x = torch.randn(8, leads, 1200, dtype=torch.float64)
    _assert_equal_in_training(encoder, twin, reference, x)
    assert bool(calls) == fused


def test_cnn_encoder_float32_matches_reference_within_tolerance():
    torch.manual_seed(0)
    encoder = CNNEncoder(1, 2500, 128)
    x = torch.randn(64, 1, 2500)
    for _ in range(3):  # give the batch norms non-trivial running statistics
        encoder(x)
    encoder.eval()
    reference = encoder.reference_layers().eval()
    torch.testing.assert_close(encoder(x), reference(x), rtol=1e-4, atol=1e-5)


def _randomise_batch_norms(module):
    """Non-trivial running statistics and affine parameters, as after training."""
    with torch.no_grad():
        for bn in module.modules():
            if isinstance(bn, nn.BatchNorm1d):
                bn.running_mean.normal_()
                bn.running_var.uniform_(0.2, 3.0)
                if bn.affine:
                    bn.weight.normal_()  # negative scales too: the maximum must not move
                    bn.bias.normal_()


@pytest.mark.parametrize(
    ("leads", "length", "params"),
    [
        (1, 2500, {}),
        (1, 388, {}),  # the minimum length: one output per stage
        (1, 394, {}),  # whole rows of the polyphase input: neither padding nor cropping
        (1, 1000, {"kernel_size": 5, "stride": 2, "pool_size": 3}),
        (1, 700, {"kernel_size": 2, "stride": 1, "pool_size": 1}),
        (1, 600, {"kernel_size": 3, "stride": 4, "pool_size": 2}),  # gaps between kernels
        (3, 1000, {}),
        (12, 2500, {"channels": (8, 8)}),
    ],
)
def test_cnn_inference_path_equals_reference_layers(leads, length, params):
    torch.manual_seed(0)
    encoder = CNNEncoder(leads, length, 16, **params).double()
    _randomise_batch_norms(encoder)
    encoder.eval()
    assert encoder._standard_stages() is not None
    reference = encoder.reference_layers().eval()
    x = torch.randn(9, leads, length, dtype=torch.float64)
    with torch.inference_mode():
        out = encoder(x)
        torch.testing.assert_close(out, reference(x), rtol=1e-12, atol=1e-12)
    with torch.no_grad():  # no_grad takes the same path
        torch.testing.assert_close(encoder(x), out, rtol=0, atol=0)
    # With autograd on, the modules run as they are; the same function.
    torch.testing.assert_close(encoder(x), out, rtol=1e-12, atol=1e-12)


def test_cnn_inference_path_float32_within_tolerance():
    torch.manual_seed(0)
    encoder = CNNEncoder(1, 2500, 128)
    _randomise_batch_norms(encoder)
    encoder.eval()
    reference = encoder.reference_layers().eval()
    x = torch.randn(64, 1, 2500)
    with torch.inference_mode():
        torch.testing.assert_close(encoder(x), reference(x), rtol=1e-5, atol=1e-5)


def test_cnn_inference_path_sees_parameter_updates():
    # Folding happens per call, so parameters changed after a call are used.
    torch.manual_seed(0)
    encoder = CNNEncoder(1, 500, 8).eval()
    x = torch.randn(4, 1, 500)
    with torch.inference_mode():
        before = encoder(x)
    _randomise_batch_norms(encoder)
    with torch.no_grad():
        encoder.features[0].weight.mul_(2.0)
    with torch.inference_mode():
        after = encoder(x)
        assert not torch.allclose(before, after)
        torch.testing.assert_close(after, encoder.reference_layers().eval()(x))


@pytest.mark.parametrize(
    "edit",
    ["other_activation", "conv_subclass"],
)
def test_cnn_edited_features_run_through_the_modules(edit):
    torch.manual_seed(0)
    encoder = CNNEncoder(1, 500, 8).double()
    if edit == "other_activation":
        encoder.features[2] = nn.Sequential(nn.Tanh(), nn.MaxPool1d(2))
    else:  # a subclass may change what the layer computes

        class ScaledConv1d(nn.Conv1d):
            def forward(self, x):
                return 2 * super().forward(x)

        conv = ScaledConv1d(1, 4, 7, stride=3).double()
        conv.load_state_dict(encoder.features[0].state_dict())
        encoder.features[0] = conv
    encoder.eval()
    assert encoder._standard_stages() is None
    x = torch.randn(5, 1, 500, dtype=torch.float64)
    with torch.inference_mode():
        torch.testing.assert_close(encoder(x), encoder.head(encoder.features(x)))


def test_cnn_batch_norm_without_running_statistics():
    # Batch statistics in both modes: nothing to fold, the modules run.
    torch.manual_seed(0)
    encoder = CNNEncoder(1, 500, 8).double()
    for i in (1, 4, 7):
        encoder.features[i] = nn.BatchNorm1d(
            encoder.features[i].num_features, track_running_stats=False
        ).double()
        encoder.features[i + 1].p = 0.0
    x = torch.randn(5, 1, 500, dtype=torch.float64)
    for mode in (True, False):
        encoder.train(mode)
        reference = encoder.reference_layers().train(mode)
        torch.testing.assert_close(encoder(x), reference(x))
        with torch.inference_mode():
            torch.testing.assert_close(encoder(x), reference(x))


@pytest.mark.parametrize("affine", [True, False])
@pytest.mark.parametrize("conv_bias", [True, False])
def test_fold_batch_norm_equals_conv_then_batch_norm(affine, conv_bias):
    torch.manual_seed(0)
    conv = nn.Conv1d(3, 5, 4, stride=2, bias=conv_bias).double()
    bn = nn.BatchNorm1d(5, affine=affine).double()
    _randomise_batch_norms(bn)
    bn.eval()
    weight, bias = _fold_batch_norm(conv, bn)
    x = torch.randn(6, 3, 40, dtype=torch.float64)
    with torch.no_grad():
        torch.testing.assert_close(F.conv1d(x, weight, bias, 2), bn(conv(x)))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize(
    ("in_channels", "out_channels", "kernel_size", "stride", "length"),
    [
        (4, 16, 7, 3, 416),  # the paper's second convolution; one sample past the last window
        (4, 16, 7, 3, 418),  # three samples past it
        (3, 5, 6, 3, 50),  # the phases stop short of the input: zero-padded gradient
        (2, 3, 5, 2, 40),
        (2, 3, 1, 2, 41),  # a ResNet shortcut: odd samples get no gradient
        (1, 2, 3, 5, 33),  # stride > kernel
        (8, 4, 4, 4, 64),
    ],
)
def test_phase_grad_conv_computes_the_gradients_of_conv2d(
    in_channels, out_channels, kernel_size, stride, length, dtype
):
    # The input gradient as a stride-1 convolution over phases equals conv2d's,
    # with the weight and bias gradients, for kernels longer and shorter than
    # the stride and inputs that end inside, on or past the last window.
    torch.manual_seed(0)
    x = torch.randn(5, in_channels, 1, length, dtype=dtype)
    x = x.contiguous(memory_format=torch.channels_last).requires_grad_()
    weight = torch.randn(out_channels, in_channels, kernel_size, dtype=dtype, requires_grad=True)
    bias = torch.randn(out_channels, dtype=dtype, requires_grad=True)
    out = _PhaseGradConv2dFunction.apply(x, weight, bias, stride)
    expected = F.conv2d(x, weight.unsqueeze(2), bias, stride=(1, stride))
    torch.testing.assert_close(out, expected, rtol=0, atol=0)
    upstream = torch.randn_like(out)
    grads = torch.autograd.grad(out, (x, weight, bias), upstream)
    expected_grads = torch.autograd.grad(expected, (x, weight, bias), upstream)
    # Sums of a few hundred products in another order: float32 rounding.
    tolerance = (
        {"rtol": 1e-12, "atol": 1e-12} if dtype == torch.float64 else {"rtol": 2e-5, "atol": 1e-4}
    )
    for got, want in zip(grads, expected_grads):
        assert got.shape == want.shape
        torch.testing.assert_close(got, want, **tolerance)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("input_grad", [False, True])
@pytest.mark.parametrize("length", [200, 203])  # single lead: phases padded or cropped
@pytest.mark.parametrize(
    "params",
    [
        {"in_channels": 1, "out_channels": 4, "kernel_size": 7, "stride": 3},
        {"in_channels": 1, "out_channels": 3, "kernel_size": 6, "stride": 2, "bias": False},
        {"in_channels": 1, "out_channels": 2, "kernel_size": 3, "stride": 5},  # stride > kernel
        {"in_channels": 1, "out_channels": 2, "kernel_size": 4},  # stride 1
        {"in_channels": 4, "out_channels": 6, "kernel_size": 5, "padding": 2, "bias": False},
        {"in_channels": 4, "out_channels": 8, "kernel_size": 3, "dilation": 2, "groups": 2},
        {"in_channels": 2, "out_channels": 3, "kernel_size": 3, "padding": "same"},
    ],
)
def test_conv1d_computes_the_gradients_of_nn_conv1d(params, length, input_grad, dtype):
    torch.manual_seed(0)
    conv = _Conv1d(**params).to(dtype)
    plain = conv.plain()
    assert type(plain) is nn.Conv1d
    assert plain.weight is conv.weight and plain.bias is conv.bias
    assert conv.state_dict().keys() == plain.state_dict().keys()
    x = torch.randn(5, params["in_channels"], length, dtype=dtype, requires_grad=input_grad)
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
    _assert_equal_in_training(encoder, twin, reference, x)
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
        with torch.inference_mode():  # nothing to fold: batch statistics as well
            torch.testing.assert_close(encoder(x), encoder.reference_layers()(x))


def test_resnet_inference_folds_batch_norms_into_convolutions(monkeypatch):
    torch.manual_seed(0)
    encoder = ResNet1dEncoder(3, 500, 16, channels=(8, 16, 32)).double()
    _randomise_batch_norms(encoder)
    encoder.eval()
    reference = encoder.reference_layers().eval()
    x = torch.randn(7, 3, 500, dtype=torch.float64)
    with torch.inference_mode():
        torch.testing.assert_close(encoder(x), reference(x), rtol=1e-12, atol=1e-12)
    calls = []
    batch_norm = F.batch_norm
    monkeypatch.setattr(F, "batch_norm", lambda *a, **k: calls.append(1) or batch_norm(*a, **k))
    with torch.inference_mode():  # the folded path runs no batch norm at all
        encoder(x)
    assert calls == []
    encoder(x)  # autograd on: the batch norms run
    assert calls
