import math

import numpy as np
import pytest
import torch
from safetensors import safe_open
from safetensors.torch import save_file
from sklearn.base import clone
from sklearn.frozen import FrozenEstimator

from sklearn_crocs import (
    ContrastivePretrainer,
    CROCSClusterer,
    InvalidModelFileError,
    clocs_loss,
)
from sklearn_crocs._pretraining import init_encoder
from sklearn_crocs.baselines import DTC
from sklearn_crocs.nn import ResNet1dEncoder

SMALL = {"channels": (8, 16)}
TINY = {"encoder_params": {"channels": (4, 8)}, "embedding_dim": 4}
# Views exactly as CLOCS defines them: no amplitude factor, no noise.
PLAIN = {"amplitude_jitter": 0.0, "noise": 0.0}


def _naive_loss(z, groups, temperature):
    """CLOCS loss one anchor at a time, with plain Python sums."""
    z = z / np.linalg.norm(z, axis=-1, keepdims=True)
    batch, n_views, _ = z.shape
    terms = []
    for a in range(n_views):
        for b in range(n_views):
            if a == b:
                continue
            for i in range(batch):
                scores = [math.exp(z[i, a] @ z[j, b] / temperature) for j in range(batch)]
                positives = [j for j in range(batch) if groups[j] == groups[i]]
                logs = [math.log(scores[j] / sum(scores)) for j in positives]
                terms.append(-sum(logs) / len(logs))
    return sum(terms) / len(terms)


@pytest.mark.parametrize("groups", [[0, 1, 2, 3, 4, 5], [0, 1, 0, 2, 1, 0]])
@pytest.mark.parametrize("n_views", [2, 3])
def test_loss_matches_a_loop_over_anchors(groups, n_views):
    z = np.random.RandomState(0).randn(6, n_views, 5)
    loss = clocs_loss(torch.from_numpy(z), torch.tensor(groups), temperature=0.5)
    assert loss.item() == pytest.approx(_naive_loss(z, groups, 0.5), rel=1e-9)


def _signals(n=64, n_leads=2, n_samples=128, seed=0):
    """Recordings whose halves share a frequency and phase drift that differ between recordings."""
    rng = np.random.RandomState(seed)
    t = np.arange(n_samples) / n_samples
    freq = rng.uniform(2, 20, size=(n, 1, 1))
    shift = rng.uniform(0, 1, size=(n, n_leads, 1))
    X = np.sin(2 * np.pi * (freq * t + shift)) + 0.1 * rng.randn(n, n_leads, n_samples)
    return X.astype(np.float32)


@pytest.mark.parametrize(
    ("method", "input_shape"),
    [("cmsc", (2, 64)), ("cmlc", (1, 128)), ("cmsmlc", (1, 64)), ("augment", (2, 32))],
)
def test_views_shape_the_encoder_and_embeddings_are_unit_norm(method, input_shape):
    X = _signals(n=8)
    pretrainer = ContrastivePretrainer(
        encoder_params=SMALL, embedding_dim=4, method=method, crop=0.25, max_epochs=1,
        random_state=0,
    ).fit(X)  # fmt: skip
    assert pretrainer.input_shape_ == input_shape
    assert len(pretrainer.loss_curve_) == pretrainer.n_iter_ == 1
    Z = pretrainer.transform(np.zeros((3, *input_shape), dtype=np.float32) + X[:3, :1, :1])
    assert Z.shape == (3, 4) and Z.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(Z, axis=1), 1, rtol=1e-5)


def test_clocs_views_are_adjacent_halves_and_leads():
    X = torch.arange(2 * 2 * 5, dtype=torch.float32).reshape(2, 2, 5)  # odd: last sample left
    draws = torch.Generator().manual_seed(0)
    halves = ContrastivePretrainer(method="cmsc", **PLAIN)._views(X, draws)
    torch.testing.assert_close(halves[:, 0], X[..., :2])
    torch.testing.assert_close(halves[:, 1], X[..., 2:4])
    leads = ContrastivePretrainer(method="cmlc", **PLAIN)._views(X, draws)
    torch.testing.assert_close(leads[:, :, 0], X)
    both = ContrastivePretrainer(method="cmsmlc", **PLAIN)._views(X, draws)
    torch.testing.assert_close(both[:, :, 0], halves.reshape(2, 4, 2))


