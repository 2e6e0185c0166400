"""CROCSClusterer: clinical prototypes learned with a skorch-wrapped encoder."""

import math
import re
import sys
import warnings
from numbers import Integral, Real

import numpy as np
import pandas as pd
import torch
import torch.nn.functional as F
from sklearn import get_config
from sklearn.base import (
    BaseEstimator,
    ClassNamePrefixFeaturesOutMixin,
    ClusterMixin,
    TransformerMixin,
    _fit_context,
    clone,
)
from sklearn.utils._param_validation import HasMethods, Interval, Options, StrOptions
from sklearn.utils.validation import check_consistent_length, check_is_fitted, validate_data
from skorch.callbacks import PassthroughScoring
from skorch.helper import predefined_split
from torch import nn

from ._attributes import AttributeCodec
from ._doc_link import DocLinkMixin
from ._guards import activation_size, check_fit_memory, check_training
from ._persistence import load_clusterer, save_clusterer
from ._utils import _device_problem, _draw_seed, _fused_adam_supported, _nearest, _silent
from .nn import (
    AcceleratedCROCSNet,
    ArrayDataset,
    CNNEncoder,
    CROCSLoss,
    CROCSNet,
    RandomWindow,
    ResNet1dEncoder,
)
from .nn._callbacks import early_stopping_callbacks
from .nn._data import is_lazy_array
from .nn._encoders import ENCODERS
from .preprocessing import SignalConditioner, check_signal_layout, resample_signals

__all__ = ["CROCSClusterer"]


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


