"""Shared helpers of the displays: class colours and attribute labels."""

import numpy as np
import pytest
from matplotlib.colors import same_color

from sklearn_crocs.plotting._base import class_colors, format_attribute
from sklearn_crocs.plotting._retrieval import MATCH_COLOR, MISMATCH_COLOR


@pytest.mark.parametrize("n_classes", [2, 4, 8, 9, 16])
def test_class_colors_are_distinct_and_never_match_or_mismatch(n_classes):
    colors = list(class_colors(range(n_classes)).values())
    assert len({tuple(c) for c in colors}) == n_classes
    for color in colors:
        assert not same_color(color, MATCH_COLOR)
        assert not same_color(color, MISMATCH_COLOR)


@pytest.mark.parametrize(
    ("name", "value", "label"),
    [
        ("age", "<=37", "age <= 37"),
        ("age", ">=69", "age >= 69"),
        ("age", "<44.5", "age < 44.5"),
        ("age", "38-52", "age = 38-52"),
        ("age", "[44, 57)", "age in [44, 57)"),
        ("sex", np.str_("F"), "sex = F"),
        ("class", "NORM", "class = NORM"),
    ],
)
def test_format_attribute(name, value, label):
    assert format_attribute(name, value) == label