def test_augment_views_are_two_random_windows_of_each_recording():
    X = torch.arange(64 * 2 * 100, dtype=torch.float32).reshape(64, 2, 100)
    views = ContrastivePretrainer(method="augment", crop=0.3, **PLAIN)._views(
        X, torch.Generator().manual_seed(0)
    )
    assert views.shape == (64, 2, 2, 30)
    starts = views[..., 0] - X[:, None, :, 0]  # offset of each window, the same for its leads
    torch.testing.assert_close(views - views[..., :1], torch.arange(30.0).expand_as(views))
    assert (starts[..., 0] == starts[..., 1]).all() and (starts >= 0).all()
    assert (starts.amax() <= 70) and (starts[:, 0] != starts[:, 1]).float().mean() > 0.9


def test_each_view_gets_its_own_amplitude_and_noise():
    X = torch.from_numpy(_signals(n=32))
    plain = ContrastivePretrainer(**PLAIN)._views(X, torch.Generator().manual_seed(0))
    scaled = ContrastivePretrainer(amplitude_jitter=0.2, noise=0.0)._views(
        X, torch.Generator().manual_seed(0)
    )
    ratio = scaled / plain
    # One factor per view, shared by its leads and samples, that differs between views.
    torch.testing.assert_close(ratio, ratio[..., :1, :1].expand_as(ratio))
    assert ratio[:, 0, 0, 0].sub(ratio[:, 1, 0, 0]).abs().mean() > 0.05
    noisy = ContrastivePretrainer(amplitude_jitter=0.0, noise=0.1)._views(
        X, torch.Generator().manual_seed(0)
    )
    relative = (noisy - plain).std(dim=-1) / plain.std(dim=-1)
    assert relative.mean().item() == pytest.approx(0.1, rel=0.1)


def test_random_state_makes_fits_reproducible_and_leaves_the_global_stream():
    X = _signals(n=16)
    params = {"encoder_params": SMALL, "embedding_dim": 4, "max_epochs": 2, "method": "augment"}
    state = torch.random.get_rng_state()
    first = ContrastivePretrainer(**params, random_state=0).fit(X).transform(X)
    assert torch.equal(torch.random.get_rng_state(), state)
    np.testing.assert_array_equal(
        ContrastivePretrainer(**params, random_state=0).fit(X).transform(X), first
    )
    assert not np.allclose(
        ContrastivePretrainer(**params, random_state=1).fit(X).transform(X), first
    )


@pytest.mark.parametrize("method", ["cmsc", "augment"])
def test_pretraining_pulls_the_views_of_a_recording_together(method):
    X = _signals()
    half = X.shape[-1] // 2
    pretrainer = ContrastivePretrainer(
        encoder_params=SMALL, embedding_dim=16, method=method, max_epochs=15, batch_size=32,
        random_state=0,
    ).fit(X)  # fmt: skip
    assert pretrainer.loss_curve_[-1] < 0.5 * pretrainer.loss_curve_[0]
    similarity = pretrainer.transform(X[..., :half]) @ pretrainer.transform(X[..., half:]).T
    positive = np.diag(similarity)
    negative = similarity[~np.eye(len(X), dtype=bool)]
    assert positive.mean() > negative.mean() + 0.3
    # Each first half finds its own second half among the 64 more often than by chance (1/64).
    assert (similarity.argmax(axis=1) == np.arange(len(X))).mean() > 0.3


