"""The components of a prototype clusterer's nets: the ensemble and the placement."""

from types import SimpleNamespace

import numpy as np
import torch
import torch.nn.functional as F

from sklearn_crocs import CROCSClusterer
from sklearn_crocs._engine._nets import Ensemble, Placement, unit_rows
from sklearn_crocs.baselines import DTC
from sklearn_crocs.nn import AcceleratedCROCSNet, CROCSNet


def test_an_ensemble_fits_one_net_per_seed_and_joins_their_embeddings():
    ensemble = Ensemble(3)
    assert ensemble.seeds(5) == [5, 6, 7] and ensemble.width(8) == 24
    fitted = ensemble.fit(lambda seed, k: f"net {k}: seed {seed}", 5)
    assert fitted == ["net 0: seed 5", "net 1: seed 6", "net 2: seed 7"]
    a, b = torch.randn(4, 8), torch.randn(4, 8)
    np.testing.assert_allclose(Ensemble.join([a]), F.normalize(a, dim=1).numpy(), rtol=1e-6)
    joined = Ensemble.join([a, b])
    # Unit rows whose cosine similarity is the mean of the two nets'.
    np.testing.assert_allclose(np.linalg.norm(joined, axis=1), 1, rtol=1e-6)
    mean = (F.normalize(a, dim=1) @ F.normalize(a, dim=1).T) / 2
    mean += (F.normalize(b, dim=1) @ F.normalize(b, dim=1).T) / 2
    np.testing.assert_allclose(joined @ joined.T, mean.numpy(), atol=1e-6)


def test_a_placement_names_the_net_class_and_its_device():
    plain = Placement("cpu")
    assert plain.net_class is CROCSNet
    assert plain.net_params == {"device": "cpu"} and plain.training_device == "cpu"
    for device_placement, device in ((True, None), (False, "cpu")):
        accelerator = SimpleNamespace(device_placement=device_placement, device="cuda:1")
        placed = Placement("cpu", accelerator)
        assert placed.net_class is AcceleratedCROCSNet
        assert placed.net_params == {"accelerator": accelerator, "device": device}
        assert placed.training_device == "cuda:1"


def test_each_clusterer_builds_its_components_from_its_parameters():
    accelerator = SimpleNamespace(device_placement=True, device="cpu")
    model = CROCSClusterer(ensemble_size=3, accelerator=accelerator)
    assert model._ensemble().size == 3 and model._placement().accelerator is accelerator
    assert DTC()._ensemble().size == 1 and DTC(device="meta")._placement().net_params == {
        "device": "meta"
    }


def test_unit_rows_survive_outputs_whose_squared_norm_overflows():
    # Finite float32 outputs beyond about 1e19: F.normalize squares them to
    # infinity and returns a zero row, an embedding without a direction.
    outputs = torch.tensor([[3e30, -4e30], [3.0, 4.0], [0.0, 0.0], [float("nan"), 1.0]])
    assert F.normalize(outputs, dim=1)[0].abs().max() == 0
    rows = unit_rows(outputs)
    np.testing.assert_allclose(rows[:2].numpy(), [[0.6, -0.8], [0.6, 0.8]], rtol=1e-6)
    assert rows[2].abs().max() == 0  # no direction to give
    assert torch.isnan(rows[3]).all()  # left for the finiteness checks
    joined = Ensemble.join([outputs[:2], outputs[:2] * 1e-3])
    np.testing.assert_allclose(np.linalg.norm(joined, axis=1), 1, rtol=1e-6)
