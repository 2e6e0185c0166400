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
