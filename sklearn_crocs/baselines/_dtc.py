"""DTC (Han et al. 2019) in the CROCS paper's supervised variant."""

import math
from numbers import Real

import torch
import torch.nn.functional as F
from sklearn.utils._param_validation import Interval
from sklearn.utils.validation import check_is_fitted

from .._clusterer import CROCSClusterer, PrototypeClustererMixin
from .._engine._base import BasePrototypeClusterer, ClassSpec
from ..nn import CROCSLoss
from ._base import CROCS_DEFAULTS, TRAINING_CONSTRAINTS

__all__ = ["DTC"]

_D = CROCS_DEFAULTS


def student_t_log_assignment(embeddings, prototypes, alpha=1.0):
    """``log p_ij``: Student-t kernel of the distances between unit vectors, normalised over j.

    ``q_ij = (1 + ||v_i - p_j||^2 / alpha) ** (-(alpha + 1) / 2)`` and
    ``p_ij = q_ij / sum_l q_il`` (DEC and DTC's soft assignment), with both
    sides L2-normalised so that the nearest prototype is the most cosine-similar
    one, as CROCS predicts and retrieves.
    """
    v = F.normalize(embeddings, dim=1)
    p = F.normalize(prototypes.to(v.dtype), dim=1)
    squared = (2 - 2 * v @ p.T).clamp_min(0)  # ||v - p||^2 of unit vectors
    log_q = -(alpha + 1) / 2 * torch.log1p(squared / alpha)
    return log_q - torch.logsumexp(log_q, dim=1, keepdim=True)


class DTCLoss(CROCSLoss):
    """KL(z || p) of DTC with the CROCS paper's supervised target (its Appendix, DTC).

    The prototypes are initialised as :class:`~sklearn_crocs.nn.CROCSLoss`'s,
    one per attribute combination. With the soft-assignment weights ``w_ij``
    of CROCS (:func:`~sklearn_crocs.nn.attribute_weight_table`), the target
    of an ECG with combination ``i`` is ``z_j = exp(w_ij) / sum_{l in L}
    exp(w_il)`` over the prototypes ``L`` of its class (0 elsewhere), and the
    loss is ``1/B sum_i KL(z_i || p_i)`` with ``p`` the Student-t assignment.
    :meth:`loss_parts` returns ``(kl, 0)``: DTC has no regulariser.
    """

    def __init__(
        self, combinations, embedding_dim, *, class_attribute=0, tau_w=1.0, alpha=1.0,
        prototype_init=None,
    ):  # fmt: skip
        super().__init__(
            combinations,
            embedding_dim,
            class_attribute=class_attribute,
            tau_w=tau_w,
            beta=0.0,
            prototype_init=prototype_init,
        )
        self.alpha = float(alpha)
        logits = self.weights.masked_fill(~self.same_class, -math.inf)
        self.register_buffer("target_table", torch.softmax(logits, dim=1))

    def loss_parts(self, embeddings, target):
        log_p = student_t_log_assignment(embeddings, self.prototypes, self.alpha)
        z = self.target_table[target].to(log_p.dtype)
        kl = (torch.xlogy(z, z) - z * log_p).sum(dim=1).mean()  # 0 log 0 = 0
        return kl, kl.new_zeros(())


