"""Patient-level splits: the paper's 60/20/20 split, stratified or not, and PTB-XL's folds."""

import math
import numbers

import numpy as np
import pandas as pd
from sklearn.model_selection import GroupShuffleSplit
from sklearn.utils import check_random_state


def patient_split(groups, *, stratify=None, val_size=0.2, test_size=0.2, random_state=None):
    """Split records (or frames) into train/validation/test sets by patient.

    Every patient's records land in exactly one of the three sets, as in the
    paper (60:20:20 at the patient level). The fractions count patients, not
    records: ``ceil(test_size * n_patients)`` patients go to the test set,
    ``ceil(val_size * n_patients)`` to the validation set (about that many
    without ``stratify``), the rest to training.

    With ``stratify`` (the class of each record), each class's patients are
    spread over the sets in proportion to their sizes, and every class with
    at least as many patients as there are sets has patients in each set
    (as far as the set sizes allow). Without it a rare class can be missing
    from the test set: three of LUDB's 102 patients are in GSVT.

    Read more in the :ref:`User Guide <datasets>`.

    Parameters
    ----------
    groups : array-like of shape (n_samples,)
        Patient id of each record or frame (e.g. the loaders' ``groups``).
    stratify : array-like of shape (n_samples,), default=None
        Class label of each record or frame (e.g. ``attributes["rhythm"]``).
        A patient with records of several classes counts under its most
        frequent one. None: a plain random split of the patients
        (:class:`~sklearn.model_selection.GroupShuffleSplit`).
    val_size : float, default=0.2
        Fraction of patients in the validation set; 0 gives an empty one.
    test_size : float, default=0.2
        Fraction of patients in the test set.
    random_state : int, RandomState instance or None, default=None
        Controls the shuffling; pass an int for a reproducible split.

    Returns
    -------
    train_idx, val_idx, test_idx : ndarray of int
        Sorted positions into ``groups``.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_crocs.datasets import patient_split
    >>> groups = np.repeat(np.arange(10), 2)  # 10 patients, 2 frames each
    >>> train, val, test = patient_split(groups, random_state=0)
    >>> len(train), len(val), len(test)
    (12, 4, 4)
    >>> set(groups[train]) & set(groups[test])
    set()

    Stratified, a class of 3 patients gets one in each set:

    >>> rhythm = np.repeat(["SR"] * 7 + ["GSVT"] * 3, 2)
    >>> train, val, test = patient_split(groups, stratify=rhythm, random_state=0)
    >>> [np.unique(rhythm[part]).tolist() for part in (train, val, test)]
    [['GSVT', 'SR'], ['GSVT', 'SR'], ['GSVT', 'SR']]
    """
    groups = np.asarray(groups)
    if groups.ndim != 1:
        raise ValueError(
            f"groups must be one-dimensional (one patient id per sample), got shape {groups.shape}."
        )
    for name, value in (("val_size", val_size), ("test_size", test_size)):
        if isinstance(value, bool) or not isinstance(value, numbers.Real) or not 0 <= value < 1:
            raise ValueError(f"{name} must be a float in [0, 1), got {value!r}.")
    if test_size == 0:
        raise ValueError("test_size must be > 0; use GroupShuffleSplit for two sets.")
    if val_size + test_size >= 1:
        raise ValueError(
            f"val_size + test_size must be < 1 to leave patients for training, "
            f"got {val_size} + {test_size}."
        )
    patients, patient_of = np.unique(groups, return_inverse=True)
    n_patients = len(patients)
    n_needed = 3 if val_size > 0 else 2
    if n_patients < n_needed:
        raise ValueError(
            f"groups has {n_patients} distinct patient(s); at least {n_needed} "
            f"are needed for a patient-level split."
        )
    rng = check_random_state(random_state)
    if stratify is not None:
        n_test = math.ceil(test_size * n_patients)
        n_val = math.ceil(val_size * n_patients)
        if n_test + n_val >= n_patients:
            raise ValueError(
                f"val_size={val_size} and test_size={test_size} leave none of the "
                f"{n_patients} patients for training."
            )
        # Test before validation: a class too small for all three sets is
        # then in the test set rather than in the validation set.
        sizes = [n_patients - n_test - n_val, n_test, n_val]
        part = _stratified_assignment(_patient_classes(patient_of, stratify), sizes, rng)
        part = part[patient_of]
        return tuple(np.flatnonzero(part == i) for i in (0, 2, 1))
    seeds = rng.randint(np.iinfo(np.int32).max, size=2)
    positions = np.arange(len(groups))
    outer = GroupShuffleSplit(n_splits=1, test_size=test_size, random_state=seeds[0])
    rest, test = next(outer.split(positions, groups=groups))
    if val_size == 0:
        return np.sort(rest), np.array([], dtype=int), np.sort(test)
    # val_size is a fraction of all patients: rescale to the remaining ones.
    inner_size = val_size / (1 - test_size)
    inner = GroupShuffleSplit(n_splits=1, test_size=inner_size, random_state=seeds[1])
    train, val = next(inner.split(rest, groups=groups[rest]))
    return np.sort(rest[train]), np.sort(rest[val]), np.sort(test)


