"""Signal preprocessing of the paper (Appendix A): frames, resampling,
normalisation and leads as instances.

CROCS cuts every recording into non-overlapping frames of 2500 samples; for
Chapman it first downsamples 500 Hz to 250 Hz, treats each lead as its own
single-lead instance and min-max scales each frame to [0, 1]; for PTB-XL it
z-scores each frame. Attributes and patient ids travel along with every
frame/instance so that splits stay at the patient level.
"""

import math
import numbers
from fractions import Fraction

import numpy as np
import pandas as pd
import psutil
from scipy.signal import resample_poly
from sklearn.base import BaseEstimator, OneToOneFeatureMixin, TransformerMixin
from sklearn.utils.validation import validate_data

from .._config import get_config
from .._display import DocLinkMixin
from .._utils import _warn

NORMALIZE_METHODS = ("zscore", "zscore-joint", "minmax")
# Sampling rates the package takes, in Hz: ECG recorders sample at 50 Hz to a
# few kHz. Far outside, a rate is a mistake (units, a damaged header) whose
# arithmetic fails later with a message that names neither the rate nor the fix.
MIN_RATE, MAX_RATE = 1.0, 100_000.0
# Lowest rate resampled from: a QRS complex lasts about 0.1 s and holds
# frequencies up to about 40 Hz, so below 50 Hz it spans a few samples and is
# aliased, and resampling only interpolates what was never recorded. 50 Hz is
# also the lowest rate ECG recorders use, and half the bundled model's 100 Hz.
MIN_ECG_RATE = 50.0
# Most samples a resampling may produce per sample in: 50 Hz up to 1 kHz.
# Beyond, the rate is a mistake, and the output (in memory at once) is out of
# proportion to the input: a 2-MB record declared at 2 Hz is 2 GB at 100 Hz.
MAX_UPSAMPLING = 20
# Largest absolute sample value, in any unit: an ECG stays within a few mV, a
# few thousand uV or the counts of a 24-bit recorder (below 1e7). Beyond it a
# gain or unit is wrong, and squares overflow float32 in scaling and filtering.
MAX_AMPLITUDE = 1e9
# Lowest band-pass edge in Hz: the AHA's diagnostic limit. Much lower, the
# filter's coefficients are singular and it needs minutes to settle.
MIN_EDGE = 0.05


def _as_signal_array(X, *, name="X", min_ndim=1):
    """``X`` as a float ndarray, with a clear error for bad input."""
    if isinstance(X, (list, tuple)) and X and isinstance(X[0], np.ndarray):
        if len({np.shape(x) for x in X}) > 1:
            raise ValueError(
                f"{name} is a list of arrays of different shapes; this function "
                f"needs one array of shape (n_records, [n_leads,] n_samples). "
                f"Crop the records to one length first (e.g. signal_length=... "
                f"in the loaders)."
            )
    X = np.asarray(X)
    if X.dtype == object or not (
        np.issubdtype(X.dtype, np.floating) or np.issubdtype(X.dtype, np.integer)
    ):
        raise TypeError(f"{name} must hold real numbers, got dtype {X.dtype}.")
    if X.ndim < min_ndim:
        raise ValueError(f"{name} must have at least {min_ndim} dimension(s), got shape {X.shape}.")
    if not np.issubdtype(X.dtype, np.floating):
        X = X.astype(np.float64)
    return X


def _check_finite(X, name="X"):
    if not np.all(np.isfinite(X)):
        raise ValueError(
            f"{name} contains NaN or infinite values; remove or repair those "
            f"records first (the loaders reject such records or skip them with "
            f"on_error='skip')."
        )


def check_rate(value, name="sampling_rate"):
    """``value`` as a float number of Hz, or a ValueError that names ``name`` and the range.

    The one check of a sampling rate, for every entry point: arguments,
    parameters, command-line options, record headers and model files.
    """
    if (
        isinstance(value, bool)
        or not isinstance(value, numbers.Real)
        or not MIN_RATE <= value <= MAX_RATE  # also refuses NaN
    ):
        raise ValueError(
            f"{name} must be a number of Hz from {MIN_RATE:g} to {MAX_RATE:g}; got "
            f"{_short(value)}."
        )
    return float(value)


