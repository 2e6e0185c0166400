"""CROCSClusterer with its defaults learns on real 12-lead ECGs: the bundled PTB-XL sample.

One default fit on the training patients of split 0 of the accuracy benchmark
(``benchmarks/bench_accuracy.py``), scored on the held-out patients. The
floors are well below what the defaults reach there (see the user guide's
"Defaults" page) and well above what a model that learned nothing scores,
the majority predictor and random retrieval, which the same tables report.
"""

import pytest

from sklearn_crocs import CROCSClusterer
from sklearn_crocs.datasets import load_ptbxl_sample_frames
from sklearn_crocs.metrics import evaluate_prototypes

# A full default fit (40 epochs) on the bundled PTB-XL sample.
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def result():
    data = load_ptbxl_sample_frames(random_state=0)
    model = CROCSClusterer(random_state=0).fit(
        data.X_train, data.y_train, groups=data.groups_train
    )
    return evaluate_prototypes(model, data.X_test, data.y_test, k=(1, 10), decimals=None)


def test_clustering_beats_the_majority_predictor(result):
    table = result.clustering
    majority = table.loc["Majority"]
    for method in ("CP CROCS", "TP CROCS"):
        scores = table.loc[method]
        assert scores["class", "Acc"] >= majority["class", "Acc"] + 20
        assert scores["class", "AMI"] >= 25
        assert scores["sex", "Acc"] >= majority["sex", "Acc"] + 5
        assert scores["age", "Acc"] >= majority["age", "Acc"] + 5
        assert scores["combination", "Acc"] >= 2 * majority["combination", "Acc"]


def test_retrieval_beats_random_retrieval(result):
    table = result.retrieval
    for method in ("CP CROCS", "TP CROCS"):
        assert table.loc[method, (10, "=3")] >= table.loc["Random", (10, "=3")] + 15
        assert table.loc[method, (1, ">=2")] >= table.loc["Random", (1, ">=2")] + 15
