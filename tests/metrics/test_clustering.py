"""Clustering metrics: accuracy and AMI per attribute and for the combination (paper, Table 1)."""

import numpy as np
import pandas as pd
import pytest
from sklearn.metrics import accuracy_score, adjusted_mutual_info_score

from sklearn_crocs.metrics import (
    attribute_accuracy_score,
    attribute_ami_score,
    clustering_report,
)

rng = np.random.RandomState(0)
Y_TRUE = pd.DataFrame(
    {"rhythm": rng.choice(["AFIB", "SB", "SR"], 40), "sex": rng.choice(["F", "M"], 40)}
)
Y_PRED = Y_TRUE.assign(
    rhythm=np.where(rng.rand(40) < 0.3, "SR", Y_TRUE["rhythm"]),
    sex=np.where(rng.rand(40) < 0.2, "F", Y_TRUE["sex"]),
)


def _combination(frame):
    return frame["rhythm"] + "/" + frame["sex"]


@pytest.mark.parametrize(
    ("function", "metric", "name"),
    [
        (attribute_accuracy_score, accuracy_score, "accuracy"),
        (attribute_ami_score, adjusted_mutual_info_score, "ami"),
    ],
)
def test_scores_per_attribute_and_combination_equal_scikit_learn(function, metric, name):
    scores = function(Y_TRUE, Y_PRED)
    assert scores.name == name
    assert scores.index.tolist() == ["rhythm", "sex", "combination"]
    for attribute in ("rhythm", "sex"):
        expected = metric(Y_TRUE[attribute], Y_PRED[attribute])
        assert scores[attribute] == pytest.approx(expected)
        assert function(Y_TRUE, Y_PRED, attribute=attribute) == pytest.approx(expected)
    expected = metric(_combination(Y_TRUE), _combination(Y_PRED))
    assert scores["combination"] == pytest.approx(expected)
    assert function(Y_TRUE, Y_PRED, attribute="combination") == pytest.approx(expected)
    assert function(Y_TRUE, Y_PRED, attribute=1) == pytest.approx(scores["sex"])


def test_combination_needs_every_attribute_right():
    y_true = [["SR", "F"], ["SR", "M"], ["SB", "F"]]
    y_pred = [["SR", "F"], ["SR", "F"], ["SR", "F"]]
    scores = attribute_accuracy_score(y_true, y_pred)
    assert scores.to_dict() == pytest.approx(
        {"attribute_0": 2 / 3, "attribute_1": 2 / 3, "combination": 1 / 3}
    )


def test_ami_ignores_the_names_of_the_values():
    relabelled = Y_PRED.replace({"AFIB": "x", "SB": "y", "SR": "z", "F": "M", "M": "F"})
    pd.testing.assert_series_equal(
        attribute_ami_score(Y_TRUE, Y_PRED), attribute_ami_score(Y_TRUE, relabelled)
    )
    assert attribute_accuracy_score(Y_TRUE, relabelled)["sex"] < 0.5


def test_values_of_any_hashable_type_and_positional_predictions():
    y_true = pd.DataFrame({"class": ["MI", "NORM", "MI", "NORM"], "age": [60, 70, 60, 70]})
    # An array y_pred takes y_true's column names; numbers and strings mix across columns.
    y_pred = np.array([["MI", 60], ["MI", 70], ["MI", 60], ["NORM", 70]], dtype=object)
    scores = attribute_accuracy_score(y_true, y_pred)
    assert scores.to_dict() == {"class": 0.75, "age": 1.0, "combination": 0.75}
    one = attribute_accuracy_score(y_true["class"].to_numpy(), y_pred[:, 0])
    assert one.to_dict() == {"attribute_0": 0.75, "combination": 0.75}


@pytest.mark.parametrize(
    ("y_pred", "attribute", "message"),
    [
        (Y_PRED[:-1], "all", "different numbers of samples: 40 and 39"),
        (Y_PRED.rename(columns={"sex": "gender"}), "all", r"y_pred has \['rhythm', 'gender'\]"),
        (Y_PRED, 2, r"attribute=2 is out of range for 2 attribute\(s\)"),
        (Y_PRED, "age", r"attribute='age' is not one of \['rhythm', 'sex'\] or 'combination'"),
    ],
    ids=["length", "columns", "position", "name"],
)
def test_bad_input(y_pred, attribute, message):
    with pytest.raises(ValueError, match=message):
        attribute_accuracy_score(Y_TRUE, y_pred, attribute=attribute)
    with pytest.raises(ValueError, match=message):
        attribute_ami_score(Y_TRUE, y_pred, attribute=attribute)


def test_empty_input():
    with pytest.raises(ValueError, match="y_true and y_pred are empty"):
        attribute_accuracy_score(Y_TRUE[:0], Y_PRED[:0])


def test_report_has_one_row_per_method_and_both_metrics_per_attribute():
    report = clustering_report(Y_TRUE, {"model": Y_PRED, "perfect": Y_TRUE}, decimals=None)
    assert report.index.tolist() == ["model", "perfect"]
    assert report.columns.names == ["attribute", "metric"]
    assert report.columns.tolist() == [
        (attribute, metric)
        for attribute in ("rhythm", "sex", "combination")
        for metric in ("Acc", "AMI")
    ]
    accuracy = attribute_accuracy_score(Y_TRUE, Y_PRED)
    ami = attribute_ami_score(Y_TRUE, Y_PRED)
    for attribute in accuracy.index:
        assert report.loc["model", (attribute, "Acc")] == pytest.approx(100 * accuracy[attribute])
        assert report.loc["model", (attribute, "AMI")] == pytest.approx(100 * ami[attribute])
    assert (report.loc["perfect"] == 100).all()


def test_report_units_rounding_and_a_single_assignment():
    raw = clustering_report(Y_TRUE, Y_PRED, percent=False, decimals=None)
    assert raw.index.tolist() == ["model"]
    assert raw.loc["model", ("sex", "Acc")] == attribute_accuracy_score(Y_TRUE, Y_PRED)["sex"]
    rounded = clustering_report(Y_TRUE, Y_PRED)
    pd.testing.assert_frame_equal(rounded, (100 * raw).round(1))
    with pytest.raises(ValueError, match="predictions is empty"):
        clustering_report(Y_TRUE, {})
