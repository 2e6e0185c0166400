"""Each baseline separates an easy two-cluster problem; the shared API around them."""

import numpy as np
import pandas as pd
import pytest
from sklearn.frozen import FrozenEstimator
from sklearn.metrics import adjusted_rand_score

from sklearn_crocs import CROCSClusterer, PrototypeRetriever
from sklearn_crocs.baselines import (
    DTC,
    DTCR,
    IIC,
    DeepCluster,
    KMeansCROCS,
    KMeansEP,
    KMeansRaw,
    SeLA,
)

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


@pytest.fixture(scope="module")
def easy():
    return two_kinds(60, 0), two_kinds(40, 1)


SEPARATORS = {
    "KMeansRaw": lambda: KMeansRaw(n_clusters=2, random_state=0),
    "KMeansCROCS": lambda: KMeansCROCS(
        CROCSClusterer(**TRAINING, validation_fraction=None), n_clusters=2, random_state=0
    ),
    "KMeansEP": lambda: KMeansEP(n_clusters=2, **TRAINING, validation_fraction=None),
    "DeepCluster": lambda: DeepCluster(n_clusters=2, **TRAINING),
    "IIC": lambda: IIC(n_clusters=2, **TRAINING, validation_fraction=None),
    "SeLA": lambda: SeLA(n_clusters=2, **TRAINING),
    # DTCR's k-means term needs longer training to pull the two kinds apart.
    "DTCR": lambda: DTCR(n_clusters=2, **{**TRAINING, "max_epochs": 40}, validation_fraction=None),
}


@pytest.mark.parametrize("name", SEPARATORS)
def test_clusterer_separates_two_kinds(name, easy):
    (X, y), (X_new, y_new) = easy
    model = SEPARATORS[name]().fit(X, y)
    assert adjusted_rand_score(y["kind"], model.labels_) > 0.9
    assert adjusted_rand_score(y_new["kind"], model.predict(X_new)) > 0.9
    # Clusters named after their training ECGs' attributes.
    assert (model.predict_attributes(X_new)["kind"] == y_new["kind"]).mean() > 0.95


def test_dtc_separates_two_kinds_and_its_prototypes_retrieve(easy):
    (X, y), (X_new, y_new) = easy
    model = DTC(**TRAINING, validation_fraction=None).fit(X, y)
    assert (model.predict(X_new)["kind"] == y_new["kind"]).mean() > 0.95
    # The paper's Table 2 retrieves with DTC's prototypes.
    retriever = PrototypeRetriever(FrozenEstimator(model), n_neighbors=5).fit(X_new)
    indices = retriever.kneighbors(return_distance=False)
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


def test_dtc_refuses_model_files(easy, tmp_path):
    (X, y), _ = easy
    model = DTC(**{**TRAINING, "max_epochs": 1}, validation_fraction=None).fit(X, y)
    with pytest.raises(NotImplementedError, match="joblib"):
        model.save(tmp_path / "dtc.safetensors")


def test_retriever_with_dtc_refuses_model_files(easy, tmp_path):
    (X, y), _ = easy
    model = DTC(**{**TRAINING, "max_epochs": 1}, validation_fraction=None).fit(X, y)
    retriever = PrototypeRetriever(FrozenEstimator(model)).fit(X)
    with pytest.raises(TypeError, match="cannot store a DTC"):
        retriever.save(tmp_path / "retriever.safetensors")
