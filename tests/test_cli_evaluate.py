"""``sklearn-crocs evaluate``: fit and score on held-out patients in one command, and the
query of score's retrieval figure (issue 58, item 7)."""

import numpy as np
import pandas as pd
import pytest
from test_cli import run

from sklearn_crocs.datasets import load_ludb

FAST = ["--encoder", "cnn", "--embedding-dim", "8", "--max-epochs", "1"]
FAST += ["--working-rate", "100", "--random-state", "0", "--quiet"]


@pytest.fixture(scope="module")
def ludb(tmp_path_factory):
    """A folder with the bundled LUDB records as an .npz and their labels (rhythm, sex)."""
    folder = tmp_path_factory.mktemp("evaluate")
    data = load_ludb()
    ids = np.array([f"L{name}" for name in data.record_names])
    np.savez(folder / "two.npz", X=data.data[:, :2], record_ids=ids, lead_names=["I", "II"])
    data.attributes[["rhythm", "sex"]].to_csv(folder / "labels.csv", index=False)
    return folder


def evaluate(folder, out, *split):
    argv = ["evaluate", folder / "two.npz", "--sampling-rate", 500, "--labels"]
    argv += [folder / "labels.csv", "--attributes", "rhythm,sex", "--out-dir", out]
    return run(*argv, *split, *FAST)


def test_evaluate_holds_out_patients(ludb, tmp_path):
    status, out, err = evaluate(ludb, tmp_path / "out", "--test-size", "0.4")
    assert status == 0, err
    written = {p.name for p in (tmp_path / "out").iterdir()}
    assert written == {"split.csv", "clustering.csv", "retrieval.csv", "per_class.csv",
                       "confusion.png", "retrieval.png"}  # fmt: skip
    split = pd.read_csv(tmp_path / "out" / "split.csv")
    parts = split.groupby("patient")["part"].nunique()
    assert (parts == 1).all()  # no patient in both parts
    assert set(split["part"]) == {"train", "test"}
    held_out = split["part"] == "test"
    assert round(held_out.sum() / len(split), 1) == 0.4
    per_class = pd.read_csv(tmp_path / "out" / "per_class.csv")
    labels = pd.read_csv(ludb / "labels.csv")
    assert sorted(per_class["rhythm"]) == sorted(labels["rhythm"][held_out].unique())
    clustering = pd.read_csv(tmp_path / "out" / "clustering.csv", header=[0, 1])
    assert clustering.iloc[:, 1].tolist() == ["CP CROCS", "TP CROCS", "Majority"]
    assert ("rhythm", "BAcc") in clustering.columns
    assert "The majority row: each attribute's most frequent value among the training" in out
    # Its outputs are not replaced without --force.
    status, _, err = evaluate(ludb, tmp_path / "out", "--test-size", "0.4")
    assert status == 1 and "pass --force" in err


def test_evaluate_cross_validates(ludb, tmp_path):
    status, _, err = evaluate(ludb, tmp_path / "out", "--cv", "3")
    assert status == 0, err
    clustering = pd.read_csv(tmp_path / "out" / "clustering.csv", header=[0, 1])
    folds = clustering.iloc[:, 0].astype(str)
    assert folds.unique().tolist() == ["1", "2", "3", "mean (std)"]
    assert (folds == "mean (std)").sum() == 3  # CP CROCS, TP CROCS, Majority
    split = pd.read_csv(tmp_path / "out" / "split.csv")
    assert sorted(split["part"].unique()) == ["fold 1", "fold 2", "fold 3"]
    assert (split.groupby("patient")["part"].nunique() == 1).all()
    status, _, err = evaluate(ludb, tmp_path / "other", "--cv", "1")
    assert status == 1 and "--cv needs at least 2 folds" in err


def test_score_query_chooses_the_retrieval_figure(ludb, tmp_path, monkeypatch):
    model = tmp_path / "model"
    argv = ["fit", ludb / "two.npz", "--sampling-rate", 500, "--labels", ludb / "labels.csv"]
    status, _, err = run(*argv, "--attributes", "rhythm,sex", "--model", model, *FAST)
    assert status == 0, err
    from sklearn_crocs.plotting import RetrievalDisplay

    queries = []
    original = RetrievalDisplay.from_estimator.__func__

    def spy(cls, *args, **kwargs):
        queries.append(kwargs.get("query"))
        return original(cls, *args, **kwargs)

    monkeypatch.setattr(RetrievalDisplay, "from_estimator", classmethod(spy))
    argv = ["score", ludb / "two.npz", "--sampling-rate", 500, "--labels", ludb / "labels.csv"]
    argv += ["--model", model, "--quiet"]
    status, _, err = run(*argv, "--out-dir", tmp_path / "a", "--query", "rhythm=SR")
    assert status == 0, err
    assert queries[-1]["rhythm"] == "SR" and set(queries[-1]) == {"rhythm", "sex"}
    status, _, err = run(*argv, "--out-dir", tmp_path / "d", "--query", "rhythm=SB,sex=F")
    assert status == 0, err
    assert queries[-1] == {"rhythm": "SB", "sex": "F"}
    # By default, the prototype of most training ECGs: SR in LUDB.
    status, _, err = run(*argv, "--out-dir", tmp_path / "b")
    assert status == 0, err
    assert queries[-1]["rhythm"] == "SR"
    status, _, err = run(*argv, "--out-dir", tmp_path / "c", "--query", "rhythm=XX")
    assert status == 1 and "not a value of 'rhythm'" in err


def test_age_groups_are_learned_from_the_training_records_only():
    from sklearn_crocs.cli._commands import bin_ages_of

    y = pd.DataFrame({"age": [20.0, 30, 40, 50, 60, 70, 80, 90], "sex": ["F", "M"] * 4})
    train = np.arange(4)  # the young ones
    binned, groups = bin_ages_of(y, train, 2)
    assert groups["age"]["edges"] == [35.0]  # the median of 20-50, not of all
    assert binned["age"].tolist() == ["<=34", "<=34", ">=35", ">=35"] + [">=35"] * 4
    assert y["age"].dtype == float  # the years are left as they are
