"""What the package's neural estimators share: signal checks, the skorch net, splits.

:class:`SignalMixin` validates ECG signals (every estimator that takes
them); :class:`NeuralEstimatorMixin` adds the device check, the
patient-grouped validation split, the pretrained encoder and the assembly
of the skorch net (the prototype clusterers and the neural baselines).
"""

import math
import time

import numpy as np
import torch
from sklearn.base import clone
from sklearn.frozen import FrozenEstimator
from sklearn.utils.validation import validate_data
from skorch.callbacks import LRScheduler
from skorch.helper import predefined_split

from .._pretraining import ContrastivePretrainer, check_starts, init_encoder
from .._split import patient_split
from .._utils import _device_problem, _warn
from ..nn import ArrayDataset
from ..preprocessing import check_signal_layout


class SignalMixin:
    """Validation of ECG signals: ``(n, T)`` or ``(n, leads, T)`` to float32 ``(n, leads, T)``."""

    def _validate_signals(self, X, *, reset, ensure_all_finite=True):
        """Return X as a C-contiguous float32 array of shape (n, n_leads, n_timepoints)."""
        if not hasattr(X, "ndim"):
            X = np.asarray(X)
        if X.ndim > 3:
            raise ValueError(
                "Expected X of shape (n_samples, n_timepoints) or (n_samples, "
                f"n_leads, n_timepoints); got an array with {X.ndim} dimensions "
                f"and shape {X.shape}."
            )
        ndim = X.ndim
        check_signal_layout(X.shape, getattr(self, "sampling_rate_", None))
        shape = tuple(X.shape[1:]) if ndim == 3 else (1, *X.shape[1:])
        # Two 2-D inputs are compared by validate_data (scikit-learn's message);
        # any 3-D side is compared here by leads and length.
        if not reset and ndim >= 2 and (ndim == 3 or self._fit_ndim == 3):
            if shape != self.input_shape_:
                unknown_rate = getattr(self, "sampling_rate_", "n/a") is None
                raise ValueError(
                    f"X has {shape[0]} lead(s) of {shape[1]} samples, but "
                    f"{type(self).__name__} was fitted on {self.input_shape_[0]} "
                    f"lead(s) of {self.input_shape_[1]} samples."
                    + (
                        " It was fitted without sampling_rate, so the rate of X cannot be "
                        "checked or converted: give X at the training rate (see "
                        "sklearn_crocs.preprocessing.resample_signals), or refit with "
                        "sampling_rate=<Hz>."
                        if unknown_rate and shape[0] == self.input_shape_[0]
                        else ""
                    )
                    + (
                        " To embed a longer recording as the mean of its frames, set "
                        'longer_signals="average".'
                        if shape[1] > self.input_shape_[1]
                        and getattr(self, "longer_signals", None) == "error"
                        else ""
                    )
                )
        if ndim == 3:
            X = X.reshape(X.shape[0], math.prod(shape))
        X = validate_data(
            self,
            X,
            reset=reset,
            dtype=np.float32,
            order="C",
            ensure_min_samples=2 if reset else 1,
            ensure_all_finite=ensure_all_finite,
        )
        if reset:
            self.input_shape_ = shape
            self._fit_ndim = ndim
        return X.reshape(X.shape[0], *self.input_shape_)


#: ``max_epochs="auto"``: ECGs seen in a fit on ``_EPOCH_REFERENCE`` ECGs, and the
#: most epochs (chosen on validation patients of PTB-XL: docs, "How much data").
_EPOCH_REFERENCE = 1000
_MOST_EPOCHS = 40


def auto_max_epochs(n_train):
    """Epochs of ``max_epochs="auto"`` for a fit on ``n_train`` ECGs.

    ``min(40, round(40 * sqrt(1000 / n_train)))``, at least 1: 40 epochs up
    to 1,000 ECGs, then ECGs seen grow as the square root of ``n_train``
    (2,000 ECGs: 28 epochs; 10,000: 13; 40,000: 6), so that the fit time
    does too. ``n_train=None`` (a net rebuilt from a file, which does not
    train) gives 40.
    """
    if n_train is None:
        return _MOST_EPOCHS
    epochs = round(_MOST_EPOCHS * math.sqrt(_EPOCH_REFERENCE / max(n_train, 1)))
    return int(min(_MOST_EPOCHS, max(1, epochs)))


