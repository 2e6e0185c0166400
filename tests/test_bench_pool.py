"""benchmarks/bench_pool.py's pseudo-labels for self-training (the benchmark is not run here)."""

import numpy as np
import pandas as pd
import pytest
from conftest import load_benchmark


@pytest.fixture(scope="module")
def bench_pool():
    yield from load_benchmark("bench_pool")


class Teacher:
    """Embeds a frame as itself; four prototypes on the axes, one per (class, sex)."""

    attributes = np.array([["NORM", "F"], ["NORM", "M"], ["ABN", "F"], ["ABN", "M"]], dtype=object)

    def transform(self, X):
        return np.asarray(X, dtype=float)

    def get_prototypes(self, kind):
        assert kind == "learned"
        return np.eye(4), self.attributes


def test_pseudo_labels_keep_the_class_and_the_surest_other_attributes(bench_pool):
    rng = np.random.default_rng(0)
    n_records = 40
    nearest = rng.integers(0, 4, n_records)
    lead = rng.uniform(0.05, 1.0, n_records)  # how far the nearest prototype leads the others
    records = rng.uniform(0, 0.01, (n_records, 4))
    records[np.arange(n_records), nearest] += lead
    # two frames per record, consecutive, whose mean is the record's embedding
    frames = np.repeat(records, 2, axis=0) + np.tile([[0.001], [-0.001]], (n_records, 1))
    y = pd.DataFrame({"class": ["NORM"] * 2, "sex": ["F", "M"]})
    pool = bench_pool.pseudo_labels(Teacher(), frames, y, keep=0.25)
    assert list(pool.columns) == ["class", "sex"] and len(pool) == 2 * n_records
    expected = Teacher.attributes[nearest]
    # the class of every record, both frames alike
    np.testing.assert_array_equal(pool["class"].to_numpy(), np.repeat(expected[:, 0], 2))
    # the sex of the quarter of the records where the nearest prototype leads the most
    sure = lead >= np.quantile(lead, 0.75)
    kept = pool["sex"].notna().to_numpy()
    np.testing.assert_array_equal(kept, np.repeat(sure, 2))
    np.testing.assert_array_equal(pool["sex"].to_numpy()[kept], np.repeat(expected[sure, 1], 2))
    everything = bench_pool.pseudo_labels(Teacher(), frames, y, keep=1.0)
    assert everything["sex"].notna().all()


def test_linear_probe_reads_what_the_embeddings_hold(bench_pool):
    """An embedding that holds sex (not age) is read as such from the labelled frames alone."""
    rng = np.random.default_rng(0)
    n = 400
    y = pd.DataFrame({"class": rng.choice(["NORM", "ABN"], n), "sex": rng.choice(["F", "M"], n),
                      "age": rng.choice(["Q1", "Q2", "Q3", "Q4"], n)})  # fmt: skip
    X = np.column_stack([(y["sex"] == "M") + 0.1 * rng.normal(size=n), rng.normal(size=(n, 3))])
    groups = np.arange(n) // 2
    labelled = groups < 50  # the probe sees these 100 frames only

    class Model:
        def transform(self, X):
            return X

    row = bench_pool.linear_probe(Model(), 1.5, (X, y, groups), labelled, (X, y))
    assert row[("time", "s")] == 1.5
    assert row[("sex", "probe Acc")] == 100.0
    assert row[("age", "probe Acc")] < 40 and row[("class", "probe Acc")] < 65  # chance: 25, 50


def test_masked_trunk_learns_to_restore_hidden_blocks_and_starts_an_encoder(bench_pool):
    import torch

    from sklearn_crocs.nn import ResNet1dEncoder

    t = np.arange(500) / 100
    rng = np.random.default_rng(0)
    phases = rng.uniform(0, 2 * np.pi, (64, 3, 1))
    X = np.sin(2 * np.pi * 1.3 * t + phases).astype(np.float32)  # 3 leads, 5 s at 100 Hz
    pretrainer = bench_pool.MaskedTrunk(3, 500, seed=0).fit(X, epochs=6, batch_size=16)
    assert pretrainer.reconstruct(torch.as_tensor(X[:2])).shape == (2, 3, 500)
    assert pretrainer.loss_curve_[-1] < 0.5 * pretrainer.loss_curve_[0]
    features = pretrainer.transform(X)
    assert features.shape == (64, 256) and np.isfinite(features).all()

    class Net:
        module_ = ResNet1dEncoder(3, 500, 8, fast_path=False).eval()

    bench_pool.StartFrom(pretrainer.trunk_state()).on_train_begin(Net())
    with torch.no_grad():
        trunk = Net.module_.blocks(Net.module_.stem(torch.as_tensor(X))).mean(-1).numpy()
    np.testing.assert_allclose(trunk, features, atol=1e-5)
    with pytest.raises(ValueError, match="not an encoder trunk"):
        bench_pool.StartFrom({"decoder.weight": torch.zeros(1)}).on_train_begin(Net())
