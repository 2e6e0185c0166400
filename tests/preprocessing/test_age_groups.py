"""Age groups: quantiles of the training ages."""

import pickle

import numpy as np
import pandas as pd
import pytest
from sklearn.base import clone
from sklearn.compose import ColumnTransformer

from sklearn_crocs.datasets import load_ludb
from sklearn_crocs.preprocessing import AgeGroupEncoder


def test_age_groups_are_training_quartiles():
    ages = np.array([[20], [30], [40], [50], [60], [70], [80], [90]])
    enc = AgeGroupEncoder().fit(ages)
    # Quartiles of the 8 training ages (averaged inverted CDF): 35, 55, 75.
    np.testing.assert_allclose(enc.bin_edges_, [20, 35, 55, 75, 90])
    assert enc.labels_ == ["<=34", "35-54", "55-74", ">=75"]
    out = enc.transform([[5], [34], [35], [54], [55], [75], [120]])
    assert out.dtype == object
    assert out.ravel().tolist() == ["<=34", "<=34", "35-54", "35-54", "55-74",
                                    ">=75", ">=75"]  # fmt: skip
    ordinal = AgeGroupEncoder(output="ordinal").fit(ages).transform([[34], [35], [99]])
    assert ordinal.ravel().tolist() == [0.0, 1.0, 3.0]
    # Fitted on training ages only: the edges come from the data given to fit.
    young = clone(enc).fit(ages[:4])
    assert young.labels_ == ["<=24", "25-34", "35-44", ">=45"]
    assert set(young.transform(ages[4:]).ravel()) == {">=45"}


def test_age_groups_with_fractional_ages_and_dataframes():
    ages = pd.DataFrame({"age": [20.5, 33.1, 47.9, 61.2, 75.0, 88.3]})
    enc = AgeGroupEncoder().fit(ages)
    assert enc.labels_[0].startswith("<") and enc.labels_[-1].startswith(">=")
    assert enc.labels_[1].startswith("[")
    assert enc.get_feature_names_out().tolist() == ["age"]
    assert enc.transform(ages).shape == (6, 1)


def test_age_groups_on_ludb_quartiles():
    ages = load_ludb().attributes[["age"]]
    enc = AgeGroupEncoder().fit(ages)
    labels = enc.transform(ages).ravel()
    counts = pd.Series(labels).value_counts()
    assert len(counts) == 4
    assert counts.min() >= 20  # roughly a quarter of 102 each


@pytest.mark.parametrize(
    ("params", "X", "match"),
    [
        ({}, [[1.0], [np.nan]], "NaN or infinite"),
        ({}, [[1.0, 2.0]], "single column of ages"),
        ({"output": "onehot"}, [[1.0], [2.0]], "output must be"),
        ({"n_groups": 1}, [[1.0], [2.0]], "n_groups must be an int >= 2"),
    ],
)
def test_age_group_errors(params, X, match):
    with pytest.raises(ValueError, match=match):
        AgeGroupEncoder(**params).fit(X)


def test_age_group_encoder_in_a_column_transformer():
    """The usual use: encode the age column of the attributes DataFrame."""
    attrs = load_ludb().attributes
    ct = ColumnTransformer([("age", AgeGroupEncoder(), ["age"])], remainder="passthrough")
    out = ct.fit_transform(attrs)
    assert out.shape == (102, 3)
    assert set(out[:, 0]) == set(ct.named_transformers_["age"].labels_)
    enc = ct.named_transformers_["age"]
    assert enc.get_params() == {"n_groups": 4, "output": "label"}
    restored = pickle.loads(pickle.dumps(enc))
    np.testing.assert_array_equal(restored.transform(attrs[["age"]]), enc.transform(attrs[["age"]]))
    with pytest.raises(Exception, match="not fitted"):
        AgeGroupEncoder().transform(attrs[["age"]])
