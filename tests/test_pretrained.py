"""The model shipped with the package: its file, its record of how it was made, what it reads,
and fits that start from it (``pretrained=``)."""

import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest
import torch
from sklearn.frozen import FrozenEstimator

from sklearn_crocs import CROCSClusterer, InvalidModelFileError, pretrained_info
from sklearn_crocs._persistence._pretrained import SHIPPED, pretrained_path
from sklearn_crocs.datasets import load_ludb
from sklearn_crocs.preprocessing import SignalConditioner, make_frames

TINY = {"max_epochs": 1, "class_attribute": "rhythm", "continuous": {"age": 2}}
SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "build_pretrained.py"


@pytest.fixture(scope="module")
def shipped():
    return CROCSClusterer.from_pretrained("ptbxl")


@pytest.fixture(scope="module")
def ludb_frames():
    """The first 30 bundled LUDB records, conditioned as the shipped model's and cut
    into 5-s frames at 100 Hz, with rhythm, sex and age."""
    ludb = load_ludb()
    records = SignalConditioner(sampling_rate=ludb.fs, target_rate=100).fit_transform(
        ludb.data[:30]
    )
    y = ludb.attributes[["rhythm", "sex", "age"]].iloc[:30]
    return make_frames(records, 500, attributes=y, groups=ludb.groups[:30])


def test_the_shipped_file_is_small_and_in_the_package_data():
    path = pretrained_path("ptbxl")
    assert path.is_file() and path.stat().st_size <= 10 * 2**20
    assert set(SHIPPED) == {"ptbxl"}
    root = Path(__file__).resolve().parents[1]
    if not (root / "pyproject.toml").is_file():
        pytest.skip("pyproject.toml is not available (installed package)")
    tomllib = pytest.importorskip("tomllib")
    config = tomllib.loads((root / "pyproject.toml").read_text())
    data = config["tool"]["setuptools"]["package-data"]["sklearn_crocs"]
    assert f"{path.parent.name}/*.safetensors" in data


def test_the_recorded_recipe_is_the_scripts():
    if not SCRIPT.is_file():
        pytest.skip("scripts/ is not available (installed package)")
    spec = importlib.util.spec_from_file_location("build_pretrained", SCRIPT)
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    info = pretrained_info("ptbxl")
    # The file's JSON document holds tuples as lists: compare as JSON.
    assert info["recipe"] == json.loads(json.dumps(script.RECIPE))
    assert info["lead_names"] == script.LEAD_NAMES
    model = CROCSClusterer.from_pretrained("ptbxl")
    for name, value in script.RECIPE["params"].items():
        assert model.get_params()[name] == value, name


def test_pretrained_info_carries_the_attribution_and_counts():
    info = pretrained_info("ptbxl")
    assert info["license"] == "CC BY 4.0"
    assert "Wagner" in info["attribution"] and "CC BY 4.0" in info["attribution"]
    assert info["records"]["ptbxl-sample"] == 500
    assert info["records"]["ptbxl-more"] == 3903
    assert info["records"]["total"] == 4403
    assert isinstance(info["sklearn_crocs_version"], str)
    assert info["attribute_names"] == ["class", "sex", "age"]


def test_the_shipped_model_reads_raw_recordings_at_any_rate(shipped):
    assert shipped.attribute_names_ == ["class", "sex", "age"]
    assert [list(c) for c in shipped.categories_[:2]] == [["ABN", "NORM"], ["F", "M"]]
    assert len(shipped.categories_[2]) == 4 and len(shipped.bin_edges_["age"]) == 5
    ludb = load_ludb()
    at_500 = shipped.transform(ludb.data[:4], sampling_rate=500)
    # The same recordings at 250 Hz embed (almost) alike: the model resamples them.
    at_250 = shipped.transform(ludb.data[:4, :, ::2], sampling_rate=250)
    assert np.all(np.sum(at_500 * at_250, axis=1) > 0.9)
    # 10-s recordings are read as the mean of their two 5-s frames.
    assert at_500.shape == (4, shipped.transform(ludb.data[:1, :, :2500], sampling_rate=500)
                            .shape[1])  # fmt: skip


def test_the_shipped_model_reads_ludb_sex_above_the_majority_rate(shipped):
    # LUDB (another country and device) was never seen nor used to choose anything.
    ludb = load_ludb()
    predicted = shipped.predict(ludb.data, sampling_rate=ludb.fs)
    sex = ludb.attributes["sex"].to_numpy()
    majority = max(np.mean(sex == "M"), np.mean(sex == "F"))
    assert np.mean(predicted["sex"].to_numpy() == sex) > majority


