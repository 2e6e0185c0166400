"""CROCSClusterer: API, attribute handling, reproducibility, composition and bad input."""

import math
import pickle
import re
import subprocess
import sys
import warnings

import joblib
import numpy as np
import pandas as pd
import pytest
import torch
from sklearn import config_context
from sklearn.base import clone
from sklearn.cluster import KMeans
from sklearn.exceptions import NotFittedError
from sklearn.metrics import adjusted_mutual_info_score
from sklearn.model_selection import GridSearchCV, GroupKFold, cross_validate
from sklearn.pipeline import make_pipeline
from sklearn.utils._param_validation import InvalidParameterError
from skorch.callbacks import Callback, LRScheduler, ProgressBar
from torch import nn

from sklearn_crocs import CROCSClusterer
from sklearn_crocs.nn import CNNEncoder, CROCSLoss, RandomWindow

# One net: these tests are about what one net does (ensembles have their own).
FAST = {"encoder": "cnn", "embedding_dim": 16, "max_epochs": 4, "lr": 3e-3, "batch_size": 32,
        "ensemble_size": 1}  # fmt: skip


def _model(**params):
    return CROCSClusterer(**{**FAST, "validation_fraction": None, "random_state": 0, **params})


@pytest.fixture(scope="module")
def fitted(synthetic):
    X, y, groups = synthetic
    return _model(max_epochs=15).fit(X, y, groups=groups)


# ------------------------------------------------------------------ fitted state
def test_fitted_attributes(fitted, synthetic):
    X, y, _ = synthetic
    assert fitted.attribute_names_ == ["rhythm", "sex", "age_group"]
    assert [list(c) for c in fitted.categories_] == [
        ["AFIB", "SB", "SR"],
        ["F", "M"],
        ["<60", ">=60"],
    ]
    assert fitted.prototypes_.shape == (12, 16)
    assert fitted.prototype_attributes_.shape == (12, 3)
    assert tuple(fitted.get_prototypes()[1][0]) == ("AFIB", "F", "<60")
    assert tuple(fitted.get_prototypes()[1][-1]) == ("SR", "M", ">=60")
    np.testing.assert_allclose(np.linalg.norm(fitted.prototypes_, axis=1), 1, rtol=1e-5)
    combos = [tuple(r) for r in y.to_numpy()]
    expected_counts = [combos.count(tuple(a)) for a in fitted.get_prototypes()[1]]
    assert fitted.prototype_counts_.tolist() == expected_counts
    assert fitted.input_shape_ == (1, 600)
    assert fitted.n_features_in_ == 600
    assert fitted.n_iter_ == 15
    assert isinstance(fitted.net_.criterion_, CROCSLoss)
    assert isinstance(fitted.net_.module_, CNNEncoder)
    assert fitted.labels_.shape == (len(X),)
    # The fitted prototypes are the criterion's parameters, normalised.
    learned = torch.nn.functional.normalize(fitted.net_.criterion_.prototypes.detach(), dim=1)
    np.testing.assert_allclose(fitted.prototypes_, learned.numpy(), rtol=1e-6)


def test_history_has_loss_parts(fitted):
    history = fitted.net_.history
    for key in ("train_loss", "train_nce", "train_reg"):
        assert len(history[:, key]) == 15
    np.testing.assert_allclose(
        history[:, "train_loss"],
        np.add(history[:, "train_nce"], history[:, "train_reg"]),
        rtol=1e-5,
    )
    assert history[-1, "train_loss"] < history[0, "train_loss"]


def test_learns_the_class_attribute(fitted, synthetic):
    X, y, _ = synthetic
    predicted = fitted.predict(X)
    assert adjusted_mutual_info_score(y["rhythm"], predicted["rhythm"]) > 0.5
    assert fitted.score(X, y) > 0.6


def test_transform_predict_and_proba_agree(fitted, synthetic):
    X, _, _ = synthetic
    embeddings = fitted.transform(X)
    assert embeddings.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(embeddings, axis=1), 1, rtol=1e-5)
    proba = fitted.predict_proba(X)
    assert proba.shape == (len(X), 12)
    np.testing.assert_allclose(proba.sum(axis=1), 1, rtol=1e-5)
    nearest = np.argmax(proba, axis=1)
    expected = fitted.prototype_attributes_.iloc[nearest].reset_index(drop=True)
    pd.testing.assert_frame_equal(fitted.predict(X), expected, check_dtype=False)
    assert (fitted.predict(X).dtypes == synthetic[1].dtypes).all()
    # Euclidean nearest prototype on unit vectors = cosine nearest.
    distances = np.linalg.norm(embeddings[:, None] - fitted.prototypes_[None], axis=2)
    np.testing.assert_array_equal(np.argmin(distances, axis=1), nearest)
    np.testing.assert_array_equal(fitted.labels_, nearest)


def test_score_is_mean_per_attribute_accuracy(fitted, synthetic):
    X, y, _ = synthetic
    predicted = fitted.predict(X)
    expected = np.mean([(predicted[c] == y[c]).mean() for c in y.columns])
    assert fitted.score(X, y) == pytest.approx(expected)


def test_fit_predict_and_fit_transform_match_separate_calls(synthetic):
    X, y, groups = synthetic
    predicted = _model().fit(X, y).predict(X)
    model = _model()
    attributes = model.fit_predict(X, y)
    pd.testing.assert_frame_equal(attributes, predicted)
    # labels_ index the prototypes (not scikit-learn cluster labels that
    # fit_predict would return): their attributes are what fit_predict gives.
    assert model.labels_.dtype.kind == "i"
    np.testing.assert_array_equal(
        model.get_prototypes()[1][model.labels_], attributes.to_numpy(dtype=object)
    )
    embeddings = _model().fit(X, y).transform(X)
    np.testing.assert_allclose(_model().fit_transform(X, y), embeddings, rtol=1e-6)


# ------------------------------------------------------------------ y layouts
def test_one_dimensional_y(synthetic):
    X, y, _ = synthetic
    model = _model().fit(X, y["rhythm"].to_numpy())
    assert model.attribute_names_ == ["attribute_0"]
    predicted = model.predict(X)
    assert predicted.shape == (len(X),)
    assert set(predicted) <= {"AFIB", "SB", "SR"}
    assert model.prototype_attributes_.shape == (3, 1)
    assert _model().fit(X, y["rhythm"]).attribute_names_ == ["rhythm"]  # a named Series


def test_two_dimensional_integer_y(synthetic):
    X, y, _ = synthetic
    codes = np.column_stack([pd.factorize(y[c], sort=True)[0] for c in y.columns])
    model = _model().fit(X, codes)
    predicted = model.predict(X)
    assert isinstance(predicted, np.ndarray)
    assert predicted.shape == (len(X), 3)
    assert predicted.dtype == codes.dtype
    assert model.score(X, codes) == pytest.approx(np.mean(predicted == codes))


def test_dataframe_y_keeps_columns_and_mixed_types(synthetic):
    X, y, _ = synthetic
    y = y.assign(age_group=(y["age_group"] == ">=60").astype(int))
    model = _model().fit(X, y)
    assert model.get_prototypes()[1].dtype == object
    assert model.prototype_attributes_["age_group"].dtype == np.int64  # as in y
    predicted = model.predict(X)
    assert list(predicted.columns) == ["rhythm", "sex", "age_group"]
    assert predicted["age_group"].dtype == np.int64
    assert set(predicted["age_group"]) <= {0, 1}


def test_class_attribute_by_name_and_position(synthetic):
    X, y, _ = synthetic
    by_name = _model(class_attribute="sex").fit(X, y)
    by_position = _model(class_attribute=1).fit(X, y)
    np.testing.assert_array_equal(by_name.prototypes_, by_position.prototypes_)
    weights = by_name.net_.criterion_.weights.numpy()
    same_sex = (
        by_name.get_prototypes()[1][:, None, 1] == by_name.get_prototypes()[1][None, :, 1]
    )
    assert np.all(weights[~same_sex] == 0)
    assert np.all(weights[same_sex] > 0)


def test_loss_variants_reach_the_criterion(synthetic):
    X, y, _ = synthetic
    hard = _model(loss="hard", max_epochs=1).fit(X, y)
    np.testing.assert_array_equal(hard.net_.criterion_.weights.numpy(), np.eye(12))
    uniform = _model(tau_w=math.inf, beta=0.0, max_epochs=1).fit(X, y)
    weights = uniform.net_.criterion_.weights.numpy()
    np.testing.assert_allclose(weights[weights > 0], 0.25)
    assert uniform.net_.history[-1, "train_reg"] == 0.0
    assert (
        _model(reg_reduction="mean", max_epochs=1).fit(X, y).net_.criterion_.reg_reduction == "mean"
    )


