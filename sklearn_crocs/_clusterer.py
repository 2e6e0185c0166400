"""CROCSClusterer: clinical prototypes learned with a skorch-wrapped encoder."""

import math
from numbers import Integral, Real

import numpy as np
import torch
from sklearn.base import TransformerMixin, _fit_context, clone
from sklearn.frozen import FrozenEstimator
from sklearn.utils._param_validation import HasMethods, Interval, Options, StrOptions
from sklearn.utils.validation import check_is_fitted

from ._engine._base import AttributeOptions, BasePrototypeClusterer, ClassSpec
from ._engine._nets import Ensemble, Placement
from ._engine._rates import SignalRates
from ._persistence._pretrained import SHIPPED, PretrainedMixin
from ._pretraining import ContrastivePretrainer
from .nn import CNNEncoder, CROCSLoss, RandomWindow, ResNet1dEncoder
from .nn._encoders import ENCODERS
from .preprocessing import SignalConditioner
from .preprocessing._signals import MAX_RATE, MIN_RATE

__all__ = ["CROCSClusterer"]


class PrototypeClustererMixin(TransformerMixin):
    """``fit``, ``transform`` and ``predict`` of the prototype clusterers (CROCSClusterer, DTC).

    ``fit`` checks the signals and learns the attributes (``_prepare``),
    trains the nets (``_train``, one per ensemble member) and sets the
    prototypes and ``labels_`` (``_summarise``); ``transform`` embeds new
    ECGs chunk by chunk, and ``predict`` gives each the attributes of its
    nearest prototype. The steps are
    :class:`~sklearn_crocs._engine._base.BasePrototypeClusterer`'s, and the
    CROCS options reach them as components (``SignalRates``, ``Ensemble``,
    ``Placement``). A
    TransformerMixin, so that ``set_output`` wraps the ``transform`` and
    ``fit_transform`` defined here.
    """

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
            DataFrame name the attributes. Unless ``missing="error"``, any
            attribute may be missing (NaN, None, ``pd.NA``), the class among
            them, and a row with every attribute missing marks an unlabelled
            ECG.
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
        embeddings : ndarray of shape (n_samples, n_features_out_)
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
        return self.attribute_codec_.decode(self._fitted.combinations[self.labels_])

    def transform(self, X, *, sampling_rate=None):
        """Embed ECGs: L2-normalised encoder outputs.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_timepoints) or (n_samples, n_leads, n_timepoints)
            ECG signals with the lead count and duration seen in ``fit``
            (longer ones too, where ``longer_signals="average"``). With
            ``longer_signals="average"``, a list of whole records of
            different lengths is accepted too, here and in ``predict``,
            ``predict_proba``, ``score`` and retrieval.
        sampling_rate : float, default=None
            Rate of ``X`` in Hz when it is not the ``sampling_rate`` the model
            was given; ``X`` is brought to the model's rate. Needs a model
            fitted with ``sampling_rate``.

        Returns
        -------
        embeddings : ndarray of shape (n_samples, n_features_out_), dtype float32
            Unit-norm embeddings, comparable with ``prototypes_``:
            ``embedding_dim`` columns per net, ``ensemble_size`` nets.
        """
        check_is_fitted(self, "net_")
        return self._embed_input(X, sampling_rate)

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
        return self.attribute_codec_.decode(self._fitted.combinations[nearest])