def _is_lr_scheduler(callback):
    """Whether a skorch callback entry (instance, class, or ``(name, either)``) is an
    ``LRScheduler``: the user's schedule replaces the built-in one."""
    if isinstance(callback, tuple):
        callback = callback[1]
    return isinstance(callback, LRScheduler) or (
        isinstance(callback, type) and issubclass(callback, LRScheduler)
    )


class NeuralEstimatorMixin(SignalMixin):
    """The device check, the patient-grouped validation split, the pretrained encoder and the
    skorch net of a neural estimator with the parameters ``device``, ``lr``, ``max_epochs``,
    ``batch_size``, ``verbose``, (for the split) ``validation_fraction`` and (for the
    pretraining) ``pretrained``, ``encoder``, ``encoder_params`` and ``embedding_dim``.
    """

    def _check_device(self):
        problem = _device_problem(self.device)
        if problem is not None:
            raise ValueError(
                f"device={self.device!r} cannot be used: {problem}. Pass device='cpu', "
                "or a device that torch can use here."
            )

    def _training_device(self):
        """The device training runs on."""
        return self.device

    def _split(self, n_samples, groups, seed, classes):
        """Train and validation indices, keeping each group on one side.

        The split is stratified by the class attribute, so that the
        validation patients hold every class that has two patients or more.
        """
        if self.validation_fraction is None:
            return np.arange(n_samples), None
        if groups is None:
            _warn(
                "fit got no groups, so the early-stopping set (validation_fraction="
                f"{self.validation_fraction}) is drawn ECG by ECG: leads or frames of one "
                "patient can land on both sides, which makes the validation loss "
                "optimistic. Pass groups=<patient id of each ECG> to fit.",
                UserWarning,
            )
            groups = np.arange(n_samples)
        n_groups = len(np.unique(groups))
        n_valid = math.ceil(self.validation_fraction * n_groups)
        if n_groups - n_valid < 1 or n_groups < 2:
            raise ValueError(
                f"validation_fraction={self.validation_fraction} leaves no training "
                f"group among the {n_groups} group(s) in the data. Pass more data or "
                "set validation_fraction=None to train without early stopping."
            )
        train, _, valid = patient_split(
            groups,
            stratify=classes,
            val_size=0.0,
            test_size=self.validation_fraction,
            random_state=seed,
        )
        if len(train) < 2:
            raise ValueError(
                f"validation_fraction={self.validation_fraction} leaves {len(train)} "
                "training ECG; at least 2 are needed. Pass more data or set "
                "validation_fraction=None."
            )
        return train, valid

    def _pretrain(self, X, groups, seed, *, lazy=False):
        """The fitted pretrainer that starts the encoder (fitted here on X if need be), or None.

        Reads the ``pretrained`` parameter; sets ``pretrainer_`` and ``pretraining_time_``.
        """
        self.pretrainer_, self.pretraining_time_ = None, 0.0
        pretrainer = self.pretrained
        if isinstance(pretrainer, FrozenEstimator):
            pretrainer = pretrainer.estimator
        if pretrainer is None:
            return None
        if isinstance(pretrainer, str):  # a shipped model's name (CROCSClusterer only)
            pretrainer = type(self).from_pretrained(pretrainer, device="cpu")
        if hasattr(pretrainer, "get_prototypes"):  # a prototype clusterer, fitted or not
            self.pretrainer_ = pretrainer
            return self._trained_encoders(pretrainer)
        if not isinstance(pretrainer, ContrastivePretrainer):
            raise TypeError(
                "pretrained must be a ContrastivePretrainer (fitted or not), possibly wrapped "
                f"in a FrozenEstimator; got {type(pretrainer).__name__}."
            )
        if not hasattr(pretrainer, "encoder_"):
            if lazy:
                raise ValueError(
                    "An unfitted pretrained= pretrains on X in memory, but X is read lazily. "
                    "Fit the ContrastivePretrainer beforehand and pass it fitted."
                )
            # The pretrained encoder must be the net's: it takes the estimator's settings.
            pretrainer = clone(pretrainer).set_params(
                encoder=self.encoder,
                encoder_params=self.encoder_params,
                embedding_dim=self.embedding_dim,
                device=self._training_device(),
            )
            if pretrainer.random_state is None:
                pretrainer.set_params(random_state=seed)
            check_starts(pretrainer, X.shape[1:])  # before spending the pretraining
            start = time.perf_counter()
            pretrainer.fit(X, groups=groups)
            self.pretraining_time_ = time.perf_counter() - start
        self.pretrainer_ = pretrainer
        return pretrainer

    def _trained_encoders(self, model):
        """The encoder weights of each net of a fitted prototype clusterer ``model``, to start
        this estimator's nets (net ``k`` from ``model``'s net ``k`` modulo their number)."""
        if not hasattr(model, "nets_"):
            raise ValueError(
                f"pretrained={type(model).__name__}(...) is not fitted. Pass a fitted model, or "
                "in a cross-validation or grid search (which clone it unfitted) wrap it in "
                "sklearn.frozen.FrozenEstimator, or pass a shipped model's name ('ptbxl')."
            )
        rate = self._signal_rates().model_rate()
        if model.sampling_rate_ != rate:
            raise ValueError(
                f"pretrained was trained on ECGs at {model.sampling_rate_} Hz, but this "
                f"model's encoder works at {rate} Hz (sampling_rate={self.sampling_rate}, "
                f"working_rate={self.working_rate}); an encoder's filters are rate-specific. "
                f"Set working_rate={model.sampling_rate_} and give sampling_rate."
            )
        return [net.module_.state_dict() for net in model.nets_]

    def _encoder_of(self, module):
        """The encoder within the net's module (the module itself here)."""
        return module

    def _fit_net(self, build, X, y, *, seed, pretrainer):
        """The net that ``build()`` makes, fitted on ``X, y``: the one training routine.

        The net is built and trained under torch's global generator seeded
        with ``seed``, forked so that the caller's random state is left as it
        was; its encoder starts from ``pretrainer``'s unless that is None.
        The fitted net holds no training data.
        """
        device = torch.device(self._training_device())
        with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []):
            torch.manual_seed(seed)
            net = build()
            if pretrainer is None:
                net.fit(X, y)
            else:
                # skorch's fit is initialize + partial_fit: the encoder starts pretrained.
                net.initialize()
                init_encoder(self._encoder_of(net.module_), pretrainer)
                net.partial_fit(X, y)
        # predefined_split holds the validation ECGs: a fitted model (and so any
        # file it is saved to) must not carry training data.
        net.train_split = None
        return net

    def _assemble_net(
        self, net_class, *, seed, valid_dataset, callbacks, n_train=None, n_nets=1,
        lr_schedule="constant", **params,
    ):  # fmt: skip
        """A skorch net of ``net_class`` with the training settings every estimator shares.

        Adam at ``lr`` (``lr_schedule="cosine"``: decayed along a half cosine
        over the epochs), ``max_epochs`` passes (see :func:`auto_max_epochs`
        for ``"auto"``, a budget shared by the ``n_nets`` nets of an
        ensemble) over the ``n_train`` training ECGs in batches of
        ``batch_size``, in an order drawn from ``seed``, early-stopping data
        ``valid_dataset`` (``None``: none); ``params`` add the module,
        criterion and placement.
        """
        max_epochs = self.max_epochs
        if max_epochs == "auto":  # two nets of half the epochs beat one (learning_curve page)
            max_epochs = max(1, round(auto_max_epochs(n_train) / n_nets))
        if lr_schedule == "cosine" and not any(map(_is_lr_scheduler, callbacks)):
            schedule = LRScheduler(policy="CosineAnnealingLR", T_max=max_epochs)
            callbacks = [("lr_schedule", schedule), *callbacks]
        return net_class(
            optimizer=torch.optim.Adam,
            lr=self.lr,
            max_epochs=max_epochs,
            batch_size=self.batch_size,
            predict_batch_size="auto",
            dataset=ArrayDataset,
            train_split=None if valid_dataset is None else predefined_split(valid_dataset),
            callbacks=callbacks,
            verbose=self.verbose,
            shuffle_seed=seed,
            **params,
        )
