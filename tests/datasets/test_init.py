"""The public names of sklearn_crocs.datasets."""

import warnings

import pytest

import sklearn_crocs.datasets as datasets


def test_public_names_import_without_warnings():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for name in datasets.__all__:
            getattr(datasets, name)
    with pytest.raises(AttributeError, match="has no attribute 'load_nothing'"):
        datasets.load_nothing  # noqa: B018
