"""Patient-level splits: patient_split, plain and stratified, and ptbxl_fold_split."""

import math

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from sklearn_crocs._split import _patient_classes
from sklearn_crocs.datasets import load_ludb, patient_split, ptbxl_fold_split


def _patients(groups, parts):
    return [set(groups[part].tolist()) for part in parts]


@pytest.mark.parametrize("stratify", [False, True])
def test_patient_split_keeps_patients_together(stratify):
    groups = np.repeat(np.arange(50), [1, 2, 3, 4, 5] * 10)  # 150 frames
    labels = np.where(groups % 5 == 0, "rare", "common") if stratify else None
    parts = patient_split(groups, stratify=labels, random_state=0)
    train, val, test = _patients(groups, parts)
    assert not (train & val or train & test or val & test)
    np.testing.assert_array_equal(np.sort(np.concatenate(parts)), np.arange(150))
    assert [len(train), len(val), len(test)] == [30, 10, 10]
    for again, part in zip(patient_split(groups, stratify=labels, random_state=0), parts):
        np.testing.assert_array_equal(again, part)


@settings(max_examples=300, deadline=None, derandomize=True, database=None)
@given(
    class_sizes=st.lists(st.integers(1, 25), min_size=1, max_size=5),
    n_records=st.integers(1, 3),
    val_size=st.sampled_from([0.0, 0.1, 0.2, 0.25]),
    test_size=st.sampled_from([0.1, 0.2, 0.3, 0.4]),
    seed=st.integers(0, 2**31 - 1),
)
def test_stratified_split_properties(class_sizes, n_records, val_size, test_size, seed):
    n_patients = sum(class_sizes)
    n_test, n_val = math.ceil(test_size * n_patients), math.ceil(val_size * n_patients)
    sizes = [n_patients - n_test - n_val, n_val, n_test]
    assume(sizes[0] >= 1 and n_patients >= (3 if val_size else 2))
    # Every patient has n_records ECGs, in shuffled order.
    patient_class = np.repeat(np.arange(len(class_sizes)), class_sizes)
    order = np.random.default_rng(seed).permutation(n_patients * n_records)
    groups = np.repeat(np.arange(n_patients), n_records)[order]
    labels = np.array([f"c{c}" for c in patient_class])[groups]
    parts = patient_split(
        groups, stratify=labels, val_size=val_size, test_size=test_size, random_state=seed
    )
    np.testing.assert_array_equal(np.sort(np.concatenate(parts)), np.arange(len(groups)))
    patients = _patients(groups, parts)
    assert [len(p) for p in patients] == sizes  # disjoint (all ECGs once) and exact sizes
    counts = np.array([np.bincount(patient_class[list(p)], minlength=len(class_sizes)) for p in patients])
    # Each class spread in proportion to the part sizes: closely where every
    # part has room for two patients of each class, and never piled up.
    share = np.outer(sizes, class_sizes) / n_patients
    if min(size for size in sizes if size) >= 2 * len(class_sizes):
        assert np.abs(counts - share).max() < 2
    assert (counts <= np.maximum(np.ceil(share), 1) + 1).all()
    # A class with a patient for each non-empty part is in each of them, when
    # the parts are large enough to hold one patient of every such class.
    n_parts = sum(size > 0 for size in sizes)
    common = np.array(class_sizes) >= n_parts
    if min(size for size in sizes if size) >= common.sum():
        assert (counts[np.array(sizes) > 0][:, common] > 0).all()


def test_stratified_split_puts_every_ludb_rhythm_in_every_part():
    ludb = load_ludb()
    rhythm = ludb.attributes["rhythm"].to_numpy()  # 3 of the 102 patients are in GSVT
    missed = 0
    for seed in range(10):
        parts = patient_split(ludb.groups, stratify=rhythm, random_state=seed)
        assert [sorted(set(rhythm[part])) for part in parts] == [["AFIB", "GSVT", "SB", "SR"]] * 3
        missed += "GSVT" not in rhythm[patient_split(ludb.groups, random_state=seed)[2]]
    assert missed > 0  # which a plain random split does not guarantee


def test_a_patient_counts_under_its_most_frequent_class():
    patient_of = np.array([0, 0, 0, 1, 1, 2, 2])
    labels = np.array(["A", "B", "B", "A", "A", np.nan, np.nan], dtype=object)
    # Codes in order of appearance, after 0 for a missing label: A 1, B 2.
    # Patient 0 (A, B, B) is B; a missing label is a class of its own.
    assert _patient_classes(patient_of, labels).tolist() == [2, 1, 0]


def test_patient_split_errors():
    groups = np.arange(10)
    with pytest.raises(ValueError, match="one class label per sample"):
        patient_split(groups, stratify=np.zeros(9))
    with pytest.raises(ValueError, match="leave none of the 10 patients for training"):
        patient_split(groups, stratify=np.zeros(10), val_size=0.45, test_size=0.5)
    with pytest.raises(ValueError, match="at least 3 are needed"):
        patient_split([1, 1, 2], stratify=[0, 0, 1])
    with pytest.raises(ValueError, match="test_size must be a float"):
        patient_split(groups, test_size=1.0)


def test_fold_split_helper():
    folds = np.array([1, 2, 9, 10, 10, 3, 9])
    train, val, test = ptbxl_fold_split(folds)
    assert train.tolist() == [0, 1, 5]
    assert val.tolist() == [2, 6]
    assert test.tolist() == [3, 4]
    _, val, _ = ptbxl_fold_split(folds, val_folds=[])
    assert val.size == 0
    with pytest.raises(ValueError, match=r"in both val_folds and test_folds"):
        ptbxl_fold_split(folds, val_folds=[9, 10])
    with pytest.raises(ValueError, match=r"folds \[7\] do not occur"):
        ptbxl_fold_split(folds, test_folds=[7])
    with pytest.raises(ValueError, match="no fold is left for training"):
        ptbxl_fold_split([9, 10])
