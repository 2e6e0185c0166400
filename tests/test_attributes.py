"""AttributeCodec: the attributes y of a fit, read, encoded and decoded the same way everywhere."""

import numpy as np
import pandas as pd
import pytest

from sklearn_crocs._attributes import AttributeCodec, joint_codes

Y = pd.DataFrame(
    {
        "rhythm": ["SR", "AFIB", "SB", "SR", "AFIB", "SB"],
        "sex": ["M", "F", "F", "M", "M", "F"],
        "age": pd.Categorical(
            [">=60", "<60", ">=60", "<60", "<60", ">=60"], categories=["none", ">=60", "<60"]
        ),
    }
)


def test_fit_learns_names_categories_dtypes_and_layout():
    codec = AttributeCodec.fit(Y, len(Y))
    assert codec.names == ["rhythm", "sex", "age"]
    # Sorted, except the categorical column: its declared order, seen values only.
    assert [c.tolist() for c in codec.categories] == [
        ["AFIB", "SB", "SR"],
        ["F", "M"],
        [">=60", "<60"],
    ]
    assert codec.dtypes == list(Y.dtypes)
    assert codec.layout == "frame"
    assert codec.shape == (3, 2, 2)


def test_combinations_are_numbered_with_the_last_attribute_fastest():
    codec = AttributeCodec.fit(Y, len(Y))
    assert codec.combinations.shape == codec.values.shape == (12, 3)
    assert codec.combinations[:3].tolist() == [[0, 0, 0], [0, 0, 1], [0, 1, 0]]
    assert codec.values[1].tolist() == ["AFIB", "F", "<60"]
    assert codec.values[-1].tolist() == ["SR", "M", "<60"]
    codes = codec.encode(Y)
    np.testing.assert_array_equal(codec.values[codes], Y.astype(object).to_numpy())


def test_decode_answers_in_the_layout_of_y():
    frame = AttributeCodec.fit(Y, len(Y))
    decoded = frame.decode(frame.encode(Y))
    pd.testing.assert_frame_equal(decoded, Y)  # categorical dtype included
    one = AttributeCodec.fit(Y["rhythm"].to_numpy(), len(Y))
    assert one.layout == "1d" and one.names == ["attribute_0"]
    np.testing.assert_array_equal(one.decode(one.encode(Y["rhythm"])), Y["rhythm"])
    numbers = np.column_stack([np.arange(6) % 3, np.arange(6) % 2])
    two = AttributeCodec.fit(numbers, 6)
    assert two.layout == "2d" and two.decode(two.encode(numbers)).dtype == np.int64
    np.testing.assert_array_equal(two.decode(two.encode(numbers)), numbers)


def test_rows_of_mixed_types_keep_each_value_type():
    rows = [("SR", 0), ("AFIB", 1), ("SR", 1), ("AFIB", 0)]
    codec = AttributeCodec.fit(rows, 4)
    assert [c.tolist() for c in codec.categories] == [["AFIB", "SR"], [0, 1]]
    assert codec.values.dtype == object
    assert [type(v) for v in codec.decode(codec.encode(rows))[0]] == [str, int]


def test_arrays_are_read_by_position_and_frames_by_name():
    codec = AttributeCodec.fit(Y, len(Y))
    positional = Y.to_numpy(dtype=object)
    read = codec.read(positional)
    assert read.columns.tolist() == codec.names
    np.testing.assert_array_equal(read.to_numpy(dtype=object), positional)
    np.testing.assert_array_equal(codec.encode(positional), codec.encode(Y))
    with pytest.raises(ValueError, match=r"y has attributes \['sex', 'rhythm', 'age'\], but"):
        codec.read(Y[["sex", "rhythm", "age"]])
    with pytest.raises(ValueError, match=r"y has attributes \['attribute_0', 'attribute_1'\]"):
        codec.read(positional[:, :2])
    with pytest.raises(ValueError, match="inconsistent numbers of samples"):
        codec.encode(Y, 5)