def check_resampling(shape, orig_fs, target_fs, name="X"):
    """Raise ValueError unless signals of ``shape`` at ``orig_fs`` Hz may be resampled to
    ``target_fs`` Hz: from at least ``MIN_ECG_RATE``, to at most ``MAX_UPSAMPLING`` times
    as many samples, within the ``memory_budget`` of :func:`sklearn_crocs.get_config`.

    The one bound on resampling, for every entry point, checked before any
    sample is read or produced. Equal rates are no resampling and pass.
    """
    if orig_fs == target_fs:
        return
    if orig_fs < MIN_ECG_RATE:
        raise ValueError(
            f"{name} is declared at {orig_fs:g} Hz, below the {MIN_ECG_RATE:g} Hz an ECG "
            "needs (its QRS complex, about 0.1 s, would span a few samples), so it cannot "
            f"be resampled to {target_fs:g} Hz: resampling would interpolate what was "
            "never recorded. Check the declared rate (a header or unit error?), or leave "
            "the record out."
        )
    factor = target_fs / orig_fs
    if factor > MAX_UPSAMPLING:
        n_out = math.ceil(math.prod(shape) * factor)
        raise ValueError(
            f"resampling {name} from {orig_fs:g} to {target_fs:g} Hz would give {factor:g} "
            f"times as many samples ({n_out} for {math.prod(shape)}), and at most "
            f"{MAX_UPSAMPLING} times is allowed. Check the rates, or work at a rate nearer "
            f"{orig_fs:g} Hz."
        )
    # Filtering works in float64: the input's and the output's copies at once.
    needed = 8 * math.prod(shape) * (1 + max(factor, 1))
    budget = get_config()["memory_budget"]
    if budget == "auto":
        budget = psutil.virtual_memory().available // 2
    if budget is not None and needed > budget:
        raise ValueError(
            f"resampling {name} of shape {tuple(shape)} from {orig_fs:g} to {target_fs:g} Hz "
            f"needs about {needed / 1e9:.2g} GB, more than memory_budget ({budget / 1e9:.2g} "
            "GB). Resample it in parts (fewer records at a time), or raise the budget with "
            "sklearn_crocs.config_context(memory_budget=<bytes>)."
        )


def check_amplitude(X, name="X"):
    """Raise ValueError if a sample of ``X`` is NaN, infinite or beyond ``MAX_AMPLITUDE``.

    The one check of amplitudes, for the conditioner and every record read.
    """
    peak = float(np.max(np.abs(X), initial=0.0))
    if not peak <= MAX_AMPLITUDE:  # also NaN
        what = "NaN or infinite values" if not math.isfinite(peak) else f"values up to {peak:.3g}"
        raise ValueError(
            f"{name} has {what}, beyond the {MAX_AMPLITUDE:g} of any ECG in any unit: its "
            "gain or units are wrong. Repair it (WFDB: the ADC gain of each lead) or leave "
            "it out."
        )


def check_bandpass(bandpass, sampling_rate, target_rate=None):
    """Raise ValueError unless ``bandpass`` is None, ``(low, high)`` or ``(low, None)`` in Hz
    that a filter at the lower of the two rates can apply (``low`` below its Nyquist frequency).

    The one check of band edges, for the conditioner, model files and the command line.
    """
    if bandpass is None:
        return
    edges = tuple(bandpass) if isinstance(bandpass, (tuple, list)) else ()
    low, high = (*edges, None, None)[:2]

    def real(v):
        return isinstance(v, numbers.Real) and not isinstance(v, bool) and math.isfinite(v)

    if (
        len(edges) != 2
        or not real(low)
        or low < MIN_EDGE
        or (high is not None and (not real(high) or high <= low))
    ):
        raise ValueError(
            f"bandpass must be (low, high) in Hz with {MIN_EDGE:g} <= low < high, or (low, "
            f"None); got {_short(bandpass)}."
        )
    rate = sampling_rate if target_rate is None else min(sampling_rate, target_rate)
    if low >= rate / 2:
        raise ValueError(
            f"bandpass={_short(bandpass)}: the lower edge {low:g} Hz is not below half the "
            f"rate the filter runs at ({rate:g} Hz, the lower of sampling_rate and "
            "target_rate)."
        )


def _short(value):
    """``repr(value)``, cut to one short line for a message."""
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _repeat_rows(values, repeats, name, n_records):
    """Rows of ``values`` (DataFrame, Series, array-like) repeated per record."""
    if values is None:
        return None
    if len(values) != n_records:
        raise ValueError(
            f"{name} has {len(values)} rows but X has {n_records} records; they "
            f"must correspond one to one."
        )
    index = np.repeat(np.arange(n_records), repeats)
    if isinstance(values, (pd.DataFrame, pd.Series)):
        return values.iloc[index].reset_index(drop=True)
    return np.asarray(values)[index]