def _patient_classes(patient_of, stratify):
    """Class code of each patient: the most frequent class of its records."""
    stratify = np.asarray(stratify)
    if stratify.shape != patient_of.shape:
        raise ValueError(
            f"stratify must hold one class label per sample, shape {patient_of.shape}; "
            f"got shape {stratify.shape}."
        )
    codes, classes = pd.factorize(stratify)  # a missing label (NaN) becomes -1
    codes = codes + 1
    n_codes = len(classes) + 1
    counts = np.bincount(patient_of * n_codes + codes, minlength=(patient_of.max() + 1) * n_codes)
    return counts.reshape(-1, n_codes).argmax(axis=1)


def _stratified_assignment(classes, sizes, random_state):
    """Which of ``len(sizes)`` parts each item goes to, stratified by class.

    Part ``j`` gets ``sizes[j]`` items. Each (class, part) pair first gets
    all but one or two items of its share ``n_class * sizes[j] / n_items``;
    the other items go one at a time to the pair furthest below its share,
    where a part that still lacks the class comes first. So every class with
    at least as many items as there are non-empty parts is in each of them,
    unless the parts are too small to hold all such classes, and a class's
    count in a part is within two of its share where every part has room for
    two items of each class. Which items of a class go to which part is
    random.

    Parameters
    ----------
    classes : ndarray of shape (n_items,) of int
        Class code of each item (e.g. of each patient), from 0.
    sizes : sequence of int
        Items per part; they sum to ``n_items``.
    random_state : int, RandomState instance or None

    Returns
    -------
    part : ndarray of shape (n_items,) of int
    """
    classes = np.asarray(classes)
    per_class = np.bincount(classes)
    share = np.outer(per_class, sizes) / len(classes)
    # All but the last one or two items of each share at once: what is left
    # still puts every class that can be in each part there...
    counts = np.maximum(np.floor(share).astype(np.int64) - 1, 0)
    left = per_class - counts.sum(axis=1)
    room = np.asarray(sizes, dtype=np.int64) - counts.sum(axis=0)
    # ... and the rest one at a time: a part without the class first, then
    # the largest shortfall.
    for _ in range(left.sum()):
        score = share - counts + len(classes) * (counts == 0)
        score[left == 0] = -np.inf
        score[:, room == 0] = -np.inf
        c, j = np.unravel_index(np.argmax(score), score.shape)
        counts[c, j] += 1
        left[c] -= 1
        room[j] -= 1
    rng = check_random_state(random_state)
    part = np.empty(len(classes), dtype=np.int64)
    for c, row in enumerate(counts):
        members = rng.permutation(np.flatnonzero(classes == c))
        part[members] = np.repeat(np.arange(len(row)), row)
    return part


def ptbxl_fold_split(folds, *, val_folds=(9,), test_folds=(10,)):
    """Split PTB-XL records by their ``strat_fold`` (1-10).

    PTB-XL's authors recommend folds 1-8 for training, 9 for validation and
    10 for testing. The folds are stratified and keep all records of a patient
    in one fold, so this split is at the patient level too.

    Read more in the :ref:`User Guide <datasets>`.

    Parameters
    ----------
    folds : array-like of shape (n_samples,)
        ``strat_fold`` of each record or frame (e.g. ``load_ptbxl().folds``,
        repeated per frame by :func:`~sklearn_crocs.preprocessing.make_frames`
        when passed as groups-like data).
    val_folds : sequence of int, default=(9,)
        Folds for validation; may be empty.
    test_folds : sequence of int, default=(10,)
        Folds for testing.

    Returns
    -------
    train_idx, val_idx, test_idx : ndarray of int
        Sorted positions into ``folds``; training gets every other fold.

    Examples
    --------
    >>> from sklearn_crocs.datasets import ptbxl_fold_split
    >>> train, val, test = ptbxl_fold_split([1, 9, 10, 3, 10, 8])
    >>> train.tolist(), val.tolist(), test.tolist()
    ([0, 3, 5], [1], [2, 4])
    """
    folds = np.asarray(folds)
    if folds.ndim != 1:
        raise ValueError(f"folds must be one-dimensional, got shape {folds.shape}.")
    val_folds = np.atleast_1d(np.asarray(val_folds, dtype=int))
    test_folds = np.atleast_1d(np.asarray(test_folds, dtype=int))
    if test_folds.size == 0:
        raise ValueError("test_folds must name at least one fold.")
    overlap = np.intersect1d(val_folds, test_folds)
    if overlap.size:
        raise ValueError(f"folds {overlap.tolist()} are in both val_folds and test_folds.")
    unknown = np.setdiff1d(np.concatenate([val_folds, test_folds]), folds)
    if unknown.size:
        raise ValueError(
            f"folds {unknown.tolist()} do not occur in the data (present: "
            f"{np.unique(folds).tolist()})."
        )
    is_val = np.isin(folds, val_folds)
    is_test = np.isin(folds, test_folds)
    train = np.flatnonzero(~(is_val | is_test))
    if train.size == 0:
        raise ValueError("no fold is left for training.")
    return train, np.flatnonzero(is_val), np.flatnonzero(is_test)
