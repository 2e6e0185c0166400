"""CROCSClusterer on real ECGs: the bundled LUDB records (lead II, 2500-sample frames)."""

import joblib
import numpy as np
import pandas as pd
import pytest
from sklearn.metrics import adjusted_mutual_info_score
from sklearn.model_selection import GroupShuffleSplit

from sklearn_crocs import CROCSClusterer
from sklearn_crocs.datasets import load_ludb


@pytest.fixture(scope="module")
def ludb_split(ludb_frames):
    X, y, groups = ludb_frames
    train, test = next(
        GroupShuffleSplit(n_splits=1, test_size=0.25, random_state=0).split(X, y, groups)
    )
    return (
        X[train],
        y.iloc[train].reset_index(drop=True),
        groups[train],
        X[test],
        y.iloc[test].reset_index(drop=True),
    )


@pytest.fixture(scope="module")
def ludb_model(ludb_split):
    X, y, groups, _, _ = ludb_split
    return CROCSClusterer(
        encoder="cnn",
        max_epochs=6,
        lr=1e-3,
        batch_size=64,
        validation_fraction=0.2,
        n_iter_no_change=3,
        random_state=0,
    ).fit(X, y, groups=groups)


def test_fit_on_real_records(ludb_model, ludb_split):
    X, y, _, X_test, y_test = ludb_split
    assert ludb_model.input_shape_ == (1, 2500)
    assert ludb_model.net_.module_.n_flat_features == 320  # the paper's frame size
    assert ludb_model.attribute_names_ == ["rhythm", "sex", "age_group"]
    assert ludb_model.prototypes_.shape == (4 * 2 * 2, 128 * ludb_model.ensemble_size)
    assert ludb_model.prototype_counts_.sum() == len(X)
    assert 1 <= ludb_model.n_iter_ <= 6
    predicted = ludb_model.predict(X_test)
    assert isinstance(predicted, pd.DataFrame)
    assert list(predicted.columns) == list(y.columns)
    assert set(predicted["rhythm"]) <= {"AFIB", "GSVT", "SB", "SR"}
    expected = np.mean([(predicted[c] == y_test[c]).mean() for c in y_test.columns])
    assert ludb_model.score(X_test, y_test) == pytest.approx(expected)


def test_fits_the_rhythm_of_its_training_frames(ludb_split):
    """Without early stopping the CNN separates the rhythms of the frames it trains on
    (a model that predicts the majority rhythm, 75 % of them, has AMI 0)."""
    X, y, groups, _, _ = ludb_split
    model = CROCSClusterer(
        encoder="cnn",
        lr=1e-3,
        batch_size=64,
        max_epochs=30,
        validation_fraction=None,
        random_state=0,
    ).fit(X, y, groups=groups)
    assert adjusted_mutual_info_score(y["rhythm"], model.predict(X)["rhythm"]) > 0.5


def test_real_records_roundtrip_and_reproducible(ludb_model, ludb_split, tmp_path):
    X, y, groups, X_test, _ = ludb_split
    joblib.dump(ludb_model, tmp_path / "m.joblib")
    loaded = joblib.load(tmp_path / "m.joblib")
    np.testing.assert_array_equal(loaded.transform(X_test), ludb_model.transform(X_test))
    again = CROCSClusterer(**ludb_model.get_params()).fit(X, y, groups=groups)
    np.testing.assert_array_equal(again.prototypes_, ludb_model.prototypes_)


def test_twelve_lead_resnet_on_real_records():
    ludb = load_ludb()
    X = ludb.data[:40, :, :2500]
    y = ludb.attributes[["sex"]].iloc[:40]
    model = CROCSClusterer(
        encoder="resnet",
        encoder_params={"channels": (16, 32)},
        embedding_dim=32,
        max_epochs=2,
        validation_fraction=None,
        random_state=0,
    ).fit(X, y)
    assert model.input_shape_ == (12, 2500)
    assert model.transform(ludb.data[40:42, :, :2500]).shape == (2, 32 * model.ensemble_size)
    with pytest.raises(
        ValueError,
        match=r"X has 6 lead\(s\) of 2500 samples, but CROCSClusterer was fitted on 12 lead\(s\)",
    ):
        model.predict(ludb.data[40:42, :6, :2500])
    with pytest.raises(ValueError, match=r"X has 12 lead\(s\) of 5000 samples"):
        model.predict(ludb.data[40:42])