def make_frames(X, frame_length=2500, *, attributes=None, groups=None, on_short="raise"):
    """Cut each record into non-overlapping frames along its last axis.

    Record ``i`` of length ``T_i`` gives ``T_i // frame_length`` consecutive
    frames; its trailing ``T_i % frame_length`` samples, too few for a whole
    frame, are dropped. This only trims the tail of a record: every record
    that is at least one frame long contributes frames. A 10-s record at
    500 Hz (5000 samples) gives two 2500-sample frames, as in the paper.
    Attributes and groups of record ``i`` are repeated for each of its frames,
    so splits by patient stay valid after framing.

    Read more in the :ref:`User Guide <datasets>`.

    Parameters
    ----------
    X : ndarray of shape (n_records, n_samples) or (n_records, n_leads, \
n_samples), or list of arrays
        The signals. A list may hold records of different lengths (each
        ``(n_samples_i,)`` or ``(n_leads, n_samples_i)``), as returned by the
        loaders with ``signal_length="variable"``.
    frame_length : int, default=2500
        Samples per frame.
    attributes : pandas.DataFrame, pandas.Series or array-like, default=None
        One row per record; returned with one row per frame (a DataFrame gets
        a fresh 0..n_frames-1 index).
    groups : array-like of shape (n_records,), default=None
        Patient ids; returned repeated per frame.
    on_short : {"raise", "skip"}, default="raise"
        What to do with a record shorter than ``frame_length``: raise a
        ValueError, or leave it out with a warning that counts such records.

    Returns
    -------
    frames : ndarray of shape (n_frames, [n_leads,] frame_length)
        The frames, record by record, in time order within each record.
    attributes : same type as the input, or None
        One row per frame.
    groups : ndarray of shape (n_frames,), or None
        One id per frame.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_crocs.preprocessing import make_frames
    >>> X = np.arange(2 * 3 * 10, dtype=float).reshape(2, 3, 10)  # 2 records
    >>> frames, attrs, groups = make_frames(
    ...     X, frame_length=4, attributes=["AFIB", "SR"], groups=[7, 8])
    >>> frames.shape  # 10 // 4 = 2 frames per record; 2 tail samples dropped
    (4, 3, 4)
    >>> attrs.tolist(), groups.tolist()
    (['AFIB', 'AFIB', 'SR', 'SR'], [7, 7, 8, 8])
    """
    if (
        not isinstance(frame_length, numbers.Integral)
        or isinstance(frame_length, bool)
        or frame_length < 1
    ):
        raise ValueError(f"frame_length must be a positive int, got {frame_length!r}.")
    if on_short not in ("raise", "skip"):
        raise ValueError(f"on_short must be 'raise' or 'skip', got {on_short!r}.")
    if isinstance(X, (list, tuple)):
        records = [_as_signal_array(x, name="each record of X") for x in X]
        if not records:
            raise ValueError("X is empty: there are no records to frame.")
        if len({x.shape[:-1] for x in records}) > 1:
            raise ValueError(
                "the records of X have different numbers of leads "
                f"({sorted({x.shape[:-1] for x in records})}); all must match."
            )
    else:
        X = _as_signal_array(X, min_ndim=2)
        if X.shape[0] == 0:
            raise ValueError("X is empty: there are no records to frame.")
        records = None
    lengths = (
        np.array([x.shape[-1] for x in records])
        if records is not None
        else np.full(X.shape[0], X.shape[-1])
    )
    n_records = len(lengths)
    counts = lengths // frame_length
    short = np.flatnonzero(counts == 0)
    if short.size:
        detail = ", ".join(f"record {i} ({lengths[i]} samples)" for i in short[:5]) + (
            " ..." if short.size > 5 else ""
        )
        if on_short == "raise" or short.size == n_records:
            raise ValueError(
                f"{short.size} of {n_records} records are shorter than "
                f"frame_length={frame_length}: {detail}. Use a shorter "
                f"frame_length, drop those records, or pass on_short='skip'."
            )
        _warn(
            f"Skipped {short.size} of {n_records} records shorter than "
            f"frame_length={frame_length}: {detail}.",
            UserWarning,
        )

    if records is None:
        k = int(counts[0])
        trimmed = X[..., : k * frame_length]
        # (n, [L,] k, F) -> (n, k, [L,] F) -> (n * k, [L,] F)
        framed = trimmed.reshape(*X.shape[:-1], k, frame_length)
        framed = np.moveaxis(framed, -2, 1)
        frames = np.ascontiguousarray(framed).reshape(n_records * k, *X.shape[1:-1], frame_length)
    else:
        pieces = []
        for x, k in zip(records, counts):
            if k:
                framed = x[..., : k * frame_length].reshape(*x.shape[:-1], k, frame_length)
                pieces.append(np.moveaxis(framed, -2, 0))
        frames = np.ascontiguousarray(np.concatenate(pieces, axis=0))
    attributes = _repeat_rows(attributes, counts, "attributes", n_records)
    groups = _repeat_rows(groups, counts, "groups", n_records)
    return frames, attributes, groups