class DTC(PrototypeClustererMixin, BasePrototypeClusterer):
    """Deep Transfer Clustering, supervised as in the CROCS paper: one prototype per combination.

    DTC (Han, Vedaldi & Zisserman, ICCV 2019) learns cluster prototypes by
    minimising ``KL(z || p)`` between a target distribution ``z`` and the
    Student-t assignment ``p`` of each embedding to the prototypes. The
    CROCS paper (Appendix, "Baseline implementations") makes it supervised:
    one prototype per attribute combination, initialised as CROCS's, and the
    target ``z_j = softmax_{l in L}(w_il)`` over the prototypes ``L`` of the
    ECG's class, with CROCS's soft weights ``w`` (temperature ``tau_w``); see
    ``DTCLoss``. Everything else is
    :class:`~sklearn_crocs.CROCSClusterer`'s (both derive from one base):
    encoder, training, early stopping (on the held-out KL divergence,
    recorded as ``valid_nce``), prediction by the nearest prototype,
    ``get_prototypes`` (so that :class:`~sklearn_crocs.PrototypeRetriever`
    retrieves with DTC's prototypes, as in the paper's Table 2), and
    :meth:`save` and :meth:`load` (a DTC file is refused by
    ``CROCSClusterer.load`` and the other way round). As in the paper, it
    trains on whole, unperturbed ECGs whose attributes are all known, at
    the rate they are given.

    Embeddings and prototypes are L2-normalised before the Student-t kernel:
    the paper compares DTC's prototypes with the embeddings by Euclidean
    distance between unit vectors (its Fig. 4), and the nearest prototype by
    that distance is the nearest by cosine similarity, which ``predict`` uses.

    Read more in the :ref:`User Guide <reproducing>`.

    Parameters
    ----------
    encoder : {"cnn", "resnet"} or nn.Module subclass, default=CROCSClusterer's
        The encoder, as in :class:`~sklearn_crocs.CROCSClusterer`.
    encoder_params : dict, default=CROCSClusterer's
        Extra keyword arguments of the encoder.
    embedding_dim : int, default=CROCSClusterer's
        Dimension of the embeddings and prototypes.
    tau_w : float, default=CROCSClusterer's
        Temperature of the weights ``w`` in the target; ``math.inf`` makes
        the target uniform over the prototypes of the ECG's class.
    alpha : float, default=1.0
        Degrees of freedom of the Student-t kernel (1 in DEC and DTC).
    prototypes : {"learned", "mean"}, default="learned"
        Centroids used by ``predict``: DTC's prototypes or the mean training
        embedding of each combination.
    class_attribute : int or str, default=0
        Column of ``y`` holding the class.
    max_epochs : int or "auto", default=CROCSClusterer's
        Maximum number of epochs; ``"auto"`` follows the number of training
        ECGs, as in :class:`~sklearn_crocs.CROCSClusterer`.
    batch_size : int, default=CROCSClusterer's
        Mini-batch size.
    lr : float, default=CROCSClusterer's
        Learning rate of Adam.
    lr_schedule : {"cosine", "constant"}, default=CROCSClusterer's
        Schedule of the learning rate, as in
        :class:`~sklearn_crocs.CROCSClusterer`.
    validation_fraction : float or None, default=CROCSClusterer's
        Fraction of the patients held out for early stopping on the KL
        divergence; ``None`` trains ``max_epochs`` epochs.
    n_iter_no_change : int, default=CROCSClusterer's
        Patience of the early stopping.
    device : str or torch.device, default="cpu"
        Torch device.
    random_state : int, RandomState instance or None, default=None
        Seeds initialisation, batch order and the validation split.
    verbose : int, default=0
        ``1`` prints one line per epoch.
    pretrained : ContrastivePretrainer, default=None
        Start the encoder from a self-supervised pretraining, as in
        :class:`~sklearn_crocs.CROCSClusterer` (a fitted pretrainer as it is,
        an unfitted one fitted in ``fit`` on every ECG of ``X``).

    Attributes
    ----------
    prototypes_ : ndarray of shape (n_prototypes, embedding_dim)
        Unit-norm prototypes used by ``predict``.
    n_features_out_ : int
        Width of the embeddings and prototypes (``embedding_dim``).
    prototype_attributes_ : DataFrame or ndarray of shape (n_prototypes, n_attributes)
        Attribute values of each prototype, in the layout of ``y`` (a
        DataFrame of its columns for a DataFrame ``y``), as ``predict``.
    prototype_counts_ : ndarray of shape (n_prototypes,)
        Training ECGs per prototype's combination.
    combination_counts_ : ndarray of shape (n_combinations,)
        Training ECGs of every attribute combination, in the order of
        ``attribute_codec_.combinations`` (zero for those without any).
    class_index_ : int
        Position of the class attribute among ``attribute_names_``.
    attribute_codec_ : AttributeCodec
        The attributes as ``fit`` saw them in ``y``.
    attribute_names_ : list of str
        Names of the attributes.
    categories_ : list of ndarray
        Values of each attribute seen in ``fit``.
    labels_ : ndarray of shape (n_samples,)
        Row of ``prototypes_`` nearest to each training ECG (an index; that
        row of ``prototype_attributes_`` gives its attributes).
    n_features_in_ : int
        Number of values per training ECG.
    sampling_rate_ : None
        Always ``None``: DTC takes no sampling rate (as CROCSClusterer
        without one).
    signal_scale_ : float or None
        Median standard deviation of the training signals' leads (see
        CROCSClusterer's).
    feature_names_in_ : ndarray of shape (`n_features_in_`,)
        Column names of ``X`` when it was a DataFrame.
    input_shape_ : tuple of int
        ``(n_leads, n_timepoints)`` of the training signals.
    n_iter_ : int
        Number of epochs run.
    pretrainer_ : ContrastivePretrainer or None
        The fitted pretrainer whose encoder started training (None without
        ``pretrained`` and in a loaded model).
    pretraining_time_ : float or None
        Seconds that ``fit`` spent pretraining (None in a loaded model).
    net_ : skorch.NeuralNet
        The fitted net; ``net_.criterion_`` is the ``DTCLoss``.

    See Also
    --------
    sklearn_crocs.CROCSClusterer : CROCS, which DTC is compared with.

    Notes
    -----
    Like :class:`~sklearn_crocs.CROCSClusterer`, DTC learns from the
    attributes ``y`` and predicts attribute values, so it is not a
    scikit-learn :class:`~sklearn.base.ClusterMixin`: ``fit_predict(X, y)``
    equals ``fit(X, y).predict(X)``.

    References
    ----------
    K. Han, A. Vedaldi and A. Zisserman, "Learning to Discover Novel Visual
    Categories via Deep Transfer Clustering", ICCV 2019.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_crocs.baselines import DTC
    >>> rng = np.random.RandomState(0)
    >>> y = np.column_stack([np.repeat(["AF", "SR"], 30), np.tile(["F", "M"], 30)])
    >>> freq = np.where(y[:, 0] == "SR", 1.0, 3.0)[:, None]
    >>> X = np.sin(freq * np.linspace(0, 20, 400)) + 0.2 * rng.randn(60, 400)
    >>> model = DTC(embedding_dim=8, max_epochs=30, lr=1e-2, validation_fraction=None,
    ...             random_state=0).fit(X, y)
    >>> model.prototypes_.shape  # one prototype per combination
    (4, 8)
    >>> bool((model.predict(X)[:, 0] == y[:, 0]).mean() > 0.9)  # the class is learned
    True
    >>> proba = model.predict_proba(X[:2])  # Student-t assignment p
    >>> proba.shape, bool(np.allclose(proba.sum(axis=1), 1))
    ((2, 4), True)
    """

    _parameter_constraints: dict = {
        **TRAINING_CONSTRAINTS,
        **{
            name: CROCSClusterer._parameter_constraints[name]
            for name in ("tau_w", "prototypes", "class_attribute", "lr_schedule")
        },
        "alpha": [Interval(Real, 0, None, closed="neither")],
    }

    def __init__(
        self,
        *,
        encoder=_D["encoder"],
        encoder_params=_D["encoder_params"],
        embedding_dim=_D["embedding_dim"],
        tau_w=_D["tau_w"],
        alpha=1.0,
        prototypes="learned",
        class_attribute=0,
        max_epochs=_D["max_epochs"],
        batch_size=_D["batch_size"],
        lr=_D["lr"],
        lr_schedule=_D["lr_schedule"],
        validation_fraction=_D["validation_fraction"],
        n_iter_no_change=_D["n_iter_no_change"],
        device="cpu",
        random_state=None,
        verbose=0,
        pretrained=None,
    ):
        self.encoder = encoder
        self.encoder_params = encoder_params
        self.embedding_dim = embedding_dim
        self.tau_w = tau_w
        self.alpha = alpha
        self.prototypes = prototypes
        self.class_attribute = class_attribute
        self.max_epochs = max_epochs
        self.batch_size = batch_size
        self.lr = lr
        self.lr_schedule = lr_schedule
        self.validation_fraction = validation_fraction
        self.n_iter_no_change = n_iter_no_change
        self.device = device
        self.random_state = random_state
        self.verbose = verbose
        self.pretrained = pretrained

    def _criterion(self, codec, class_index, partial_combinations=None):
        # Every attribute is known (the base class's missing="error").
        return ClassSpec(DTCLoss, {
            "combinations": codec.combinations,
            "embedding_dim": self.embedding_dim,
            "class_attribute": class_index,
            "tau_w": self.tau_w,
            "alpha": self.alpha,
        })  # fmt: skip

    def predict_proba(self, X):
        """Student-t assignment ``p`` of each ECG to the prototypes.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_timepoints) or (n_samples, n_leads, n_timepoints)
            ECG signals.

        Returns
        -------
        proba : ndarray of shape (n_samples, n_prototypes)
            Column ``j`` belongs to row ``j`` of ``prototype_attributes_``.
        """
        check_is_fitted(self, "net_")
        embeddings = torch.from_numpy(self.transform(X))
        prototypes = torch.from_numpy(self.prototypes_)
        return student_t_log_assignment(embeddings, prototypes, self.alpha).exp().numpy()
