"""SignalConditioner: band-pass, mains notch, resampling and per-lead scaling of raw ECGs."""

import math
import numbers

import numpy as np
from scipy.signal import butter, iirnotch, sosfiltfilt, tf2sos
from sklearn.base import BaseEstimator, TransformerMixin
from sklearn.utils._param_validation import Interval, Options, StrOptions
from sklearn.utils.validation import validate_data

from .._display import DocLinkMixin
from .._utils import _length_groups, _warn
from ._signals import (
    MAX_RATE,
    MIN_RATE,
    NORMALIZE_METHODS,
    check_amplitude,
    check_bandpass,
    check_rate,
    check_resampling,
    check_signal_layout,
    normalize_array,
    resample_signals,
)

# Filter order of each Butterworth edge (doubled by the forward-backward pass).
_FILTER_ORDER = 3
# Amplitudes of an ECG in mV stay within a few mV; a lead whose median
# absolute value exceeds this is in microvolts or ADC units.
_MAX_PLAUSIBLE_MV = 50.0


def _condition(X, fs, target_fs, bandpass, notch, normalize):
    """Filter, resample and normalise float64 signals, time on the last axis."""
    # Down to a lower rate, resample first: the polyphase filter removes what
    # lies above the new Nyquist frequency, and the band-pass then runs on
    # fewer samples (5x fewer from 500 to 100 Hz), with the same result in band.
    if target_fs is not None and target_fs < fs:
        X, fs, target_fs = resample_signals(X, fs, target_fs), target_fs, None
    n = X.shape[-1]
    sections = []
    if bandpass is not None:
        low, high = bandpass
        if high is not None and high < fs / 2:
            sections.append(butter(_FILTER_ORDER, [low, high], "bandpass", fs=fs, output="sos"))
        else:  # the upper edge is at or above Nyquist: high-pass only
            sections.append(butter(_FILTER_ORDER, low, "highpass", fs=fs, output="sos"))
    if notch is not None and notch < fs / 2:
        sections.append(tf2sos(*iirnotch(notch, 30.0, fs=fs)))
    if sections and n > 1:
        sos = np.concatenate(sections)
        # Pad by one period of the low edge (at most the signal) so that the
        # slowest wave the filter keeps settles before the signal starts.
        edge = bandpass[0] if bandpass is not None else notch
        padlen = min(n - 1, math.ceil(fs / edge))
        X = sosfiltfilt(sos, X, axis=-1, padtype="odd", padlen=padlen)
    if target_fs is not None and target_fs != fs:
        X = resample_signals(X, fs, target_fs)
    if normalize is not None:
        X = normalize_array(X, normalize)
    return X