def test_unseen_values_are_named():
    codec = AttributeCodec.fit(Y, len(Y))
    with pytest.raises(
        ValueError,
        match=r"Attribute 'sex' has values \['X'\] that were not seen in fit; "
        r"known values: \['F', 'M'\]",
    ):
        codec.encode(Y.assign(sex="X"))


@pytest.mark.parametrize(
    ("y", "error", "message"),
    [
        (None, ValueError, "requires y to be passed, but the target y is None"),
        (np.zeros((6, 2, 2)), ValueError, "y must have shape"),
        (Y.assign(sex=[None, *Y["sex"][1:]]), ValueError, r"missing values .* 'sex' \(1\)"),
        (Y.assign(site="A"), ValueError, "Attribute 'site' takes the single value 'A'"),
        (Y.assign(sex=[1, "F"] * 3), TypeError, "one type"),
        (np.column_stack([np.arange(6)] * 6), ValueError, "46656 attribute combinations"),
    ],
    ids=["none", "3d", "missing", "single-value", "mixed-types", "too-many"],
)
def test_fit_refuses(y, error, message):
    with pytest.raises(error, match=message):
        AttributeCodec.fit(y, 6)


def test_constructor_refuses_an_inconsistent_description():
    categories = [np.array(["a", "b"]), np.array([0, 1])]
    dtypes = [np.dtype(object), np.dtype(int)]
    with pytest.raises(ValueError, match="inconsistent description"):
        AttributeCodec(["a"], categories, dtypes, "2d")
    with pytest.raises(ValueError, match="inconsistent description"):
        AttributeCodec(["a", "b"], categories, dtypes, "table")
    with pytest.raises(ValueError, match="inconsistent description"):
        AttributeCodec([], [], [], "2d")


def test_format_lists_combinations_for_messages():
    codec = AttributeCodec.fit(np.column_stack([np.arange(24) % 12, np.arange(24) % 2]), 24)
    assert codec.format([0, 3]) == "(0, 0); (1, 1)"
    assert codec.format(np.arange(13), limit=2) == "(0, 0); (0, 1) and 11 more"


def test_joint_codes_match_values_of_any_type_across_both_sides():
    true, pred = joint_codes([("SR", 1), ("SB", 0), 2.5], [2.5, ("SR", 1), "x"])
    assert true.tolist() == [0, 1, 2]
    assert pred.tolist() == [2, 0, 3]


# ------------------------------------------------------- missing values
@pytest.mark.parametrize("marker", [None, np.nan, pd.NA], ids=["None", "NaN", "NA"])
def test_missing_values_get_code_minus_one_and_no_category(marker):
    y = Y.astype({"sex": object})
    y.loc[[1, 4], "sex"] = marker
    y["age"] = y["age"].where(y.index != 2)  # categorical NaN
    codec = AttributeCodec.fit(y, len(y), allow_missing=True)
    assert [c.tolist() for c in codec.categories] == [
        ["AFIB", "SB", "SR"],
        ["F", "M"],
        [">=60", "<60"],
    ]
    assert codec.shape == (3, 2, 2) and len(codec.combinations) == 12
    codes = codec.codes(y, allow_missing=True)
    np.testing.assert_array_equal(
        codes, [[2, 1, 0], [0, -1, 1], [1, 0, -1], [2, 1, 1], [0, -1, 1], [1, 0, 0]]
    )
    index, partial = codec.encode_partial(y)
    # Rows 1 and 4 share one pattern; row 2 has another.
    np.testing.assert_array_equal(partial, [[0, -1, 1], [1, 0, -1]])
    np.testing.assert_array_equal(index[[1, 4, 2]], [12, 12, 13])
    np.testing.assert_array_equal(index[[0, 3, 5]], codec.encode(Y.iloc[[0, 3, 5]]))
    with pytest.raises(ValueError, match=r"missing values .* 'sex' \(2\)"):
        codec.encode(y)  # combinations need every value