def test_combination_without_examples(synthetic):
    X, y, groups = synthetic
    unseen = (y["rhythm"] == "SB") & (y["sex"] == "F") & (y["age_group"] == "<60")
    assert unseen.any()
    X_seen, y_seen = X[~unseen.to_numpy()], y[~unseen].reset_index(drop=True)
    learned = _model().fit(X_seen, y_seen)
    assert learned.prototypes_.shape[0] == 12
    row = [tuple(a) for a in learned.get_prototypes()[1]].index(("SB", "F", "<60"))
    assert learned.prototype_counts_[row] == 0
    init = _model(max_epochs=1, lr=1e-12).fit(X_seen, y_seen).prototypes_[row]
    assert not np.allclose(learned.prototypes_[row], init)  # it was trained
    with pytest.warns(UserWarning, match=r"1 of 12 attribute combinations .* \('SB', 'F', '<60'\)"):
        mean = _model(prototypes="mean").fit(X_seen, y_seen)
    assert mean.prototypes_.shape[0] == 11
    assert ("SB", "F", "<60") not in [tuple(a) for a in mean.get_prototypes()[1]]
    assert (mean.prototype_counts_ > 0).all()


def test_mean_prototypes_are_normalised_class_means(synthetic):
    X, y, _ = synthetic
    model = _model(prototypes="mean").fit(X, y)
    embeddings = model.transform(X)
    for prototype, attributes in zip(model.prototypes_, model.get_prototypes()[1]):
        members = (y.to_numpy() == attributes).all(axis=1)
        mean = embeddings[members].mean(axis=0)
        np.testing.assert_allclose(prototype, mean / np.linalg.norm(mean), rtol=1e-4, atol=1e-6)
    learned, _ = model.get_prototypes("learned")
    np.testing.assert_allclose(
        learned,
        torch.nn.functional.normalize(model.net_.criterion_.prototypes.detach(), dim=1),
        rtol=1e-6,
    )
    with pytest.raises(ValueError, match="prototypes must be"):
        model.get_prototypes("median")


# ------------------------------------------------------------------ inputs
def test_multilead_and_single_lead_layouts(synthetic):
    X, y, _ = synthetic
    two_d = _model().fit(X[:, 0, :], y)
    three_d = _model().fit(X, y)
    np.testing.assert_array_equal(two_d.prototypes_, three_d.prototypes_)
    np.testing.assert_array_equal(two_d.transform(X), two_d.transform(X[:, 0, :]))
    X12 = np.repeat(X, 3, axis=1)
    model = _model().fit(X12, y)
    assert model.input_shape_ == (3, 600)
    assert model.net_.module_.features[0].in_channels == 3
    assert model.transform(X12).shape == (len(X), 16)


def test_float64_and_list_input_give_the_same_model(synthetic):
    X, y, _ = synthetic
    reference = _model(max_epochs=2).fit(X, y).prototypes_
    np.testing.assert_array_equal(
        _model(max_epochs=2).fit(X.astype(np.float64), y).prototypes_, reference
    )
    np.testing.assert_array_equal(_model(max_epochs=2).fit(X.tolist(), y).prototypes_, reference)


class _GRUEncoder(nn.Module):
    """A user-defined encoder following the constructor contract."""

    def __init__(self, in_channels, n_timepoints, embedding_dim, hidden=8):
        super().__init__()
        self.gru = nn.GRU(in_channels, hidden, batch_first=True)
        self.out = nn.Linear(hidden, embedding_dim)

    def forward(self, x):
        _, h = self.gru(x[:, :, ::10].transpose(1, 2))
        return self.out(h[-1])


def test_custom_encoder_class_and_resnet(synthetic):
    X, y, _ = synthetic
    model = _model(encoder=_GRUEncoder, encoder_params={"hidden": 4}, max_epochs=2).fit(X, y)
    assert isinstance(model.net_.module_, _GRUEncoder)
    assert model.net_.module_.gru.hidden_size == 4
    assert model.transform(X[:3]).shape == (3, 16)
    resnet = _model(encoder="resnet", encoder_params={"channels": (8, 16)}, max_epochs=2)
    assert resnet.fit(X, y).predict(X[:2]).shape == (2, 3)


