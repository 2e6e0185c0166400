"""One rule for every display that embeds ECGs: whole records at a declared rate (issue 58.4).

A model fitted on 5-s frames with a ``sampling_rate`` (and the default
``longer_signals="error"``) is given whole records at another rate; every
display embeds each as the mean of its frames, as ``PrototypeRetriever`` does,
without the model being changed.
"""

import numpy as np
import pytest
from conftest import make_synthetic_ecgs
from sklearn.decomposition import PCA

from sklearn_crocs import CROCSClusterer, PrototypeRetriever
from sklearn_crocs.plotting import PrototypeDisplay, RetrievalDisplay
from sklearn_crocs.preprocessing import resample_signals

RATE = 250


@pytest.fixture(scope="module")
def whole():
    """A model on 5-s frames at 100 Hz, and 10-s and 8-s records of the same ECGs at 250 Hz."""
    X, y, groups = make_synthetic_ecgs(n_patients=12, frames_per_patient=2, length=10 * RATE)
    frames = resample_signals(X[:, :, : 5 * RATE], RATE, 100).astype(np.float32)
    model = CROCSClusterer(
        encoder="cnn",
        embedding_dim=8,
        max_epochs=1,
        sampling_rate=100,
        validation_fraction=None,
        random_state=0,
    ).fit(frames, y, groups=groups)
    lengths = np.resize([10, 8], len(X)) * RATE
    records = [x[:, :n] for x, n in zip(X, lengths)]
    return model, records, y


def test_displays_embed_whole_records_as_the_retriever_does(whole):
    model, records, y = whole
    expected = PrototypeRetriever(model).fit(records, sampling_rate=RATE).embeddings_
    prototypes = model.get_prototypes()[0]

    display = PrototypeDisplay.from_estimator(model, records, y, sampling_rate=RATE)
    coords = PCA(n_components=2, random_state=0).fit_transform(np.vstack([prototypes, expected]))
    np.testing.assert_allclose(display.embedding_coords, coords[len(prototypes) :], atol=1e-4)

    display = RetrievalDisplay.from_estimator(model, records, y, n_neighbors=3, sampling_rate=RATE)
    np.testing.assert_allclose(
        display.distances, np.linalg.norm(expected - prototypes[0], axis=1), atol=1e-5
    )
    assert display.sampling_rate == RATE
    # The model is left as it was.
    assert model.longer_signals == "error"
