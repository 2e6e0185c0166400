"""Each baseline separates an easy two-cluster problem; the shared API around them."""

import inspect
import math

import numpy as np
import pandas as pd
import pytest
import torch
from sklearn.base import clone
from sklearn.cluster import KMeans
from sklearn.frozen import FrozenEstimator
from sklearn.metrics import adjusted_rand_score
from torch import nn

from sklearn_crocs import (
    ContrastivePretrainer,
    CROCSClusterer,
    InvalidModelFileError,
    PrototypeRetriever,
)
from sklearn_crocs.baselines import (
    DTC,
    DTCR,
    IIC,
    DeepCluster,
    KMeansCROCS,
    KMeansEP,
    KMeansRaw,
    SeLA,
    _sela,
)
from sklearn_crocs.baselines._iic import iic_loss
from sklearn_crocs.baselines._sela import sinkhorn_knopp

# Pinned, so that these runs do not follow changes of CROCSClusterer's defaults.
TRAINING = {"encoder": "cnn", "encoder_params": None, "embedding_dim": 32, "batch_size": 32,
            "max_epochs": 20, "lr": 3e-3, "random_state": 0}  # fmt: skip


def two_kinds(n, seed):
    """Sines of frequency 1 (kind 0) or 3 (kind 1) plus noise, with a random sex attribute."""
    rng = np.random.RandomState(seed)
    kind = np.repeat([0, 1], n // 2)
    t = np.linspace(0, 20, 400)
    X = np.sin(np.where(kind == 1, 3.0, 1.0)[:, None] * t) + 0.2 * rng.randn(n, 400)
    y = pd.DataFrame({"kind": kind, "sex": rng.choice(["F", "M"], n)})
    return X[:, None, :].astype(np.float32), y


def buried(n, seed):
    """The sines of :func:`two_kinds` under white noise of 1.75 times their amplitude.

    The kinds differ only at low frequencies, and the noise swamps them in the
    embeddings of an untrained encoder, whose random filters respond mostly to
    it: k-means on those is near chance, and a model separates the kinds only
    once training has taught its encoder to look past the noise. (k-means on
    the raw signals, which averages the noise over all 400 samples, still
    separates them.)
    """
    rng = np.random.RandomState(seed)
    kind = np.repeat([0, 1], n // 2)
    t = np.linspace(0, 20, 400)
    X = np.sin(np.where(kind == 1, 3.0, 1.0)[:, None] * t) + 1.75 * rng.randn(n, 400)
    y = pd.DataFrame({"kind": kind, "sex": rng.choice(["F", "M"], n)})
    return X[:, None, :].astype(np.float32), y


@pytest.fixture(scope="module")
def easy():
    return two_kinds(60, 0), two_kinds(40, 1)


@pytest.fixture(scope="module")
def hidden():
    return buried(200, 0), buried(100, 1)


# The same model left untrained: a learning rate of 1e-12 for one epoch (the
# batch-norm statistics still follow the data, as in a trained model).
UNTRAINED = {"max_epochs": 1, "lr": 1e-12}
# Each neural method and the data on which it is tested: where its untrained
# model is near chance and the trained one far above it, so that a broken loss
# or a skipped training fails the test. The prototype methods and the heads'
# argmax (IIC, SeLA) assign at chance without training whatever the data;
# k-means on embeddings (KM CROCS, KM EP, DeepCluster, DTCR) separates the easy
# kinds even on an untrained encoder, so these need the buried ones.
LEARNERS = {
    "CROCSClusterer": ("hidden", lambda p: CROCSClusterer(**p, validation_fraction=None)),
    "DTC": ("hidden", lambda p: DTC(**p, validation_fraction=None)),
    "KMeansCROCS": ("hidden", lambda p: KMeansCROCS(
        CROCSClusterer(**p, validation_fraction=None), n_clusters=2, random_state=0)),
    "KMeansEP": ("hidden", lambda p: KMeansEP(n_clusters=2, **p, validation_fraction=None)),
    "DeepCluster": ("hidden", lambda p: DeepCluster(n_clusters=2, **p)),
    "IIC": ("hidden", lambda p: IIC(n_clusters=2, **p, validation_fraction=None)),
    # SeLA's pseudo-labels find the buried kinds from some initialisations only
    # (not from random_state=0, in 20 or 40 epochs); its argmax head is at
    # chance untrained on the easy kinds too.
    "SeLA": ("easy", lambda p: SeLA(n_clusters=2, **p)),
    # DTCR's k-means term needs longer training to pull the two kinds apart.
    "DTCR": ("hidden", lambda p: DTCR(n_clusters=2, **p, validation_fraction=None)),
}  # fmt: skip
EPOCHS = {"DTCR": 40}


def kind_ari(model, X, y):
    """Adjusted Rand index between the kinds and the model's clusters of ``X``."""
    predicted = model.predict(X)
    if isinstance(predicted, pd.DataFrame):  # the prototype methods name attributes
        predicted = predicted["kind"].astype(int)
    return adjusted_rand_score(y["kind"], predicted)


@pytest.mark.parametrize("name", LEARNERS)
def test_training_separates_what_the_untrained_model_does_not(name, request):
    data, make = LEARNERS[name]
    (X, y), (X_new, y_new) = request.getfixturevalue(data)
    trained_params = {**TRAINING, "max_epochs": EPOCHS.get(name, TRAINING["max_epochs"])}
    untrained = make({**TRAINING, **UNTRAINED}).fit(X, y)
    assert kind_ari(untrained, X_new, y_new) < 0.3
    model = make(trained_params).fit(X, y)
    assert kind_ari(model, X_new, y_new) > 0.7
    # Clusters (or prototypes) named after their training ECGs' attributes.
    named = model.predict(X_new) if name in ("CROCSClusterer", "DTC") else None
    if named is None:
        named = model.predict_attributes(X_new)
    assert (named["kind"].astype(int) == y_new["kind"]).mean() > 0.9


@pytest.mark.parametrize("data", ["easy", "hidden"])
def test_kmeans_raw_is_kmeans_on_the_raw_signals(data, request):
    # KM raw trains nothing: its fit is k-means on the flattened signals, which
    # separates both the easy and the buried kinds (averaging the noise away),
    # where the untrained encoders above do not.
    (X, y), (X_new, y_new) = request.getfixturevalue(data)
    model = KMeansRaw(n_clusters=2, random_state=0).fit(X, y)
    assert adjusted_rand_score(y["kind"], model.labels_) > 0.9
    assert adjusted_rand_score(y_new["kind"], model.predict(X_new)) > 0.9
    assert (model.predict_attributes(X_new)["kind"] == y_new["kind"]).mean() > 0.95
    # Converged k-means: every centroid is the mean signal of its cluster.
    flat = X.reshape(len(X), -1)
    means = np.stack([flat[model.labels_ == c].mean(axis=0) for c in (0, 1)])
    np.testing.assert_allclose(model.kmeans_.cluster_centers_, means, atol=1e-4)


def test_dtc_separates_two_kinds_and_its_prototypes_retrieve(easy):
    (X, y), (X_new, y_new) = easy
    model = DTC(**TRAINING, validation_fraction=None).fit(X, y)
    assert (model.predict(X_new)["kind"] == y_new["kind"]).mean() > 0.95
    # The paper's Table 2 retrieves with DTC's prototypes.
    retriever = PrototypeRetriever(FrozenEstimator(model), n_neighbors=5).fit(X_new)
    indices = retriever.query(return_distance=False)
    kinds = y_new["kind"].to_numpy()[indices]
    assert np.all(kinds == retriever.query_attributes_["kind"].to_numpy()[:, None])


def test_dtc_early_stops_on_the_held_out_kl(easy):
    (X, y), _ = easy
    groups = np.arange(len(X)) // 2
    model = DTC(**{**TRAINING, "max_epochs": 200}, validation_fraction=0.3, n_iter_no_change=2)
    model.fit(X, y, groups=groups)
    assert model.n_iter_ < 200
    assert "valid_nce" in model.net_.history[-1]


def test_neural_baseline_early_stopping(easy):
    (X, y), _ = easy
    groups = np.arange(len(X)) // 2
    model = IIC(n_clusters=2, **{**TRAINING, "max_epochs": 200}, validation_fraction=0.3,
                n_iter_no_change=2).fit(X, groups=groups)  # fmt: skip
    assert model.n_iter_ < 200
    assert "valid_loss" in model.net_.history[-1]


def test_baselines_follow_crocs_defaults():
    crocs = CROCSClusterer().get_params()
    for estimator in (DTC(), KMeansEP(), DeepCluster(), IIC(), SeLA(), DTCR()):
        shared = set(estimator.get_params()) & set(crocs) - {"class_attribute", "prototypes"}
        assert {"encoder", "embedding_dim", "lr", "max_epochs"} <= shared
        assert {k: estimator.get_params()[k] for k in shared} == {k: crocs[k] for k in shared}


def test_kmeans_crocs_uses_a_frozen_model_as_it_is(easy):
    (X, y), (X_new, _) = easy
    crocs = CROCSClusterer(**{**TRAINING, "max_epochs": 2}, validation_fraction=None).fit(X, y)
    model = KMeansCROCS(FrozenEstimator(crocs), random_state=0).fit(X, y)
    assert model.crocs_.estimator is crocs
    assert np.array_equal(model.transform(X_new), crocs.transform(X_new))
    assert model.n_clusters_ == 4  # one per combination of kind x sex


def test_predict_attributes_needs_y_in_fit(easy):
    (X, _), _ = easy
    model = KMeansRaw(n_clusters=2, random_state=0).fit(X)
    with pytest.raises(AttributeError, match="fitted without y"):
        model.predict_attributes(X)


def test_hungarian_mapping_names_each_cluster_differently(easy):
    (X, y), _ = easy
    model = KMeansRaw(n_clusters=4, mapping="hungarian", random_state=0).fit(X, y)
    named = model.cluster_attributes_.apply(tuple, axis=1)
    assert named.is_unique


@pytest.mark.parametrize("prototypes", ["learned", "mean"])
def test_dtc_saves_and_loads(easy, tmp_path, prototypes):
    (X, y), (X_test, _) = easy
    model = DTC(
        **{**TRAINING, "max_epochs": 2}, alpha=2.0, prototypes=prototypes,
        validation_fraction=None,
    ).fit(X, y)  # fmt: skip
    path = tmp_path / "dtc.safetensors"
    loaded = DTC.load(model.save(path) and path)
    assert type(loaded) is DTC and loaded.get_params() == model.get_params()
    for method in ("transform", "predict", "predict_proba"):
        np.testing.assert_array_equal(
            getattr(loaded, method)(X_test), getattr(model, method)(X_test)
        )
    np.testing.assert_array_equal(loaded.labels_, model.labels_)
    np.testing.assert_array_equal(loaded.combination_counts_, model.combination_counts_)


def test_dtc_and_crocs_model_files_are_not_interchangeable(easy, tmp_path):
    (X, y), _ = easy
    dtc = DTC(**{**TRAINING, "max_epochs": 1}, validation_fraction=None).fit(X, y)
    crocs = CROCSClusterer(**{**TRAINING, "max_epochs": 1}, validation_fraction=None).fit(X, y)
    dtc.save(tmp_path / "dtc.safetensors")
    crocs.save(tmp_path / "crocs.safetensors")
    with pytest.raises(InvalidModelFileError, match="holds a DTC, not a CROCSClusterer; load it "):
        CROCSClusterer.load(tmp_path / "dtc.safetensors")
    with pytest.raises(InvalidModelFileError, match="holds a CROCSClusterer, not a DTC"):
        DTC.load(tmp_path / "crocs.safetensors")


def test_retriever_with_dtc_refuses_model_files(easy, tmp_path):
    (X, y), _ = easy
    model = DTC(**{**TRAINING, "max_epochs": 1}, validation_fraction=None).fit(X, y)
    retriever = PrototypeRetriever(FrozenEstimator(model)).fit(X)
    with pytest.raises(TypeError, match="cannot store a DTC"):
        retriever.save(tmp_path / "retriever.safetensors")


@pytest.mark.parametrize("pca_components", [256, 4])
def test_deepcluster_clusters_pca_whitened_unit_norm_features(easy, pca_components):
    (X, y), (X_new, _) = easy
    model = DeepCluster(n_clusters=2, **{**TRAINING, "max_epochs": 2}, whiten=True,
                        pca_components=pca_components).fit(X, y)  # fmt: skip
    # PCA to pca_components dimensions (at most the embedding's 32), whitened:
    # the training embeddings' components have unit variance and no covariance
    # (checked on those of non-negligible variance: the ReLU embeddings have
    # dead units, and float32 rounding swamps the whitening of the tiniest).
    components = model.pca_.transform(model.transform(X))
    assert components.shape == (len(X), min(pca_components, 32))
    kept = components[:, model.pca_.explained_variance_ratio_ > 1e-4]
    assert kept.shape[1] >= 4
    np.testing.assert_allclose(np.cov(kept, rowvar=False), np.eye(kept.shape[1]), atol=1e-3)
    # k-means clusters those components L2-normalised, in fit and in predict.
    features = components / np.linalg.norm(components, axis=1, keepdims=True)
    assert model.kmeans_.cluster_centers_.shape[1] == components.shape[1]
    np.testing.assert_array_equal(model.labels_, model.kmeans_.predict(features))
    means = [features[model.labels_ == c].mean(axis=0) for c in (0, 1)]
    np.testing.assert_allclose(model.kmeans_.cluster_centers_, means, atol=1e-3)
    embedded = model.pca_.transform(model.transform(X_new))
    expected = model.kmeans_.predict(embedded / np.linalg.norm(embedded, axis=1, keepdims=True))
    np.testing.assert_array_equal(model.predict(X_new), expected)


def test_iic_trains_its_heads_in_alternate_epochs(easy):
    # The main head trains in epochs 1, 3, ..., the over-clustering head in
    # 2, 4, ...: a head left out of an epoch ends it with the weights it began
    # with (the same seed makes the first epochs of the three fits identical).
    (X, y), _ = easy
    heads = {}
    for epochs in (1, 2, 3):
        model = IIC(n_clusters=2, **{**TRAINING, "max_epochs": epochs},
                    validation_fraction=None).fit(X)  # fmt: skip
        module = model.net_.module_
        heads[epochs] = [h.linear.weight.detach().clone() for h in (module.head, module.over_head)]
    main, over = 0, 1
    assert torch.equal(heads[2][main], heads[1][main])  # epoch 2 trained the over-clustering head
    assert not torch.equal(heads[2][over], heads[1][over])
    assert not torch.equal(heads[3][main], heads[2][main])  # epoch 3 the main head
    assert torch.equal(heads[3][over], heads[2][over])


def test_iic_predicts_with_the_main_sub_head_of_lowest_training_loss(easy):
    # An unperturbed copy (scale by 1 + 0 N(0, 1)), so that the sub-heads'
    # losses can be recomputed here exactly from their probabilities.
    (X, _), (X_new, _) = easy
    model = IIC(n_clusters=2, n_subheads=5, perturbation="scale", perturbation_scale=0.0,
                **{**TRAINING, "max_epochs": 5}, validation_fraction=None).fit(X)  # fmt: skip
    head = model.net_.module_.head
    with torch.inference_mode():
        probs = head(torch.from_numpy(model.transform(X)))  # (n_samples, 5, 2)
    losses = [math.log(2) + iic_loss(probs[:, s], probs[:, s]).item() for s in range(5)]
    np.testing.assert_allclose(model.subhead_losses_, losses, rtol=1e-4)
    assert np.ptp(losses) > 1e-3  # distinct sub-heads: the choice matters
    assert model.best_subhead_ == np.argmin(losses)
    # predict uses the selected sub-head, whichever it is.
    with torch.inference_mode():
        new_probs = head(torch.from_numpy(model.transform(X_new))).numpy()
    for subhead in range(5):
        model.best_subhead_ = subhead
        np.testing.assert_allclose(model.predict_proba(X_new), new_probs[:, subhead], rtol=1e-5)


def test_sela_labels_each_head_on_its_own_at_the_scheduled_epochs(easy, monkeypatch):
    (X, _), _ = easy
    calls = []

    def recording_sinkhorn_knopp(log_probs, lam, **kwargs):
        calls.append(log_probs)
        return sinkhorn_knopp(log_probs, lam, **kwargs)

    monkeypatch.setattr(_sela, "sinkhorn_knopp", recording_sinkhorn_knopp)
    model = SeLA(n_clusters=2, n_heads=3, n_labelings=3, **{**TRAINING, "max_epochs": 7}).fit(X)
    labelled = [row.get("labelled", False) for row in model.net_.history]
    assert np.flatnonzero(labelled).tolist() == [0, 2, 4]  # 3 times, evenly from the first epoch
    # Each labelling runs Sinkhorn-Knopp once per head, on that head's own posteriors.
    assert len(calls) == 3 * 3
    for labelling in range(3):
        first, second, third = calls[3 * labelling : 3 * labelling + 3]
        assert first.shape == (len(X), 2)
        assert not torch.allclose(first, second) and not torch.allclose(second, third)


def test_sela_loss_is_the_mean_over_heads_of_each_heads_cross_entropy():
    torch.manual_seed(0)
    module = _sela.MultiHead(nn.Flatten(), 6, n_clusters=4, n_heads=3)
    x, targets = torch.randn(5, 1, 6), torch.randint(0, 4, (5, 3))
    logits = module(x)
    assert logits.shape == (5, 4, 3)
    # Head h: its own slice of the layer's outputs, scored against its own labels.
    per_head = [
        nn.functional.cross_entropy(module.head(x.flatten(1))[:, 4 * h : 4 * h + 4], targets[:, h])
        for h in range(3)
    ]
    loss = nn.CrossEntropyLoss()(logits, targets)
    assert loss.item() == pytest.approx(torch.stack(per_head).mean().item(), rel=1e-6)


# ------------------------------------------------ pretrained= of the neural baselines
PRETRAINABLE = {DeepCluster: {"n_clusters": 2}, IIC: {"n_clusters": 2}, SeLA: {"n_clusters": 2},
                DTCR: {"n_clusters": 2}, KMeansEP: {}}  # fmt: skip
TINY_ENCODER = {"encoder": "resnet", "encoder_params": {"channels": (4, 8)}, "embedding_dim": 4}
# One step of a learning rate too small to move the weights: the encoder keeps its start.
STILL = {"batch_size": 24, "lr": 1e-12}


def tiny_ecgs():
    rng = np.random.RandomState(0)
    X = rng.randn(24, 2, 128).astype(np.float32)
    return X, pd.DataFrame({"kind": np.repeat([0, 1], 12)}), np.arange(24) // 2


def tiny(cls, **params):
    return cls(**PRETRAINABLE[cls], **TINY_ENCODER, max_epochs=1, random_state=0, **params)


def takes_groups(model):
    return "groups" in inspect.signature(model.fit).parameters


def fit(model, X, y, groups):
    return model.fit(X, y, **({"groups": groups} if takes_groups(model) else {}))


def start_of(model):
    return dict(model.net_.module_.encoder.named_parameters())


@pytest.fixture(scope="module")
def pretrainer():
    return ContrastivePretrainer(**TINY_ENCODER, max_epochs=1, random_state=1).fit(tiny_ecgs()[0])


@pytest.mark.parametrize("cls", PRETRAINABLE)
def test_a_fitted_pretrainer_starts_the_baselines_encoder(cls, pretrainer):
    X, y, groups = tiny_ecgs()
    # Cloned as in a grid search: FrozenEstimator keeps it fitted.
    model = fit(clone(tiny(cls, pretrained=FrozenEstimator(pretrainer), **STILL)), X, y, groups)
    start = start_of(model)
    for name, value in pretrainer.encoder_.named_parameters():
        torch.testing.assert_close(start[name], value)
    assert model.pretrainer_ is pretrainer and model.pretraining_time_ == 0
    random = start_of(fit(tiny(cls, **STILL), X, y, groups))
    assert not torch.allclose(random["head.2.weight"], start["head.2.weight"])


@pytest.mark.parametrize("cls", PRETRAINABLE)
def test_an_unfitted_pretrainer_is_fitted_in_fit_with_the_baselines_encoder(cls):
    X, y, groups = tiny_ecgs()
    given = ContrastivePretrainer(max_epochs=1, random_state=0)
    model = fit(tiny(cls, pretrained=given, **STILL), X, y, groups)
    assert not hasattr(given, "encoder_")  # the parameter is left as it was
    assert model.pretraining_time_ > 0
    fitted = model.pretrainer_
    assert {k: fitted.get_params()[k] for k in TINY_ENCODER} == TINY_ENCODER
    # Fitted on X (with the patients where fit takes them), it started the net.
    by_hand = ContrastivePretrainer(**TINY_ENCODER, max_epochs=1, random_state=0)
    by_hand.fit(X, groups=groups if takes_groups(model) else None)
    np.testing.assert_array_equal(fitted.transform(X), by_hand.transform(X))
    start = start_of(model)
    for name, value in fitted.encoder_.named_parameters():
        torch.testing.assert_close(start[name], value)


@pytest.mark.parametrize("cls", PRETRAINABLE)
def test_pretrained_must_be_a_contrastive_pretrainer(cls):
    X, y, groups = tiny_ecgs()
    with pytest.raises(TypeError, match="'pretrained' parameter"):
        fit(tiny(cls, pretrained="encoder.safetensors"), X, y, groups)
    with pytest.raises(TypeError, match="must be a ContrastivePretrainer.*got KMeans"):
        fit(tiny(cls, pretrained=FrozenEstimator(KMeans())), X, y, groups)


@pytest.mark.parametrize("cls", PRETRAINABLE)
def test_a_refit_without_pretrained_is_a_plain_fit(cls, pretrainer):
    X, y, groups = tiny_ecgs()
    plain = fit(tiny(cls), X, y, groups)
    model = fit(tiny(cls, pretrained=pretrainer), X, y, groups)
    assert not np.allclose(model.transform(X), plain.transform(X))
    fit(model.set_params(pretrained=None), X, y, groups)
    assert model.pretrainer_ is None and model.pretraining_time_ == 0
    np.testing.assert_array_equal(model.transform(X), plain.transform(X))
    np.testing.assert_array_equal(model.labels_, plain.labels_)