class SignalConditioner(DocLinkMixin, TransformerMixin, BaseEstimator):
    """Condition raw ECG recordings: band-pass, mains notch, resampling, per-lead scaling.

    Brings recordings as exported by a hospital or read from PhysioNet (in
    mV, with baseline wander, DC offsets and mains interference, at 250 to
    1000 Hz) to the form the package's defaults were chosen on: the PTB-XL
    release band-passed 0.5-40 Hz and z-scored per lead. In order, for each
    ECG and lead on its own:

    1. polyphase resampling to ``target_rate``
       (:func:`~sklearn_crocs.preprocessing.resample_signals`), before the
       filters when it lowers the rate (its anti-aliasing filter removes
       what lies above the new Nyquist frequency, and the filters then run
       on fewer samples), after them when it raises it;
    2. a zero-phase Butterworth band-pass (forward and backward, order
       3 per edge; :func:`scipy.signal.sosfiltfilt`), whose lower edge removes
       DC offsets and baseline wander (by default 0.67 Hz, a heart rate of 40
       per minute: wander near 0.5 Hz passes a 0.5 Hz edge, and the zero
       phase keeps the ST segment in place);
    3. optionally a zero-phase notch at the mains frequency (Q = 30), when
       that is below the Nyquist frequency (at 100 Hz, 50 Hz is the Nyquist
       frequency, where the band-pass's upper edge has a zero; 60 Hz is
       removed by the resampling);
    4. z-score (or min-max) scaling per lead.

    It learns nothing (``fit`` only validates), so it is the same in training
    and prediction. Filter whole recordings, then cut them into frames with
    :func:`~sklearn_crocs.preprocessing.make_frames`: a 0.67 Hz edge needs
    seconds of signal to settle. As the ``conditioning`` of
    :class:`~sklearn_crocs.CROCSClusterer` it is saved in the model file and
    applied to every ECG given to the model, with the rates set by the model.

    Read more in the :ref:`User Guide <raw_recordings>`.

    Records at different rates (as :func:`~sklearn_crocs.datasets.load_wfdb`
    returns them with ``signal_length="variable"``, rates in its
    ``sampling_rates``) are conditioned each at its own rate with
    ``fit_transform(X, sampling_rates=rates)`` (or ``transform``), as each
    would be alone, and all brought to ``target_rate``.

    Parameters
    ----------
    sampling_rate : float, default=None
        Rate of the input signals in Hz; required by ``fit`` and ``transform``
        unless they are given ``sampling_rates``.
    target_rate : float, default=None
        Rate of the output in Hz; ``None`` keeps ``sampling_rate``.
    bandpass : tuple of (float, float or None), default=(0.67, 40.0)
        Edges of the band-pass in Hz; ``(low, None)``, or an upper edge at or
        above half the sampling rate, is a high-pass. ``None``: no filter.
    notch : {50, 60} or None, default=None
        Mains frequency to remove. ``None``: no notch (a 40 Hz upper edge
        attenuates 50 Hz by about 14 dB and 60 Hz by 22 dB at 500 Hz, and
        resampling to 100 Hz removes both).
    normalize : {"zscore", "zscore-joint", "minmax"} or None, default="zscore"
        Scaling after filtering: ``"zscore"`` and ``"minmax"`` scale each lead
        of a record on its own; ``"zscore-joint"`` centres each lead and
        divides all leads of a record by the median of their standard
        deviations, so that, unit-free, they keep their relative amplitudes
        (which differ between men and women); ``None`` keeps mV.

    Attributes
    ----------
    n_features_in_ : int
        ``X.shape[1]`` seen in ``fit``.

    See Also
    --------
    resample_signals : Resampling alone.
    FrameNormalizer : Per-frame scaling alone.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_crocs.preprocessing import SignalConditioner
    >>> t = np.arange(5000) / 500                        # 10 s at 500 Hz
    >>> ecg = np.sin(2 * np.pi * 1.2 * t)                # a 1.2 Hz "heart beat"
    >>> wander, mains = 0.4 * np.sin(2 * np.pi * 0.1 * t), 0.2 * np.sin(2 * np.pi * 50 * t)
    >>> raw = ecg + wander + 0.8 + mains
    >>> conditioner = SignalConditioner(sampling_rate=500, target_rate=100, notch=50)
    >>> out = conditioner.fit_transform(raw[None, None])
    >>> out.shape, out.dtype
    ((1, 1, 1000), dtype('float32'))
    >>> clean = (ecg - ecg.mean()) / ecg.std()
    >>> bool(np.abs(out[0, 0, 100:-100] - clean[::5][100:-100]).max() < 0.1)
    True
    """

    _parameter_constraints: dict = {
        "sampling_rate": [Interval(numbers.Real, MIN_RATE, MAX_RATE, closed="both"), None],
        "target_rate": [Interval(numbers.Real, MIN_RATE, MAX_RATE, closed="both"), None],
        "bandpass": [tuple, None],
        "notch": [Options(numbers.Real, {50, 60}), None],
        "normalize": [StrOptions(set(NORMALIZE_METHODS)), None],
    }

    def __init__(
        self,
        *,
        sampling_rate=None,
        target_rate=None,
        bandpass=(0.67, 40.0),
        notch=None,
        normalize="zscore",
    ):
        self.sampling_rate = sampling_rate
        self.target_rate = target_rate
        self.bandpass = bandpass
        self.notch = notch
        self.normalize = normalize

    def _check_settings(self, rate):
        self._validate_params()
        if rate is None:
            raise ValueError(
                "SignalConditioner needs the rate of the signals: pass sampling_rate=<Hz>, "
                "or sampling_rates=<one rate per record> to fit and transform."
            )
        check_bandpass(self.bandpass, rate, self.target_rate)

    def _validate(self, X, reset, rate):
        self._check_settings(rate)
        X = validate_data(self, X, reset=reset, allow_nd=True, dtype=[np.float64, np.float32])
        if X.ndim > 3:
            raise ValueError(
                f"X must have shape (n_ecgs, n_samples) or (n_ecgs, n_leads, n_samples); "
                f"got {X.shape}."
            )
        check_signal_layout(X.shape, rate)
        if self.target_rate is not None:  # before any filtering
            check_resampling(X.shape, rate, self.target_rate)
        check_amplitude(X)
        return X

    def _rate_groups(self, X, sampling_rates):
        """``[(rate, rows of X at that rate)]``: one entry at ``sampling_rate`` without
        ``sampling_rates``."""
        if sampling_rates is None:
            return [(self.sampling_rate, None)]
        rates = np.asarray(sampling_rates, dtype=object)
        if rates.ndim != 1 or len(rates) != len(X):
            raise ValueError(
                f"sampling_rates must give one rate per record of X ({len(X)} records); got "
                f"{rates.size} values of shape {rates.shape}."
            )
        rates = np.array([check_rate(r, "each of sampling_rates") for r in rates])
        distinct = np.unique(rates)
        if len(distinct) > 1 and self.target_rate is None:
            raise ValueError(
                f"sampling_rates holds {len(distinct)} different rates; set target_rate=<Hz> "
                "to bring every record to one rate."
            )
        return [(float(rate), np.flatnonzero(rates == rate)) for rate in distinct]

    def fit(self, X, y=None, *, sampling_rates=None):
        """Validate ``X`` and the settings; nothing is learned.

        Parameters
        ----------
        X : array-like of shape (n_ecgs, n_samples) or (n_ecgs, n_leads, n_samples), \
or list of arrays
            Signals at ``sampling_rate``; a list may hold records of different
            lengths (each ``(n_samples_i,)`` or ``(n_leads, n_samples_i)``).
        y : None
            Ignored.
        sampling_rates : array-like of shape (n_ecgs,), default=None
            Rate of each record in Hz, instead of ``sampling_rate``; records
            of different rates need ``target_rate``.

        Returns
        -------
        self : SignalConditioner
        """
        reset = True
        for rate, rows in self._rate_groups(X, sampling_rates):
            records = X if rows is None else [X[i] for i in rows]
            groups = _length_groups(records)
            for group in [None] if groups is None else groups:  # each length as one array
                self._validate(
                    records if group is None else np.stack([records[i] for i in group]),
                    reset=reset,
                    rate=rate,
                )
                reset = False
        return self

    def fit_transform(self, X, y=None, *, sampling_rates=None):
        """Validate ``X`` and condition it, as ``fit(X).transform(X)``.

        Parameters
        ----------
        X : array-like of shape (n_ecgs, n_samples) or (n_ecgs, n_leads, n_samples), \
or list of arrays
            Signals at ``sampling_rate`` (or ``sampling_rates``).
        y : None
            Ignored.
        sampling_rates : array-like of shape (n_ecgs,), default=None
            Rate of each record in Hz, instead of ``sampling_rate``.

        Returns
        -------
        X_conditioned : ndarray or list of ndarray
            As :meth:`transform` returns it.
        """
        return self.fit(X, sampling_rates=sampling_rates).transform(
            X, sampling_rates=sampling_rates
        )

    def transform(self, X, *, sampling_rates=None):
        """Filter, resample and scale each ECG and lead of ``X``.

        Parameters
        ----------
        X : array-like of shape (n_ecgs, n_samples) or (n_ecgs, n_leads, n_samples), \
or list of arrays
            Signals at ``sampling_rate``, in mV when ``normalize=None``; a
            list may hold records of different lengths.
        sampling_rates : array-like of shape (n_ecgs,), default=None
            Rate of each record in Hz, instead of ``sampling_rate``: each
            record is conditioned at its own rate, as it would be alone.
            Records of different rates need ``target_rate``.

        Returns
        -------
        X_conditioned : ndarray of shape (n_ecgs, [n_leads,] n_samples_out), dtype float32, \
or list of ndarray
            ``n_samples_out = ceil(n_samples * target_rate / sampling_rate)``;
            a list of one array per record for records of different lengths
            or rates.
        """
        by_rate = self._rate_groups(X, sampling_rates)
        if len(by_rate) > 1:  # one list, each record at its own rate
            out = [None] * len(X)
            for rate, rows in by_rate:
                records = self._transform([X[i] for i in rows], rate)
                for i, record in zip(rows, records):
                    out[i] = record
            return out
        return self._transform(X, by_rate[0][0])

    def _transform(self, X, rate):
        """``transform(X)`` of records at one ``rate``."""
        groups = _length_groups(X)
        if groups is not None:  # each record filtered whole, as on its own
            out = [None] * len(X)
            for rows in groups:
                for i, record in zip(rows, self._transform(np.stack([X[i] for i in rows]), rate)):
                    out[i] = record
            return out
        X = self._validate(X, reset=False, rate=rate)
        if self.normalize is None and X.size:
            level = float(np.median(np.abs(X)))
            if level > _MAX_PLAUSIBLE_MV:
                _warn(
                    f"The median absolute amplitude of X is {level:.3g}, which in mV is far "
                    "beyond an ECG's: X looks like microvolts or ADC units. Divide it by "
                    "the gain (ADC units per mV; 1000 for microvolts), or set "
                    "normalize='zscore'.",
                    UserWarning,
                )
        out = _condition(
            X.astype(np.float64, copy=False),
            rate,
            self.target_rate,
            None if self.bandpass is None else tuple(self.bandpass),
            self.notch,
            self.normalize,
        )
        return out.astype(np.float32)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.requires_fit = False
        tags.input_tags.three_d_array = True
        tags.transformer_tags.preserves_dtype = ["float32"]  # the output is always float32
        return tags