class CROCSClusterer(
    DocLinkMixin, ClassNamePrefixFeaturesOutMixin, TransformerMixin, ClusterMixin, BaseEstimator
):
    """Cluster ECGs around clinical prototypes of attribute combinations (CROCS).

    CROCS (Kiyasseh, Zhu & Clifton, NeurIPS 2021) learns one embedding, a
    *clinical prototype*, for every combination of discrete patient attributes
    (for example disease class x sex x age group) together with an encoder
    that places each ECG near the prototypes that share its attributes. The
    fitted prototypes act as cluster centroids: :meth:`predict` assigns an
    unlabelled ECG the attributes of its nearest prototype.

    The encoder is trained by a private skorch net (``net_``) whose criterion,
    :class:`~sklearn_crocs.nn.CROCSLoss`, owns the prototypes.

    Read more in the :ref:`User Guide <clustering>`.

    Parameters
    ----------
    encoder : {"cnn", "resnet"} or nn.Module subclass, default="resnet"
        ``"resnet"``: a 1-D ResNet18 with one block per stage, at half its
        widths (:class:`~sklearn_crocs.nn.ResNet1dEncoder`, the paper's
        PTB-XL encoder); ``"cnn"``: the paper's small CNN for single-lead
        Chapman frames (:class:`~sklearn_crocs.nn.CNNEncoder`), which learns
        far less on 12-lead ECGs (see :ref:`defaults`). A class is
        instantiated as ``encoder(in_channels=n_leads, n_timepoints=n_timepoints,
        embedding_dim=embedding_dim, **encoder_params)`` and must map
        ``(batch, n_leads, n_timepoints)`` to ``(batch, embedding_dim)``.
    encoder_params : dict, default=None
        Extra keyword arguments of the encoder.
    embedding_dim : int, default=128
        Dimension ``E`` of the embeddings and prototypes (paper: 128 on
        Chapman, 256 on PTB-XL).
    tau_s : float, default=0.1
        Temperature of the cosine similarity.
    tau_w : float, default=0.5
        Temperature of the soft-assignment weights; ``math.inf`` weighs all
        prototypes of an ECG's class equally. Ignored when ``loss="hard"``.
        The paper uses 1; 0.5 gives an ECG's own combination more of the
        weight (see :ref:`defaults` for what each value measured).
    beta : float, default=0.0
        Desired distance between two same-class prototypes per differing
        attribute in the arrangement regulariser (the paper's
        NCE-soft + L_reg uses 0.2); ``0`` turns it off: on the PTB-XL
        sample the learned prototypes then retrieve better, with the other
        figures within their noise (see :ref:`defaults`).
    loss : {"soft", "hard"}, default="soft"
        ``"soft"``: NCE-soft (an ECG is attracted to every prototype of its
        class, more strongly the more attributes they share); ``"hard"``:
        NCE-hard (only to the prototype of its exact combination).
    reg_reduction : {"sum", "mean"}, default="mean"
        How the regulariser adds up its terms over pairs of same-class
        prototypes: their mean (the paper's text calls it a mean-squared
        error) or their sum (Eq. 3), which with 16 prototypes starts about
        30 times larger than the NCE term. Used only when ``beta > 0``.
    prototypes : {"learned", "mean"}, default="learned"
        Centroids used by :meth:`predict`, :meth:`predict_proba` and
        ``prototypes_``: the learned clinical prototypes (CP CROCS) or the
        mean training embedding of each combination (TP CROCS). Training is
        the same for both; :meth:`get_prototypes` gives either set.
    class_attribute : int or str, default=0
        Column (position or name) of ``y`` that holds the class attribute:
        ECGs are only attracted to prototypes of their own class.
    missing : {"marginalise", "error"}, default="marginalise"
        What ``fit`` does with missing values (NaN, None, ``pd.NA``) in
        ``y``. ``"marginalise"``: an ECG whose attributes other than the
        class are partly unknown is attracted to every prototype consistent
        with its known ones (Eq. 2 with the unknown attributes summed out;
        for ``loss="hard"``, the probability summed over those prototypes),
        see :ref:`missing_attributes`; an ECG with every attribute missing
        is unlabelled and trains the encoder through its pseudo-label
        (see :ref:`unlabelled_ecgs`); a missing class with other attributes
        known raises a ``ValueError``. ``"error"``: any missing value
        raises a ``ValueError``. Prediction is the same either way.
    unlabelled_weight : float, default=1.0
        Weight of the unlabelled ECGs' term (rows of ``y`` with every
        attribute missing, with ``missing="marginalise"``): an unlabelled
        ECG whose class probability (the softmax over prototypes, summed
        over each class's) exceeds ``unlabelled_threshold`` is pulled
        towards the prototypes of that class, its pseudo-label. ``0``:
        unlabelled ECGs only share the batches (and the batch-norm
        statistics). Ignored when every ECG is labelled.
    unlabelled_threshold : float, default=0.99
        Class probability above which an unlabelled ECG gets a
        pseudo-label; lower values label more ECGs, and more wrongly.
    ordinal : "auto", list of str or None, default="auto"
        Attributes whose values are ordered (age groups, say): the distance
        between their ranks, ``|rank_i - rank_j|``, replaces the 0/1
        mismatch in the soft weights ``q(A_i, A_j)`` and in the
        regulariser's Hamming distance, so that neighbouring groups count
        as closer than distant ones (see :ref:`ordinal_attributes`).
        ``"auto"``: the pandas ordered categorical columns of ``y``
        (and the ``continuous`` ones); a list: those attributes, ranked in
        the order of ``categories_``; ``None``: every attribute nominal
        (the paper's setting).
    continuous : dict of str to int, default=None
        Numeric columns of a DataFrame ``y`` to bin inside the estimator,
        each into the given number of quantile bins of its training values
        (``{"age": 4}``: quartiles, as the paper's age groups); they become
        ordered attributes whose values are bin labels such as ``"45-58"``,
        with the edges in ``bin_edges_``. Numbers given later (to
        :meth:`score`, the scorers) are binned with the same edges.
    sampling_rate : float, default=None
        Rate in Hz of the signals given to ``fit``, and of those given later
        unless a method is told otherwise (``predict(X, sampling_rate=500)``).
        Declared, the model runs its encoder at ``working_rate``: signals are
        resampled to it (polyphase, with its anti-aliasing filter), new
        signals of another declared rate are brought to it, and a frame of
        another duration than in training is refused with both rates named
        (see :ref:`raw_recordings`). ``None``: the rate is unknown, signals
        are used as they are and only their shape is checked.
    working_rate : float, default=100.0
        Rate in Hz at which the encoder runs when ``sampling_rate`` is given;
        ``None`` runs it at ``sampling_rate``. 100 Hz keeps what a 0.5-40 Hz
        ECG holds and makes 500 Hz input cost what 100 Hz input costs (the
        defaults were chosen on 100 Hz signals; see :ref:`raw_recordings`
        for what other rates measured).
    conditioning : SignalConditioner, default=None
        Filtering and scaling of every ECG given to the model (in ``fit``
        and at prediction), applied at the ECG's own rate before the
        resampling to ``working_rate``; its rates are set by the model (leave
        them ``None``). Needs ``sampling_rate``. Stored in the model file.
        ``None``: signals are used as they are. For raw recordings
        (mV, baseline wander, mains), condition whole records before cutting
        them into frames instead where you can (see :ref:`raw_recordings`).
    max_epochs : int, default=40
        Number of passes over the training data (the most, with early
        stopping).
    batch_size : int, default=128
        Mini-batch size of training (paper: 256 on Chapman, 128 on PTB-XL).
        Inference (``transform``, ``predict``, validation) runs on CPU in
        batches of as many frames (at most 1024) as keep a batch's largest
        intermediate tensor within 8 MiB (52 frames for the ResNet on 12-lead
        2500-sample frames, 630 for the paper's CNN on 2500 samples), and in
        batches of ``batch_size`` on other devices; outputs do not depend on
        it (up to float rounding).
    lr : float, default=1e-3
        Learning rate of Adam (paper: 1e-4 on Chapman, 1e-5 on PTB-XL; those
        need many more epochs than a small dataset offers).
    crop : float in (0, 1] or "auto", default="auto"
        Each training ECG is a random window of this fraction of its
        samples, drawn anew on every pass (:class:`~sklearn_crocs.nn.RandomWindow`);
        ``transform`` and ``predict`` embed whole signals, so the encoder
        must accept both lengths. ``"auto"``: 0.8 for the ResNet, which pools
        over time, and 1 (whole signals) for the CNN and encoder classes.
    amplitude_jitter : float, default=0.1
        Each training ECG is multiplied by a factor drawn from
        ``N(1, amplitude_jitter^2)`` on every pass; 0 turns it off.
    validation_fraction : float or None, default=None
        ``None`` trains for ``max_epochs`` epochs on all the data. A float is
        the fraction of the training groups (patients) held out for early
        stopping, drawn stratified by the class attribute (every class with
        enough patients on both sides): training stops when the contrastive (NCE) loss of these
        patients has not improved by a relative ``1e-4`` for
        ``n_iter_no_change`` epochs, and the encoder and prototypes of the
        best epoch are kept. (The regulariser depends on the prototypes only,
        so it is the same on both sides and says nothing about overfitting.)
        On small datasets the held-out patients are few and their loss noisy,
        so early stopping costs accuracy (see :ref:`defaults`).
    n_iter_no_change : int, default=10
        Patience of the early stopping, in epochs.
    device : str or torch.device, default="cpu"
        Torch device for training and inference, e.g. ``"cuda"``.
    random_state : int, RandomState instance or None, default=None
        Seeds the weight and prototype initialisation, dropout, batch order
        and the validation split. ``None`` draws fresh entropy from the
        operating system. The global numpy and torch random states are
        neither used nor changed.
    verbose : int, default=0
        ``0`` is silent; ``1`` prints one line per epoch (losses and time),
        with each column's best value in colour when standard output is a
        terminal.
    callbacks : list of skorch callbacks or (name, callback) tuples, default=None
        Extra :mod:`skorch.callbacks` for training, run after the clusterer's
        own (loss parts, early stopping, restoring the best epoch), for
        example ``LRScheduler``, ``ProgressBar`` or ``Checkpoint``. Each fit
        runs clones of them, so those passed here are left unchanged; the
        fitted ones are in ``net_.callbacks_``. Names given in tuples must
        differ from the clusterer's own (``"train_nce"``, ``"train_reg"``,
        ``"valid_nce"``, ``"valid_reg"``, ``"early_stopping"``,
        ``"keep_best"``) and skorch's defaults. :meth:`save` does not store
        them: a loaded model has ``callbacks=None``.
    accelerator : accelerate.Accelerator, default=None
        Train through Hugging Face Accelerate (skorch's ``AccelerateMixin``;
        the ``accelerate`` extra): run the same script in several processes,
        for example with ``accelerate launch --num_processes 2``, and each
        training step takes ``batch_size`` ECGs in every process and
        averages the gradients over them (see :ref:`accelerate`). The
        accelerator places the model, so ``device`` is not used for
        training. :meth:`save` does not store it: a loaded model has
        ``accelerator=None``.
    memory_budget : "auto", int or None, default="auto"
        Bytes of memory a fit may need. Before allocating anything, ``fit``
        estimates its peak memory (the M x M weight tables of the M attribute
        combinations, the regulariser's prototype pairs, the prototypes with
        their optimiser state, one batch's activations and logits) and raises
        a ``ValueError`` naming the parameter or attribute responsible when
        the estimate exceeds the budget. ``"auto"``: half of the memory
        available when ``fit`` starts; ``None``: no check.

    Attributes
    ----------
    prototypes_ : ndarray of shape (n_prototypes, embedding_dim)
        L2-normalised centroids used for prediction (learned or mean, see
        ``prototypes``).
    prototype_attributes_ : ndarray of shape (n_prototypes, n_attributes)
        Attribute values of each row of ``prototypes_``, in the original label
        values (object dtype when attributes have different types).
    prototype_counts_ : ndarray of shape (n_prototypes,)
        Number of training ECGs with each prototype's attribute combination
        (ECGs with a missing attribute are not counted).
    attribute_names_ : list of str
        Names of the attributes: the columns of a DataFrame ``y``, the name of
        a Series, or ``"attribute_0"``, ``"attribute_1"``, ...
    categories_ : list of ndarray
        Values of each attribute seen in ``fit``: sorted, or in the declared
        order for a pandas categorical column. Prototypes enumerate the
        combinations in this order.
    bin_edges_ : dict of str to ndarray
        Edges of the bins of each ``continuous`` attribute (empty without
        any): bin ``k`` holds values in ``[edges[k], edges[k + 1])``, the
        first and last bins also the values beyond them.
    attribute_codec_ : AttributeCodec
        The attributes as ``fit`` saw them in ``y`` (names, categories,
        dtypes, layout), which reads, encodes and decodes attribute values
        for this model, :class:`PrototypeRetriever` and the metrics.
    labels_ : ndarray of shape (n_samples,)
        Row of ``prototypes_`` nearest to each training ECG.
    n_features_in_ : int
        Number of values per training ECG (``n_leads * n_timepoints``).
    feature_names_in_ : ndarray of shape (`n_features_in_`,)
        Column names of ``X`` when it was a DataFrame.
    input_shape_ : tuple of int
        ``(n_leads, n_timepoints)`` of the training signals, at
        ``sampling_rate_``.
    sampling_rate_ : float or None
        Rate in Hz of the encoder's input (``working_rate``, or
        ``sampling_rate`` when that is ``None``); ``None`` when ``fit`` was
        given no ``sampling_rate``. Frames last
        ``input_shape_[1] / sampling_rate_`` seconds.
    signal_scale_ : float or None
        Median standard deviation of the training signals' leads as the
        encoder saw them (of the first 1024 ECGs; ``None`` for a lazily read
        ``X``). New signals whose spread differs from it by a factor of 20 or
        more are reported with a warning (microvolts or ADC units against mV,
        raw against normalised signals).
    n_iter_ : int
        Number of epochs run.
    net_ : skorch.NeuralNet
        The fitted net; ``net_.module_`` is the encoder, ``net_.criterion_``
        the :class:`~sklearn_crocs.nn.CROCSLoss` with the learned prototypes,
        ``net_.history`` the per-epoch losses (``train_loss``, ``train_nce``,
        ``train_reg`` and their ``valid_`` counterparts).

    See Also
    --------
    sklearn_crocs.paper_params : The paper's parameters for Chapman and PTB-XL.
    sklearn_crocs.nn.CROCSLoss : The loss and its prototypes.
    sklearn.cluster.KMeans : Unsupervised clustering of the embeddings
        (the paper's KM CROCS, as ``make_pipeline(CROCSClusterer(), KMeans())``).

    Notes
    -----
    Embeddings and prototypes are compared by cosine similarity, which ranks
    like the Euclidean distance between L2-normalised vectors, as in the
    paper. Every attribute is treated as discrete: bin continuous ones (age)
    first. With ``prototypes="learned"`` a combination without training ECGs
    still gets a prototype, shaped by the soft weights and the regulariser;
    with ``prototypes="mean"`` it cannot, and it is left out with a warning.

    References
    ----------
    D. Kiyasseh, T. Zhu and D. A. Clifton, "CROCS: Clustering and Retrieval of
    Cardiac Signals Based on Patient Disease Class, Sex, and Age", NeurIPS 2021.

    Examples
    --------
    >>> import numpy as np
    >>> import pandas as pd
    >>> from sklearn_crocs import CROCSClusterer
    >>> rng = np.random.RandomState(0)
    >>> y = pd.DataFrame({"rhythm": rng.choice(["AFIB", "SR"], 60),
    ...                   "sex": rng.choice(["F", "M"], 60)})
    >>> freq = np.where(y["rhythm"] == "SR", 1.0, 2.5)[:, None]
    >>> X = np.sin(freq * np.linspace(0, 20, 500)) + 0.3 * rng.randn(60, 500)
    >>> model = CROCSClusterer(embedding_dim=16, max_epochs=5, lr=1e-3,
    ...                        validation_fraction=None, random_state=0).fit(X, y)
    >>> model.prototypes_.shape
    (4, 16)
    >>> model.prototype_attributes_
    array([['AFIB', 'F'],
           ['AFIB', 'M'],
           ['SR', 'F'],
           ['SR', 'M']], dtype=object)
    >>> model.predict(X[:3]).columns.tolist()
    ['rhythm', 'sex']
    >>> model.transform(X[:3]).shape
    (3, 16)
    """

    _parameter_constraints: dict = {
        "encoder": [StrOptions(set(ENCODERS)), type],
        "encoder_params": [dict, None],
        "embedding_dim": [Interval(Integral, 1, None, closed="left")],
        "tau_s": [Interval(Real, 0, None, closed="neither")],
        "tau_w": [Interval(Real, 0, None, closed="neither"), Options(Real, {math.inf})],
        "beta": [Interval(Real, 0, None, closed="left")],
        "loss": [StrOptions({"soft", "hard"})],
        "reg_reduction": [StrOptions({"sum", "mean"})],
        "prototypes": [StrOptions({"learned", "mean"})],
        "class_attribute": [Interval(Integral, 0, None, closed="left"), str],
        "missing": [StrOptions({"marginalise", "error"})],
        "unlabelled_weight": [Interval(Real, 0, None, closed="left")],
        "unlabelled_threshold": [Interval(Real, 0, 1, closed="left")],
        "ordinal": [StrOptions({"auto"}), list, None],
        "continuous": [dict, None],
        "max_epochs": [Interval(Integral, 1, None, closed="left")],
        "batch_size": [Interval(Integral, 1, None, closed="left")],
        "lr": [Interval(Real, 0, None, closed="neither")],
        "crop": [Interval(Real, 0, 1, closed="right"), StrOptions({"auto"})],
        "amplitude_jitter": [Interval(Real, 0, None, closed="left")],
        "validation_fraction": [Interval(Real, 0, 1, closed="neither"), None],
        "n_iter_no_change": [Interval(Integral, 1, None, closed="left")],
        "device": [str, torch.device],
        "random_state": ["random_state"],
        "verbose": ["verbose"],
        "callbacks": [list, None],
        "accelerator": [HasMethods(["prepare"]), None],
        "memory_budget": [StrOptions({"auto"}), Interval(Integral, 1, None, closed="left"), None],
        "sampling_rate": [Interval(Real, 0, None, closed="neither"), None],
        "working_rate": [Interval(Real, 0, None, closed="neither"), None],
        "conditioning": [SignalConditioner, None],
    }

    def __init__(
        self,
        encoder="resnet",
        encoder_params=None,
        embedding_dim=128,
        tau_s=0.1,
        tau_w=0.5,
        beta=0.0,
        loss="soft",
        reg_reduction="mean",
        prototypes="learned",
        class_attribute=0,
        missing="marginalise",
        unlabelled_weight=1.0,
        unlabelled_threshold=0.99,
        ordinal="auto",
        continuous=None,
        sampling_rate=None,
        working_rate=100.0,
        conditioning=None,
        max_epochs=40,
        batch_size=128,
        lr=1e-3,
        crop="auto",
        amplitude_jitter=0.1,
        validation_fraction=None,
        n_iter_no_change=10,
        device="cpu",
        random_state=None,
        verbose=0,
        callbacks=None,
        accelerator=None,
        memory_budget="auto",
    ):
        self.encoder = encoder
        self.encoder_params = encoder_params
        self.embedding_dim = embedding_dim
        self.tau_s = tau_s
        self.tau_w = tau_w
        self.beta = beta
        self.loss = loss
        self.reg_reduction = reg_reduction
        self.prototypes = prototypes
        self.class_attribute = class_attribute
        self.missing = missing
        self.unlabelled_weight = unlabelled_weight
        self.unlabelled_threshold = unlabelled_threshold
        self.ordinal = ordinal
        self.continuous = continuous
        self.sampling_rate = sampling_rate
        self.working_rate = working_rate
        self.conditioning = conditioning
        self.max_epochs = max_epochs
        self.batch_size = batch_size
        self.lr = lr
        self.crop = crop
        self.amplitude_jitter = amplitude_jitter
        self.validation_fraction = validation_fraction
        self.n_iter_no_change = n_iter_no_change
        self.device = device
        self.random_state = random_state
        self.verbose = verbose
        self.callbacks = callbacks
        self.accelerator = accelerator
        self.memory_budget = memory_budget

    # ------------------------------------------------------------------ input
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
    def _fit_rate(self):
        """``sampling_rate_`` for the declared rates: the encoder's input rate, or None."""
        if self.sampling_rate is None:
            if self.conditioning is not None:
                raise ValueError(
                    "conditioning filters signals in Hz, so it needs their rate: pass "
                    "sampling_rate=<Hz of X> too."
                )
            return None
        return float(self.sampling_rate if self.working_rate is None else self.working_rate)

    def _conditioner(self, rate):
        """The ``conditioning`` step for signals at ``rate`` Hz, with the model's rates."""
        step = self.conditioning
        for name, wanted in (("sampling_rate", rate), ("target_rate", self.sampling_rate_)):
            given = getattr(step, name)
            if given is not None and given != wanted:
                raise ValueError(
                    f"conditioning has {name}={given:g}, but the model gives it signals at "
                    f"{rate:g} Hz and runs at {self.sampling_rate_:g} Hz: leave the rates of "
                    "the conditioning step None, the model sets them."
                )
        return clone(step).set_params(sampling_rate=rate, target_rate=self.sampling_rate_)

    def _to_model_rate(self, X, rate, *, fitting=False):
        """Signals declared at ``rate`` Hz, conditioned and resampled as the encoder takes them.

        ``X`` is returned as it is when there is nothing to do. Otherwise the
        duration of its frames is checked against training (at prediction)
        and it comes back as a float32 ndarray at ``sampling_rate_``.
        """
        if rate is None:
            return X
        model_rate = self.sampling_rate_
        if model_rate is None:
            raise ValueError(
                f"X was declared at sampling_rate={rate:g} Hz, but this "
                f"{type(self).__name__} was fitted without a sampling rate, so it does "
                "not know the rate it was trained at. Give X at the training rate without "
                "sampling_rate, or refit with sampling_rate=<Hz of the training signals>."
            )
        shape = tuple(getattr(X, "shape", np.shape(X)))
        if len(shape) >= 2:
            check_signal_layout(shape, rate)
        if len(shape) >= 2 and not fitting:
            n, trained = shape[-1], self.input_shape_[1]
            # resample_signals gives ceil(n * model_rate / rate) samples.
            if math.ceil(n * model_rate / rate - 1e-9) != trained:
                seconds = trained / model_rate
                other = n * model_rate / trained
                raise ValueError(
                    f"X has {n} samples per lead, {n / rate:g} s at {rate:g} Hz, but "
                    f"{type(self).__name__} was fitted on frames of {seconds:g} s "
                    f"({trained} samples at {model_rate:g} Hz). Cut X into {seconds:g}-s "
                    f"frames ({round(seconds * rate)} samples at {rate:g} Hz, "
                    "sklearn_crocs.preprocessing.make_frames), or, if X is sampled at "
                    f"{other:g} Hz, pass sampling_rate={other:g}."
                )
        if rate == model_rate and self.conditioning is None:
            return X
        if is_lazy_array(X) and fitting:
            raise ValueError(
                f"X is read lazily, and bringing it from {rate:g} Hz to {model_rate:g} Hz"
                + (" with conditioning" if self.conditioning is not None else "")
                + " inside fit would read it whole. Prepare it first (SignalConditioner "
                "or resample_signals of sklearn_crocs.preprocessing, chunk by chunk) and fit "
                f"with sampling_rate={model_rate:g}, conditioning=None."
            )
        X = np.asarray(X, dtype=np.float32)
        if self.conditioning is not None:
            return self._conditioner(rate).fit_transform(X)
        return resample_signals(X, rate, model_rate)

    def _check_scale(self, X):
        """Warn when validated signals X are in other units than the training signals."""
        trained = getattr(self, "signal_scale_", None)
        scale = _signal_scale(X)
        if not trained or not scale:
            return
        factor = scale / trained
        if max(factor, 1 / factor) >= _SCALE_FACTOR:
            warnings.warn(
                f"The signals' spread (median standard deviation of a lead {scale:.3g}) is "
                f"{factor:.3g} times that of the training signals ({trained:.3g}): they "
                "look like other units (microvolts or ADC units against mV), or raw "
                "against normalised signals. Bring them to the training signals' units "
                "(divide by the gain), or give the model conditioning=SignalConditioner() "
                "so that every signal is normalised.",
                UserWarning,
                stacklevel=4,
            )

    def _fit_attributes(self, y, n_samples):
        """Learn the attributes of y; return ``(target, classes, partial)``.

        ``target[i]``: the combination number of ECG ``i``; when some of its
        attributes are missing, ``n_combinations + r`` for row ``r`` of
        ``partial`` (value codes, ``-1`` where missing); ``-1`` when all are
        (unlabelled). ``classes[i]``: its class code (``-1`` if unlabelled).
        """
        for name, n_bins in (self.continuous or {}).items():
            if not isinstance(n_bins, Integral) or isinstance(n_bins, bool) or n_bins < 2:
                raise ValueError(
                    f"continuous={self.continuous!r}: the number of bins of {name!r} must be "
                    "an int >= 2."
                )
        codec = self.attribute_codec_ = AttributeCodec.fit(
            y, n_samples, allow_missing=self.missing == "marginalise", continuous=self.continuous
        )
        names = codec.names
        self._class_index = codec.position(self.class_attribute, "class_attribute")
        target, partial = codec.encode_partial(y)
        unlabelled = target < 0
        codes = np.vstack([codec.combinations, partial])[target]
        codes[unlabelled] = -1
        no_class = (codes[:, self._class_index] < 0) & ~unlabelled
        if no_class.any():
            raise ValueError(
                f"{no_class.sum()} ECG(s) of y have no value for the class attribute "
                f"{names[self._class_index]!r} (rows {_first_rows(no_class)}). "
                "missing='marginalise' sums out the other attributes only: fill in their "
                "class, or leave all their attributes missing to train on them as unlabelled "
                "ECGs."
            )
        return target, codes[:, self._class_index], partial

    @property
    def attribute_names_(self):
        return self.attribute_codec_.names

    @property
    def categories_(self):
        return self.attribute_codec_.categories

    @property
    def bin_edges_(self):
        return self.attribute_codec_.bin_edges

    def _ordinal_mask(self):
        """Which attributes the loss treats as ordinal (codes are ranks)."""
        codec = self.attribute_codec_
        if self.ordinal is None:
            return [False] * len(codec.names)
        if self.ordinal == "auto":
            return codec.ordinal
        positions = {codec.position(name, "ordinal") for name in self.ordinal}
        return [j in positions for j in range(len(codec.names))]

    # ---------------------------------------------------------------- fitting
    def _criterion(self, partial_combinations=None):
        """The loss that owns the prototypes, and its parameters.

        A subclass trains another prototype loss (the baselines' DTC) by
        returning another class here; it gets ``combinations``,
        ``embedding_dim`` and ``class_attribute`` in the same way.
        """
        return CROCSLoss, {
            "combinations": self.attribute_codec_.combinations,
            "embedding_dim": self.embedding_dim,
            "class_attribute": self._class_index,
            "tau_s": self.tau_s,
            "tau_w": self.tau_w,
            "beta": self.beta,
            "loss": self.loss,
            "reg_reduction": self.reg_reduction,
            "partial_combinations": partial_combinations,
            "ordinal": self._ordinal_mask(),
            "unlabelled_weight": self.unlabelled_weight,
            "unlabelled_threshold": self.unlabelled_threshold,
        }

    def _build_net(self, n_leads, n_timepoints, seed, valid_dataset, partial_combinations=None):
        if isinstance(self.encoder, str):
            encoder = ENCODERS[self.encoder]
        elif issubclass(self.encoder, nn.Module):
            encoder = self.encoder
        else:
            raise TypeError(
                "encoder must be 'cnn', 'resnet' or a torch.nn.Module subclass; "
                f"got the class {self.encoder.__name__}."
            )
        encoder_params = {f"module__{k}": v for k, v in (self.encoder_params or {}).items()}
        crop = self.crop
        if crop == "auto":
            crop = 0.8 if issubclass(encoder, ResNet1dEncoder) else 1.0
        if crop < 1 and issubclass(encoder, CNNEncoder):
            raise ValueError(
                f"crop={crop} trains on windows shorter than the signals that transform "
                "embeds, but the CNN's linear layer takes one length only. Use crop=1 "
                "(or 'auto') with encoder='cnn'."
            )
        augment = None
        if crop < 1 or self.amplitude_jitter > 0:
            augment = RandomWindow(crop=crop, amplitude_jitter=self.amplitude_jitter)
        sink = _print if self.verbose else _silent
        criterion, criterion_params = self._criterion(partial_combinations)
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
        # Clones: a fit must not change the parameters (nor one fit the next).
        callbacks += [clone(callback, safe=False) for callback in self.callbacks or []]
        net_class, placement = CROCSNet, {"device": self.device}
        if self.accelerator is not None:
            net_class = AcceleratedCROCSNet
            # With device placement, skorch's AccelerateMixin requires device=None.
            placement = {
                "accelerator": self.accelerator,
                "device": None if self.accelerator.device_placement else self.device,
            }
        return net_class(
            module=encoder,
            module__in_channels=n_leads,
            module__n_timepoints=n_timepoints,
            module__embedding_dim=self.embedding_dim,
            **encoder_params,
            criterion=criterion,
            **{f"criterion__{k}": v for k, v in criterion_params.items()},
            optimizer=torch.optim.Adam,
            optimizer__fused=_fused_adam_supported(self._training_device()),
            lr=self.lr,
            max_epochs=self.max_epochs,
            batch_size=self.batch_size,
            predict_batch_size="auto",
            dataset=ArrayDataset,
            train_split=None if valid_dataset is None else predefined_split(valid_dataset),
            callbacks=callbacks,
            callbacks__print_log__sink=sink,
            verbose=self.verbose,
            shuffle_seed=seed,
            augment=augment,
            **placement,
        )

    def _training_device(self):
        """The device training runs on: the accelerator's, if there is one."""
        return self.device if self.accelerator is None else self.accelerator.device

    def _split(self, n_samples, groups, seed, classes):
        """Train and validation indices, keeping each group on one side.

        The split is stratified by the class attribute, so that the
        validation patients hold every class that has two patients or more.
        """
        if self.validation_fraction is None:
            return np.arange(n_samples), None
        if groups is None:
            warnings.warn(
                "fit got no groups, so the early-stopping set (validation_fraction="
                f"{self.validation_fraction}) is drawn ECG by ECG: leads or frames of one "
                "patient can land on both sides, which makes the validation loss "
                "optimistic. Pass groups=<patient id of each ECG> to fit.",
                UserWarning,
                stacklevel=5,  # _split < _fit < fit < scikit-learn's _fit_context < caller
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
        from .datasets import patient_split

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

    def _fit(self, X, y, groups, return_embeddings=False):
        """Train encoder and prototypes; return the embeddings of X if asked.

        A lazy X (a memory map, ``h5py.Dataset``, ``zarr.Array`` or dask
        array) is never loaded whole: training reads the rows of each batch,
        and the embeddings are computed chunk by chunk.
        """
        problem = _device_problem(self.device)
        if problem is not None:
            raise ValueError(
                f"device={self.device!r} cannot be used: {problem}. Pass device='cpu', "
                "or a device that torch can use here."
            )
        self.sampling_rate_ = self._fit_rate()
        X = self._to_model_rate(X, self.sampling_rate, fitting=True)
        lazy = is_lazy_array(X)
        if lazy:
            self._check_lazy_signals(X)
        else:
            X = self._validate_signals(X, reset=True)
        # A lazy X is read only batch by batch, in training: no extra pass for this.
        self.signal_scale_ = None if lazy else _signal_scale(X)
        n_samples = X.shape[0]
        target, classes, partial = self._fit_attributes(y, n_samples)
        encoder = ENCODERS.get(self.encoder) if isinstance(self.encoder, str) else self.encoder
        size = activation_size(
            encoder, *self.input_shape_, self.embedding_dim, self.encoder_params or {}
        )
        check_fit_memory(self, self.attribute_codec_.shape, size)
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

        seed = _draw_seed(self.random_state)
        train, valid = self._split(n_samples, groups, seed, classes)
        # Training and validation sets are index sets into X, not copies of it.
        check = lazy and not get_config()["assume_finite"]  # lazy X was not read yet

        def dataset(indices):
            return ArrayDataset(
                X, target, indices=indices, sample_shape=self.input_shape_, check_finite=check
            )

        valid_dataset = None if valid is None else dataset(valid)

        device = torch.device(self._training_device())
        fork_devices = [device] if device.type == "cuda" else []
        with torch.random.fork_rng(devices=fork_devices):
            torch.manual_seed(seed)
            # Rows of y with missing values only: with none, the loss is unchanged.
            net = self._build_net(
                *self.input_shape_, seed, valid_dataset, partial if len(partial) else None
            )
            net.fit(dataset(None if valid is None else train), None)
        # predefined_split holds the validation ECGs: a fitted model (and so any
        # file it is saved to) must not carry training data.
        net.train_split = None
        self.net_ = net
        self.n_iter_ = len(net.history)

        learned = F.normalize(net.criterion_.prototypes.detach().float(), dim=1)
        self._learned_prototypes = learned.cpu().numpy()
        # Mean prototypes and counts come from the ECGs whose attributes are all known.
        n_combinations = len(self.attribute_codec_.combinations)
        known = (target >= 0) & (target < n_combinations)
        counts = np.bincount(target[known], minlength=n_combinations)
        self._prototype_counts = counts
        # In-memory X: its embeddings in one piece. Lazy X: chunk by chunk, kept
        # only when returned, with the learned prototypes' labels on the way
        # (the mean prototypes' need a second pass, below).
        embeddings = None
        if not lazy:
            embeddings = self._embed(X)
        elif return_embeddings:
            embeddings = self._embed_input(X, prepared=True)
        chunks = (
            self._embedding_chunks(X, prepared=True) if embeddings is None else [(0, embeddings)]
        )
        sums = torch.zeros(n_combinations, self.embedding_dim)
        low = np.full(self.embedding_dim, np.inf, dtype=np.float32)
        high = -low
        labels = None
        if embeddings is None and self.prototypes == "learned":
            labels = np.empty(n_samples, dtype=np.int64)
        for start, part in chunks:
            rows = slice(start, start + len(part))
            mask = known[rows]
            sums.index_add_(0, torch.from_numpy(target[rows][mask]), torch.from_numpy(part[mask]))
            low, high = np.minimum(low, part.min(axis=0)), np.maximum(high, part.max(axis=0))
            if labels is not None:
                labels[rows] = _nearest(part, self._learned_prototypes, counts)
        means = F.normalize(sums, dim=1).numpy()
        means[counts == 0] = np.nan
        self._mean_prototypes = means
        check_training(net.history, float((high - low).max()), X)
        self._select_prototypes()
        if self.prototypes == "mean" and (counts == 0).any():
            missing = np.flatnonzero(counts == 0)
            warnings.warn(
                f"{len(missing)} of {len(counts)} attribute combinations of "
                f"{self.attribute_names_} have no training ECG, so prototypes='mean' "
                f"(TP CROCS) has no prototype for them: {self.attribute_codec_.format(missing)}."
                " They are left out of prototypes_; prototypes='learned' covers them.",
                UserWarning,
                stacklevel=3,
            )
        if embeddings is not None:
            self.labels_ = _nearest(embeddings, self.prototypes_, self.prototype_counts_)
        elif labels is not None:
            self.labels_ = labels
        else:  # the mean prototypes are known only now: a second pass
            self.labels_ = self._predict_chunks(X, prepared=True)
        return embeddings

    def _select_prototypes(self):
        """Set ``prototypes_`` and its companions from the learned or mean prototypes."""
        counts = self._prototype_counts
        if self.prototypes == "mean":
            used = counts > 0
            self.prototypes_ = self._mean_prototypes[used]
        else:
            used = np.ones(len(counts), dtype=bool)
            self.prototypes_ = self._learned_prototypes
        self.prototype_attributes_ = self.attribute_codec_.values[used]
        self.prototype_counts_ = counts[used]
        self._prototype_combinations = np.flatnonzero(used)

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y, groups=None):
        """Learn the encoder and one prototype per attribute combination.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_timepoints) or (n_samples, n_leads, n_timepoints)
            ECG signals (one lead, or several leads channel-first).
        y : array-like of shape (n_samples,) or (n_samples, n_attributes), or DataFrame
            Discrete attributes of each ECG, for example class, sex and age
            group. Values may be of any hashable type; the columns of a
            DataFrame name the attributes. With ``missing="marginalise"``,
            attributes other than the class may be missing (NaN, None,
            ``pd.NA``), and a row with every attribute missing marks an
            unlabelled ECG.
        groups : array-like of shape (n_samples,), default=None
            Patient of each ECG. The internal validation split keeps all ECGs
            of a patient on the same side, stratified by the class attribute.

        Returns
        -------
        self : CROCSClusterer
            The fitted estimator.
        """
        self._fit(X, y, groups)
        return self

    @_fit_context(prefer_skip_nested_validation=True)
    def fit_transform(self, X, y, groups=None):
        """Fit and return the L2-normalised embeddings of X.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_timepoints) or (n_samples, n_leads, n_timepoints)
            ECG signals.
        y : array-like of shape (n_samples,) or (n_samples, n_attributes), or DataFrame
            Discrete attributes of each ECG.
        groups : array-like of shape (n_samples,), default=None
            Patient of each ECG, for the internal validation split.

        Returns
        -------
        embeddings : ndarray of shape (n_samples, embedding_dim)
            Same as ``fit(X, y).transform(X)``.
        """
        return self._fit(X, y, groups, return_embeddings=True)

    def fit_predict(self, X, y, groups=None):
        """Fit and return the attributes of the nearest prototype of each ECG in X.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_timepoints) or (n_samples, n_leads, n_timepoints)
            ECG signals.
        y : array-like of shape (n_samples,) or (n_samples, n_attributes), or DataFrame
            Discrete attributes of each ECG.
        groups : array-like of shape (n_samples,), default=None
            Patient of each ECG, for the internal validation split.

        Returns
        -------
        attributes : ndarray or DataFrame
            Same as ``fit(X, y).predict(X)``.
        """
        self.fit(X, y, groups)
        return self.attribute_codec_.decode(self._prototype_combinations[self.labels_])

    # -------------------------------------------------------------- inference
    def _embed(self, X, *, check_finite=False):
        """L2-normalised embeddings of validated signals, as float32 ndarray.

        ``check_finite`` checks each batch for NaN and infinity as the net
        reads it (see :class:`~sklearn_crocs.nn.ArrayDataset`).
        """
        dataset = ArrayDataset(X, check_finite=check_finite)
        out = self.net_.forward(dataset, training=False, device="cpu")
        return F.normalize(out.float(), dim=1).numpy()

    def _embedding_chunks(self, X, sampling_rate=None, *, prepared=False):
        """Validate and embed unseen ECGs chunk by chunk: yield ``(start, embeddings)``.

        An ndarray, memory map or lazy array (see
        :func:`~sklearn_crocs.nn._data.is_lazy_array`) is read, checked and
        embedded ``_CHUNK_BYTES`` at a time, with progress lines when
        ``verbose``; other inputs are validated whole. NaN and infinity are
        looked for batch by batch as the net reads them (unless scikit-learn's
        ``assume_finite`` is set), not in a separate pass over the input.
        Signals are first brought to the model's rate (see :meth:`_to_model_rate`)
        unless ``prepared`` (fit's own X, already there).
        """
        check = not get_config()["assume_finite"]
        rate = self.sampling_rate if sampling_rate is None else sampling_rate
        first = [True]

        def embed(part):
            if not prepared:
                part = self._to_model_rate(part, rate)
            part = self._validate_signals(part, reset=False, ensure_all_finite=False)
            if first[0] and not prepared:  # one look at the units per call
                first[0] = False
                self._check_scale(part)
            return self._embed(part, check_finite=check)

        arraylike = isinstance(X, np.ndarray) or is_lazy_array(X)
        if not (arraylike and len(X.shape) in (2, 3) and X.shape[0] > 0):
            yield 0, embed(X)
            return
        rows = max(1, _CHUNK_BYTES // (4 * math.prod(X.shape[1:])))
        batch = self.net_._inference_batch_size()
        rows = max(rows - rows % batch, min(rows, batch))  # whole batches per chunk
        n = X.shape[0]
        for start in range(0, n, rows):
            stop = min(start + rows, n)
            yield start, embed(X[start:stop])
            if self.verbose and n > rows:
                print(f"Embedded {stop}/{n} ECGs", flush=True)

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

    def get_prototypes(self, kind=None):
        """Return the learned (CP CROCS) or mean (TP CROCS) prototypes.

        Parameters
        ----------
        kind : {"learned", "mean"}, default=None
            Which set; ``None`` means the one chosen by the ``prototypes``
            parameter. ``"mean"`` leaves out combinations without training ECGs.

        Returns
        -------
        prototypes : ndarray of shape (n_prototypes, embedding_dim)
            L2-normalised prototypes.
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
        ((2, 8), [0, 1])
        """
        check_is_fitted(self, "net_")
        kind = self.prototypes if kind is None else kind
        if kind == "learned":
            return self._learned_prototypes, self.attribute_codec_.values
        if kind == "mean":
            seen = self._prototype_counts > 0
            return self._mean_prototypes[seen], self.attribute_codec_.values[seen]
        raise ValueError(f"kind must be 'learned', 'mean' or None; got {kind!r}.")

    def transform(self, X, *, sampling_rate=None):
        """Embed ECGs: L2-normalised encoder outputs.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_timepoints) or (n_samples, n_leads, n_timepoints)
            ECG signals with the lead count and duration seen in ``fit``.
        sampling_rate : float, default=None
            Rate of ``X`` in Hz when it is not the ``sampling_rate`` the model
            was given; ``X`` is brought to the model's rate. Needs a model
            fitted with ``sampling_rate``.

        Returns
        -------
        embeddings : ndarray of shape (n_samples, embedding_dim), dtype float32
            Unit-norm embeddings, comparable with ``prototypes_``.
        """
        check_is_fitted(self, "net_")
        return self._embed_input(X, sampling_rate)

    def predict_proba(self, X, attribute=None, *, sampling_rate=None):
        """Softmax over prototype similarities ``cos(v, p) / tau_s``, or one attribute's marginal.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_timepoints) or (n_samples, n_leads, n_timepoints)
            ECG signals.
        attribute : str or int, default=None
            ``None``: the probability of each prototype. The name or position
            of an attribute: the probability of each of its values, the sum
            of the prototype probabilities over the other attributes.
        sampling_rate : float, default=None
            Rate of ``X`` in Hz when it is not the ``sampling_rate`` the model
            was given; ``X`` is brought to the model's rate. Needs a model
            fitted with ``sampling_rate``.

        Returns
        -------
        proba : ndarray of shape (n_samples, n_prototypes) or (n_samples, n_values)
            Without ``attribute``, column ``j`` belongs to row ``j`` of
            ``prototype_attributes_``; with it, column ``k`` to the value
            ``categories_[a][k]`` of attribute ``a``, in its declared order.

        Examples
        --------
        >>> import numpy as np
        >>> import pandas as pd
        >>> from sklearn_crocs import CROCSClusterer
        >>> rng = np.random.RandomState(0)
        >>> y = pd.DataFrame({"rhythm": rng.choice(["AFIB", "SR"], 40),
        ...                   "age": rng.choice(["<60", "60-70", ">70"], 40)})
        >>> y["age"] = pd.Categorical(y["age"], categories=["<60", "60-70", ">70"])
        >>> X = rng.randn(40, 400)
        >>> model = CROCSClusterer(embedding_dim=8, max_epochs=2,
        ...                        random_state=0).fit(X, y)
        >>> model.predict_proba(X[:2]).shape
        (2, 6)
        >>> marginal = model.predict_proba(X[:2], attribute="age")
        >>> marginal.shape, model.categories_[1].tolist()
        ((2, 3), ['<60', '60-70', '>70'])
        >>> bool(np.allclose(marginal.sum(axis=1), 1.0))
        True
        """
        check_is_fitted(self, "net_")
        if attribute is not None:
            column = self.attribute_codec_.position(attribute)
        logits = torch.from_numpy(
            self.transform(X, sampling_rate=sampling_rate) @ self.prototypes_.T
        )
        proba = torch.softmax(logits / self.tau_s, dim=1).numpy()
        if attribute is None:
            return proba
        values = self.attribute_codec_.combinations[self._prototype_combinations, column]
        one_hot = values[:, None] == np.arange(self.attribute_codec_.shape[column])
        return proba @ one_hot.astype(proba.dtype)

    def predict(self, X, *, sampling_rate=None):
        """Attributes of the nearest prototype of each ECG.

        An ECG whose embedding is all zeros (an encoder that ends in a ReLU,
        as the paper's CNN does, can output one) is equally near every
        prototype; it gets the combination with the most training ECGs.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_timepoints) or (n_samples, n_leads, n_timepoints)
            ECG signals.
        sampling_rate : float, default=None
            Rate of ``X`` in Hz when it is not the ``sampling_rate`` the model
            was given; ``X`` is brought to the model's rate. Needs a model
            fitted with ``sampling_rate``.

        Returns
        -------
        attributes : ndarray of shape (n_samples,) or (n_samples, n_attributes), or DataFrame
            In the layout of the ``y`` passed to ``fit``: 1-D for 1-D ``y``, a
            DataFrame with the same columns for a DataFrame ``y``.
        """
        check_is_fitted(self, "net_")
        nearest = self._predict_chunks(X, sampling_rate)
        return self.attribute_codec_.decode(self._prototype_combinations[nearest])

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
        predicted = self._prototype_combinations[nearest]
        return float(np.mean(codec.combinations[true] == codec.combinations[predicted]))

    def save(self, path, *, overwrite=False):
        """Write the fitted model to a file that runs no code when loaded.

        The file is a safetensors file: the network's weights, the prototypes
        and the other fitted arrays as tensors, and a JSON document with the
        parameters, attribute names, categories and dtypes, the input shape,
        the training history and the library versions. It holds no training
        signal. Unlike a pickle (``joblib.dump``), loading it cannot run
        code; see :ref:`persistence`.

        Parameters
        ----------
        path : str or path-like
            File to write; the extension ``.safetensors`` is customary. A
            model file already there is replaced atomically (an interrupted
            save leaves it as it was); any other file is refused.
        overwrite : bool, default=False
            Replace ``path`` even if it is not a model file of this package.

        Returns
        -------
        self : CROCSClusterer
            The estimator, unchanged.

        See Also
        --------
        load : Read a saved model.

        Examples
        --------
        >>> import os, tempfile
        >>> import numpy as np
        >>> from sklearn_crocs import CROCSClusterer
        >>> rng = np.random.RandomState(0)
        >>> X, y = rng.randn(40, 400), np.repeat(["A", "B"], 20)
        >>> model = CROCSClusterer(embedding_dim=8, max_epochs=2,
        ...                        validation_fraction=None, random_state=0).fit(X, y)
        >>> with tempfile.TemporaryDirectory() as folder:
        ...     path = os.path.join(folder, "model.safetensors")
        ...     _ = model.save(path)
        ...     loaded = CROCSClusterer.load(path)
        >>> loaded.predict(X[:4]).tolist() == model.predict(X[:4]).tolist()
        True
        """
        check_is_fitted(self, "net_")
        save_clusterer(self, path, overwrite=overwrite)
        return self

    @classmethod
    def load(cls, path, *, device=None, encoder=None, sha256=None):
        """Read a model written by :meth:`save`.

        Only JSON and tensors are read: nothing in the file is executed or
        imported. The file is refused with an
        :class:`~sklearn_crocs.InvalidModelFileError` when it was written in
        another format version, is truncated, or holds tensors that differ
        from its document (names, dtypes, shapes or SHA-256).

        Parameters
        ----------
        path : str or path-like
            A file written by :meth:`save`.
        device : str or torch.device, default=None
            Device of the loaded model. ``None``: the saved ``device`` if
            torch can use it here, else the CPU, with a warning (a model
            saved on a GPU machine loads on a CPU-only one).
        encoder : nn.Module subclass, default=None
            The encoder class, for a model fitted with a custom encoder
            class: the file records only its name, and classes are never
            imported from a file.
        sha256 : str, default=None
            The SHA-256 of the whole file (64 hexadecimal digits), as
            published by whoever sent the model: a file with another hash is
            refused before it is parsed. The hash inside the file only
            detects damage; anyone who edits a file can recompute it.

        Returns
        -------
        model : CROCSClusterer
            The fitted model; it predicts, transforms and scores as the one
            that was saved.

        Examples
        --------
        >>> import os, tempfile
        >>> import numpy as np
        >>> from sklearn_crocs import CROCSClusterer
        >>> rng = np.random.RandomState(0)
        >>> X, y = rng.randn(40, 400), np.repeat([0, 1], 20)
        >>> model = CROCSClusterer(embedding_dim=8, max_epochs=2,
        ...                        validation_fraction=None, random_state=0).fit(X, y)
        >>> with tempfile.TemporaryDirectory() as folder:
        ...     path = os.path.join(folder, "model.safetensors")
        ...     _ = model.save(path)
        ...     loaded = CROCSClusterer.load(path, device="cpu")
        >>> np.array_equal(loaded.transform(X), model.transform(X))
        True
        """
        return load_clusterer(cls, path, device=device, encoder=encoder, sha256=sha256)

    @property
    def _n_features_out(self):
        return self.embedding_dim

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
