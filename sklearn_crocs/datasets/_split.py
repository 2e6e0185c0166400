"""Patient-level splits: the paper's 60/20/20 split and PTB-XL's folds."""

import numbers

import numpy as np
from sklearn.model_selection import GroupShuffleSplit
from sklearn.utils import check_random_state


def patient_split(groups, *, val_size=0.2, test_size=0.2, random_state=None):
    """Split records (or frames) into train/validation/test sets by patient.

    Every patient's records land in exactly one of the three sets, as in the
    paper (60:20:20 at the patient level). The fractions count patients, not
    records: ``test_size`` of the patients go to the test set, ``val_size`` of
    them to the validation set (both rounded up by
    :class:`~sklearn.model_selection.GroupShuffleSplit`), the rest to training.

    Parameters
    ----------
    groups : array-like of shape (n_samples,)
        Patient id of each record or frame (e.g. the loaders' ``groups``).
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
    n_patients = len(np.unique(groups))
    n_needed = 3 if val_size > 0 else 2
    if n_patients < n_needed:
        raise ValueError(
            f"groups has {n_patients} distinct patient(s); at least {n_needed} "
            f"are needed for a patient-level split."
        )
    rng = check_random_state(random_state)
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


def ptbxl_fold_split(folds, *, val_folds=(9,), test_folds=(10,)):
    """Split PTB-XL records by their ``strat_fold`` (1-10).

    PTB-XL's authors recommend folds 1-8 for training, 9 for validation and
    10 for testing. The folds are stratified and keep all records of a patient
    in one fold, so this split is at the patient level too.

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
