"""The fast layers compute the same functions as the standard torch layers."""

import copy

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from sklearn_crocs.nn import CNNEncoder, ReLUMaxPoolDropout, ResNet1dEncoder, _fastpath
from sklearn_crocs.nn._fastpath import _fold_batch_norm


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


@pytest.mark.parametrize("leads", [1, 2])
def test_cnn_later_stages_run_channels_last(monkeypatch, leads):
    # What makes training fast: after the first stage, the convolutions (forward
    # and backward) and batch norms run on channels-last (batch, C, 1, time)
    # tensors; the first convolution runs on the input as it comes.
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
    assert layouts == [("conv1d", leads, False), ("conv2d", 4, True), ("conv2d", 16, True)]
    out.sum().backward()
    assert all(p.grad is not None for p in encoder.parameters())


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
    assert _fastpath._standard_stages(encoder) is not None
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
    assert _fastpath._standard_stages(encoder) is None
    x = torch.randn(5, 1, 500, dtype=torch.float64)
    with torch.inference_mode():
        torch.testing.assert_close(encoder(x), encoder.head(encoder.features(x)))


@pytest.mark.parametrize(
    ("encoder_class", "shape", "params"),
    [
        (CNNEncoder, (5, 1, 500), {"dropout": 0.0}),
        (ResNet1dEncoder, (5, 2, 200), {"channels": (4, 8)}),
    ],
)
def test_fast_path_false_runs_the_reference_layers(monkeypatch, encoder_class, shape, params):
    # The one switch: no fast-path step runs, and the function is the same.
    torch.manual_seed(0)
    _, leads, length = shape
    fast = encoder_class(leads, length, 8, **params).double()
    plain = copy.deepcopy(fast)
    plain.fast_path = False
    x = torch.randn(*shape, dtype=torch.float64)
    for mode in (True, False):
        expected = fast.train(mode)(x)
        with monkeypatch.context() as patch:
            for name in ("cnn_forward", "resnet_forward"):
                patch.setattr(_fastpath, name, lambda *a: pytest.fail("fast path called"))
            torch.testing.assert_close(plain.train(mode)(x), expected)


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


def test_resnet_inference_matches_the_reference_layers():
    # Running statistics randomised: evaluation mode reads them, not the batch's.
    torch.manual_seed(0)
    encoder = ResNet1dEncoder(3, 500, 16, channels=(8, 16, 32)).double()
    _randomise_batch_norms(encoder)
    encoder.eval()
    reference = encoder.reference_layers().eval()
    x = torch.randn(7, 3, 500, dtype=torch.float64)
    with torch.inference_mode():
        torch.testing.assert_close(encoder(x), reference(x), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("edit", ["block_relu", "stem_relu", "conv_subclass", "other_block"])
def test_resnet_edited_layers_run_through_the_modules(edit):
    from sklearn_crocs.nn._encoders import _BasicBlock1d

    torch.manual_seed(0)
    encoder = ResNet1dEncoder(2, 200, 8, channels=(4, 8)).double()
    _randomise_batch_norms(encoder)
    assert _fastpath._standard_resnet(encoder, _BasicBlock1d)
    if edit == "block_relu":  # the fast path applied F.relu where the block has Tanh
        encoder.blocks[1].relu = nn.Tanh()
    elif edit == "stem_relu":
        encoder.stem[2] = nn.LeakyReLU(0.1)
    elif edit == "conv_subclass":  # a subclass may change what the layer computes

        class ScaledConv1d(nn.Conv1d):
            def forward(self, x):
                return 2 * super().forward(x)

        old = encoder.blocks[0].conv2
        conv = ScaledConv1d(4, 4, 3, padding=1, bias=False).double()
        conv.load_state_dict(old.state_dict())
        encoder.blocks[0].conv2 = conv
    else:

        class OtherBlock(_BasicBlock1d):
            def forward(self, x):
                return super().forward(x) + 1

        block = OtherBlock(4, 8, 3, 2).double()
        block.load_state_dict(encoder.blocks[1].state_dict())
        encoder.blocks[1] = block
    assert not _fastpath._standard_resnet(encoder, _BasicBlock1d)
    x = torch.randn(5, 2, 200, dtype=torch.float64)
    for mode in (True, False):
        encoder.train(mode)
        plain = encoder.head(encoder.blocks(encoder.stem(x)))
        torch.testing.assert_close(encoder(x), plain)
        with torch.inference_mode():
            torch.testing.assert_close(encoder(x), encoder.head(encoder.blocks(encoder.stem(x))))