def resample_signals(X, orig_fs, target_fs):
    """Resample signals along their last axis with a polyphase filter.

    Uses :func:`scipy.signal.resample_poly` with ``up/down = target_fs /
    orig_fs`` reduced to lowest terms, and ``padtype="line"`` so that the
    ends of a record with a baseline offset are not pulled towards zero. The
    paper downsamples Chapman from 500 Hz to 250 Hz. A record of ``n``
    samples becomes ``ceil(n * target_fs / orig_fs)`` samples. Signals
    declared below 50 Hz, or brought to more than 20 times as many
    samples, are refused: no ECG is, and the output would be out of
    proportion to the input.

    Read more in the :ref:`User Guide <datasets>`.

    Parameters
    ----------
    X : array-like of shape (..., n_samples)
        Signals, time on the last axis.
    orig_fs : float
        Sampling rate of ``X`` in Hz.
    target_fs : float
        Wanted sampling rate in Hz.

    Returns
    -------
    X_resampled : ndarray of shape (..., n_samples_out)
        Same float dtype as ``X`` (float64 for integer input); a copy even
        when the two rates are equal.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_crocs.preprocessing import resample_signals
    >>> X = np.zeros((3, 12, 5000), dtype=np.float32)
    >>> resample_signals(X, 500, 250).shape
    (3, 12, 2500)
    """
    orig_fs, target_fs = check_rate(orig_fs, "orig_fs"), check_rate(target_fs, "target_fs")
    X = _as_signal_array(X)
    check_resampling(X.shape, orig_fs, target_fs)
    ratio = Fraction(target_fs).limit_denominator(10**6) / Fraction(orig_fs).limit_denominator(
        10**6
    )
    up, down = ratio.numerator, ratio.denominator
    if max(up, down) > 1000:
        raise ValueError(
            f"The ratio target_fs/orig_fs = {target_fs}/{orig_fs} reduces to "
            f"{up}/{down}, which needs an impractically long filter; choose "
            f"rates with a simpler ratio."
        )
    if up == down:
        return X.copy()
    out = resample_poly(X, up, down, axis=-1, padtype="line")
    return out.astype(X.dtype, copy=False)


def normalize_array(X, method):
    if method == "zscore":
        center = X.mean(axis=-1, keepdims=True)
        scale = X.std(axis=-1, keepdims=True)
    elif method == "zscore-joint":
        # Each lead centred, all leads of an ECG divided by one scale: no unit, but the
        # leads' relative amplitudes (which differ by sex) stay. The median of the leads'
        # standard deviations, so that one lead with an artefact cannot squash the others.
        center = X.mean(axis=-1, keepdims=True)
        scale = X.std(axis=-1, keepdims=True)
        if X.ndim > 2:  # flat leads (a missing lead of zeros) left out; all flat: 0
            scale = np.ma.median(np.ma.masked_equal(scale, 0), axis=-2, keepdims=True).filled(0)
    else:
        center = X.min(axis=-1, keepdims=True)
        scale = X.max(axis=-1, keepdims=True) - center
    out = X - center
    # A flat frame (zero spread) maps to all zeros instead of dividing by 0.
    flat = scale == 0
    np.divide(out, np.where(flat, 1, scale), out=out)
    return out


