"""The estimator of one prototype per attribute combination: what CROCS and DTC share.

:class:`BasePrototypeClusterer` fits, predicts and transforms; its
subclasses (``CROCSClusterer``, the baselines' ``DTC``) choose the loss and
their parameters. The signal checks and the skorch net that every neural
estimator shares are in :mod:`sklearn_crocs._engine._neural`.
"""

import math
import re
import sys
from functools import partial
from numbers import Integral
from typing import NamedTuple

import numpy as np
import pandas as pd
import torch
import torch.nn.functional as F
from sklearn import get_config
from sklearn.base import (
    BaseEstimator,
    ClassNamePrefixFeaturesOutMixin,
    TransformerMixin,
)
from sklearn.utils.validation import check_consistent_length, check_is_fitted
from skorch.callbacks import Freezer, PassthroughScoring
from tqdm import tqdm

from .._attributes import AttributeCodec
from .._display import DocLinkMixin
from .._guards import (
    activation_size,
    check_finite_embeddings,
    check_fit_memory,
    check_training,
)
from .._persistence._estimator import EstimatorFile
from .._utils import _draw_seed, _length_groups, _n_rows, _nearest, _silent, _warn
from ..nn import ArrayDataset
from ..nn._callbacks import early_stopping_callbacks
from ..nn._data import is_lazy_array
from ..nn._encoders import encoder_class
from ._nets import Ensemble, Placement
from ._neural import NeuralEstimatorMixin
from ._prototypes import FittedPrototypes
from ._rates import SignalRates

# Inference reads and validates its input in chunks of about this many bytes
# of float32 signal, so that embedding a large (e.g. memory-mapped) database
# needs extra memory independent of its size.
_CHUNK_BYTES = 64 * 2**20

# ECGs whose signal spread is measured for the unit check (see signal_scale_).
_SCALE_ROWS = 1024
# New signals whose spread differs from the training signals' by more than this
# factor are in other units (uV or ADC units against mV, or raw against z-scored).
_SCALE_FACTOR = 20.0

# The colour codes that skorch's PrintLog puts around each column's best value.
_ANSI_CODE = re.compile(r"\x1b\[[0-9;]*m")


class ClassSpec(NamedTuple):
    """A class to build and its parameters: the loss that ``_criterion`` names."""

    cls: type
    params: dict


class AttributeOptions(NamedTuple):
    """How ``fit`` reads ``y``: CROCSClusterer's parameters of the same names."""

    missing: str = "error"  # or "marginalise", "posterior"
    continuous: object = None  # {column: number of quantile bins}, or None


class _Training(NamedTuple):
    """What ``fit`` prepares for training (see :meth:`BasePrototypeClusterer._prepare`)."""

    X: object  # validated ndarray, or a lazy array read batch by batch
    lazy: bool
    codec: AttributeCodec
    class_index: int
    target: np.ndarray  # combination number of each ECG (see _fit_attributes)
    partial: np.ndarray
    seed: int
    train: np.ndarray
    valid: object  # ndarray or None
    groups: object  # ndarray or None


