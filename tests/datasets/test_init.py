"""The public names of sklearn_crocs.datasets, and the ones that moved to preprocessing."""

import warnings

import pytest

import sklearn_crocs.datasets as datasets
import sklearn_crocs.preprocessing as preprocessing

MOVED = [
    "AgeGroupEncoder",
    "FrameNormalizer",
    "leads_as_instances",
    "make_frames",
    "normalize_frames",
    "resample_signals",
]


@pytest.mark.parametrize("name", MOVED)
def test_moved_names_still_import_with_a_future_warning(name):
    message = (
        rf"sklearn_crocs\.datasets\.{name} moved to sklearn_crocs\.preprocessing\.{name}"
        r".*will stop working in sklearn-crocs 0\.3"
    )
    with pytest.warns(FutureWarning, match=message) as record:
        moved = getattr(datasets, name)
    assert moved is getattr(preprocessing, name)
    assert record[0].filename == __file__  # points at the importing code
    with pytest.warns(FutureWarning, match=message):
        exec(f"from sklearn_crocs.datasets import {name}", {})
    assert name not in datasets.__all__ and name in preprocessing.__all__


def test_public_names_import_without_warnings():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for name in datasets.__all__:
            getattr(datasets, name)
    with pytest.raises(AttributeError, match="has no attribute 'load_nothing'"):
        datasets.load_nothing  # noqa: B018