def test_patients_make_their_recordings_positives():
    X = _signals(n=8)
    params = {"encoder_params": SMALL, "embedding_dim": 4, "max_epochs": 1, "random_state": 0}
    alone = ContrastivePretrainer(**params).fit(X).loss_curve_
    shared = ContrastivePretrainer(**params).fit(X, groups=[0, 0, 0, 0, 1, 1, 1, 1]).loss_curve_
    assert shared != alone  # same encoder and batches: only the positives differ


def test_the_cnn_embeds_the_length_it_was_pretrained_on_only():
    X = _signals(n=8, n_samples=1000)
    pretrainer = ContrastivePretrainer(encoder="cnn", embedding_dim=4, max_epochs=1)
    pretrainer.fit(X)
    assert pretrainer.transform(X[..., :500]).shape == (8, 4)
    with pytest.raises(ValueError, match="built for 500 time points"):
        pretrainer.transform(X)
    with pytest.raises(ValueError, match=r"shape \(n, 2, n_timepoints\)"):
        pretrainer.transform(X[:, :1, :500])


@pytest.mark.parametrize(
    ("method", "X", "message"),
    [
        ("cmsc", np.zeros((1, 2, 100)), "at least 2 recordings"),
        ("cmsc", np.zeros((4, 200)), "n_recordings, n_leads, n_samples"),
        ("cmlc", np.zeros((4, 1, 100)), "contrasts leads"),
    ],
)
def test_fit_refuses_data_without_views_or_negatives(method, X, message):
    with pytest.raises(ValueError, match=message):
        ContrastivePretrainer(method=method, max_epochs=1).fit(X)


# ------------------------------------------------------------ model files
@pytest.fixture(scope="module")
def pretrainer():
    return ContrastivePretrainer(**TINY, max_epochs=1, random_state=0).fit(_signals(n=8))


def test_save_and_load_give_the_same_encoder(pretrainer, tmp_path):
    path = tmp_path / "encoder.safetensors"
    pretrainer.save(path)
    loaded = ContrastivePretrainer.load(path)
    X = _signals(n=8)
    np.testing.assert_array_equal(loaded.transform(X), pretrainer.transform(X))
    assert loaded.get_params() == pretrainer.get_params()
    assert loaded.loss_curve_ == pretrainer.loss_curve_
    assert loaded.input_shape_ == pretrainer.input_shape_


def test_a_tampered_file_is_refused(pretrainer, tmp_path):
    path = tmp_path / "encoder.safetensors"
    pretrainer.save(path)
    with safe_open(path, framework="pt") as fh:
        tensors = {k: fh.get_tensor(k) for k in fh.keys()}
        metadata = fh.metadata()
    name = next(k for k in tensors if k.endswith("weight"))
    tensors[name] = tensors[name] + 1  # same dtype and shape, other values
    save_file(tensors, path, metadata=metadata)
    with pytest.raises(InvalidModelFileError, match="sha256"):
        ContrastivePretrainer.load(path)
    pretrainer.save(path)
    with pytest.raises(InvalidModelFileError, match="holds a ContrastivePretrainer"):
        CROCSClusterer.load(path)


def test_a_loaded_pretrainer_starts_a_fit_as_the_one_in_memory(pretrainer, tmp_path):
    pretrainer.save(tmp_path / "p.safetensors")
    loaded = ContrastivePretrainer.load(tmp_path / "p.safetensors")
    X, y = _signals(n=24), np.repeat(["A", "B"], 12)
    params = {**TINY, "max_epochs": 2, "random_state": 0}
    first = CROCSClusterer(**params, pretrained=pretrainer).fit(X, y).transform(X)
    second = CROCSClusterer(**params, pretrained=loaded).fit(X, y).transform(X)
    np.testing.assert_array_equal(first, second)
    assert not np.allclose(CROCSClusterer(**params).fit(X, y).transform(X), first)


# ---------------------------------------------------- pretrained= of a fit
def _first_parameters(cls, pretrained, X, y):
    """The encoder's parameters after one step of a learning rate too small to move them."""
    model = cls(**TINY, max_epochs=1, batch_size=len(X), lr=1e-12, pretrained=pretrained)
    return dict(model.fit(X, y).net_.module_.named_parameters())