class BasePrototypeClusterer(
    EstimatorFile,
    NeuralEstimatorMixin,
    DocLinkMixin,
    ClassNamePrefixFeaturesOutMixin,
    TransformerMixin,
    BaseEstimator,
):
    """One prototype per attribute combination, learned with an encoder; the nearest one predicts.

    Subclasses set the loss (:meth:`_criterion`) and their parameters, which
    include ``encoder``, ``encoder_params``, ``embedding_dim``,
    ``prototypes``, ``class_attribute``, ``max_epochs``, ``batch_size``,
    ``lr``, ``validation_fraction``, ``n_iter_no_change``, ``device``,
    ``random_state``, ``verbose`` and ``pretrained``. Options that only
    some have reach the shared code as components that the hooks below
    build from the parameters, here in their plain form (DTC's): the
    :class:`SignalRates` of the signals, the :class:`Ensemble` of nets and
    their :class:`Placement`. The attribute options, the augmentation (a
    :class:`~sklearn_crocs.nn.RandomWindow`) and the extra callbacks are
    values, which hooks give as they are.
    """

    #: Parameters that :meth:`save` leaves out (objects of any class, which a
    #: file that runs no code cannot restore); a loaded model has None.
    _not_saved = ("encoder", "pretrained")

    # ------------------------------------------------------------------ hooks
    def _criterion(self, codec, class_index, partial_combinations=None):
        """The :class:`ClassSpec` of the loss that owns the prototypes."""
        raise NotImplementedError

    def _signal_rates(self):
        """The :class:`SignalRates` of the signals: here they are taken as they are."""
        return SignalRates()

    def _attribute_options(self):
        """How ``y`` is read (:class:`AttributeOptions`); here every attribute is known."""
        return AttributeOptions()

    def _ensemble(self):
        """The :class:`Ensemble` of nets of the model: here one net."""
        return Ensemble()

    def _frozen_layers(self, encoder):
        """Name prefixes of the ``encoder`` class's parameters that keep their starting
        weights during a fit; none here."""
        return ()

    def _placement(self):
        """The :class:`Placement` of the nets: here on ``device``."""
        return Placement(self.device)

    def _augmentation(self, encoder):
        """The ``augment`` of training ECGs for the encoder class ``encoder``; none here."""
        return None

    def _user_callbacks(self):
        """Extra skorch callbacks of a fit, after the estimator's own; none here."""
        return []

    @property
    def _output_dim(self):
        """Width of the embeddings (see :meth:`Ensemble.width`)."""
        return self._ensemble().width(self.embedding_dim)

    def _training_device(self):
        """The device training runs on (see :attr:`Placement.training_device`)."""
        return self._placement().training_device

    # ------------------------------------------------------------------ input
    def _check_lazy_signals(self, X):
        """Check the shape and dtype of a lazily read X at fit, without reading it.

        Its values are checked batch by batch as training reads them.
        """
        shape = tuple(int(d) for d in X.shape)
        if len(shape) not in (2, 3):
            raise ValueError(
                "Expected X of shape (n_samples, n_timepoints) or (n_samples, n_leads, "
                f"n_timepoints); got an array of shape {shape}."
            )
        if np.dtype(X.dtype).kind not in "biuf":
            raise ValueError(f"X must hold numbers; got an array of dtype {X.dtype}.")
        if shape[0] < 2 or math.prod(shape[1:]) < 1:
            raise ValueError(
                f"Found array with shape {shape} while {type(self).__name__} needs at "
                "least 2 samples of at least 1 value."
            )
        self.input_shape_ = shape[1:] if len(shape) == 3 else (1, shape[1])
        self._fit_ndim = len(shape)
        self.n_features_in_ = math.prod(self.input_shape_)
        if hasattr(self, "feature_names_in_"):  # from an earlier fit on a DataFrame
            del self.feature_names_in_

    # ------------------------------------------------------------------ rates
    def _to_model_rate(self, X, rate, *, fitting=False, lazy=False):
        """X declared at ``rate`` Hz as the encoder takes it (SignalRates.to_model_rate)."""
        return self._signal_rates().to_model_rate(
            X, rate, self.sampling_rate_, getattr(self, "input_shape_", None),
            name=type(self).__name__, fitting=fitting, lazy=lazy,
        )  # fmt: skip

    def _check_scale(self, X):
        """Warn when validated signals X are in other units than the training signals."""
        trained = getattr(self, "signal_scale_", None)
        scale = _signal_scale(X)
        if not trained or not scale:
            return
        factor = scale / trained
        if max(factor, 1 / factor) >= _SCALE_FACTOR:
            _warn(
                f"The signals' spread (median standard deviation of a lead {scale:.3g}) is "
                f"{factor:.3g} times that of the training signals ({trained:.3g}): they "
                "look like other units (microvolts or ADC units against mV), or raw "
                "against normalised signals. Bring them to the training signals' units "
                "(divide by the gain), or give the model conditioning=SignalConditioner() "
                "so that every signal is normalised.",
                UserWarning,
            )

    def _fit_attributes(self, y, n_samples):
        """Learn the attributes of y; return ``(codec, class_index, target, classes, partial)``.

        ``target[i]``: the combination number of ECG ``i``; when some of its
        attributes are missing, ``n_combinations + r`` for row ``r`` of
        ``partial`` (value codes, ``-1`` where missing); ``-1`` when all are
        (unlabelled). ``classes[i]``: its class code (``-1`` if unlabelled).
        """
        options = self._attribute_options()
        missing, continuous = options.missing, options.continuous
        for name, n_bins in (continuous or {}).items():
            if not isinstance(n_bins, Integral) or isinstance(n_bins, bool) or n_bins < 2:
                raise ValueError(
                    f"continuous={continuous!r}: the number of bins of {name!r} must be "
                    "an int >= 2."
                )
        codec = AttributeCodec.fit(
            y, n_samples, allow_missing=missing != "error", continuous=continuous
        )
        class_index = codec.position(self.class_attribute, "class_attribute")
        target, partial = codec.encode_partial(y)
        unlabelled = target < 0
        codes = np.vstack([codec.combinations, partial])[target]
        codes[unlabelled] = -1
        return codec, class_index, target, codes[:, class_index], partial

    # ------------------------------------------------------ fitted attributes
    @property
    def attribute_codec_(self):
        return self._fitted.codec

    @property
    def class_index_(self):
        return self._fitted.class_index

    @property
    def attribute_names_(self):
        return self._fitted.codec.names

    @property
    def categories_(self):
        return self._fitted.codec.categories

    @property
    def bin_edges_(self):
        return self._fitted.codec.bin_edges

    @property
    def prototypes_(self):
        return self._fitted.prototypes

    @property
    def prototype_attributes_(self):
        # In the layout of y, as predict answers: a DataFrame y gives a DataFrame of its columns
        # and dtypes; an array y, the (n_prototypes, n_attributes) array of get_prototypes.
        if self._fitted.codec.layout == "frame":
            return self._fitted.codec.decode(self._fitted.combinations)
        return self._fitted.attributes

    @property
    def prototype_counts_(self):
        return self._fitted.prototype_counts

    @property
    def combination_counts_(self):
        return self._fitted.counts

    # ---------------------------------------------------------------- fitting
    def _build_net(
        self, n_leads, n_timepoints, seed, valid_dataset, partial_combinations=None, *,
        codec, class_index, n_train=None,
    ):  # fmt: skip
        encoder = encoder_class(self.encoder)
        encoder_params = {f"module__{k}": v for k, v in (self.encoder_params or {}).items()}
        sink = _print if self.verbose else _silent
        loss = self._criterion(codec, class_index, partial_combinations)
        callbacks = [
            ("train_nce", PassthroughScoring("train_nce", on_train=True)),
            ("train_reg", PassthroughScoring("train_reg", on_train=True)),
        ]
        if valid_dataset is not None:
            callbacks += [
                ("valid_nce", PassthroughScoring("valid_nce")),
                ("valid_reg", PassthroughScoring("valid_reg")),
                *early_stopping_callbacks("valid_nce", self.n_iter_no_change, sink),
            ]
        placement = self._placement()
        frozen = self._frozen_layers(encoder)
        if frozen:  # skorch's Freezer, with patterns (a net with them still pickles)
            callbacks.append(("freeze", Freezer([f"{prefix}*" for prefix in frozen])))
        return self._assemble_net(
            placement.net_class,
            seed=seed,
            valid_dataset=valid_dataset,
            callbacks=callbacks + self._user_callbacks(),
            n_train=n_train,
            n_nets=self._ensemble().size,
            lr_schedule=self.lr_schedule,
            module=encoder,
            module__in_channels=n_leads,
            module__n_timepoints=n_timepoints,
            module__embedding_dim=self.embedding_dim,
            **encoder_params,
            criterion=loss.cls,
            **{f"criterion__{k}": v for k, v in loss.params.items()},
            callbacks__print_log__sink=sink,
            augment=self._augmentation(encoder),
            **placement.net_params,
        )

    def _fit(self, X, y, groups, return_embeddings=False):
        """Train encoder and prototypes; return the embeddings of X if asked.

        A lazy X (a memory map, ``h5py.Dataset``, ``zarr.Array`` or dask
        array) is never loaded whole: training reads the rows of each batch,
        and the embeddings are computed chunk by chunk, as they are for an
        X in memory.
        """
        data = self._prepare(X, y, groups)
        self._train(data)
        return self._summarise(data, return_embeddings)

    def _prepare(self, X, y, groups):
        """Check X (at the model's rate), learn the attributes of y, check memory, split."""
        self._check_device()
        rates = self._signal_rates()
        self.sampling_rate_ = rates.model_rate()
        # Decided once: the rate conversion, the checks, training and the
        # summary follow it (a lazy X is never converted here, see SignalRates).
        lazy = is_lazy_array(X)
        X = self._to_model_rate(X, rates.sampling_rate, fitting=True, lazy=lazy)
        if lazy:
            self._check_lazy_signals(X)
        else:
            X = self._validate_signals(X, reset=True)
        # A lazy X is read only batch by batch, in training: no extra pass for this.
        self.signal_scale_ = None if lazy else _signal_scale(X)
        n_samples = X.shape[0]
        codec, class_index, target, classes, partial = self._fit_attributes(y, n_samples)
        encoder = encoder_class(self.encoder)
        size = activation_size(
            encoder, *self.input_shape_, self.embedding_dim, self.encoder_params or {}
        )
        check_fit_memory(self, codec, class_index, size)
        if groups is not None:
            groups = np.asarray(groups)
            check_consistent_length(X, groups)
            unknown = pd.isna(groups)
            if unknown.any():
                raise ValueError(
                    f"groups holds {unknown.sum()} missing patient id(s) (NaN or None; rows "
                    f"{_first_rows(unknown)}). Give every ECG the id of its patient; an ECG "
                    "whose patient is unknown can get a unique id of its own."
                )
        self._check_class_count(codec, class_index, n_samples, groups)
        seed = _draw_seed(self.random_state)
        train, valid = self._split(n_samples, groups, seed, classes)
        return _Training(X, lazy, codec, class_index, target, partial, seed, train, valid, groups)

    @staticmethod
    def _check_class_count(codec, class_index, n_samples, groups):
        """Warn when the class has nearly one value per patient (e.g. raw diagnosis codes)."""
        n_classes = len(codec.categories[class_index])
        n_units = n_samples if groups is None else len(np.unique(groups))
        if n_classes >= 10 and n_classes > n_units / 2:
            unit = "ECGs" if groups is None else "patients"
            _warn(
                f"The class attribute {codec.names[class_index]!r} has {n_classes} values for "
                f"{n_units} {unit}, nearly one class each: too few {unit} per class to learn "
                "it. Group diagnosis codes into classes first, e.g. with "
                "sklearn_crocs.datasets.map_classes.",
                UserWarning,
            )

    def _train(self, data):
        """Fit ``net_`` on the training rows of X, early-stopping on the validation rows."""
        # Training and validation sets are index sets into X, not copies of it.
        check = data.lazy and not get_config()["assume_finite"]  # lazy X was not read yet

        def dataset(indices):
            return ArrayDataset(
                data.X, data.target, indices=indices, sample_shape=self.input_shape_,
                check_finite=check,
            )  # fmt: skip

        valid_dataset = None if data.valid is None else dataset(data.valid)
        pretrainer = self._pretrain(data.X, data.groups, data.seed, lazy=data.lazy)
        # Rows of y with missing values only: with none, the loss is unchanged.
        partial_combinations = data.partial if len(data.partial) else None
        n_train = data.X.shape[0] if data.valid is None else len(data.train)

        def build(seed):
            return self._build_net(
                *self.input_shape_, seed, valid_dataset, partial_combinations,
                codec=data.codec, class_index=data.class_index, n_train=n_train,
            )  # fmt: skip

        # A fitted clusterer gives one encoder per net; a pretrainer one for all.
        starts = pretrainer if isinstance(pretrainer, list) else [pretrainer]

        def fit_one(seed, k):
            return self._fit_net(
                partial(build, seed), dataset(None if data.valid is None else data.train),
                None, seed=seed, pretrainer=starts[k % len(starts)],
            )  # fmt: skip

        nets = self._ensemble().fit(fit_one, data.seed)
        self.net_, self.nets_ = nets[0], nets
        self.n_iter_ = len(nets[0].history)

    def _summarise(self, data, return_embeddings):
        """Set the prototypes and ``labels_``, check the training; return X's embeddings if asked.

        X is embedded chunk by chunk, in memory or not; the embeddings are
        kept when returned or when X is in memory (they are a fraction of
        its size), else the mean prototypes' labels need a second pass.
        """
        target, codec = data.target, data.codec
        learned = Ensemble.join(
            [net.criterion_.prototypes.detach().float().cpu() for net in self.nets_]
        )
        # Mean prototypes and counts come from the ECGs whose attributes are all known.
        n_combinations, n_samples = len(codec.combinations), data.X.shape[0]
        known = (target >= 0) & (target < n_combinations)
        counts = np.bincount(target[known], minlength=n_combinations)
        keep = return_embeddings or not data.lazy
        embeddings = np.empty((n_samples, self._output_dim), np.float32) if keep else None
        labels = np.empty(n_samples, dtype=np.int64)
        sums = torch.zeros(n_combinations, self._output_dim)
        low = np.full(self._output_dim, np.inf, dtype=np.float32)
        high = -low
        check = data.lazy and not get_config()["assume_finite"]
        for start, part in self._embedding_chunks(data.X, prepared=True, check_finite=check):
            rows = slice(start, start + len(part))
            mask = known[rows]
            sums.index_add_(0, torch.from_numpy(target[rows][mask]), torch.from_numpy(part[mask]))
            low, high = np.minimum(low, part.min(axis=0)), np.maximum(high, part.max(axis=0))
            if self.prototypes == "learned":
                labels[rows] = _nearest(part, learned, counts)
            if keep:
                embeddings[rows] = part
        means = F.normalize(sums, dim=1).numpy()
        means[counts == 0] = np.nan
        self._fitted = FittedPrototypes(
            codec, data.class_index, learned, means, counts, self.prototypes
        )
        # Each net's own columns: one collapsed net of an ensemble is a failed fit too.
        spreads = (high - low).reshape(len(self.nets_), -1).max(axis=1)
        for net, spread in zip(self.nets_, spreads):
            check_training(net.history, float(spread), data.X)
        if self.prototypes == "mean":
            if (counts == 0).any():
                missing = np.flatnonzero(counts == 0)
                _warn(
                    f"{len(missing)} of {len(counts)} attribute combinations of "
                    f"{codec.names} have no training ECG, so prototypes='mean' "
                    f"(TP CROCS) has no prototype for them: {codec.format(missing)}."
                    " They are left out of prototypes_; prototypes='learned' covers them.",
                    UserWarning,
                )
            if keep:
                labels = _nearest(embeddings, self.prototypes_, self.prototype_counts_)
            else:
                labels = self._predict_chunks(data.X, prepared=True)
        self.labels_ = labels
        return embeddings if return_embeddings else None

    # -------------------------------------------------------------- inference
    def _embed(self, X, *, check_finite=False):
        """L2-normalised embeddings of validated signals, as float32 ndarray.

        ``check_finite`` checks each batch for NaN and infinity as the net
        reads it (see :class:`~sklearn_crocs.nn.ArrayDataset`).
        """
        dataset = ArrayDataset(X, check_finite=check_finite)
        return Ensemble.join([
            net.forward(dataset, training=False, device="cpu").float() for net in self.nets_
        ])  # fmt: skip

    def _embedding_chunks(self, X, sampling_rate=None, *, prepared=False, check_finite=None):
        """Validate and embed unseen ECGs chunk by chunk: yield ``(start, embeddings)``.

        An ndarray, memory map or lazy array (see
        :func:`~sklearn_crocs.nn._data.is_lazy_array`) is read, checked and
        embedded ``_CHUNK_BYTES`` at a time, with a progress bar (tqdm, on
        stderr) when ``verbose``; other inputs are validated whole. NaN and infinity are
        looked for batch by batch as the net reads them (unless scikit-learn's
        ``assume_finite`` is set, or ``check_finite`` is False), not in a
        separate pass over the input. Signals are first brought to the
        model's rate (see :class:`SignalRates`) and checked unless
        ``prepared`` (fit's own X, checked there); their embeddings must be
        finite (see :func:`~sklearn_crocs._guards.check_finite_embeddings`),
        whereas fit's own warn through its training checks.
        """
        check = not get_config()["assume_finite"] if check_finite is None else check_finite
        rates = self._signal_rates()
        rate = rates.sampling_rate if sampling_rate is None else sampling_rate
        first = [True]

        def embed(part, rows):
            out = embed_part(part)
            if not prepared:
                check_finite_embeddings(out, rows, n_rows=None if rows is None else _n_rows(X))
            return out

        def embed_part(part):
            if prepared:
                part = np.ascontiguousarray(part, dtype=np.float32)
                return self._embed(part.reshape(len(part), *self.input_shape_), check_finite=check)
            part = self._to_model_rate(part, rate)
            part, n_frames = rates.frames_covering(part, self.input_shape_[1])
            part = self._validate_signals(part, reset=False, ensure_all_finite=False)
            if first[0]:  # one look at the units per call
                first[0] = False
                self._check_scale(part)
            out = self._embed(part, check_finite=check)
            if n_frames == 1:
                return out
            # One ECG: the normalised mean of its frames' embeddings.
            mean = out.reshape(-1, n_frames, out.shape[1]).mean(axis=1)
            return mean / np.maximum(np.linalg.norm(mean, axis=1, keepdims=True), 1e-12)

        groups = None if prepared else _length_groups(X)
        if groups is not None:  # records of different lengths: one array per length
            out = None
            for rows in groups:
                part = embed(np.stack([np.asarray(X[i]) for i in rows]), rows)
                if out is None:
                    out = np.empty((len(X), part.shape[1]), dtype=np.float32)
                out[rows] = part
            yield 0, out
            return
        # fit's own X (prepared) is an ndarray or a lazy array already.
        arraylike = prepared or isinstance(X, np.ndarray) or is_lazy_array(X)
        if not (arraylike and len(X.shape) in (2, 3) and X.shape[0] > 0):
            yield 0, embed(X, None)
            return
        rows = max(1, _CHUNK_BYTES // (4 * math.prod(X.shape[1:])))
        batch = self.net_.inference_batch_size()
        rows = max(rows - rows % batch, min(rows, batch))  # whole batches per chunk
        n = X.shape[0]
        # A bar only when X takes several chunks (large or lazy X).
        quiet = not self.verbose or n <= rows
        with tqdm(total=n, desc="Embedding", unit="ECG", disable=quiet) as bar:
            for start in range(0, n, rows):
                stop = min(start + rows, n)
                yield start, embed(X[start:stop], np.arange(start, stop))
                bar.update(stop - start)

    def _embed_input(self, X, sampling_rate=None, *, prepared=False):
        """Embeddings of unseen ECGs, computed chunk by chunk (see :meth:`_embedding_chunks`)."""
        out = None
        for start, part in self._embedding_chunks(X, sampling_rate, prepared=prepared):
            if start == 0 and (not hasattr(X, "shape") or len(part) == X.shape[0]):
                return part  # embedded in one piece
            if out is None:
                out = np.empty((X.shape[0], part.shape[1]), dtype=np.float32)
            out[start : start + len(part)] = part
        return out

    def _predict_chunks(self, X, sampling_rate=None, *, prepared=False):
        """Index of the nearest prototype of each unseen ECG, without holding all embeddings."""
        return np.concatenate(
            [
                _nearest(part, self.prototypes_, self.prototype_counts_)
                for _, part in self._embedding_chunks(X, sampling_rate, prepared=prepared)
            ]
        )

    def get_prototypes(self, prototypes=None):
        """Return the learned (CP CROCS) or mean (TP CROCS) prototypes.

        Parameters
        ----------
        prototypes : {"learned", "mean"}, default=None
            Which set; ``None`` means the one chosen by the ``prototypes``
            parameter. ``"mean"`` leaves out combinations without training ECGs.

        Returns
        -------
        prototypes : ndarray of shape (n_prototypes, n_features_out)
            L2-normalised prototypes, as wide as the embeddings.
        attributes : ndarray of shape (n_prototypes, n_attributes)
            Attribute values of each prototype.

        Examples
        --------
        >>> import numpy as np
        >>> from sklearn_crocs import CROCSClusterer
        >>> rng = np.random.RandomState(0)
        >>> X, y = rng.randn(40, 400), np.repeat([0, 1], 20)
        >>> model = CROCSClusterer(embedding_dim=8, max_epochs=2,
        ...                        validation_fraction=None, random_state=0).fit(X, y)
        >>> prototypes, attributes = model.get_prototypes("mean")
        >>> prototypes.shape, attributes.ravel().tolist()
        ((2, 16), [0, 1])
        """
        check_is_fitted(self, "net_")
        if prototypes not in (None, "learned", "mean"):
            raise ValueError(
                f"prototypes must be 'learned', 'mean' or None; got {prototypes!r}."
            )
        return self._fitted.get(prototypes)

    def score(self, X, y, *, sampling_rate=None):
        """Mean over attributes of the accuracy of :meth:`predict`.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_timepoints) or (n_samples, n_leads, n_timepoints)
            ECG signals.
        y : array-like of shape (n_samples,) or (n_samples, n_attributes), or DataFrame
            True attributes, in the layout used in ``fit``; every value must
            have been seen in ``fit``.
        sampling_rate : float, default=None
            Rate of ``X`` in Hz when it is not the ``sampling_rate`` the model
            was given; ``X`` is brought to the model's rate. Needs a model
            fitted with ``sampling_rate``.

        Returns
        -------
        score : float
            Mean per-attribute accuracy.
        """
        check_is_fitted(self, "net_")
        embeddings = self._embed_input(X, sampling_rate)
        codec = self.attribute_codec_
        true = codec.encode(y, embeddings.shape[0])
        nearest = _nearest(embeddings, self.prototypes_, self.prototype_counts_)
        predicted = self._fitted.combinations[nearest]
        return float(np.mean(codec.combinations[true] == codec.combinations[predicted]))

    @property
    def n_features_out_(self):
        # The width fit learned: the nets' embeddings side by side, embedding_dim each.
        return self._fitted.prototypes.shape[1]

    @property
    def _n_features_out(self):
        return self.n_features_out_

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.three_d_array = True
        tags.target_tags.required = True
        tags.target_tags.multi_output = True
        tags.transformer_tags.preserves_dtype = ["float32"]
        return tags


def _signal_scale(X):
    """Median standard deviation of the leads of the first ECGs of X (0 if all are flat)."""
    rows = np.asarray(X[:_SCALE_ROWS], dtype=np.float32)
    if rows.size == 0:
        return 0.0
    return float(np.median(rows.reshape(-1, rows.shape[-1]).std(axis=1)))


def _first_rows(mask, limit=10):
    """The first ``limit`` positions where ``mask`` is True, for messages."""
    rows = np.flatnonzero(mask)
    more = f" and {len(rows) - limit} more" if len(rows) > limit else ""
    return str(rows[:limit].tolist()) + more


def _print(text):
    """Sink for the training log: print, without colour codes unless stdout is a terminal."""
    print(text if sys.stdout.isatty() else _ANSI_CODE.sub("", text), flush=True)
