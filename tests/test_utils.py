"""The package's shared private helpers."""

import numpy as np
import pytest
import torch
from sklearn.decomposition import PCA
from sklearn.frozen import FrozenEstimator
from sklearn.pipeline import make_pipeline

from sklearn_crocs import CROCSClusterer
from sklearn_crocs._utils import (
    _atomic_path,
    _crocs_step,
    _device_problem,
    _nearest,
    _python_value,
)
from sklearn_crocs.preprocessing import FrameNormalizer


def test_python_value():
    assert type(_python_value(np.int64(3))) is int
    assert type(_python_value(np.str_("F"))) is str
    assert _python_value(("F", 1)) == ("F", 1)


def test_crocs_step_finds_the_clusterer_in_its_wrappings():
    crocs = CROCSClusterer()
    for wrapped in (
        crocs,
        FrozenEstimator(crocs),
        make_pipeline(FrameNormalizer(), crocs),
        FrozenEstimator(make_pipeline(FrameNormalizer(), crocs)),
    ):
        assert _crocs_step(wrapped) is crocs
    with pytest.raises(TypeError, match="must be a CROCSClusterer.*got PCA"):
        _crocs_step(make_pipeline(crocs, PCA()))


def test_nearest_prototype_and_zero_embeddings():
    prototypes = np.eye(3, dtype=np.float32)
    embeddings = np.array([[0.1, 0.9, 0], [0, 0, 0], [0.8, 0, 0.6]], dtype=np.float32)
    # The all-zero embedding gets the prototype with the most training ECGs.
    assert _nearest(embeddings, prototypes, counts=[5, 1, 9]).tolist() == [1, 2, 0]


def test_device_problem():
    assert _device_problem("cpu") is None
    assert _device_problem(torch.device("cpu")) is None
    assert _device_problem("gpu").startswith("it is not a torch device")
    if not torch.cuda.is_available():
        assert "torch.cuda.is_available() is False" in _device_problem("cuda")
    else:
        count = torch.cuda.device_count()
        assert _device_problem(f"cuda:{count}") == f"only {count} cuda device(s) are visible"


def test_atomic_path_replaces_only_on_success(tmp_path):
    path = tmp_path / "sub" / "file.txt"
    with _atomic_path(path) as tmp:
        assert tmp.parent == path.parent and not path.exists()
        tmp.write_text("new")
    assert path.read_text() == "new"

    def write_half():
        with _atomic_path(path, replace=True) as tmp:
            tmp.write_text("half")
            raise RuntimeError("interrupted")

    with pytest.raises(RuntimeError, match="interrupted"):
        write_half()
    assert path.read_text() == "new"
    assert sorted(p.name for p in path.parent.iterdir()) == ["file.txt"]
