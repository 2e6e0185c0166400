"""AMI and P@K scorers in cross_validate and GridSearchCV, with 2-D y, DataFrames and Pipelines."""

import math

import numpy as np
import pandas as pd
import pytest
from sklearn.frozen import FrozenEstimator
from sklearn.model_selection import GridSearchCV, GroupKFold, cross_validate
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import FunctionTransformer
from sklearn.utils._param_validation import InvalidParameterError

from sklearn_crocs import CROCSClusterer, PrototypeRetriever
from sklearn_crocs.metrics import (
    attribute_ami_score,
    make_ami_scorer,
    make_precision_at_k_scorer,
    precision_at_k,
)

FAST = {"embedding_dim": 16, "max_epochs": 3, "lr": 3e-3, "batch_size": 32}


def _model(**params):
    return CROCSClusterer(**{**FAST, "validation_fraction": None, "random_state": 0, **params})


@pytest.fixture(scope="module")
def split(synthetic):
    """A model fitted on two thirds of the patients, and the other third."""
    X, y, groups = synthetic
    test = groups % 3 == 0
    model = _model().fit(X[~test], y[~test])
    return model, X[test], y[test].reset_index(drop=True)


@pytest.fixture(scope="module")
def fitted(split):
    return split[0]


def test_ami_scorer_equals_the_metric(split):
    fitted, X_test, y_test = split
    predicted = fitted.predict(X_test)
    for attribute in ("rhythm", 1, "combination"):
        expected = attribute_ami_score(y_test, predicted, attribute=attribute)
        assert make_ami_scorer(attribute=attribute)(fitted, X_test, y_test) == expected
    per_attribute = attribute_ami_score(y_test, predicted)
    assert make_ami_scorer(attribute="mean")(fitted, X_test, y_test) == pytest.approx(
        per_attribute.drop("combination").mean()
    )
    assert make_ami_scorer()(fitted, X_test, y_test) == per_attribute["combination"]


@pytest.mark.parametrize("prototypes", ["learned", "mean"])
@pytest.mark.parametrize("min_matches", [1, 2, None])
def test_precision_scorer_equals_retriever_and_metric(split, prototypes, min_matches):
    fitted, X_test, y_test = split
    retriever = PrototypeRetriever(FrozenEstimator(fitted), n_neighbors=5, prototypes=prototypes)
    indices = retriever.fit(X_test).query(return_distance=False)
    expected = precision_at_k(y_test, indices, retriever.query_attributes_, min_matches=min_matches)
    scorer = make_precision_at_k_scorer(k=5, min_matches=min_matches, prototypes=prototypes)
    assert 0 <= expected <= 1
    assert scorer(fitted, X_test, y_test) == expected
    # The same with y as a 2-D array (attributes in the fitted order).
    assert scorer(fitted, X_test, y_test.to_numpy()) == expected


def test_precision_scorer_no_match_rule(fitted, synthetic):
    X, y, _ = synthetic
    # Only SR ECGs in the scored set: AFIB and SB prototypes have no exact match.
    keep = (y["rhythm"] == "SR").to_numpy()
    X_sr, y_sr = X[keep], y[keep]
    with pytest.warns(UserWarning, match="excluded 8 of 12 queries"):
        exclude = make_precision_at_k_scorer(k=3, no_match="exclude")(fitted, X_sr, y_sr)
    zero = make_precision_at_k_scorer(k=3)(fitted, X_sr, y_sr)  # Eq. 5 as written
    assert zero == pytest.approx(exclude * 4 / 12)  # 4 of the 12 prototypes are SR


def test_scorers_in_cross_validate_with_2d_y_and_pipeline(synthetic):
    X, y, groups = synthetic
    scoring = {
        "ami": make_ami_scorer(attribute=0),
        "p_at_5": make_precision_at_k_scorer(k=5, min_matches=2),
    }
    codes = np.column_stack([pd.factorize(y[c], sort=True)[0] for c in y.columns])
    pipeline = make_pipeline(FunctionTransformer(np.negative), _model(max_epochs=2))
    for estimator, target in ((_model(max_epochs=2), codes), (pipeline, y)):
        result = cross_validate(
            estimator, X, target, groups=groups, cv=GroupKFold(n_splits=2), scoring=scoring
        )
        assert result["test_ami"].shape == (2,)
        assert np.all((result["test_p_at_5"] >= 0) & (result["test_p_at_5"] <= 1))
        assert np.all(np.isfinite(result["test_ami"]))


def test_grid_search_on_ludb_with_groups(ludb_frames):
    X, y, groups = ludb_frames
    search = GridSearchCV(
        CROCSClusterer(
            embedding_dim=16,
            max_epochs=2,
            lr=3e-3,
            batch_size=64,
            validation_fraction=None,
            random_state=0,
        ),
        param_grid={"tau_w": [1.0, math.inf], "beta": [0.0, 0.2]},
        scoring={
            "ami": make_ami_scorer(attribute="rhythm"),
            "p_at_10": make_precision_at_k_scorer(k=10, min_matches=1),
        },
        refit="ami",
        cv=GroupKFold(n_splits=2),
    )
    search.fit(X, y, groups=groups)
    results = search.cv_results_
    assert len(results["params"]) == 4
    for name in ("ami", "p_at_10"):
        assert np.isfinite(results[f"mean_test_{name}"]).all()
    assert np.all(results["mean_test_p_at_10"] <= 1)
    assert search.best_index_ == int(np.argmax(results["mean_test_ami"]))
    assert search.best_score_ == results["mean_test_ami"][search.best_index_]
    assert search.best_estimator_.predict(X[:2]).shape == (2, 3)
    for train, test in GroupKFold(n_splits=2).split(X, y, groups):
        assert not set(groups[train]) & set(groups[test])


def test_scorer_repr_and_bad_input(fitted, synthetic):
    X, y, _ = synthetic
    assert repr(make_ami_scorer(attribute="sex")) == "make_ami_scorer(attribute='sex')"
    assert repr(make_precision_at_k_scorer(k=1)) == (
        "make_precision_at_k_scorer(k=1, min_matches=None, prototypes='learned', no_match='zero')"
    )
    with pytest.raises(ValueError, match=r"k=10\) cannot score 4 ECG\(s\)"):
        make_precision_at_k_scorer(k=10)(fitted, X[:4], y[:4])
    with pytest.raises(InvalidParameterError):
        make_precision_at_k_scorer(k=0)
    with pytest.raises(InvalidParameterError):
        make_precision_at_k_scorer(prototypes="median")
    with pytest.raises(ValueError, match="attribute='age' is not one of"):
        make_ami_scorer(attribute="age")(fitted, X[:8], y[:8])
    with pytest.raises(TypeError, match="must be a CROCSClusterer"):
        make_precision_at_k_scorer(k=1)(make_pipeline(FunctionTransformer()), X[:4], y[:4])