def test_inference_batches_sized_by_the_largest_activation(synthetic, monkeypatch):
    from sklearn_crocs.nn import _net

    X, y, _ = synthetic
    model = _model(encoder="resnet", encoder_params={"channels": (8, 16)}, max_epochs=1)
    model.fit(X, y)
    # Small frames: more than the training batch, as many as fit the bound.
    per_frame = model.net_.module_.max_activation_size
    fitting = min(_net._MAX_INFERENCE_BATCH, _net._ACTIVATION_BYTES // (4 * per_frame))
    assert model.net_.inference_batch_size() == fitting > model.batch_size
    expected = model.transform(X)
    monkeypatch.setattr(_net, "_ACTIVATION_BYTES", 5 * 4 * per_frame)
    assert model.net_.inference_batch_size() == 5
    batches = []
    model.net_.module_.register_forward_hook(lambda m, args, out: batches.append(len(out)))
    np.testing.assert_allclose(model.transform(X), expected, rtol=1e-5, atol=1e-6)
    assert max(batches) == 5 and sum(batches) == len(X)


# ------------------------------------------------------------------ training control
def test_early_stopping_with_patient_groups(synthetic, monkeypatch):
    X, y, groups = synthetic
    model = CROCSClusterer(
        **{**FAST, "max_epochs": 200, "lr": 3e-2},
        validation_fraction=0.25,
        n_iter_no_change=3,
        random_state=0,
    )
    valid = _fit_recording_split(model, X, y, groups, monkeypatch)
    assert model.n_iter_ < 200
    history = model.net_.history
    assert "valid_loss" in history[-1] and "valid_nce" in history[-1]
    scores = history[:, "valid_nce"]
    # Stopped 3 epochs after the last improvement by more than 1e-4 (relative)...
    bound, improved = np.inf, None
    for epoch, score in enumerate(scores):
        if score < bound:
            bound, improved = score * (1 - 1e-4), epoch
    assert model.n_iter_ == improved + 1 + 3
    # ... with the prototypes of the lowest validation loss, the best epoch.
    best = int(np.argmin(scores))
    # The best epoch's prototypes were restored, not the last epoch's.
    valid_X = X[valid]
    valid_y = model.attribute_codec_.encode(y.iloc[valid])
    criterion = model.net_.criterion_
    with torch.no_grad():
        embeddings = model.net_.forward(valid_X)
        nce, _ = criterion.loss_parts(embeddings, torch.as_tensor(valid_y))
    assert nce.item() == pytest.approx(history[best, "valid_nce"], rel=1e-4)


def _fit_recording_split(model, X, y, groups, monkeypatch):
    """Fit ``model``; return the indices of its validation ECGs (the fitted model keeps none)."""
    splits = []
    split = CROCSClusterer._split

    def recording_split(self, *args, **kwargs):
        splits.append(split(self, *args, **kwargs))
        return splits[-1]

    monkeypatch.setattr(CROCSClusterer, "_split", recording_split)
    model.fit(X, y, groups=groups)
    return splits[-1][1]


def test_validation_split_keeps_patients_together(synthetic, monkeypatch):
    X, y, groups = synthetic
    model = _model(validation_fraction=0.25, n_iter_no_change=50, max_epochs=1)
    valid = _fit_recording_split(model, X, y, groups, monkeypatch)
    in_valid = np.isin(np.arange(len(X)), valid)
    assert 0 < in_valid.sum() < len(X)
    for patient in np.unique(groups):
        assert len(set(in_valid[groups == patient])) == 1


def test_validation_split_is_stratified_by_the_class_attribute(synthetic, monkeypatch):
    X, y, groups = synthetic
    # A class of two patients has one on each side, whatever the seed.
    y = y.assign(rhythm=np.where(np.isin(groups, [0, 1]), "GSVT", y["rhythm"]))
    for seed in range(4):
        model = _model(validation_fraction=0.25, max_epochs=1, random_state=seed)
        in_valid = np.isin(
            np.arange(len(X)), _fit_recording_split(model, X, y, groups, monkeypatch)
        )
        assert len(np.unique(groups[in_valid])) == 6  # a quarter of the 24 patients
        for side in (in_valid, ~in_valid):
            assert set(y["rhythm"][side]) == {"AFIB", "GSVT", "SB", "SR"}


def test_verbose_prints_progress_and_zero_is_silent(synthetic, capsys):
    X, y, groups = synthetic
    _model(max_epochs=2).fit(X, y)
    assert capsys.readouterr().out == ""
    _model(max_epochs=2, verbose=1, validation_fraction=0.25).fit(X, y, groups=groups)
    out = capsys.readouterr().out
    for column in ("epoch", "train_loss", "train_nce", "train_reg", "valid_loss", "dur"):
        assert column in out
    assert len([line for line in out.splitlines() if line.strip().startswith(("1 ", "2 "))]) == 2


def test_training_log_has_colour_codes_only_on_a_terminal(synthetic, capsys, monkeypatch):
    X, y, groups = synthetic
    params = {"max_epochs": 3, "verbose": 1, "validation_fraction": 0.25}
    _model(**params).fit(X, y, groups=groups)
    piped = capsys.readouterr().out
    assert "train_loss" in piped and "valid_nce" in piped
    assert "\x1b[" not in piped
    monkeypatch.setattr(sys.stdout, "isatty", lambda: True)
    _model(**params).fit(X, y, groups=groups)
    terminal = capsys.readouterr().out
    assert "\x1b[" in terminal  # skorch's colours around each column's best value
    # Otherwise the same table (the durations aside).
    plain = re.sub(r"\x1b\[[0-9;]*m", "", terminal).splitlines()
    assert plain[:2] == piped.splitlines()[:2]
    assert [line.split()[:-1] for line in plain] == [
        line.split()[:-1] for line in piped.splitlines()
    ]


# ------------------------------------------------------------------ skorch callbacks
class _CountEpochs(Callback):
    """Counts the epochs it sees, in ``epochs_`` (state, so not a parameter)."""

    def initialize(self):
        self.epochs_ = 0
        return self

    def on_epoch_end(self, net, **kwargs):
        self.epochs_ += 1


def test_user_callback_runs_every_epoch_on_a_clone(synthetic):
    X, y, _ = synthetic
    counter = _CountEpochs()
    model = _model(max_epochs=3, callbacks=[("count", counter), _CountEpochs])
    model.fit(X, y)
    fitted = dict(model.net_.callbacks_)
    assert fitted["count"].epochs_ == 3
    assert fitted["_CountEpochs"].epochs_ == 3  # a class is instantiated, as in skorch
    assert fitted["count"] is not counter and not hasattr(counter, "epochs_")
    assert model.callbacks[0][1] is counter  # the parameter is left as it was
    model.fit(X, y)  # a second fit counts from 0 on a fresh clone
    assert dict(model.net_.callbacks_)["count"].epochs_ == 3


def test_lr_scheduler_with_early_stopping(synthetic):
    X, y, groups = synthetic
    scheduler = LRScheduler(policy="StepLR", step_size=1, gamma=0.5)
    model = _model(max_epochs=4, validation_fraction=0.25, callbacks=[scheduler])
    model.fit(X, y, groups=groups)
    history = model.net_.history
    # The learning rate of each epoch, halved after each.
    np.testing.assert_allclose(history[:, "event_lr"], FAST["lr"] * 0.5 ** np.arange(4))
    assert model.net_.optimizer_.param_groups[0]["lr"] == pytest.approx(FAST["lr"] / 16)
    # The clusterer's own callbacks ran too.
    assert {"valid_nce", "train_nce"} <= set(history[-1])
    assert {"early_stopping", "keep_best"} <= set(dict(model.net_.callbacks_))
    assert not hasattr(scheduler, "lr_scheduler_")
    unscheduled = _model(max_epochs=4, validation_fraction=0.25, lr_schedule="constant")
    unscheduled.fit(X, y, groups=groups)
    assert "event_lr" not in unscheduled.net_.history[-1]
    assert not np.allclose(unscheduled.prototypes_, model.prototypes_)


def test_progress_bar(synthetic, capsys):
    X, y, _ = synthetic
    model = _model(max_epochs=2, callbacks=[ProgressBar()]).fit(X, y)
    assert model.n_iter_ == 2
    assert "it/s" in capsys.readouterr().err  # tqdm's bar, on stderr
    pickle.loads(pickle.dumps(model))  # the bar itself is not pickled


def test_callbacks_params_and_clone():
    scheduler = LRScheduler(policy="StepLR", step_size=2)
    model = CROCSClusterer(callbacks=[("lr", scheduler)])
    assert model.get_params()["callbacks"] == [("lr", scheduler)]
    copy = clone(model)
    name, cloned = copy.callbacks[0]
    assert name == "lr" and cloned is not scheduler
    assert cloned.get_params() == scheduler.get_params()
    assert clone(copy).get_params()["callbacks"][0][1].step_size == 2
    assert model.set_params(callbacks=None).callbacks is None
    with pytest.raises(ValueError, match="The 'callbacks' parameter"):
        CROCSClusterer(callbacks=ProgressBar()).fit(np.zeros((4, 10)), [0, 1, 0, 1])


def test_callback_names_must_not_clash_with_the_clusterers_own(synthetic):
    X, y, _ = synthetic
    with pytest.raises(ValueError, match="duplicate user-set callback name 'train_nce'"):
        _model(callbacks=[("train_nce", _CountEpochs())]).fit(X, y)


# ------------------------------------------------------------------ reproducibility
def test_same_random_state_gives_identical_model_and_leaves_global_rngs(synthetic):
    X, y, groups = synthetic
    np.random.seed(123)
    torch.manual_seed(456)
    numpy_state = np.random.get_state()
    torch_state = torch.get_rng_state()
    params = {"validation_fraction": 0.25, "max_epochs": 3}
    first = _model(**params).fit(X, y, groups=groups)
    second = _model(**params).fit(X, y, groups=groups)
    np.testing.assert_array_equal(first.prototypes_, second.prototypes_)
    np.testing.assert_array_equal(first.transform(X), second.transform(X))
    pd.testing.assert_frame_equal(first.predict(X), second.predict(X))
    other = _model(random_state=1, **params).fit(X, y, groups=groups)
    assert not np.array_equal(first.prototypes_, other.prototypes_)
    _model(random_state=None, max_epochs=1).fit(X, y)
    after_numpy = np.random.get_state()
    assert after_numpy[0] == numpy_state[0]
    np.testing.assert_array_equal(after_numpy[1], numpy_state[1])
    assert after_numpy[2:] == numpy_state[2:]
    assert torch.equal(torch.get_rng_state(), torch_state)


def test_joblib_and_pickle_round_trip(fitted, synthetic, tmp_path):
    X, _, _ = synthetic
    path = tmp_path / "model.joblib"
    joblib.dump(fitted, path)
    loaded = joblib.load(path)
    np.testing.assert_array_equal(loaded.transform(X), fitted.transform(X))
    pd.testing.assert_frame_equal(loaded.predict(X), fitted.predict(X))
    restored = pickle.loads(pickle.dumps(fitted))
    np.testing.assert_array_equal(restored.predict_proba(X), fitted.predict_proba(X))


# ------------------------------------------------------------------ composition
def test_clone_get_and_set_params():
    model = CROCSClusterer(tau_w=1, beta=0.2, encoder_params={"dropout": 0.2})
    params = model.get_params()
    assert params["tau_w"] == 1 and params["beta"] == 0.2
    copy = clone(model)
    assert copy.get_params() == params
    assert copy.encoder_params is not model.encoder_params
    model.set_params(tau_w=math.inf, beta=0.0)
    assert (model.tau_w, model.beta) == (math.inf, 0.0)
    assert not hasattr(copy, "net_")


def test_km_crocs_pipeline(synthetic):
    X, y, _ = synthetic
    pipeline = make_pipeline(_model(), KMeans(n_clusters=3, n_init=3, random_state=0))
    labels = pipeline.fit(X, y).predict(X)
    assert labels.shape == (len(X),)
    assert set(labels) <= {0, 1, 2}
    crocs = pipeline[0]
    np.testing.assert_allclose(pipeline[-1].cluster_centers_.shape, (3, crocs.embedding_dim))
    # The pipeline's first step is a fitted CROCSClusterer usable on its own.
    assert crocs.predict(X[:2]).shape == (2, 3)


def test_set_output_pandas(synthetic):
    X, y, _ = synthetic
    model = _model(max_epochs=1).set_output(transform="pandas").fit(X[:, 0, :], y)
    frame = model.transform(X[:4, 0, :])
    assert list(frame.columns) == [f"crocsclusterer{i}" for i in range(16)]


def test_grid_search_with_group_kfold(synthetic):
    X, y, groups = synthetic
    search = GridSearchCV(
        _model(max_epochs=3),
        param_grid={"tau_w": [1.0, math.inf], "beta": [0.0, 0.2]},
        cv=GroupKFold(n_splits=3),
    )
    search.fit(X, y, groups=groups)
    assert len(search.cv_results_["params"]) == 4
    assert np.isfinite(search.cv_results_["mean_test_score"]).all()
    assert search.best_estimator_.predict(X[:2]).shape == (2, 3)
    for train, test in GroupKFold(n_splits=3).split(X, y, groups):
        assert not set(groups[train]) & set(groups[test])


def test_groups_routed_to_fit_with_metadata_routing(synthetic):
    X, y, groups = synthetic
    with config_context(enable_metadata_routing=True):
        model = _model(max_epochs=1, validation_fraction=0.25).set_fit_request(groups=True)
        result = cross_validate(model, X, y, params={"groups": groups}, cv=GroupKFold(n_splits=2))
    assert len(result["test_score"]) == 2


# ------------------------------------------------------------------ bad input
def test_not_fitted():
    with pytest.raises(NotFittedError):
        CROCSClusterer().predict(np.zeros((2, 500)))


@pytest.mark.parametrize(
    ("mutate", "error", "message"),
    [
        (
            lambda X, y: (np.where(np.arange(X.size).reshape(X.shape) == 5, np.nan, X), y),
            ValueError,
            "NaN",
        ),
        (
            lambda X, y: (np.where(np.arange(X.size).reshape(X.shape) == 5, np.inf, X), y),
            ValueError,
            "infinity",
        ),
        (lambda X, y: (X[:, 0, 0], y), ValueError, "Expected 2D array, got 1D array"),
        (lambda X, y: (X[:, :, None, :], y), ValueError, "got an array with 4 dimensions"),
        (lambda X, y: (X[:0], y[:0]), ValueError, "0 sample"),
        (lambda X, y: (X, y[:-1]), ValueError, "inconsistent numbers of samples"),
        (lambda X, y: (X, None), ValueError, "requires y to be passed"),
        (
            lambda X, y: (X, y.assign(site="A")),
            ValueError,
            "Attribute 'site' takes the single value 'A'",
        ),
        (
            lambda X, y: (X, y.mask(np.ones(y.shape, dtype=bool))),
            ValueError,
            "Attribute 'rhythm' has no known value in y",
        ),
        (lambda X, y: (X, y.assign(sex=[1, "F"] * (len(y) // 2))), TypeError, "one type"),
        (lambda X, y: (X, np.zeros((len(y), 2, 2))), ValueError, "y must have shape"),
        (lambda X, y: (np.array([["a"] * 600] * len(y)), y), ValueError, "could not convert"),
    ],
    ids=[
        "nan",
        "inf",
        "1d-X",
        "4d-X",
        "empty",
        "y-length",
        "no-y",
        "constant-attribute",
        "all-unlabelled",
        "mixed-types",
        "3d-y",
        "strings",
    ],
)
def test_bad_fit_input(synthetic, mutate, error, message):
    X, y, _ = synthetic
    X_bad, y_bad = mutate(X, y)
    with pytest.raises(error, match=message):
        CROCSClusterer(max_epochs=1, validation_fraction=None).fit(X_bad, y_bad)


def test_signals_too_short_for_the_cnn(synthetic):
    X, y, _ = synthetic
    with pytest.raises(ValueError, match="needs at least 388 time points"):
        CROCSClusterer(encoder="cnn", max_epochs=1).fit(X[:, :, :100], y)


def test_bad_predict_input(fitted, synthetic):
    X, y, _ = synthetic
    with pytest.raises(
        ValueError,
        match=r"X has 3 lead\(s\) of 600 samples, but CROCSClusterer was fitted on 1 lead\(s\) of 600",
    ):
        fitted.predict(np.repeat(X, 3, axis=1))
    with pytest.raises(ValueError, match=r"X has 1 lead\(s\) of 500 samples"):
        fitted.transform(X[:, :, :500])
    with pytest.raises(ValueError, match="NaN"):
        fitted.predict(np.full_like(X, np.nan))
    with pytest.raises(ValueError, match="Expected 2D array, got 1D array"):
        fitted.predict(X[0, 0])
    with pytest.raises(
        ValueError,
        match=r"Attribute 'sex' has values \['X'\] that were not seen in fit; known values: \['F', 'M'\]",
    ):
        fitted.score(X, y.assign(sex="X"))
    with pytest.raises(ValueError, match="inconsistent numbers of samples"):
        fitted.score(X, y[:-2])
    with pytest.raises(ValueError, match=r"y has attributes \['rhythm', 'sex'\]"):
        fitted.score(X, y[["rhythm", "sex"]])


def test_bad_parameters(synthetic):
    X, y, groups = synthetic
    with pytest.raises(ValueError, match="The 'tau_w' parameter"):
        CROCSClusterer(tau_w=0).fit(X, y)
    with pytest.raises(ValueError, match="The 'encoder' parameter"):
        CROCSClusterer(encoder="transformer").fit(X, y)
    with pytest.raises(TypeError, match="torch.nn.Module subclass; got the class dict"):
        CROCSClusterer(encoder=dict, validation_fraction=None).fit(X, y)
    with pytest.raises(ValueError, match=r"class_attribute='diagnosis' is not an attribute of y"):
        CROCSClusterer(class_attribute="diagnosis").fit(X, y)
    with pytest.raises(ValueError, match="class_attribute=5 but y has only 3 attribute"):
        CROCSClusterer(class_attribute=5).fit(X, y)
    with pytest.raises(ValueError, match="leaves no training group"):
        CROCSClusterer(validation_fraction=0.5).fit(X, y, groups=np.zeros(len(X)))
    with pytest.raises(ValueError, match="more than 10000"):
        CROCSClusterer().fit(
            np.zeros((20001, 2)), np.column_stack([np.arange(20001), np.arange(20001) % 2])
        )


def test_many_fits_warn_nothing_unexpected(synthetic):
    X, y, _ = synthetic
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _model(max_epochs=1).fit(X, y).predict(X)


def test_categorical_attribute_keeps_declared_order(synthetic):
    X, y, _ = synthetic
    order = [">=60", "<60"]  # not the sorted order
    y = y.assign(age_group=pd.Categorical(y["age_group"], categories=["unused", *order]))
    model = _model(max_epochs=1).fit(X, y)
    assert model.categories_[2].tolist() == order
    assert [tuple(a) for a in model.get_prototypes()[1][:2]] == [
        ("AFIB", "F", ">=60"),
        ("AFIB", "F", "<60"),
    ]
    predicted = model.predict(X)
    assert isinstance(predicted["age_group"].dtype, pd.CategoricalDtype)
    # Decoded predictions and the encoded comparison in score use the same order.
    expected = np.mean([(predicted[c].astype(str) == y[c].astype(str)).mean() for c in y])
    assert model.score(X, y) == pytest.approx(expected)


def test_chunked_and_memmap_transform_equal_in_memory(
    fitted, synthetic, tmp_path, monkeypatch, capsys
):
    import sklearn_crocs._engine._base as clusterer_module

    X, y, _ = synthetic
    expected = fitted.transform(X)
    path = tmp_path / "db.npy"
    np.save(path, X)
    database = np.load(path, mmap_mode="r")
    monkeypatch.setattr(clusterer_module, "_CHUNK_BYTES", 4 * 600 * 10)  # 10 ECGs per chunk
    # Equal up to float32 rounding, which depends on the batch composition.
    np.testing.assert_allclose(fitted.transform(database), expected, rtol=1e-5, atol=1e-6)
    assert capsys.readouterr() == ("", "")  # verbose=0
    pd.testing.assert_frame_equal(fitted.predict(database), fitted.predict(X))
    assert fitted.score(database, y) == pytest.approx(fitted.score(X, y))
    loud = clone(fitted).set_params(verbose=1)
    loud.__dict__.update(
        {k: v for k, v in fitted.__dict__.items() if k.endswith("_") or k.startswith("_")}
    )
    loud.transform(database)
    captured = capsys.readouterr()
    assert captured.out == ""
    # A tqdm bar on stderr, from none to all 72 ECGs (chunks of 10).
    assert "Embedding:" in captured.err
    assert " 0/72 " in captured.err and " 72/72 " in captured.err
    bad = X.copy()
    bad[45, 0, 3] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        fitted.transform(bad)


def test_chunks_hold_whole_batches(fitted, synthetic, monkeypatch):
    # A chunk of a large input is cut to whole inference batches, so that no
    # chunk but the last ends in a short batch.
    import sklearn_crocs._engine._base as clusterer_module
    from sklearn_crocs.nn import _net

    X, _, _ = synthetic
    monkeypatch.setattr(_net, "_MAX_INFERENCE_BATCH", 16)  # several batches in X
    batch = fitted.net_.inference_batch_size()
    assert 5 * batch // 4 < len(X)
    monkeypatch.setattr(clusterer_module, "_CHUNK_BYTES", 4 * X[0].size * (5 * batch // 4))
    sizes = []
    hook = fitted.net_.module_.register_forward_hook(lambda m, args, out: sizes.append(len(out)))
    try:
        embedded = fitted.transform(X)
    finally:
        hook.remove()
    assert sizes[:-1] == [batch] * (len(sizes) - 1)
    assert sum(sizes) == len(X)
    np.testing.assert_allclose(embedded, fitted.transform(X[:]), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize(("value", "message"), [(np.nan, "NaN"), (np.inf, "infinity")])
def test_non_finite_input_is_found_batch_by_batch(fitted, synthetic, monkeypatch, value, message):
    # NaN and infinity are looked for in each batch as the net reads it, not in a
    # separate pass of scikit-learn's check over the whole input.
    import sklearn.utils.validation as validation

    X, y, _ = synthetic
    calls = []
    check = validation._assert_all_finite
    monkeypatch.setattr(
        validation, "_assert_all_finite", lambda *a, **k: calls.append(1) or check(*a, **k)
    )
    fitted.transform(X)
    assert calls == []
    bad = X.copy()
    bad[-1, 0, -1] = value  # in the last batch
    for method in (fitted.transform, fitted.predict, fitted.predict_proba):
        with pytest.raises(ValueError, match=message):
            method(bad)
    with pytest.raises(ValueError, match=message):
        fitted.score(bad, y)
    with config_context(assume_finite=True):  # scikit-learn's switch skips the check
        assert fitted.transform(bad).shape == (len(X), fitted.embedding_dim)


def test_list_of_mixed_type_rows_keeps_value_types(synthetic):
    X, y, _ = synthetic
    rows = [(r, int(s == "M")) for r, s in zip(y["rhythm"], y["sex"])]
    model = _model(max_epochs=1).fit(X, rows)
    assert [c.tolist() for c in model.categories_] == [["AFIB", "SB", "SR"], [0, 1]]
    predicted = model.predict(X)
    assert {type(v) for v in predicted[:, 1]} == {int}
    expected = np.mean(
        [[p == t for p, t in zip(row, truth)] for row, truth in zip(predicted, rows)]
    )
    assert model.score(X, rows) == pytest.approx(expected)


def test_zero_embedding_gets_the_most_frequent_combination(synthetic, monkeypatch):
    X, y, _ = synthetic
    # SB/M/>=60 (not the first combination) becomes the most frequent one.
    extra = np.flatnonzero((y["rhythm"] == "SB") & (y["sex"] == "M") & (y["age_group"] == ">=60"))
    X, y = np.concatenate([X, X[extra]]), pd.concat([y, y.iloc[extra]], ignore_index=True)
    model = _model(max_epochs=1).fit(X, y)
    embeddings = model.transform(X[:6])
    embeddings[[1, 4]] = 0  # as a CNN ending in a ReLU can output
    monkeypatch.setattr(model, "_embedding_chunks", lambda X, *a, **k: iter([(0, embeddings)]))
    predicted = model.predict(X[:6])
    assert predicted.iloc[[1, 4]].to_numpy().tolist() == [["SB", "M", ">=60"]] * 2
    nearest = np.argmax(embeddings @ model.prototypes_.T, axis=1)
    keep = [0, 2, 3, 5]
    assert (
        predicted.iloc[keep].to_numpy().tolist()
        == model.get_prototypes()[1][nearest[keep]].tolist()
    )


def test_early_stopping_without_groups_warns_once(synthetic):
    X, y, groups = synthetic
    with pytest.warns(UserWarning, match=r"fit got no groups.*Pass groups=") as record:
        _model(max_epochs=2, validation_fraction=0.2).fit(X, y)
    # Only the package's own warning: the first fit of a process may import
    # wfdb (through sklearn_crocs.datasets), whose import warns under pandas 3.
    ours = [w for w in record if "fit got no groups" in str(w.message)]
    assert len(ours) == 1
    assert ours[0].filename == __file__  # points at the caller
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _model(max_epochs=2, validation_fraction=0.2).fit(X, y, groups=groups)


def test_training_augmentation_settings_reach_the_net(synthetic):
    X, y, _ = synthetic
    resnet = {"encoder": "resnet", "encoder_params": {"channels": (4, 8)}, "max_epochs": 1}
    assert repr(_model(**resnet).fit(X, y).net_.augment) == (
        "RandomWindow(crop=0.8, amplitude_jitter=0.1)"
    )
    assert repr(_model(max_epochs=1).fit(X, y).net_.augment) == (
        "RandomWindow(crop=1.0, amplitude_jitter=0.1)"  # the CNN takes whole signals
    )
    assert _model(max_epochs=1, augment=None).fit(X, y).net_.augment is None
    # A RandomWindow that changes nothing is no augmentation.
    still = RandomWindow(crop=1.0, amplitude_jitter=0.0)
    assert _model(max_epochs=1, augment=still).fit(X, y).net_.augment is None
    window = RandomWindow(crop=0.5, amplitude_jitter=0.2)
    assert _model(**resnet, augment=window).fit(X, y).net_.augment is window
    plain = _model(**resnet, augment=None).fit(X, y)
    augmented = _model(**resnet).fit(X, y)
    assert plain.net_.augment is None
    assert not np.allclose(plain.prototypes_, augmented.prototypes_)
    with pytest.raises(ValueError, match=r"augment=RandomWindow\(crop=0.8, .* shorter .* CNN"):
        _model(encoder="cnn", augment=RandomWindow(crop=0.8)).fit(X, y)


@pytest.mark.parametrize("augment", ["none", 0.8, {"crop": 0.8}])
def test_augment_refuses_other_values(synthetic, augment):
    X, y, _ = synthetic
    with pytest.raises(InvalidParameterError, match="The 'augment' parameter"):
        _model(max_epochs=1, augment=augment).fit(X, y)


# ---------------------------------------------------------- missing attributes
def _remove(y, fraction, seed=0):
    """y with ``fraction`` of its sex and of its age values missing, drawn independently."""
    rng = np.random.RandomState(seed)
    y = y.copy()
    for column in ("sex", "age_group"):
        y.loc[rng.rand(len(y)) < fraction, column] = None
    return y


def test_missing_attributes_are_marginalised(synthetic):
    X, y, _ = synthetic
    y_missing = _remove(y, 0.3)
    known = y_missing.notna().all(axis=1).to_numpy()
    assert 0 < known.sum() < len(y)
    model = _model(max_epochs=2).fit(X, y_missing)
    # No prototype stands for "missing": the combinations of the complete y.
    assert [list(c) for c in model.categories_] == [
        ["AFIB", "SB", "SR"],
        ["F", "M"],
        ["<60", ">=60"],
    ]
    assert model.prototypes_.shape == (12, 16)
    counts = y[known].value_counts().reindex(pd.MultiIndex.from_tuples(
        [tuple(a) for a in model.get_prototypes()[1]]), fill_value=0)  # fmt: skip
    assert model.prototype_counts_.tolist() == counts.tolist()
    # One extra target row per pattern of missing values.
    n_patterns = len(y_missing[~known].fillna("?").drop_duplicates())
    criterion = model.net_.criterion_
    assert criterion.weights.shape == (12 + n_patterns, 12)
    np.testing.assert_allclose(criterion.weights.sum(axis=1), 1.0, rtol=1e-6)
    predicted = model.predict(X)
    assert predicted.notna().all().all() and list(predicted.columns) == list(y.columns)
    assert model.transform(X).shape == (len(X), 16)
    with pytest.raises(ValueError, match=r"missing values .* 'sex'"):
        _model(max_epochs=1, missing="error").fit(X, y_missing)


@pytest.mark.parametrize("missing", ["marginalise", "posterior"])
def test_missing_class_with_other_attributes_known_trains(synthetic, missing):
    # The common case of a hospital's records: sex and age in every header, the
    # diagnosis for few. Such rows train with the class summed out (or completed
    # by the class posterior).
    X, y, _ = synthetic
    y_missing = y.assign(rhythm=y["rhythm"].where(np.arange(len(y)) % 3 == 0))
    model = _model(max_epochs=2, missing=missing).fit(X, y_missing)
    assert len(model.net_.criterion_.completions) == (missing == "posterior") * 4
    assert [list(c) for c in model.categories_][0] == ["AFIB", "SB", "SR"]
    # Only the rows with every attribute known count towards the mean prototypes.
    assert model.prototype_counts_.sum() == y_missing.notna().all(axis=1).sum()
    weights = model.net_.criterion_.weights
    # A row with sex and age but no class spreads its weight over the three classes.
    assert weights.shape[0] > 12
    np.testing.assert_allclose(weights.sum(axis=1), 1.0, rtol=1e-6)
    assert model.predict(X)["rhythm"].notna().all()


def test_all_known_y_trains_exactly_as_before(synthetic):
    X, y, groups = synthetic
    marginalise = _model(max_epochs=2, loss="hard").fit(X, y)
    error = _model(max_epochs=2, loss="hard", missing="error").fit(X, y)
    assert marginalise.net_.criterion_.weights.shape == (12, 12)
    assert marginalise.net_.criterion_.consistent is None
    assert marginalise.net_.history[:, "train_loss"] == error.net_.history[:, "train_loss"]
    np.testing.assert_array_equal(marginalise.prototypes_, error.prototypes_)
    np.testing.assert_array_equal(marginalise.transform(X), error.transform(X))


@pytest.mark.parametrize("loss", ["soft", "hard"])
def test_missing_attributes_with_early_stopping_and_save(synthetic, tmp_path, loss):
    X, y, groups = synthetic
    model = _model(max_epochs=2, loss=loss, validation_fraction=0.25).fit(
        X, _remove(y, 0.5, seed=1), groups=groups
    )
    assert "valid_nce" in model.net_.history[-1]
    path = tmp_path / "model.safetensors"
    model.save(path)
    loaded = CROCSClusterer.load(path)
    np.testing.assert_array_equal(loaded.predict(X), model.predict(X))


def _top_class_proba(model, X):
    """Each ECG's largest class probability under the fitted prototypes."""
    return model.predict_proba(X, attribute="rhythm").max(axis=1)


def test_unlabelled_ecgs_train_through_pseudo_labels(synthetic):
    X, y, groups = synthetic
    rng = np.random.RandomState(0)
    unlabelled = rng.rand(len(y)) < 0.7
    y_semi = y.mask(np.broadcast_to(unlabelled[:, None], y.shape))
    model = _model(max_epochs=6, unlabelled_threshold=0.5).fit(X, y_semi)
    criterion = model.net_.criterion_
    # No extra target row: unlabelled ECGs are target -1, not a pattern of missing values.
    assert criterion.weights.shape == (12, 12)
    assert criterion.unlabelled_threshold == 0.5
    counts = y[~unlabelled].value_counts().reindex(pd.MultiIndex.from_tuples(
        [tuple(a) for a in model.get_prototypes()[1]]), fill_value=0)  # fmt: skip
    assert model.prototype_counts_.tolist() == counts.tolist()
    assert model.predict(X).notna().all().all() and len(model.labels_) == len(X)
    # Pseudo-labels make the unlabelled ECGs' class more decided than without them.
    silent = _model(max_epochs=6, unlabelled_weight=0).fit(X, y_semi)
    assert (
        _top_class_proba(model, X[unlabelled]).mean()
        > _top_class_proba(silent, X[unlabelled]).mean()
    )
    # With early stopping (stratified by class, unlabelled ECGs as a group of their own).
    stopped = _model(max_epochs=2, validation_fraction=0.25).fit(X, y_semi, groups=groups)
    assert "valid_nce" in stopped.net_.history[-1]
    with pytest.raises(ValueError, match=r"missing values .* 'rhythm'"):
        _model(max_epochs=1, missing="error").fit(X, y_semi)


# --------------------------------------------------------- per-attribute proba
def test_predict_proba_marginals_follow_the_declared_category_order(synthetic):
    X, y, _ = synthetic
    order = [">=60", "<60"]  # not sorted
    y = y.assign(age_group=pd.Categorical(y["age_group"], categories=order))
    model = _model(max_epochs=2).fit(X, y)
    proba = model.predict_proba(X)
    for position, name in enumerate(model.attribute_names_):
        categories = model.categories_[position]
        marginal = model.predict_proba(X, attribute=name)
        assert marginal.shape == (len(X), len(categories))
        np.testing.assert_allclose(marginal.sum(axis=1), 1.0, rtol=1e-5)
        for k, value in enumerate(categories):
            columns = model.get_prototypes()[1][:, position] == value
            np.testing.assert_allclose(marginal[:, k], proba[:, columns].sum(axis=1), rtol=1e-6)
        np.testing.assert_array_equal(model.predict_proba(X, attribute=position), marginal)
    assert model.categories_[2].tolist() == order
    with pytest.raises(ValueError, match=r"attribute='age' is not an attribute of y"):
        model.predict_proba(X, attribute="age")
    with pytest.raises(ValueError, match="attribute=3 but y has only 3 attribute"):
        model.predict_proba(X, attribute=3)


# ------------------------------------------------- ordinal and continuous attributes
def _with_ages(y, seed=0):
    """Whole-year ages consistent with the age groups: 30-59 for <60, 60-89 for >=60."""
    rng = np.random.RandomState(seed)
    old = (y["age_group"] == ">=60").to_numpy()
    age = np.where(old, 60, 30) + rng.randint(0, 30, len(y))
    return y.drop(columns="age_group").assign(age=age)


def _ordinal(model):
    """Which attributes the fitted model's loss treats as ordinal."""
    return list(model.net_.get_params()["criterion__ordinal"])


def test_ordered_categoricals_are_ordinal_in_the_loss(synthetic):
    X, y, _ = synthetic
    y = y.assign(
        age_group=pd.Categorical(y["age_group"], categories=["<60", ">=60"], ordered=True),
        sex=pd.Categorical(y["sex"]),  # a categorical, but not ordered: nominal
    )
    auto = _model(max_epochs=1).fit(X, y)
    assert _ordinal(auto) == [False, False, True]
    named = _model(max_epochs=1, ordinal=["sex"]).fit(X, y)
    assert _ordinal(named) == [False, True, False]
    nominal = _model(max_epochs=1, ordinal=None).fit(X, y)
    assert _ordinal(nominal) == [False, False, False]
    # Two age groups: ranks 0 and 1 differ by 1, as a nominal mismatch does.
    np.testing.assert_array_equal(auto.net_.criterion_.weights, nominal.net_.criterion_.weights)
    with pytest.raises(ValueError, match="ordinal='weight' is not an attribute"):
        _model(max_epochs=1, ordinal=["weight"]).fit(X, y)


def test_continuous_attribute_is_binned_into_ordered_quantile_groups(synthetic):
    X, y, _ = synthetic
    y = _with_ages(y)
    model = _model(max_epochs=2, continuous={"age": 3}).fit(X, y)
    edges = model.bin_edges_["age"]
    assert len(edges) == 4 and np.all(np.diff(edges) > 0)
    assert edges[0] == y["age"].min() and edges[-1] == y["age"].max()
    labels = list(model.categories_[2])
    assert len(labels) == 3 and labels[0].startswith("<=") and labels[-1].startswith(">=")
    assert _ordinal(model) == [False, False, True]
    # Three ranks: the loss's weights distinguish ranks 1 and 2 away.
    weights = model.net_.criterion_.weights.numpy()
    first = model.attribute_codec_.encode(
        pd.DataFrame({"rhythm": ["SR"] * 3, "sex": ["F"] * 3, "age": labels})
    )
    assert weights[first[0], first[1]] > weights[first[0], first[2]] > 0
    # Predictions are bin labels; numbers given later are binned with the same edges.
    predicted = model.predict(X)
    assert set(predicted["age"]) <= set(labels)
    cut = pd.cut(y["age"], [-np.inf, edges[1], edges[2], np.inf], right=False, labels=labels)
    binned = y.assign(age=cut.astype(object))
    np.testing.assert_array_equal(
        model.attribute_codec_.read(y)["age"].astype(object), binned["age"]
    )
    assert model.score(X, y) == model.score(X, binned)


def test_continuous_attribute_with_missing_values_and_save(synthetic, tmp_path):
    X, y, groups = synthetic
    y = _with_ages(y).astype({"age": float})
    y.loc[::5, "age"] = np.nan
    model = _model(max_epochs=2, continuous={"age": 2}).fit(X, y, groups=groups)
    assert model.prototypes_.shape[0] == 3 * 2 * 2
    path = tmp_path / "model.safetensors"
    model.save(path)
    loaded = CROCSClusterer.load(path)
    np.testing.assert_array_equal(loaded.bin_edges_["age"], model.bin_edges_["age"])
    pd.testing.assert_frame_equal(loaded.predict(X), model.predict(X))
    known = y["age"].notna().to_numpy()
    assert loaded.score(X[known], y[known]) == model.score(X[known], y[known])


@pytest.mark.parametrize(
    ("continuous", "y_kind", "error", "match"),
    [
        ({"age": 1}, "frame", ValueError, "int >= 2"),
        ({"weight": 3}, "frame", ValueError, "'weight', which is not a column"),
        ({"sex": 2}, "frame", TypeError, "must hold numbers"),
        ({"attribute_2": 2}, "array", ValueError, "columns of a DataFrame y"),
    ],
)
def test_continuous_errors(synthetic, continuous, y_kind, error, match):
    X, y, _ = synthetic
    y = _with_ages(y)
    y = y if y_kind == "frame" else y.to_numpy()
    with pytest.raises(error, match=match):
        _model(max_epochs=1, continuous=continuous).fit(X, y)


# ------------------------------------------------------------------ out-of-core fit
class _ReadLog:
    """A lazy array (shape, dtype, slicing) that records how many rows each read takes."""

    def __init__(self, array):
        self.array, self.shape, self.dtype, self.reads = array, array.shape, array.dtype, []

    def __getitem__(self, key):
        rows = self.array[key]
        self.reads.append(len(rows))
        return rows


def _lazy_copies(X, tmp_path):
    """X as a float64 memory map, an h5py dataset, a zarr array and a dask array, when installed."""
    path = tmp_path / "X.npy"
    np.save(path, X.astype(np.float64))
    copies = {"memmap float64": np.load(path, mmap_mode="r")}
    path32 = tmp_path / "X32.npy"
    np.save(path32, X)
    copies["memmap float32"] = np.load(path32, mmap_mode="r")
    try:
        import h5py

        copies["h5py"] = h5py.File(tmp_path / "X.h5", "w").create_dataset("X", data=X)
    except ImportError:
        pass
    try:
        import zarr

        copies["zarr"] = zarr.open(
            str(tmp_path / "X.zarr"),
            mode="w",
            shape=X.shape,
            dtype=X.dtype,
            chunks=(8, *X.shape[1:]),
        )
        copies["zarr"][:] = X
    except ImportError:
        pass
    try:
        import dask.array as da

        copies["dask"] = da.from_array(X, chunks=(16, *X.shape[1:]))
    except ImportError:
        pass
    return copies


@pytest.mark.parametrize("prototypes", ["learned", "mean"])
def test_fit_on_lazy_arrays_equals_fit_in_memory(synthetic, tmp_path, prototypes):
    # Same batches in the same order: the same model, whatever holds X.
    X, y, groups = synthetic
    params = {"max_epochs": 2, "validation_fraction": 0.25, "prototypes": prototypes}
    expected = _model(**params).fit(X, y, groups=groups)
    for name, lazy in _lazy_copies(X, tmp_path).items():
        model = _model(**params).fit(lazy, y, groups=groups)
        np.testing.assert_array_equal(model.prototypes_, expected.prototypes_, err_msg=name)
        np.testing.assert_array_equal(model.labels_, expected.labels_, err_msg=name)
        assert model.n_features_in_ == X.shape[1] * X.shape[2]
        assert [h["valid_loss"] for h in model.net_.history] == [
            h["valid_loss"] for h in expected.net_.history
        ], name
        np.testing.assert_array_equal(model.transform(lazy), expected.transform(X), err_msg=name)
        embedded = _model(**params).fit_transform(lazy, y, groups=groups)
        np.testing.assert_array_equal(embedded, expected.transform(X), err_msg=name)


def test_fit_reads_a_lazy_array_in_batches_and_chunks(synthetic, monkeypatch):
    import sklearn_crocs._engine._base as clusterer_module
    from sklearn_crocs.nn import _net

    X, y, groups = synthetic
    monkeypatch.setattr(_net, "_MAX_INFERENCE_BATCH", 16)  # validation batches
    monkeypatch.setattr(clusterer_module, "_CHUNK_BYTES", 4 * X[0].size * 20)  # 20 ECGs a chunk
    log = _ReadLog(X.astype(np.float64))
    model = _model(max_epochs=2, batch_size=16, validation_fraction=0.25, prototypes="mean")
    model.fit(log, y, groups=groups)
    assert max(log.reads) <= 20 < len(X)
    # 2 epochs of training and validation batches, the embedding pass and the
    # second pass for the mean prototypes' labels: each ECG read 4 times.
    assert sum(log.reads) == 4 * len(X)


def test_lazy_fit_checks_the_signals_it_reads(synthetic):
    X, y, _ = synthetic
    bad = X.astype(np.float64)
    bad[40, 0, 7] = np.inf
    with pytest.raises(ValueError, match="infinity"):
        _model(max_epochs=1).fit(_ReadLog(bad), y)
    with config_context(assume_finite=True):  # scikit-learn's switch: not checked
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            _model(max_epochs=1).fit(_ReadLog(bad), y)
    with pytest.raises(ValueError, match="of shape"):
        _model().fit(_ReadLog(X[..., None]), y)
    with pytest.raises(ValueError, match="must hold numbers"):
        _model().fit(_ReadLog(X.astype(complex)), y)
    with pytest.raises(ValueError, match="at least 2 samples"):
        _model().fit(_ReadLog(X[:1]), y[:1])


# ---------------------------------------------------------------- sampling rate
def _sines(rate, seconds=5, n=40, leads=2, seed=0):
    """Two classes of sine ECGs at ``rate`` Hz, shape (n, leads, seconds * rate)."""
    rng = np.random.RandomState(seed)
    y = np.repeat(["A", "B"], n // 2)
    t = np.arange(seconds * rate) / rate
    freq = np.where(y == "A", 1.0, 2.5)[:, None, None]
    X = np.sin(2 * np.pi * freq * t) + 0.1 * rng.randn(n, leads, len(t))
    return X.astype(np.float32), y


@pytest.fixture(scope="module")
def at_500hz():
    X, y = _sines(500)
    return _model(encoder="resnet", sampling_rate=500).fit(X, y), X, y


def test_a_declared_rate_runs_the_encoder_at_the_working_rate(at_500hz):
    from sklearn_crocs.preprocessing import resample_signals

    model, X, y = at_500hz
    assert model.sampling_rate_ == 100.0
    assert model.input_shape_ == (2, 500)  # 5 s at 100 Hz
    # The same signals given at 100 Hz train the same model.
    X_100 = resample_signals(X, 500, 100)
    same = _model(encoder="resnet", sampling_rate=100).fit(X_100, y)
    np.testing.assert_array_equal(same.prototypes_, model.prototypes_)
    np.testing.assert_array_equal(same.transform(X_100), model.transform(X))
    native = _model(encoder="resnet", sampling_rate=500, working_rate=None).fit(X, y)
    assert native.sampling_rate_ == 500.0 and native.input_shape_ == (2, 2500)


def test_other_rates_are_brought_to_the_model(at_500hz):
    from sklearn_crocs.preprocessing import resample_signals

    model, X, y = at_500hz
    X_250 = resample_signals(X, 500, 250)
    expected = model.predict(X)
    assert (model.predict(X_250, sampling_rate=250) == expected).mean() >= 0.9
    cosine = (model.transform(X_250, sampling_rate=250) * model.transform(X)).sum(axis=1)
    assert cosine.min() > 0.95
    proba = model.predict_proba(X_250, sampling_rate=250)
    assert proba.shape == (len(X), len(model.prototypes_))
    assert model.score(X_250, y, sampling_rate=250) == pytest.approx(model.score(X, y), abs=0.1)


@pytest.mark.bad_input(
    "Signals", "frames of another duration than in fit (rate known)", "ValueError"
)
def test_frames_of_another_duration_are_refused_naming_both_rates(at_500hz):
    model, X, _ = at_500hz
    with pytest.raises(
        ValueError,
        match=r"500 samples per lead, 1 s at 500 Hz.*frames of 5 s "
        r"\(500 samples at 100 Hz\).*2500 samples at 500 Hz.*sampling_rate=100",
    ):
        model.predict(X[..., :500])  # 1 s at 500 Hz, as the issue found predicted silently
    with pytest.raises(
        ValueError, match=r"5000 samples per lead, 10 s at 500 Hz.*longer_signals=\"average\""
    ):
        model.transform(np.concatenate([X, X], axis=-1))


def test_an_ensemble_joins_nets_whose_first_is_the_single_model(synthetic):
    X, y, _ = synthetic
    one = _model(random_state=0).fit(X, y)
    two = _model(random_state=0, ensemble_size=2).fit(X, y)
    d = FAST["embedding_dim"]
    E = two.transform(X)
    assert E.shape == (len(X), 2 * d) and len(two.nets_) == 2 and two.net_ is two.nets_[0]
    assert len(two.get_feature_names_out()) == 2 * d
    np.testing.assert_allclose(np.linalg.norm(E, axis=1), 1, atol=1e-5)
    np.testing.assert_allclose(E[:, :d] * np.sqrt(2), one.transform(X), atol=1e-5)
    np.testing.assert_allclose(two.prototypes_[:, :d] * np.sqrt(2), one.prototypes_, atol=1e-5)
    assert not np.allclose(E[:, :d], E[:, d:], atol=1e-2)  # another seed, another net
    # Predictions follow the mean of the nets' cosine similarities.
    P = two.prototypes_
    # Each half is a net's unit vectors divided by sqrt(2).
    per_net = [2 * E[:, part] @ P[:, part].T for part in (slice(0, d), slice(d, None))]
    attributes = two.get_prototypes()[1][np.argmax(np.mean(per_net, axis=0), axis=1)]
    np.testing.assert_array_equal(np.asarray(two.predict(X)), attributes.reshape(len(X), -1))


def test_the_nets_of_an_ensemble_share_the_auto_epoch_budget(synthetic):
    """max_epochs="auto" is the ensemble's budget (two nets of half the epochs, in about the
    time of one); an integer is each net's."""
    X, y = synthetic[0][:60], synthetic[1][:60]
    params = {**FAST, "max_epochs": "auto", "validation_fraction": None}
    for size, epochs in ((1, 40), (2, 20), (3, 13)):  # "auto": 40 epochs for 60 ECGs
        model = CROCSClusterer(**{**params, "ensemble_size": size}, random_state=0).fit(X, y)
        assert [len(net.history) for net in model.nets_] == [epochs] * size
    fixed = CROCSClusterer(**{**params, "max_epochs": 2, "ensemble_size": 2}).fit(X, y)
    assert [len(net.history) for net in fixed.nets_] == [2, 2]


def test_longer_recordings_are_embedded_as_the_mean_of_their_frames(at_500hz):
    import copy

    from sklearn_crocs import PrototypeRetriever
    from sklearn_crocs.preprocessing import resample_signals

    model, X, _ = at_500hz
    model = copy.deepcopy(model).set_params(longer_signals="average")
    frames = model.transform(X)

    def unit_mean(*parts):
        mean = sum(parts) / len(parts)
        return mean / np.linalg.norm(mean, axis=1, keepdims=True)

    def assert_close(a, b):  # up to the resampling of a record vs of its frames
        assert (a * b).sum(axis=1).min() > 0.9999

    # 10-s records: their two 5-s frames, averaged.
    records = np.concatenate([X[0::2], X[1::2]], axis=-1)
    expected = unit_mean(frames[0::2], frames[1::2])
    assert_close(model.transform(records), expected)
    prototypes, attributes = model.get_prototypes()
    nearest = np.argmax(model.transform(records) @ prototypes.T, axis=1)
    np.testing.assert_array_equal(model.predict(records), attributes[nearest].ravel())
    # At another declared rate, and for a length that is not a multiple of the frames'
    # (7.5 s: the first and the last 5 s, overlapping).
    at_250 = resample_signals(records, 500, 250)
    cosine = (model.transform(at_250, sampling_rate=250) * expected).sum(axis=1)
    assert cosine.min() > 0.95
    longer = records[..., :3750]
    assert_close(
        model.transform(longer), unit_mean(frames[0::2], model.transform(longer[..., -2500:]))
    )
    retriever = PrototypeRetriever(model).fit(records)
    assert retriever.kneighbors(records[:2], n_neighbors=3, return_distance=False).shape == (2, 3)
    # Frames of the training length are unchanged; shorter ones are still refused.
    np.testing.assert_array_equal(model.transform(X), frames)
    with pytest.raises(ValueError, match=r"1 s at 500 Hz"):
        model.transform(X[..., :500])


@pytest.mark.bad_input(
    "Signals", "a sampling rate given to a model fitted without one", "ValueError"
)
def test_a_rate_for_a_model_without_one_is_refused(synthetic):
    X, y, _ = synthetic
    model = _model(max_epochs=1).fit(X, y)
    assert model.sampling_rate_ is None
    with pytest.raises(ValueError, match=r"sampling_rate=500 Hz.*fitted without a sampling rate"):
        model.predict(X, sampling_rate=500)
    with pytest.raises(
        ValueError,
        match=r"fitted on 1 lead\(s\) of 600 samples. It was fitted "
        r"without sampling_rate",
    ):
        model.predict(X[..., :300])


@pytest.mark.bad_input("Signals", "(n, samples, leads) layout (wfdb.rdsamp stacked)", "ValueError")
def test_swapped_axes_are_refused_with_the_fix(at_500hz):
    model, X, y = at_500hz
    swapped = np.swapaxes(X, 1, 2)
    for rate in (None, 500):
        with pytest.raises(ValueError, match=r"2500 leads of 2 samples.*np.swapaxes\(X, 1, 2\)"):
            _model(sampling_rate=rate).fit(swapped, y)
    with pytest.raises(ValueError, match=r"np.swapaxes\(X, 1, 2\)"):
        model.predict(swapped)


@pytest.mark.bad_input(
    "Signals", "frames shorter than a quarter second at the declared rate", "ValueError"
)
def test_frames_too_short_for_the_declared_rate_are_refused():
    X, y = _sines(500, seconds=5)
    with pytest.raises(ValueError, match=r"100 samples per lead, 0.2 s at the declared 500 Hz"):
        _model(sampling_rate=500).fit(X[..., :100], y)


@pytest.mark.bad_input("Signals", "other units than in fit (uV or ADC against mV)", "UserWarning")
def test_signals_in_other_units_warn(at_500hz):
    model, X, _ = at_500hz
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        model.predict(X)
        model.predict(X * 3)  # a different gain is not another unit
    with pytest.warns(UserWarning, match=r"1e\+03 times that of the training signals.*microvolts"):
        model.predict(X * 1000)


def test_conditioning_in_the_model_equals_conditioning_before_it():
    from sklearn_crocs.preprocessing import SignalConditioner

    X, y = _sines(500)
    t = np.arange(X.shape[-1]) / 500
    raw = 0.3 * X + 1.0 + 0.4 * np.sin(2 * np.pi * 0.2 * t) + 0.1 * np.sin(2 * np.pi * 50 * t)
    raw = raw.astype(np.float32)
    inside = _model(sampling_rate=500, conditioning=SignalConditioner(notch=50)).fit(raw, y)
    prepared = SignalConditioner(sampling_rate=500, target_rate=100, notch=50).fit_transform(raw)
    outside = _model(sampling_rate=100).fit(prepared, y)
    np.testing.assert_array_equal(inside.prototypes_, outside.prototypes_)
    np.testing.assert_array_equal(inside.transform(raw), outside.transform(prepared))
    assert inside.conditioning.sampling_rate is None  # fit left the parameter alone
    # Conditioning z-scores each lead: the raw signals' gain no longer matters.
    np.testing.assert_allclose(inside.transform(raw * 7), inside.transform(raw), atol=1e-4)


@pytest.mark.bad_input(
    "Parameters", "conditioning without a rate, or with other rates", "ValueError"
)
def test_conditioning_needs_the_rate_and_leaves_rates_to_the_model():
    from sklearn_crocs.preprocessing import SignalConditioner

    X, y = _sines(500)
    with pytest.raises(ValueError, match=r"conditioning filters signals in Hz.*sampling_rate="):
        _model(conditioning=SignalConditioner()).fit(X, y)
    with pytest.raises(
        ValueError,
        match=r"conditioning has sampling_rate=250, but the model gives "
        r"it signals at 500 Hz",
    ):
        _model(sampling_rate=500, conditioning=SignalConditioner(sampling_rate=250)).fit(X, y)


def test_a_lazy_x_that_needs_resampling_is_refused(tmp_path):
    X, y = _sines(500)
    path = tmp_path / "X.npy"
    np.save(path, X)
    lazy = np.load(path, mmap_mode="r")
    with pytest.raises(ValueError, match=r"read lazily.*from 500 Hz to 100 Hz.*resample_signals"):
        _model(sampling_rate=500).fit(lazy, y)
    model = _model(sampling_rate=500, working_rate=None).fit(lazy, y)  # nothing to convert
    assert model.signal_scale_ is None
    np.testing.assert_array_equal(model.predict(lazy), model.predict(X))


def test_a_fit_with_a_validation_split_does_not_import_the_dataset_readers():
    # The split is patient_split's, which lives outside sklearn_crocs.datasets
    # (whose readers import wfdb): a fit must not need the readers.
    code = (
        "import sys\n"
        "import numpy as np\n"
        "from sklearn_crocs import CROCSClusterer\n"
        "X, y = np.random.RandomState(0).randn(20, 400), np.repeat([0, 1], 10)\n"
        "CROCSClusterer(encoder='cnn', embedding_dim=4, max_epochs=2, random_state=0,\n"
        "               validation_fraction=0.3).fit(X, y, groups=np.arange(20) // 2)\n"
        "print(sorted(m for m in ('wfdb', 'sklearn_crocs.datasets') if m in sys.modules))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


# ------------------------------------------------------------- epoch budget
@pytest.mark.parametrize(
    ("n_train", "epochs"),
    [(None, 40), (1, 40), (600, 40), (1000, 40), (2000, 28), (4000, 20), (10_000, 13),
     (40_000, 6), (10**7, 1)],  # fmt: skip
)
def test_auto_max_epochs_rule(n_train, epochs):
    from sklearn_crocs._engine._neural import auto_max_epochs

    assert auto_max_epochs(n_train) == epochs


class _StopAfterOneEpoch(Callback):
    def on_epoch_end(self, net, **kwargs):
        raise KeyboardInterrupt  # skorch ends training cleanly on it


@pytest.mark.parametrize(("validation_fraction", "n_train"), [(None, 4000), (0.25, 3000)])
def test_auto_max_epochs_counts_the_training_ecgs(synthetic, validation_fraction, n_train):
    X, y, groups = synthetic
    repeat = -(-4000 // len(X))
    X, y = np.tile(X, (repeat, 1, 1))[:4000], pd.concat([y] * repeat)[:4000]
    groups = np.arange(4000) // 10  # 400 patients: 300 of them train with 0.25 held out
    model = _model(max_epochs="auto", validation_fraction=validation_fraction,
                   callbacks=[_StopAfterOneEpoch()]).fit(X, y, groups=groups)  # fmt: skip
    expected = round(40 * math.sqrt(1000 / n_train))
    assert model.net_.max_epochs == expected and model.n_iter_ == 1


def test_cosine_lr_schedule_is_the_default(synthetic):
    X, y, _ = synthetic
    history = _model(max_epochs=4, lr_schedule="cosine").fit(X, y).net_.history
    expected = FAST["lr"] * (1 + np.cos(np.pi * np.arange(4) / 4)) / 2
    np.testing.assert_allclose(history[:, "event_lr"], expected)
    assert CROCSClusterer().lr_schedule == "cosine"
    constant = _model(max_epochs=4, lr_schedule="constant").fit(X, y).net_
    assert "event_lr" not in constant.history[-1]
    assert constant.optimizer_.param_groups[0]["lr"] == FAST["lr"]


# ------------------------------------------------------- embedding width, attribute layout
def test_embedding_width_is_stated_and_is_embedding_dim_per_net(synthetic):
    X, y, _ = synthetic
    assert CROCSClusterer().ensemble_size == 2  # the default: 2 * 128 = 256 wide
    model = _model(max_epochs=2, ensemble_size=2, embedding_dim=8).fit(X[:60], y.iloc[:60])
    assert model.n_features_out_ == 16 == model.transform(X[:3]).shape[1]
    assert model.prototypes_.shape[1] == 16 == len(model.get_feature_names_out())


def test_prototype_attributes_in_the_layout_of_y(synthetic):
    X, y, _ = synthetic
    model = _model(max_epochs=1).fit(X[:60], y.iloc[:60])
    attributes = model.prototype_attributes_
    assert isinstance(attributes, pd.DataFrame)
    assert list(attributes.columns) == ["rhythm", "sex", "age_group"]
    assert attributes["sex"].tolist() == model.get_prototypes()[1][:, 1].tolist()
    assert attributes.iloc[model.labels_].shape == (60, 3)
    array = _model(max_epochs=1).fit(X[:60], y.iloc[:60].to_numpy())
    assert isinstance(array.prototype_attributes_, np.ndarray)
    assert array.prototype_attributes_.shape == (len(array.prototypes_), 3)
