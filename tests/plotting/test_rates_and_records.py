"""Every display that takes ECGs, for models fitted at 100, 250 and 500 Hz and for whole records.

The documented raw path fits ``CROCSClusterer(sampling_rate=...)`` on frames at
the recording's rate, while the encoder runs at the working rate (100 Hz), so
the frames given to a display are longer than the encoder's input.
"""

import numpy as np
import pytest
from conftest import make_synthetic_ecgs

from sklearn_crocs import CROCSClusterer, PrototypeRetriever
from sklearn_crocs.plotting import (
    PrototypeDendrogramDisplay,
    PrototypeDisplay,
    RetrievalDisplay,
    TrainingCurveDisplay,
)
from sklearn_crocs.preprocessing import resample_signals

SECONDS = 2


@pytest.fixture(scope="module", params=[100, 250, 500])
def fitted(request):
    """A small model fitted on 2-s, 2-lead frames at ``rate`` Hz."""
    rate = request.param
    X, y, groups = make_synthetic_ecgs(
        n_patients=12, frames_per_patient=2, n_leads=2, length=SECONDS * rate
    )
    model = CROCSClusterer(
        embedding_dim=4, max_epochs=1, validation_fraction=None, random_state=0,
        sampling_rate=rate,
    ).fit(X, y, groups=groups)
    return rate, model, X, y


def test_retrieval_display_at_the_model_rate(fitted):
    rate, model, X, y = fitted
    display = RetrievalDisplay.from_estimator(model, X, y, n_neighbors=3, lead=1)
    assert len(display.neighbors) == 3
    for line, row in zip(display.trace_lines_, display.neighbors):
        np.testing.assert_allclose(line.get_ydata(), X[row, 1])
        # The time axis is in seconds at the model's rate.
        assert line.get_xdata()[-1] == pytest.approx(SECONDS - 1 / rate)
    expected = np.linalg.norm(model.transform(X) - model.get_prototypes()[0][0], axis=1)
    np.testing.assert_allclose(display.distances, expected, atol=1e-5)


def test_retrieval_display_at_another_declared_rate(fitted):
    rate, model, X, y = fitted
    X100 = resample_signals(X, rate, 100).astype(np.float32)
    display = RetrievalDisplay.from_estimator(model, X100, y, n_neighbors=2, sampling_rate=100)
    for line, row in zip(display.trace_lines_, display.neighbors):
        np.testing.assert_allclose(line.get_ydata(), X100[row, 0])
        assert line.get_xdata()[-1] == pytest.approx(SECONDS - 1 / 100)
    expected = np.linalg.norm(
        model.transform(X100, sampling_rate=100) - model.get_prototypes()[0][0], axis=1
    )
    np.testing.assert_allclose(display.distances, expected, atol=1e-5)


def test_prototype_display_at_the_model_rate_and_another(fitted):
    rate, model, X, y = fitted
    display = PrototypeDisplay.from_estimator(model, X, y)
    assert len(display.embedding_coords) == len(X)
    X100 = resample_signals(X, rate, 100).astype(np.float32)
    display = PrototypeDisplay.from_estimator(model, X100, y, sampling_rate=100)
    assert len(display.embedding_coords) == len(X)


def test_displays_of_the_fit_alone(fitted):
    """The displays that take no ECGs: the prototypes' dendrogram and the training curve."""
    _, model, _, _ = fitted
    dendrogram = PrototypeDendrogramDisplay.from_estimator(model)
    assert len(dendrogram.row_order_) == len(model.prototypes_)
    curve = TrainingCurveDisplay.from_estimator(model, parts=("loss",))
    assert len(curve.lines_["train", "loss"].get_xdata()) == model.n_iter_


@pytest.fixture(scope="module")
def records():
    """Whole records of 4, 6 and 5 s at 250 Hz, and a model on 2-s frames of them."""
    X, y, groups = make_synthetic_ecgs(
        n_patients=12, frames_per_patient=2, n_leads=2, length=6 * 250
    )
    lengths = np.resize([4, 6, 5], len(X)) * 250
    ragged = [x[:, :n] for x, n in zip(X, lengths)]
    frames = X[:, :, : 2 * 250]
    model = CROCSClusterer(
        embedding_dim=4, max_epochs=1, validation_fraction=None, random_state=0,
        sampling_rate=250, longer_signals="average",
    ).fit(frames, y, groups=groups)
    return model, ragged, y


def test_retrieval_display_of_records_of_different_lengths(records):
    model, ragged, y = records
    display = RetrievalDisplay.from_estimator(model, ragged, y, n_neighbors=len(ragged))
    for line, row in zip(display.trace_lines_, display.neighbors):
        np.testing.assert_allclose(line.get_ydata(), ragged[row][0])
    # Each record is embedded whole, as on its own.
    one = np.stack([model.transform(r[None])[0] for r in ragged])
    np.testing.assert_allclose(model.transform(ragged), one, atol=1e-5)
    expected = np.linalg.norm(one - model.get_prototypes()[0][0], axis=1)
    np.testing.assert_allclose(display.distances, expected, atol=1e-5)


def test_retriever_and_prototype_display_take_records_of_different_lengths(records):
    model, ragged, y = records
    retriever = PrototypeRetriever(model, n_neighbors=2).fit(ragged)
    assert retriever.n_samples_fit_ == len(ragged)
    _, indices = retriever.kneighbors(ragged[:2], n_neighbors=1)
    np.testing.assert_array_equal(indices.ravel(), [0, 1])
    display = PrototypeDisplay.from_estimator(model, ragged, y)
    assert len(display.embedding_coords) == len(ragged)
    assert len(model.predict(ragged)) == len(ragged)


def test_prototype_display_bins_raw_ages_as_the_model_does():
    X, y, groups = make_synthetic_ecgs(n_patients=12, frames_per_patient=2, length=200)
    ages = np.random.RandomState(0).randint(20, 90, len(y)).astype(float)
    y = y[["rhythm", "sex"]].assign(age=ages)
    model = CROCSClusterer(
        embedding_dim=4, max_epochs=1, validation_fraction=None, random_state=0,
        continuous={"age": 2},
    ).fit(X, y, groups=groups)
    display = PrototypeDisplay.from_estimator(model, X, y, size_attribute="age")
    # Two age groups, not one value per age.
    assert set(display.embedding_attributes[:, 2]) == set(model.categories_[2])