def normalize_frames(X, method="zscore"):
    """Normalise every frame along the last axis, each lead or (``"zscore-joint"``) all together.

    ``"zscore"`` (PTB-XL in the paper) subtracts the mean and divides by the
    standard deviation; ``"zscore-joint"`` subtracts each lead's mean and
    divides all leads of a frame by the median of their standard deviations,
    so the leads keep their relative amplitudes and a few leads with
    artefacts do not change the others (for 2-D input, one lead per frame, it
    is ``"zscore"``); ``"minmax"`` (Chapman) maps the minimum to 0 and the
    maximum to 1. A flat lead (zero standard deviation or range) becomes all
    zeros rather than NaN.

    Read more in the :ref:`User Guide <datasets>`.

    Parameters
    ----------
    X : array-like of shape (n_frames, [n_leads,] n_samples)
        Frames, time on the last axis.
    method : {"zscore", "zscore-joint", "minmax"}, default="zscore"

    Returns
    -------
    X_normalized : ndarray, same shape as ``X``
        float32 for float32 input, float64 otherwise.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_crocs.preprocessing import normalize_frames
    >>> X = np.array([[[0.0, 1.0, 2.0, 3.0], [5.0, 5.0, 5.0, 5.0]]])
    >>> normalize_frames(X, method="minmax")
    array([[[0.        , 0.33333333, 0.66666667, 1.        ],
            [0.        , 0.        , 0.        , 0.        ]]])
    """
    if method not in NORMALIZE_METHODS:
        raise ValueError(
            f"method must be 'zscore' (per-frame standardisation, PTB-XL), 'zscore-joint' "
            f"(one scale for all leads of a frame) or 'minmax' (scale each frame to [0, 1], "
            f"Chapman), got {method!r}."
        )
    X = _as_signal_array(X)
    _check_finite(X)
    return normalize_array(X, method)


class FrameNormalizer(DocLinkMixin, OneToOneFeatureMixin, TransformerMixin, BaseEstimator):
    """Normalise each frame, as :func:`normalize_frames` does (stateless transformer).

    The scikit-learn counterpart of :func:`normalize_frames` for use in a
    :class:`~sklearn.pipeline.Pipeline`: it learns nothing, so ``fit`` only
    validates the input, and the same frame is normalised the same way in
    training and at prediction time.

    Read more in the :ref:`User Guide <datasets>`.

    Parameters
    ----------
    method : {"zscore", "zscore-joint", "minmax"}, default="zscore"
        ``"zscore"``: zero mean and unit standard deviation per frame and lead
        (PTB-XL in the paper); ``"zscore-joint"``: each lead centred, all
        leads of a frame divided by the median of their standard deviations
        (their relative amplitudes stay); ``"minmax"``: range [0, 1]
        (Chapman). Flat leads become zeros.

    Attributes
    ----------
    n_features_in_ : int
        ``X.shape[1]`` seen in ``fit``: the number of samples for 2-D input
        (n_frames, n_samples), the number of leads for 3-D input (n_frames,
        n_leads, n_samples).

    See Also
    --------
    normalize_frames : The same operation as a function.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_crocs.preprocessing import FrameNormalizer
    >>> X = np.array([[1.0, 2.0, 3.0], [10.0, 10.0, 10.0]])
    >>> FrameNormalizer(method="zscore").fit_transform(X).round(3)
    array([[-1.225,  0.   ,  1.225],
           [ 0.   ,  0.   ,  0.   ]])
    """

    def __init__(self, *, method="zscore"):
        self.method = method

    def _validate(self, X, reset):
        if self.method not in NORMALIZE_METHODS:
            raise ValueError(f"method must be one of {NORMALIZE_METHODS}, got {self.method!r}.")
        return validate_data(
            self,
            X,
            reset=reset,
            allow_nd=True,
            dtype=[np.float64, np.float32],
            ensure_min_features=1,
        )

    def fit(self, X, y=None):
        """Validate ``X`` and record ``n_features_in_``; nothing is learned.

        Parameters
        ----------
        X : array-like of shape (n_frames, n_samples) or (n_frames, n_leads, \
n_samples)
        y : None
            Ignored.

        Returns
        -------
        self : FrameNormalizer
        """
        self._validate(X, reset=True)
        return self

    def transform(self, X):
        """Normalise each frame (and lead) of ``X``.

        Parameters
        ----------
        X : array-like of shape (n_frames, n_samples) or (n_frames, n_leads, \
n_samples)

        Returns
        -------
        X_normalized : ndarray of the same shape
        """
        X = self._validate(X, reset=False)
        return normalize_array(X, self.method)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.requires_fit = False
        tags.input_tags.three_d_array = True
        return tags