def test_rows_with_every_value_missing_are_unlabelled():
    y = Y.astype(object)
    y.iloc[[1, 3]] = None
    codec = AttributeCodec.fit(y, len(y), allow_missing=True)
    index, partial = codec.encode_partial(y)
    # Target -1, and no row of partial: nothing is known to be consistent with.
    assert index[[1, 3]].tolist() == [-1, -1]
    assert len(partial) == 0
    np.testing.assert_array_equal(index[[0, 2, 4, 5]], codec.encode(Y.iloc[[0, 2, 4, 5]]))


def test_missing_values_are_refused_unless_allowed():
    y = Y.assign(sex=[None, *Y["sex"][1:]])
    with pytest.raises(ValueError, match=r"missing values .* 'sex' \(1\)"):
        AttributeCodec.fit(y, 6)
    codec = AttributeCodec.fit(y, 6, allow_missing=True)
    with pytest.raises(ValueError, match=r"missing values .* 'sex' \(1\)"):
        codec.codes(y)
    with pytest.raises(ValueError, match="Attribute 'sex' has no known value in y"):
        AttributeCodec.fit(Y.assign(sex=None), 6, allow_missing=True)
    with pytest.raises(ValueError, match=r"Attribute 'sex' has values \['X'\] that were not seen"):
        codec.codes(y.assign(sex=[None, "X", "F", "M", "M", "F"]), allow_missing=True)


def test_position_of_an_attribute():
    codec = AttributeCodec.fit(Y, len(Y))
    assert codec.position("sex") == 1 == codec.position(np.int64(1))
    with pytest.raises(ValueError, match=r"class_attribute='dx' is not an attribute of y"):
        codec.position("dx", "class_attribute")
    with pytest.raises(ValueError, match="attribute=3 but y has only 3 attribute"):
        codec.position(3)
    with pytest.raises(TypeError, match="attribute must be an attribute name or position"):
        codec.position(True)


def test_ordinal_means_an_ordered_categorical_column():
    y = pd.DataFrame(
        {
            "dx": ["MI", "NORM", "MI"],
            "sex": pd.Categorical(["F", "M", "F"]),
            "age": pd.Categorical(["old", "young", "old"], ["young", "old"], ordered=True),
        }
    )
    assert AttributeCodec.fit(y, 3).ordinal == [False, False, True]
    assert AttributeCodec.fit(y.to_numpy(), 3).ordinal == [False, False, False]


def test_continuous_columns_become_ordered_quantile_bins():
    ages = [23, 35, 41, 50, 58, 62, 67, 71, 80, np.nan]
    y = pd.DataFrame({"dx": ["MI", "NORM"] * 5, "age": ages})
    codec = AttributeCodec.fit(y, 10, allow_missing=True, continuous={"age": 3})
    edges = codec.bin_edges["age"]
    assert edges[0] == 23 and edges[-1] == 80 and len(edges) == 4
    assert codec.ordinal == [False, True]
    labels = list(codec.categories[1])
    # Whole-year labels (the AgeGroupEncoder's) in increasing order.
    assert labels[0].startswith("<=") and labels[-1].startswith(">=")
    codes = codec.codes(y, allow_missing=True)[:, 1]
    np.testing.assert_array_equal(codes, [0, 0, 0, 1, 1, 1, 2, 2, 2, -1])
    # Later numbers: binned with the same edges, outliers into the end bins;
    # labels pass as they are.
    later = pd.DataFrame({"dx": ["MI"] * 4, "age": [5.0, 51.0, 200.0, 60.0]})
    np.testing.assert_array_equal(codec.codes(later)[:, 1], [0, 1, 2, 1])
    as_labels = pd.DataFrame({"dx": ["MI"], "age": [labels[2]]})
    assert codec.codes(as_labels)[0, 1] == 2
    decoded = codec.decode(codec.encode(later))
    assert decoded["age"].tolist() == [labels[0], labels[1], labels[2], labels[1]]


def test_bin_edges_must_match_the_categories():
    with pytest.raises(ValueError, match="inconsistent"):
        AttributeCodec(
            ["age"], [np.array(["<=40", ">=41"], dtype=object)], [object], "frame",
            {"age": [20, 40, 60, 80]},
        )  # fmt: skip
