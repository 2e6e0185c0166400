"""Fixtures of the display tests: the Agg backend and small fitted models."""

import matplotlib
import matplotlib.pyplot as plt
import pytest
from conftest import make_synthetic_ecgs

from sklearn_crocs import CROCSClusterer

# Draw off-screen; switching is allowed while no figure is open.
matplotlib.use("Agg")


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


@pytest.fixture(scope="package")
def data():
    """24 patients x 3 frames of 2-lead synthetic ECGs; rhythm (3) x sex (2) x age (2)."""
    return make_synthetic_ecgs(n_patients=24, frames_per_patient=3, n_leads=2, length=400)


@pytest.fixture(scope="package")
def model(data):
    """Fitted with early stopping on held-out patients, so the history has valid_* keys."""
    X, y, groups = data
    return CROCSClusterer(
        embedding_dim=8,
        max_epochs=4,
        lr=1e-2,
        batch_size=32,
        validation_fraction=0.25,
        n_iter_no_change=2,
        random_state=0,
    ).fit(X, y, groups=groups)


@pytest.fixture(scope="package")
def model_without_validation(data):
    X, y, _ = data
    return CROCSClusterer(
        embedding_dim=8, max_epochs=3, validation_fraction=None, random_state=0
    ).fit(X, y)
