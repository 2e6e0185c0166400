"""Input that used to be accepted silently and give a wrong model: now an error or a warning.

Each case names the fix: ``continuous=`` for a measurement given as is,
patient ids for missing groups, fewer age groups than distinct ages, a
device that torch can use.
"""

import warnings

import numpy as np
import pandas as pd
import pytest
import torch
from conftest import make_synthetic_ecgs
from test_cli import TINY, error_line, run
from test_common import FAST_CNN

from sklearn_crocs import CROCSClusterer
from sklearn_crocs.preprocessing import AgeGroupEncoder


def _model(**params):
    defaults = {"encoder": "cnn", "encoder_params": FAST_CNN, "embedding_dim": 4,
                "max_epochs": 1, "validation_fraction": None, "random_state": 0}  # fmt: skip
    return CROCSClusterer(**{**defaults, **params})


@pytest.fixture(scope="module")
def data():
    X, y, groups = make_synthetic_ecgs(n_patients=40, frames_per_patient=1, length=100, seed=2)
    ages = np.random.RandomState(0).permutation(np.arange(30, 70)).astype(float)
    return X, y.assign(age=ages), groups


@pytest.mark.bad_input(
    "Fit", "numeric attribute with many distinct values (age given as is)", "UserWarning"
)
@pytest.mark.parametrize("dtype", [float, int])
def test_numeric_attribute_with_many_values_warns(data, dtype):
    X, y, _ = data
    y = y[["rhythm", "age"]].astype({"age": dtype})
    with pytest.warns(
        UserWarning, match=r"'age' is numeric with 40 distinct .*continuous=\{'age': 4\}"
    ):
        model = _model().fit(X, y)
    assert len(model.categories_[1]) == 40  # the fit still does what was asked
    # Binned, or declared categorical, it is silent.
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        _model(continuous={"age": 4}).fit(X, y)
        _model().fit(X, y.astype({"age": "category"}))
        _model().fit(X, y.assign(age=y["age"] // 20))  # a few numeric codes


@pytest.mark.bad_input("Fit", "missing (NaN or None) patient groups", "ValueError")
@pytest.mark.parametrize("missing", [np.nan, None])
def test_missing_groups_are_refused(data, missing):
    X, y, groups = data
    groups = groups.astype(object)
    groups[[3, 7]] = missing
    with pytest.raises(ValueError, match=r"groups holds 2 missing patient id\(s\) .*rows \[3, 7\]"):
        _model(validation_fraction=0.2).fit(X, y[["rhythm", "sex"]], groups=groups)


@pytest.mark.bad_input("Preprocessing", "more age groups than distinct ages", "ValueError")
@pytest.mark.parametrize("n_groups", [13, 50])
def test_impossible_number_of_age_groups(n_groups):
    ages = np.arange(40, 52).reshape(-1, 1)  # 12 distinct ages
    ages[-1] = ages[-2]  # 11 distinct
    with pytest.raises(ValueError, match=rf"n_groups={n_groups} .*Pass n_groups=11 or fewer"):
        AgeGroupEncoder(n_groups=n_groups).fit(ages)
    # Possible, but the tie merges two quantile groups: said, with the count made.
    with pytest.warns(UserWarning, match="made 10 age groups, not n_groups=11.*n_groups=10"):
        assert len(AgeGroupEncoder(n_groups=11).fit(ages).labels_) == 10


@pytest.mark.bad_input("Command line", "--age-groups above the number of distinct ages", "error")
def test_cli_age_groups_above_the_distinct_ages(shared_data, tmp_path):
    folder = shared_data / "cinc2021"
    argv = ["fit", folder, "--attributes", "sex,age", "--model", tmp_path / "m", *TINY]
    status, _, err = run(*argv, "--age-groups", 50, "--quiet")
    assert status == 1
    assert "--age-groups 50: the " in error_line(err)
    assert "Pass --age-groups" in error_line(err)
    assert not (tmp_path / "m").exists()


@pytest.mark.bad_input("Command line", "--device that torch cannot use", "error")
@pytest.mark.parametrize("command", ["fit", "predict", "search"])
def test_cli_device_check(shared_data, tmp_path, monkeypatch, command):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    folder = shared_data / "cinc2021"
    extra = {
        "fit": ["--attributes", "sex,age", *TINY],
        "predict": ["--out", tmp_path / "p"],
        "search": ["--out", tmp_path / "s"],
    }
    argv = [command, folder, "--model", tmp_path / "m", "--device", "cuda", *extra[command]]
    status, _, err = run(*argv)
    assert status == 1
    assert "--device cuda: torch.cuda.is_available() is False" in error_line(err)
    assert "Pass --device cpu" in error_line(err)


def test_attribute_dataframe_is_unchanged(data):
    # The warning reads y; it does not convert it.
    X, y, _ = data
    before = y.copy()
    with pytest.warns(UserWarning, match="distinct values"):
        _model().fit(X, y[["rhythm", "age"]])
    pd.testing.assert_frame_equal(y, before)
