"""How a model takes signals at their rates: a component of CROCSClusterer."""

import math

import numpy as np
from sklearn.base import clone

from ..preprocessing import check_signal_layout, resample_signals
from ..preprocessing._signals import check_rate, check_resampling


class SignalRates:
    """The rates of a model's signals, their conditioning, and what it does with longer ones.

    ``CROCSClusterer`` builds one from its parameters of the same names; the
    default, every option off, takes signals as they are (``DTC``).

    Parameters
    ----------
    sampling_rate : float, default=None
        Rate in Hz of the signals given to ``fit``, and of later ones unless
        a method is told otherwise; None: unknown.
    working_rate : float, default=None
        Rate in Hz at which the encoder runs; None: ``sampling_rate``.
    conditioning : SignalConditioner, default=None
        Filtering and scaling of every signal, at its own rate.
    longer_signals : {"error", "average"}, default=None
        What inference does with signals longer than the training frames;
        None: the model has no such option (they are refused).
    """

    def __init__(self, sampling_rate=None, working_rate=None, conditioning=None,
                 longer_signals=None):  # fmt: skip
        self.sampling_rate = sampling_rate
        self.working_rate = working_rate
        self.conditioning = conditioning
        self.longer_signals = longer_signals

    def model_rate(self):
        """``sampling_rate_`` for the declared rates: the encoder's input rate, or None."""
        if self.sampling_rate is None:
            if self.conditioning is not None:
                raise ValueError(
                    "conditioning filters signals in Hz, so it needs their rate: pass "
                    "sampling_rate=<Hz of X> too."
                )
            return None
        rate = self.sampling_rate if self.working_rate is None else self.working_rate
        return float(rate)

    def conditioner(self, rate, model_rate):
        """The ``conditioning`` step for signals at ``rate`` Hz, with the model's rates."""
        step = self.conditioning
        for name, wanted in (("sampling_rate", rate), ("target_rate", model_rate)):
            given = getattr(step, name)
            if given is not None and given != wanted:
                raise ValueError(
                    f"conditioning has {name}={given:g}, but the model gives it signals at "
                    f"{rate:g} Hz and runs at {model_rate:g} Hz: leave the rates of "
                    "the conditioning step None, the model sets them."
                )
        return clone(step).set_params(sampling_rate=rate, target_rate=model_rate)

    def to_model_rate(self, X, rate, model_rate, input_shape, *, name, fitting=False,
                      lazy=False):  # fmt: skip
        """Signals declared at ``rate`` Hz, conditioned and resampled as the encoder takes them.

        ``X`` is returned as it is when there is nothing to do. Otherwise the
        duration of its frames is checked against the training frames of
        ``input_shape`` (at prediction) and it comes back as a float32
        ndarray at ``model_rate``. ``name`` is the model's, for messages;
        ``lazy`` says that ``X`` is fit's lazily read array, which a conversion
        would read whole.
        """
        if rate is None:
            return X
        rate = check_rate(rate)
        if model_rate is None:
            raise ValueError(
                f"X was declared at sampling_rate={rate:g} Hz, but this "
                f"{name} was fitted without a sampling rate, so it does "
                "not know the rate it was trained at. Give X at the training rate without "
                "sampling_rate, or refit with sampling_rate=<Hz of the training signals>."
            )
        shape = tuple(getattr(X, "shape", np.shape(X)))
        if len(shape) >= 2:
            check_signal_layout(shape, rate)
        if len(shape) >= 2 and not fitting:
            n, trained = shape[-1], input_shape[1]
            # resample_signals gives ceil(n * model_rate / rate) samples.
            at_model_rate = math.ceil(n * model_rate / rate - 1e-9)
            longer = at_model_rate > trained and self.longer_signals == "average"
            if at_model_rate != trained and not longer:
                seconds = trained / model_rate
                other = n * model_rate / trained
                raise ValueError(
                    f"X has {n} samples per lead, {n / rate:g} s at {rate:g} Hz, but "
                    f"{name} was fitted on frames of {seconds:g} s "
                    f"({trained} samples at {model_rate:g} Hz). Cut X into {seconds:g}-s "
                    f"frames ({round(seconds * rate)} samples at {rate:g} Hz, "
                    "sklearn_crocs.preprocessing.make_frames), or, if X is sampled at "
                    f"{other:g} Hz, pass sampling_rate={other:g}."
                    + (
                        " To embed a longer recording as the mean of its frames, set "
                        'longer_signals="average".'
                        if at_model_rate > trained and self.longer_signals == "error"
                        else ""
                    )
                )
        conditioning = self.conditioning
        if rate == model_rate and conditioning is None:
            return X
        if len(shape) >= 2:  # before X is converted, or read whole
            check_resampling(shape, rate, model_rate)
        if lazy:
            raise ValueError(
                f"X is read lazily, and bringing it from {rate:g} Hz to {model_rate:g} Hz"
                + (" with conditioning" if conditioning is not None else "")
                + " inside fit would read it whole. Prepare it first (SignalConditioner "
                "or resample_signals of sklearn_crocs.preprocessing, chunk by chunk) and fit "
                f"with sampling_rate={model_rate:g}, conditioning=None."
            )
        X = np.asarray(X, dtype=np.float32)
        if conditioning is not None:
            return self.conditioner(rate, model_rate).fit_transform(X)
        return resample_signals(X, rate, model_rate)

    def frames_covering(self, X, length):
        """``(frames, n_frames)``: with ``longer_signals="average"``, ECGs longer than
        ``length`` (the training frames') cut into ``n_frames`` frames of that length
        each, evenly spaced from start to end (overlapping unless the length is a
        multiple); otherwise ``(X, 1)``, left to the shape checks."""
        if self.longer_signals != "average":
            return X, 1
        X = X if hasattr(X, "shape") else np.asarray(X)
        if len(X.shape) not in (2, 3) or X.shape[-1] <= length:
            return X, 1
        n_frames = math.ceil(X.shape[-1] / length)
        starts = np.linspace(0, X.shape[-1] - length, n_frames).round().astype(int)
        X = np.asarray(X)
        frames = np.stack([X[..., s : s + length] for s in starts], axis=1)
        return frames.reshape(-1, *X.shape[1:-1], length), n_frames