@pytest.mark.parametrize("cls", [CROCSClusterer, DTC])
def test_a_fitted_pretrainer_starts_the_encoder(cls, pretrainer):
    X, y = _signals(n=24), np.repeat(["A", "B"], 12)
    start = _first_parameters(cls, pretrainer, X, y)
    for name, value in pretrainer.encoder_.named_parameters():
        torch.testing.assert_close(start[name], value)
    random = _first_parameters(cls, None, X, y)
    assert not torch.allclose(random["head.2.weight"], start["head.2.weight"])
    # In a grid search the parameter is cloned: FrozenEstimator keeps it fitted.
    frozen = clone(cls(**TINY, pretrained=FrozenEstimator(pretrainer)))
    start = _first_parameters(cls, frozen.pretrained, X, y)
    torch.testing.assert_close(start["head.2.weight"], pretrainer.encoder_.head[2].weight)


def test_every_net_of_an_ensemble_starts_from_the_pretrained_encoder(pretrainer):
    X, y = _signals(n=24), np.repeat(["A", "B"], 12)
    model = CROCSClusterer(**TINY, max_epochs=1, batch_size=len(X), lr=1e-12,
                           pretrained=pretrainer, ensemble_size=2).fit(X, y)  # fmt: skip
    assert len(model.nets_) == 2
    for net in model.nets_:
        start = dict(net.module_.named_parameters())
        for name, value in pretrainer.encoder_.named_parameters():
            torch.testing.assert_close(start[name], value)


def test_an_unfitted_pretrainer_is_fitted_on_every_ecg_of_x():
    X, y = _signals(n=24), np.repeat(["A", "B"], 12).astype(object)
    y[::2] = None  # unlabelled ECGs are pretrained on too
    y = np.column_stack([np.repeat(["A", "B"], 12), y])
    groups = np.arange(24) // 2
    given = ContrastivePretrainer(method="augment", max_epochs=2, random_state=0)
    model = CROCSClusterer(**TINY, max_epochs=1, pretrained=given).fit(X, y, groups=groups)
    assert not hasattr(given, "encoder_")  # the parameter is left as it was
    assert model.pretraining_time_ > 0
    # The clone takes the clusterer's encoder settings and sees X and groups.
    by_hand = ContrastivePretrainer(method="augment", max_epochs=2, random_state=0, **TINY)
    by_hand.fit(X, groups=groups)
    np.testing.assert_array_equal(model.pretrainer_.transform(X), by_hand.transform(X))
    # Its encoder serves the next fit as it is.
    again = CROCSClusterer(**TINY, max_epochs=1, pretrained=model.pretrainer_).fit(X, y)
    assert again.pretraining_time_ == 0 and again.pretrainer_ is model.pretrainer_


def test_an_encoder_of_another_shape_is_refused_clearly(pretrainer):
    X, y = _signals(n=24), np.repeat(["A", "B"], 12)
    model = CROCSClusterer(**{**TINY, "embedding_dim": 8}, max_epochs=1, pretrained=pretrainer)
    with pytest.raises(ValueError, match="does not fit this one.*embedding_dim"):
        model.fit(X, y)
    with pytest.raises(ValueError, match="does not fit this one"):
        CROCSClusterer(**TINY, max_epochs=1, pretrained=pretrainer).fit(X[:, :1], y)