def test_an_unknown_name_is_refused():
    with pytest.raises(ValueError, match="No shipped model is named 'ptb'; the package ships 'ptbxl'"):
        CROCSClusterer.from_pretrained("ptb")
    with pytest.raises(ValueError, match="'pretrained' parameter"):
        CROCSClusterer(pretrained="ptb").fit(np.zeros((4, 100)), [0, 1, 0, 1])


def test_a_shipped_file_that_was_altered_is_refused(tmp_path, monkeypatch):
    from sklearn_crocs._persistence import _pretrained

    data = bytearray(pretrained_path("ptbxl").read_bytes())
    data[-100] ^= 0xFF  # a byte of the last tensor
    (tmp_path / "ptbxl.safetensors").write_bytes(bytes(data))
    monkeypatch.setattr(_pretrained, "FOLDER", tmp_path)
    with pytest.raises(InvalidModelFileError, match="sha256"):
        CROCSClusterer.from_pretrained("ptbxl")


def _stem(net):
    return net.module_.stem[0].weight.detach().clone()


@pytest.mark.parametrize("start", ["ptbxl", "model", "frozen"])
def test_fine_tuning_starts_each_net_from_the_shipped_ones(shipped, ludb_frames, start):
    X, y, groups = ludb_frames
    pretrained = {"ptbxl": "ptbxl", "model": shipped, "frozen": FrozenEstimator(shipped)}[start]
    # A learning rate too small to move the weights: the fitted encoders are the start.
    model = CROCSClusterer(
        pretrained=pretrained, sampling_rate=100, class_attribute="rhythm",
        continuous={"age": 2}, max_epochs=1, lr=1e-30, ensemble_size=3, random_state=0,
    ).fit(X, y, groups=groups)  # fmt: skip
    sources = [_stem(net) for net in shipped.nets_]
    for k, net in enumerate(model.nets_):
        torch.testing.assert_close(_stem(net), sources[k % len(sources)])
    assert model.attribute_names_ == ["rhythm", "sex", "age"]
    assert isinstance(model.pretrainer_, CROCSClusterer)


def test_fine_tuning_refuses_an_encoder_of_another_rate_or_shape(shipped, ludb_frames):
    X, y, groups = ludb_frames
    with pytest.raises(ValueError, match="trained on ECGs at 100.0 Hz.*works at 50.0 Hz"):
        CROCSClusterer(
            pretrained="ptbxl", sampling_rate=100, working_rate=50, **TINY
        ).fit(X, y, groups=groups)
    with pytest.raises(ValueError, match="does not fit this one"):
        CROCSClusterer(
            pretrained=shipped, sampling_rate=100, embedding_dim=16, **TINY
        ).fit(X, y, groups=groups)
    with pytest.raises(ValueError, match="is not fitted.*FrozenEstimator"):
        CROCSClusterer(pretrained=CROCSClusterer(), sampling_rate=100, **TINY).fit(
            X, y, groups=groups
        )


def _trainable(model):
    return {name for name, p in model.net_.module_.named_parameters() if p.requires_grad}


def test_a_trained_start_freezes_the_early_layers(ludb_frames):
    X, y, groups = ludb_frames
    params = {"sampling_rate": 100, "ensemble_size": 1, **TINY}
    tuned = CROCSClusterer(pretrained="ptbxl", **params).fit(X, y, groups=groups)
    frozen = {n for n, _ in tuned.net_.module_.named_parameters()} - _trainable(tuned)
    early = ("stem.", "blocks.0.", "blocks.1.", "blocks.2.")
    assert frozen == {n for n, _ in tuned.net_.module_.named_parameters() if n.startswith(early)}
    assert "blocks.3.conv1.weight" in _trainable(tuned)
    assert tuned.net_.criterion_.prototypes.requires_grad
    shipped = CROCSClusterer.from_pretrained("ptbxl")
    torch.testing.assert_close(_stem(tuned.nets_[0]), _stem(shipped.nets_[0]))
    # From scratch, and with freeze=False, every layer trains.
    scratch = CROCSClusterer(**params).fit(X, y, groups=groups)
    unfrozen = CROCSClusterer(pretrained="ptbxl", freeze=False, **params).fit(X, y, groups=groups)
    for model in (scratch, unfrozen):
        assert _trainable(model) == {n for n, _ in model.net_.module_.named_parameters()}
    with pytest.raises(ValueError, match="freeze=True .* pretrained is None"):
        CROCSClusterer(freeze=True, **params).fit(X, y, groups=groups)