def check_signal_layout(shape, sampling_rate=None, *, name="X"):
    """Refuse signal arrays whose axes are evidently swapped or whose frames are too short.

    A 3-D array with more leads than samples is almost always in wfdb's
    ``(samples, leads)`` layout, stacked; with a known ``sampling_rate``, a
    frame shorter than a quarter of a second (less than one heart beat at
    any heart rate) is refused too. :class:`~sklearn_crocs.CROCSClusterer`,
    :class:`SignalConditioner` and the command line check every input with it.

    Read more in the :ref:`User Guide <raw_recordings>`.

    Parameters
    ----------
    shape : tuple of int
        Shape of the signals: ``(n_ecgs, n_leads, n_samples)`` or
        ``(n_ecgs, n_samples)``.
    sampling_rate : float, default=None
        Declared rate of the signals in Hz, if known.
    name : str, default="X"
        Name of the array in the messages.

    Raises
    ------
    ValueError
        With the fix in the message (``np.swapaxes(X, 1, 2)``, or the rate).

    Examples
    --------
    >>> from sklearn_crocs.preprocessing import check_signal_layout
    >>> check_signal_layout((8, 12, 5000), sampling_rate=500)  # 12 leads, 10 s: fine
    >>> check_signal_layout((8, 5000, 12))
    Traceback (most recent call last):
    ...
    ValueError: X has shape (8, 5000, 12): 5000 leads of 12 samples each. ...
    """
    if len(shape) == 3 and shape[-1] < 2:  # before the layout: 12 leads of 1 sample are no swap
        raise ValueError(
            f"{name} has shape {tuple(shape)}: {shape[-1]} sample(s) per lead, no ECG. The "
            "record holds no signal (or its header gives no samples); leave it out."
        )
    if len(shape) == 3 and shape[1] > shape[2]:
        raise ValueError(
            f"{name} has shape {tuple(shape)}: {shape[1]} leads of {shape[2]} samples each. "
            "Signals go channel-first, (n_ecgs, n_leads, n_samples); an array stacked from "
            f"wfdb.rdsamp is (n_ecgs, n_samples, n_leads): pass np.swapaxes({name}, 1, 2)."
        )
    if sampling_rate is not None and len(shape) >= 2:
        seconds = shape[-1] / sampling_rate
        if seconds < 0.25:
            layout = (
                " or np.swapaxes(X, 1, 2) if the leads are on the last axis"
                if (len(shape) == 3)
                else ""
            )
            raise ValueError(
                f"{name} has {shape[-1]} samples per lead, {seconds:.3g} s at the declared "
                f"{sampling_rate:g} Hz: too short for an ECG. Check sampling_rate"
                f"{layout}."
            )


def leads_as_instances(X, attributes=None, groups=None):
    """Turn every lead of every record (or frame) into a single-lead instance.

    The paper treats each of Chapman's 12 leads as its own instance. Instance
    ``i * n_leads + j`` is lead ``j`` of record ``i``; attributes and groups
    of record ``i`` are repeated for its ``n_leads`` instances.

    Read more in the :ref:`User Guide <datasets>`.

    Parameters
    ----------
    X : array-like of shape (n_records, n_leads, n_samples)
    attributes : pandas.DataFrame, pandas.Series or array-like, default=None
        One row per record.
    groups : array-like of shape (n_records,), default=None
        Patient ids.

    Returns
    -------
    X_instances : ndarray of shape (n_records * n_leads, 1, n_samples)
    attributes : same type as the input, or None
        One row per instance.
    groups : ndarray of shape (n_records * n_leads,), or None
    lead_index : ndarray of shape (n_records * n_leads,), dtype int64
        The lead each instance came from (index into the loader's
        ``lead_names``).

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_crocs.preprocessing import leads_as_instances
    >>> X = np.zeros((2, 12, 2500))
    >>> X1, attrs, groups, lead = leads_as_instances(X, ["SR", "SB"], [1, 2])
    >>> X1.shape
    (24, 1, 2500)
    >>> attrs[10:14].tolist(), groups[10:14].tolist(), lead[10:14].tolist()
    (['SR', 'SR', 'SB', 'SB'], [1, 1, 2, 2], [10, 11, 0, 1])
    """
    X = _as_signal_array(X)
    if X.ndim != 3:
        raise ValueError(f"X must have shape (n_records, n_leads, n_samples), got shape {X.shape}.")
    n_records, n_leads, n_samples = X.shape
    X_instances = X.reshape(n_records * n_leads, 1, n_samples)
    repeats = np.full(n_records, n_leads)
    attributes = _repeat_rows(attributes, repeats, "attributes", n_records)
    groups = _repeat_rows(groups, repeats, "groups", n_records)
    lead_index = np.tile(np.arange(n_leads, dtype=np.int64), n_records)
    return X_instances, attributes, groups, lead_index