def test_a_single_lead_encoder_starts_a_multi_lead_one_on_the_mean_of_its_leads():
    X = _signals(n=8)
    single = ContrastivePretrainer(method="cmlc", **TINY, max_epochs=1, random_state=0).fit(X)
    assert single.input_shape_ == (1, 128)
    multi = init_encoder(ResNet1dEncoder(3, 128, 4, channels=(4, 8)), single).eval()
    lead = torch.as_tensor(X[:, :1])
    with torch.no_grad():
        # Three copies of a lead: the multi-lead encoder reads what the single-lead one did.
        torch.testing.assert_close(multi(lead.repeat(1, 3, 1)), single.encoder_.eval()(lead))
    # Only a single-lead first layer is spread over the leads; any other mismatch is refused.
    with pytest.raises(ValueError, match="does not fit this one"):
        init_encoder(ResNet1dEncoder(3, 128, 8, channels=(4, 8)), single)


@pytest.mark.parametrize("method", ["cmlc", "cmsmlc"])
def test_lead_views_pretrain_a_multi_lead_fit(method):
    X, y = _signals(n=24), np.repeat(["A", "B"], 12)
    model = CROCSClusterer(**TINY, max_epochs=1, random_state=0,
                           pretrained=ContrastivePretrainer(method=method, max_epochs=1))  # fmt: skip
    model.fit(X, y)
    assert model.pretrainer_.input_shape_[0] == 1 and model.pretraining_time_ > 0


def test_a_pretraining_that_cannot_start_the_encoder_is_refused_before_it_runs(monkeypatch):
    X, y = _signals(n=24, n_samples=1000), np.repeat(["A", "B"], 12)
    cnn = {"encoder": "cnn", "embedding_dim": 4, "max_epochs": 1, "random_state": 0}
    # The CNN's linear layer takes one length: half-length views cannot start it.
    fit = ContrastivePretrainer.fit
    monkeypatch.setattr(ContrastivePretrainer, "fit", lambda *a, **k: pytest.fail("pretrained"))
    model = CROCSClusterer(**cnn, pretrained=ContrastivePretrainer(method="cmsc"))
    with pytest.raises(ValueError, match=r"views of 2 lead\(s\) x 500 samples.*encoder='cnn'"):
        model.fit(X, y)
    # Whole-length single-lead views can.
    monkeypatch.setattr(ContrastivePretrainer, "fit", fit)
    model.set_params(pretrained=ContrastivePretrainer(method="cmlc", max_epochs=1)).fit(X, y)
    assert model.pretrainer_.input_shape_ == (1, 1000)


def test_an_unfitted_pretrainer_needs_x_in_memory(tmp_path):
    X = np.lib.format.open_memmap(tmp_path / "X.npy", mode="w+", dtype=np.float32,
                                  shape=(24, 2, 128))  # fmt: skip
    X[:] = _signals(n=24)
    model = CROCSClusterer(**TINY, max_epochs=1, pretrained=ContrastivePretrainer())
    with pytest.raises(ValueError, match="read lazily"):
        model.fit(X, np.repeat(["A", "B"], 12))


def test_a_model_fitted_from_a_pretrainer_saves_without_it(pretrainer, tmp_path):
    X, y = _signals(n=24), np.repeat(["A", "B"], 12)
    model = CROCSClusterer(**TINY, max_epochs=1, pretrained=pretrainer).fit(X, y)
    model.save(tmp_path / "m.safetensors")
    loaded = CROCSClusterer.load(tmp_path / "m.safetensors")
    np.testing.assert_array_equal(loaded.transform(X), model.transform(X))
    assert loaded.pretrained is None and loaded.pretrainer_ is None


def test_non_finite_embeddings_are_an_error_naming_the_rows():
    X = _signals(n=8)
    pretrainer = ContrastivePretrainer(
        encoder_params=SMALL, embedding_dim=4, method="augment", max_epochs=1, random_state=0
    ).fit(X)
    conv = next(m for m in pretrainer.encoder_.modules() if isinstance(m, torch.nn.Conv1d))
    with torch.no_grad():
        conv.weight.mul_(1e34)  # a faulty model: a spike overflows its first layer
    Z = X[:3].copy()
    Z[1, :, 10] = 1e5
    with pytest.raises(ValueError, match=r"row\(s\) 1 \(1 of 3 ECGs\) are not finite"):
        pretrainer.transform(Z)
