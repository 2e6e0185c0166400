"""The encoders and estimators on a CUDA device (skipped where torch sees none, as in CI).

Each check compares the GPU with the CPU on the same weights and inputs, in
full float32: cuDNN's convolutions otherwise run in TF32 on recent GPUs
(10-bit mantissas), which the fixture ``exact_float32`` turns off.
"""

import copy

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from conftest import make_synthetic_ecgs

from sklearn_crocs import CROCSClusterer, PrototypeRetriever
from sklearn_crocs.nn import CNNEncoder, ResNet1dEncoder

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")

ENCODERS = [(CNNEncoder, 1, 2500, 128), (ResNet1dEncoder, 12, 2500, 256)]


@pytest.fixture
def exact_float32():
    saved = torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32
    torch.backends.cudnn.allow_tf32 = torch.backends.cuda.matmul.allow_tf32 = False
    yield
    torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32 = saved


def _relative_error(out, ref):
    out, ref = out.detach().double().cpu(), ref.detach().double().cpu()
    return float((out - ref).norm() / ref.norm())


@pytest.mark.parametrize(("encoder_class", "leads", "length", "dim"), ENCODERS)
@pytest.mark.parametrize("grad", [False, True])
def test_encoder_evaluation_on_cuda_matches_cpu(
    exact_float32, encoder_class, leads, length, dim, grad
):
    torch.manual_seed(0)
    encoder = encoder_class(leads, length, dim)
    x = torch.randn(16, leads, length)
    # Running statistics away from their initial values, so that the folded
    # batch norms of the inference path are exercised.
    encoder.train()
    with torch.no_grad():
        encoder(x)
    encoder.eval()
    gpu = copy.deepcopy(encoder).cuda()
    with torch.set_grad_enabled(grad):  # no_grad takes the CNN's inference path
        ref, out = encoder(x), gpu(x.cuda())
    assert out.device.type == "cuda"
    assert _relative_error(out, ref) < 1e-5


@pytest.mark.parametrize(("encoder_class", "leads", "length", "dim"), ENCODERS)
def test_encoder_training_step_on_cuda_is_as_accurate_as_on_cpu(
    exact_float32, encoder_class, leads, length, dim
):
    # Gradients through training-mode batch norms cancel much of their terms:
    # float32 ones differ from float64 ones by up to 3e-3 (relative) on the
    # CPU already. Each parameter's gradient on the GPU must be as close to
    # the float64 one as the CPU's float32 gradient is, errors measured
    # against the norm of the whole gradient (a convolution bias before a
    # batch norm has a gradient of exactly zero, in float32 rounding noise).
    torch.manual_seed(0)
    kwargs = {"dropout": 0.0} if encoder_class is CNNEncoder else {}
    encoder = encoder_class(leads, length, dim, **kwargs).train()
    models = {
        "cpu": encoder,
        "float64": copy.deepcopy(encoder).double(),
        "cuda": copy.deepcopy(encoder).cuda(),
    }
    x, target = torch.randn(16, leads, length), torch.randn(16, dim)
    for model in models.values():
        p = next(model.parameters())
        F.mse_loss(model(x.to(p)), target.to(p)).backward()
    grads = {k: [p.grad.double().cpu() for p in m.parameters()] for k, m in models.items()}
    total = torch.cat([g.flatten() for g in grads["float64"]]).norm()
    names = [name for name, _ in encoder.named_parameters()]
    for name, ref, cpu, gpu in zip(names, grads["float64"], grads["cpu"], grads["cuda"]):
        cpu_error, gpu_error = (cpu - ref).norm() / total, (gpu - ref).norm() / total
        assert gpu_error <= max(4 * cpu_error, 1e-6), (name, float(gpu_error), float(cpu_error))
    for b_cpu, b_gpu in zip(models["cpu"].buffers(), models["cuda"].buffers()):
        assert _relative_error(b_gpu.float(), b_cpu.float()) < 1e-5


def test_batches_are_prefetched_to_the_device_unchanged():
    from sklearn_crocs.nn import ArrayDataset
    from sklearn_crocs.nn._data import BatchIterator

    rng = np.random.default_rng(0)
    dataset = ArrayDataset(rng.standard_normal((50, 2, 30), dtype=np.float32), np.arange(50) % 7)
    for shuffle in (False, True):
        host = list(BatchIterator(dataset, 8, shuffle=shuffle, seed=1))
        cuda = list(BatchIterator(dataset, 8, shuffle=shuffle, seed=1, device="cuda"))
        assert len(host) == len(cuda) == 7
        for (xh, yh), (xc, yc) in zip(host, cuda):
            assert xc.device.type == yc.device.type == "cuda"
            assert torch.equal(xc.cpu(), xh) and torch.equal(yc.cpu(), yh)
    unlabelled = ArrayDataset(dataset.X)
    batches = list(BatchIterator(unlabelled, 16, device="cuda"))
    assert all(yb is None for _, yb in batches)
    assert torch.equal(torch.cat([xb for xb, _ in batches]).cpu(), dataset.X)


def test_clusterer_fits_on_cuda_and_embeds_as_its_module_does_on_cpu(exact_float32):
    X, y, groups = make_synthetic_ecgs(n_leads=1, length=600)
    model = CROCSClusterer(
        encoder_params={"kernel_size": 5, "stride": 2},
        max_epochs=3,
        batch_size=16,
        device="cuda",
        random_state=0,
    ).fit(X, y, groups)
    assert next(model.net_.module_.parameters()).device.type == "cuda"
    embeddings = model.transform(X)
    assert embeddings.dtype == np.float32 and embeddings.shape == (len(X), model.embedding_dim)

    encoder = copy.deepcopy(model.net_.module_).cpu().eval()
    with torch.inference_mode():
        ref = F.normalize(encoder(torch.from_numpy(X)), dim=1).numpy()
    np.testing.assert_allclose(embeddings, ref, rtol=1e-4, atol=1e-5)
    # Labels are the nearest prototypes of those embeddings.
    nearest = np.argmax(ref @ model.prototypes_.T, axis=1)
    np.testing.assert_array_equal(model.labels_, nearest)
    assert np.isfinite(model.net_.history[-1, "train_loss"])

    retriever = PrototypeRetriever(model, n_neighbors=5).fit(X, y)
    distances, indices = retriever.query()
    assert distances.shape == indices.shape == (len(model.prototypes_), 5)


def test_model_saved_on_cuda_loads_on_the_cpu(exact_float32, tmp_path):
    X, y, groups = make_synthetic_ecgs(n_leads=1, length=600)
    model = CROCSClusterer(
        encoder_params={"kernel_size": 5, "stride": 2},
        max_epochs=2,
        device="cuda",
        random_state=0,
    ).fit(X, y, groups)
    model.save(tmp_path / "model.safetensors")
    on_gpu = CROCSClusterer.load(tmp_path / "model.safetensors")
    assert on_gpu.device == "cuda"
    np.testing.assert_array_equal(on_gpu.transform(X), model.transform(X))
    on_cpu = CROCSClusterer.load(tmp_path / "model.safetensors", device="cpu")
    assert {p.device.type for p in on_cpu.net_.module_.parameters()} == {"cpu"}
    np.testing.assert_allclose(on_cpu.transform(X), model.transform(X), rtol=1e-4, atol=1e-5)