class CROCSClusterer(PretrainedMixin, PrototypeClustererMixin, BasePrototypeClusterer):
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
        Dimension ``E`` of each net's embeddings (paper: 128 on Chapman, 256
        on PTB-XL); the model's are ``E * ensemble_size`` wide.
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
    missing : {"posterior", "marginalise", "error"}, default="posterior"
        What ``fit`` does with missing values (NaN, None, ``pd.NA``) in
        ``y``. ``"marginalise"``: an ECG whose attributes are partly unknown
        (the class among them: a record with sex and age but no diagnosis)
        is attracted to every prototype consistent with its known ones (Eq. 2
        with the unknown attributes summed out; for ``loss="hard"``, the
        probability summed over those prototypes), see
        :ref:`missing_attributes`; an ECG with every attribute missing is
        unlabelled and trains the encoder through its pseudo-label (see
        :ref:`unlabelled_ecgs`). ``"posterior"`` (the default): the same,
        but an ECG with no class is pulled towards each class's consistent
        prototypes in proportion to the model's current probability of that
        class (an EM-style completion), not towards every class alike
        (:ref:`scarce_diagnoses`). ``"error"``: any missing value raises.
    unlabelled_weight : float, default=1.0
        Weight of the unlabelled ECGs' term (rows of ``y`` with every
        attribute missing, unless ``missing="error"``): an unlabelled
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
        ``None`` runs it at ``sampling_rate``. 100 Hz keeps what a 0.67-40 Hz
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
    longer_signals : {"error", "average"}, default="error"
        What ``transform``, ``predict``, ``score`` and retrieval do with ECGs
        longer than the training frames (at the model's rate): ``"error"``
        refuses them, as the paper's frame-level protocol expects frames of
        one duration; ``"average"`` embeds each as the normalised mean of the
        embeddings of ``ceil(length / frame length)`` frames of the training
        length, evenly spaced from its start to its end (the two 5-s halves
        of a 10-s record for a model fitted on 5-s frames): record-level
        embeddings and predictions. Shorter ECGs are refused either way. It
        acts at inference only, so it can be set on a fitted model. See
        :ref:`record_level` for what it changes in accuracy.
    ensemble_size : int, default=2
        Number of nets (encoder and prototypes each) trained on the same data
        from different seeds, one after the other.
        The model's embeddings are the nets' unit embeddings side by side,
        divided by ``sqrt(ensemble_size)`` (``n_features_out_ = ensemble_size
        * embedding_dim`` wide, unit norm), and so are its prototypes: a cosine
        similarity is the mean of the nets', and ``predict``, ``transform``,
        retrieval and saved files work as for one net. The first net is the
        one ``ensemble_size=1`` trains; with ``pretrained``, every net starts
        from the pretrained encoder. With ``max_epochs="auto"``, the nets
        share its budget (each trains for ``1 / ensemble_size`` of its epochs,
        at least 1), so that fit time stays about that of one net; with an
        integer ``max_epochs``, each net trains for that many. The default
        of two was chosen on validation patients of PTB-XL at 500 to 3,500
        records, where two nets of half the epochs scored higher than one
        (:ref:`shared_budget`); ``transform`` and ``predict`` take twice as
        long as with one net and the embeddings are twice as wide (256).
    max_epochs : int or "auto", default="auto"
        Number of passes over the training data (the most, with early
        stopping). ``"auto"``: 40 up to 1,000 training ECGs, then fewer, so
        that the ECGs seen grow as the square root of their number
        (``min(40, round(40 * sqrt(1000 / n)))``: 28 epochs for 2,000 ECGs,
        13 for 10,000, 6 for 40,000). Chosen on validation patients of
        PTB-XL at 500 to 3,500 records, where more epochs overfit the class
        and cost time in proportion to the data (:ref:`learning_curve`).
        An ensemble's nets share these epochs (see ``ensemble_size``).
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
    lr_schedule : {"cosine", "constant"}, default="cosine"
        ``"cosine"``: the learning rate falls from ``lr`` towards 0 along a
        half cosine over ``max_epochs`` epochs (skorch's ``LRScheduler``
        with ``CosineAnnealingLR``, stepped once per epoch), so that the
        last epochs refine rather than jump between solutions; on
        validation patients of PTB-XL it raised age and the combination
        by several points at the same cost (:ref:`learning_curve`).
        ``"constant"``: ``lr`` throughout. An ``LRScheduler`` among
        ``callbacks`` replaces the built-in schedule.
    augment : "auto", RandomWindow or None, default="auto"
        Perturbation of each training ECG, drawn anew on every pass
        (:class:`~sklearn_crocs.nn.RandomWindow`: a random window of a
        fraction ``crop`` of its samples, and an amplitude factor from
        ``N(1, amplitude_jitter^2)``); ``transform`` and ``predict`` embed
        whole signals, so with ``crop < 1`` the encoder must accept both
        lengths (the CNN does not). ``"auto"``: ``RandomWindow(crop=0.8,
        amplitude_jitter=0.1)`` for the ResNet, which pools over time, and
        ``RandomWindow(crop=1.0, amplitude_jitter=0.1)`` (whole signals) for
        the CNN and encoder classes. ``None``: no augmentation. Stored in
        the model file.
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
        terminal, and shows a progress bar (tqdm, on stderr) while embedding
        an input read in several chunks (a large or lazily read ``X``).
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
    pretrained : ContrastivePretrainer, CROCSClusterer or str, default=None
        Start from a trained model (see :ref:`pretrained`): a shipped
        model's name (``"ptbxl"``, see :meth:`from_pretrained`) or a fitted
        ``CROCSClusterer``, whose encoders start this model's nets (net ``k``
        from its net ``k`` modulo their number); the attributes and
        prototypes are this fit's own. Or from a self-supervised pretraining
        (:class:`~sklearn_crocs.ContrastivePretrainer`, see
        :ref:`pretraining`): a fitted one gives its encoder as it is, so that
        one pretraining on a large unlabelled database serves many fits; an
        unfitted one is cloned and fitted in ``fit`` on every ECG of ``X``,
        labelled or not, with ``groups`` as its patients, this estimator's
        ``encoder``, ``encoder_params``, ``embedding_dim`` and device (and its
        seed when its ``random_state`` is None). Either way the encoder,
        ``encoder_params``, ``embedding_dim``, leads (and the model rate of a
        trained model) must be this model's, else ``fit`` raises a
        ``ValueError``. Cross-validation and grid searches clone parameters,
        which unfits a model: wrap a fitted one in
        :class:`sklearn.frozen.FrozenEstimator` there (a name survives).
        :meth:`save` does not store it: a loaded model has ``pretrained=None``.
    freeze : "auto" or bool, default="auto"
        Keep the encoder's ``early_layers`` (the ResNet's stem and first three
        stages; the CNN's first stage) as ``pretrained`` gave them. ``"auto"``:
        from a trained CROCS model (a fitted ``CROCSClusterer`` or a name),
        chosen on validation folds over a lower rate or fewer epochs
        (:ref:`pretrained`); ``True``: from any ``pretrained``; ``False``: never.

    Attributes
    ----------
    prototypes_ : ndarray of shape (n_prototypes, `n_features_out_`)
        L2-normalised centroids used for prediction (learned or mean, see
        ``prototypes``).
    n_features_out_ : int
        Width of the embeddings and prototypes: ``embedding_dim *
        ensemble_size``, each net's unit embeddings side by side.
    prototype_attributes_ : DataFrame or ndarray of shape (n_prototypes, n_attributes)
        Attribute values of each row of ``prototypes_`` in the layout of ``y``,
        as ``predict`` gives them: a DataFrame of its columns and dtypes for a
        DataFrame ``y``, else an array (object dtype for mixed types).
    prototype_counts_ : ndarray of shape (n_prototypes,)
        Number of training ECGs with each prototype's attribute combination
        (ECGs with a missing attribute are not counted).
    combination_counts_ : ndarray of shape (n_combinations,)
        Number of training ECGs of every attribute combination, in the order
        of ``attribute_codec_.combinations`` (the rows of ``get_prototypes("learned")``),
        zero for those without any; ``prototype_counts_`` holds those of the
        combinations in ``prototypes_``.
    class_index_ : int
        Position of the class attribute (``class_attribute``) among
        ``attribute_names_``.
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
        Row of ``prototypes_`` nearest to each training ECG (an index, not
        an attribute value: those rows of ``prototype_attributes_`` are what
        ``fit_predict`` returns).
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
    pretrainer_ : ContrastivePretrainer or None
        The fitted pretrainer whose encoder started training (the one fitted
        in ``fit`` when ``pretrained`` was unfitted: pass it, or its
        :meth:`~sklearn_crocs.ContrastivePretrainer.save` file, to later
        fits); None without ``pretrained`` and in a loaded model.
    pretraining_time_ : float or None
        Seconds that ``fit`` spent pretraining (0 when ``pretrained`` was
        None or fitted already); None in a loaded model.
    net_ : skorch.NeuralNet
        The fitted net; ``net_.module_`` is the encoder, ``net_.criterion_``
        the :class:`~sklearn_crocs.nn.CROCSLoss` with the learned prototypes,
        ``net_.history`` the per-epoch losses (``train_loss``, ``train_nce``,
        ``train_reg`` and their ``valid_`` counterparts); the first net of an
        ensemble.
    nets_ : list of skorch.NeuralNet
        The ``ensemble_size`` fitted nets; ``nets_[0]`` is ``net_``.

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

    The clusterer is not a scikit-learn :class:`~sklearn.base.ClusterMixin`:
    a scikit-learn clusterer learns from ``X`` alone and its ``fit_predict``
    returns the integer cluster ids of ``labels_``, whereas this one learns
    from the attributes ``y`` and predicts attribute values. So
    ``fit_predict(X, y)`` equals ``fit(X, y).predict(X)`` (attribute values),
    and ``labels_`` holds the index of each training ECG's prototype.

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
    >>> model.prototypes_.shape  # two nets (the default ensemble_size=2) of 16 each
    (4, 32)
    >>> model.prototype_attributes_  # in the layout of y
      rhythm sex
    0   AFIB   F
    1   AFIB   M
    2     SR   F
    3     SR   M
    >>> model.transform(X[:3]).shape, model.n_features_out_
    ((3, 32), 32)
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
        "missing": [StrOptions({"marginalise", "posterior", "error"})],
        "unlabelled_weight": [Interval(Real, 0, None, closed="left")],
        "unlabelled_threshold": [Interval(Real, 0, 1, closed="left")],
        "ordinal": [StrOptions({"auto"}), list, None],
        "continuous": [dict, None],
        "max_epochs": [Interval(Integral, 1, None, closed="left"), StrOptions({"auto"})],
        "batch_size": [Interval(Integral, 1, None, closed="left")],
        "lr": [Interval(Real, 0, None, closed="neither")],
        "lr_schedule": [StrOptions({"cosine", "constant"})],
        "augment": [StrOptions({"auto"}), RandomWindow, None],
        "validation_fraction": [Interval(Real, 0, 1, closed="neither"), None],
        "n_iter_no_change": [Interval(Integral, 1, None, closed="left")],
        "device": [str, torch.device],
        "random_state": ["random_state"],
        "verbose": ["verbose"],
        "callbacks": [list, None],
        "accelerator": [HasMethods(["prepare"]), None],
        "sampling_rate": [Interval(Real, MIN_RATE, MAX_RATE, closed="both"), None],
        "working_rate": [Interval(Real, MIN_RATE, MAX_RATE, closed="both"), None],
        "conditioning": [SignalConditioner, None],
        "longer_signals": [StrOptions({"error", "average"})],
        "ensemble_size": [Interval(Integral, 1, None, closed="left")],
        "pretrained": [
            ContrastivePretrainer, FrozenEstimator, BasePrototypeClusterer,
            StrOptions(set(SHIPPED)), None,
        ],
        "freeze": [StrOptions({"auto"}), "boolean"],
    }

    def __init__(
        self,
        *,
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
        missing="posterior",
        unlabelled_weight=1.0,
        unlabelled_threshold=0.99,
        ordinal="auto",
        continuous=None,
        sampling_rate=None,
        working_rate=100.0,
        conditioning=None,
        longer_signals="error",
        ensemble_size=2,
        max_epochs="auto",
        batch_size=128,
        lr=1e-3,
        lr_schedule="cosine",
        augment="auto",
        validation_fraction=None,
        n_iter_no_change=10,
        device="cpu",
        random_state=None,
        verbose=0,
        callbacks=None,
        accelerator=None,
        pretrained=None,
        freeze="auto",
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
        self.longer_signals = longer_signals
        self.ensemble_size = ensemble_size
        self.max_epochs = max_epochs
        self.batch_size = batch_size
        self.lr = lr
        self.lr_schedule = lr_schedule
        self.augment = augment
        self.validation_fraction = validation_fraction
        self.n_iter_no_change = n_iter_no_change
        self.device = device
        self.random_state = random_state
        self.verbose = verbose
        self.callbacks = callbacks
        self.accelerator = accelerator
        self.pretrained = pretrained
        self.freeze = freeze

    _not_saved = ("encoder", "callbacks", "accelerator", "pretrained")

    # ------------------------------------------------- options of the base class
    def _signal_rates(self):
        return SignalRates(
            self.sampling_rate, self.working_rate, self.conditioning, self.longer_signals
        )

    def _attribute_options(self):
        return AttributeOptions(self.missing, self.continuous)

    def _ensemble(self):
        return Ensemble(self.ensemble_size)

    def _frozen_layers(self, encoder):
        freeze = self.freeze
        if freeze == "auto":  # a start from a trained CROCS model fine-tunes the rest
            freeze = hasattr(getattr(self, "pretrainer_", None), "get_prototypes")
        elif freeze and self.pretrained is None:
            raise ValueError(
                "freeze=True keeps the encoder's early layers as pretrained= gives them, but "
                "pretrained is None: they would stay random. Pass pretrained, or freeze='auto'."
            )
        return tuple(getattr(encoder, "early_layers", ())) if freeze else ()

    def _placement(self):
        return Placement(self.device, self.accelerator)

    def _augmentation(self, encoder):
        augment = self.augment
        if augment is None:
            return None
        if isinstance(augment, str):  # "auto"
            crop = 0.8 if issubclass(encoder, ResNet1dEncoder) else 1.0
            return RandomWindow(crop=crop, amplitude_jitter=0.1)
        if augment.crop < 1 and issubclass(encoder, CNNEncoder):
            raise ValueError(
                f"augment={augment!r} trains on windows shorter than the signals that "
                "transform embeds, but the CNN's linear layer takes one length only. Use "
                "augment='auto' or RandomWindow(crop=1.0, ...) with encoder='cnn'."
            )
        if augment.crop < 1 or augment.amplitude_jitter > 0:
            return augment
        return None

    def _user_callbacks(self):
        # Clones: a fit must not change the parameters (nor one fit the next).
        return [clone(callback, safe=False) for callback in self.callbacks or []]

    # ---------------------------------------------------------------- the loss
    def _ordinal_mask(self, codec):
        """Which attributes the loss treats as ordinal (codes are ranks)."""
        if self.ordinal is None:
            return [False] * len(codec.names)
        if self.ordinal == "auto":
            return codec.ordinal
        positions = {codec.position(name, "ordinal") for name in self.ordinal}
        return [j in positions for j in range(len(codec.names))]

    def _criterion(self, codec, class_index, partial_combinations=None):
        return ClassSpec(CROCSLoss, {
            "combinations": codec.combinations,
            "embedding_dim": self.embedding_dim,
            "class_attribute": class_index,
            "tau_s": self.tau_s,
            "tau_w": self.tau_w,
            "beta": self.beta,
            "loss": self.loss,
            "reg_reduction": self.reg_reduction,
            "partial_combinations": partial_combinations,
            "ordinal": self._ordinal_mask(codec),
            "unlabelled_weight": self.unlabelled_weight,
            "unlabelled_threshold": self.unlabelled_threshold,
            "missing_class": "posterior" if self.missing == "posterior" else "uniform",
        })  # fmt: skip

    # -------------------------------------------------------------- inference
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
        values = self.attribute_codec_.combinations[self._fitted.combinations, column]
        one_hot = values[:, None] == np.arange(self.attribute_codec_.shape[column])
        return proba @ one_hot.astype(proba.dtype)
