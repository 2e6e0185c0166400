"""What the baselines share: CROCS's training defaults, the cluster -> attribute map, the net."""

from numbers import Integral, Real

import numpy as np
import pandas as pd
import torch
from scipy.optimize import linear_sum_assignment
from sklearn.base import BaseEstimator, ClusterMixin, TransformerMixin
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import check_is_fitted
from torch import nn

from .._attributes import as_attribute_frame, combination_labels
from .._clusterer import CROCSClusterer
from .._display import DocLinkMixin
from .._engine._neural import NeuralEstimatorMixin
from .._utils import _draw_seed, _silent
from ..nn import ArrayDataset, CROCSNet
from ..nn._callbacks import early_stopping_callbacks
from ..nn._encoders import encoder_class

__all__ = ["map_clusters"]

#: CROCSClusterer's defaults: the baselines train with the same encoder,
#: embedding size, epochs, batch size and learning rate unless told otherwise,
#: and follow the defaults wherever they change.
CROCS_DEFAULTS = CROCSClusterer().get_params()

# Constraints of the training parameters, as CROCSClusterer validates them.
TRAINING_CONSTRAINTS = {
    name: CROCSClusterer._parameter_constraints[name]
    for name in (
        "encoder",
        "encoder_params",
        "embedding_dim",
        "max_epochs",
        "batch_size",
        "lr",
        "validation_fraction",
        "n_iter_no_change",
        "device",
        "random_state",
        "verbose",
        "pretrained",
    )
}
# DeepCluster and SeLA redraw their pseudo-labels every epoch, so their loss
# is not comparable from one epoch to the next: they have no early stopping.
NO_VALIDATION_TRAINING_CONSTRAINTS = {
    k: v
    for k, v in TRAINING_CONSTRAINTS.items()
    if k not in ("validation_fraction", "n_iter_no_change")
}
MAPPING_CONSTRAINT = {"mapping": [StrOptions({"majority", "hungarian"})]}
N_CLUSTERS_CONSTRAINT = {"n_clusters": [Interval(Integral, 1, None, closed="left")]}
POSITIVE = [Interval(Real, 0, None, closed="neither")]


def map_clusters(labels, y, *, n_clusters=None, method="majority"):
    """Attribute combination of each cluster, learned from labelled (training) ECGs.

    An unsupervised clustering has no attributes; to score it with the
    attribute accuracy of the CROCS paper (Eq. 4), each cluster is named
    after the combination of attributes of its training ECGs:

    - ``"majority"``: the most frequent combination among its members (ties:
      the combination met first in ``y``), as is usual for clustering
      accuracy with more clusters than classes;
    - ``"hungarian"``: a one-to-one matching of clusters to combinations that
      maximises the number of ECGs whose combination is their cluster's
      (:func:`scipy.optimize.linear_sum_assignment`); clusters left over when
      there are more clusters than combinations fall back to the majority.

    A cluster without labelled members gets the most frequent combination.

    Read more in the :ref:`User Guide <reproducing>`.

    Parameters
    ----------
    labels : array-like of shape (n_samples,)
        Cluster index (``0 .. n_clusters - 1``) of each labelled ECG.
    y : array-like of shape (n_samples,) or (n_samples, n_attributes), or DataFrame
        Attributes of the same ECGs.
    n_clusters : int, default=None
        Number of clusters; ``None`` means ``max(labels) + 1``.
    method : {"majority", "hungarian"}, default="majority"
        How clusters are matched to combinations.

    Returns
    -------
    cluster_attributes : pandas.DataFrame of shape (n_clusters, n_attributes)
        Row ``c`` holds the attributes assigned to cluster ``c``, with the
        columns and dtypes of ``y`` (as a DataFrame).

    Examples
    --------
    >>> import pandas as pd
    >>> from sklearn_crocs.baselines import map_clusters
    >>> y = pd.DataFrame({"rhythm": ["SR", "SR", "SR", "AF", "AF"],
    ...                   "sex": ["F", "F", "M", "M", "M"]})
    >>> map_clusters([0, 0, 0, 1, 1], y)
      rhythm sex
    0     SR   F
    1     AF   M

    The majority may name two clusters alike; the matching does not:

    >>> labels, y = [0, 0, 0, 1, 1], ["a", "a", "a", "a", "b"]
    >>> map_clusters(labels, y)["attribute_0"].tolist()
    ['a', 'a']
    >>> map_clusters(labels, y, method="hungarian")["attribute_0"].tolist()
    ['a', 'b']
    """
    if method not in ("majority", "hungarian"):
        raise ValueError(f"method must be 'majority' or 'hungarian'; got {method!r}.")
    labels = np.asarray(labels)
    frame = as_attribute_frame(y)
    if labels.ndim != 1 or len(labels) != len(frame):
        raise ValueError(
            f"labels must be 1-D with one cluster per row of y; got shape {labels.shape} "
            f"for {len(frame)} rows."
        )
    if len(labels) == 0:
        raise ValueError("labels and y are empty; pass at least one labelled ECG.")
    if not np.issubdtype(labels.dtype, np.integer) or labels.min() < 0:
        raise ValueError("labels must be non-negative integer cluster indices.")
    n_clusters = int(labels.max()) + 1 if n_clusters is None else int(n_clusters)
    if labels.max() >= n_clusters:
        raise ValueError(f"labels holds cluster {labels.max()}, but n_clusters={n_clusters}.")
    combination, first_rows = pd.factorize(combination_labels(frame))
    first_rows = np.array([np.flatnonzero(combination == c)[0] for c in range(len(first_rows))])
    counts = np.zeros((n_clusters, len(first_rows)), dtype=np.int64)
    np.add.at(counts, (labels, combination), 1)
    # argmax takes the first maximum: among equally frequent combinations, the one met first.
    most_frequent = np.bincount(combination).argmax()
    assigned = np.where(counts.any(axis=1), counts.argmax(axis=1), most_frequent)
    if method == "hungarian":
        clusters, combinations = linear_sum_assignment(counts, maximize=True)
        assigned[clusters] = combinations
    return frame.iloc[first_rows[assigned]].reset_index(drop=True)


class AttributeMapMixin:
    """``predict_attributes`` for clusterers: each cluster named by :func:`map_clusters`.

    ``fit`` calls :meth:`_fit_map` with the training clusters and ``y``.
    """

    def _fit_map(self, labels, y):
        if y is None:
            return
        self.cluster_attributes_ = map_clusters(
            labels, y, n_clusters=self._n_clusters_out(), method=self.mapping
        )

    def _n_clusters_out(self):
        return self.n_clusters

    def predict_attributes(self, X):
        """Attributes of the cluster of each ECG, as named from the training ECGs.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_timepoints) or (n_samples, n_leads, n_timepoints)
            ECG signals.

        Returns
        -------
        attributes : pandas.DataFrame of shape (n_samples, n_attributes)
            Row ``i``: the attributes of the cluster of ECG ``i``
            (``cluster_attributes_``, learned by ``fit`` from ``y`` with
            :func:`map_clusters`).
        """
        check_is_fitted(self)
        if not hasattr(self, "cluster_attributes_"):
            raise AttributeError(
                f"This {type(self).__name__} was fitted without y, so its clusters have no "
                "attributes. Pass the attributes of the training ECGs to fit."
            )
        clusters = self.predict(X)
        return self.cluster_attributes_.iloc[clusters].reset_index(drop=True)


class BaselineNet(CROCSNet):
    """:class:`~sklearn_crocs.nn.CROCSNet` whose criterion takes the module's whole output.

    The batching, devices and inference of CROCSNet, with skorch's plain
    ``criterion_(y_pred, y_true)`` loss: a baseline's module returns a tuple
    of what its loss needs.
    """

    def get_loss(self, y_pred, y_true, X=None, training=False):
        return self.criterion_(y_pred, y_true.to(self.device))


class EncoderModule(nn.Module):
    """Base of the baselines' modules: an encoder of the package, and its size hint."""

    def __init__(self, encoder):
        super().__init__()
        self.encoder = encoder

    @property
    def max_activation_size(self):
        # Read by CROCSNet to size inference batches on CPU.
        return getattr(self.encoder, "max_activation_size", None)


class NeuralBaseline(
    NeuralEstimatorMixin, DocLinkMixin, ClusterMixin, TransformerMixin, BaseEstimator
):
    """Shared fitting of the neural baselines: input checks, seeding, skorch net, embeddings.

    Subclasses implement ``_build(n_leads, n_timepoints, seed)`` returning
    ``(module, criterion, callbacks)``; the module is an
    :class:`EncoderModule` whose ``encoder`` gives the embeddings. Input
    checks, the validation split, the pretrained encoder and the net's
    training settings are CROCSClusterer's
    (:class:`~sklearn_crocs._engine._neural.NeuralEstimatorMixin`).
    """

    def _encoder_of(self, module):
        return module.encoder

    def _make_encoder(self, n_leads, n_timepoints):
        return encoder_class(self.encoder)(
            in_channels=n_leads,
            n_timepoints=n_timepoints,
            embedding_dim=self.embedding_dim,
            **(self.encoder_params or {}),
        )

    def _train_encoder(self, X, targets, groups=None):
        """Fit ``net_`` on validated signals X and per-ECG ``targets``; return the seed."""
        self._check_device()
        seed = _draw_seed(self.random_state)
        if getattr(self, "validation_fraction", None) is None:
            train, valid = np.arange(len(X)), None
        else:
            # The patient-grouped split (and its warning without groups), not
            # stratified: the baselines' targets are no classes.
            train, valid = self._split(len(X), groups, seed, None)
        pretrainer = self._pretrain(X, groups, seed)
        callbacks = []
        if valid is not None:
            sink = print if self.verbose else _silent
            callbacks = early_stopping_callbacks("valid_loss", self.n_iter_no_change, sink)

        def build():
            module, criterion, extra_callbacks = self._build(*X.shape[1:], seed)
            return self._assemble_net(
                BaselineNet,
                seed=seed,
                valid_dataset=None if valid is None else ArrayDataset(X[valid], targets[valid]),
                callbacks=[*extra_callbacks, *callbacks],
                n_train=len(train),
                module=module,
                criterion=criterion,
                device=self.device,
            )

        net = self._fit_net(build, X[train], targets[train], seed=seed, pretrainer=pretrainer)
        self.net_ = net
        self.n_iter_ = len(net.history)
        return seed

    def _encode(self, X, net=None):
        """Encoder outputs of validated signals X, as a float32 ndarray."""
        net = self.net_ if net is None else net
        net.module_.train(False)
        batch_size = net.inference_batch_size()
        encoder = self._encoder_of(net.module_)
        with torch.inference_mode():
            parts = [
                encoder(part.to(net.device)).float().cpu()
                for part in torch.as_tensor(X).split(batch_size)
            ]
        return torch.cat(parts).numpy()

    def transform(self, X):
        """Embed ECGs with the trained encoder.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_timepoints) or (n_samples, n_leads, n_timepoints)
            ECG signals with the lead count and length seen in ``fit``.

        Returns
        -------
        embeddings : ndarray of shape (n_samples, embedding_dim), dtype float32
            The encoder's outputs.
        """
        check_is_fitted(self, "net_")
        return self._encode(self._validate_signals(X, reset=False))

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.three_d_array = True
        tags.target_tags.multi_output = True
        tags.transformer_tags.preserves_dtype = ["float32"]
        return tags


def class_codes(y, class_attribute):
    """Attribute frame of ``y`` and integer codes of its class column."""
    frame = as_attribute_frame(y)
    if isinstance(class_attribute, str):
        if class_attribute not in frame.columns:
            raise ValueError(
                f"class_attribute={class_attribute!r} is not an attribute of y; "
                f"attributes: {list(frame.columns)}."
            )
        column = frame[class_attribute]
    else:
        if class_attribute >= frame.shape[1]:
            raise ValueError(
                f"class_attribute={class_attribute} but y has only {frame.shape[1]} attribute(s)."
            )
        column = frame.iloc[:, class_attribute]
    codes, _ = pd.factorize(column, sort=True)
    return frame, codes.astype(np.int64)


def n_combinations(frame):
    """Number of attribute combinations (prototypes of CROCS) of an attribute frame."""
    return int(np.prod(frame.nunique().to_numpy()))


# Shared descriptions, substituted for "{training}", "{early_stopping}", "{run}" and
# "{pretraining}" (attributes) in the docstrings of the neural baselines.
TRAINING_DOC = """encoder : {"cnn", "resnet"} or nn.Module subclass, default=CROCSClusterer's
        The encoder, as in :class:`~sklearn_crocs.CROCSClusterer`.
    encoder_params : dict, default=CROCSClusterer's
        Extra keyword arguments of the encoder.
    embedding_dim : int, default=CROCSClusterer's
        Dimension of the encoder's output.
    max_epochs : int or "auto", default=CROCSClusterer's
        Number of passes over the training data (at most, with early stopping);
        ``"auto"`` follows the number of training ECGs, as in
        :class:`~sklearn_crocs.CROCSClusterer`.
    batch_size : int, default=CROCSClusterer's
        Mini-batch size.
    lr : float, default=CROCSClusterer's
        Learning rate of Adam (constant)."""
EARLY_STOPPING_DOC = """validation_fraction : float or None, default=CROCSClusterer's
        Fraction of the patients (``groups``) held out: training stops when
        their loss has not improved by a relative 1e-4 for
        ``n_iter_no_change`` epochs, and the weights of the best epoch are
        kept. ``None`` trains ``max_epochs`` epochs on all data.
    n_iter_no_change : int, default=CROCSClusterer's
        Patience of the early stopping, in epochs."""
RUN_DOC = """device : str or torch.device, default="cpu"
        Torch device for training and inference.
    random_state : int, RandomState instance or None, default=None
        Seeds the initialisation, the batch order, the random parts of the
        method and its k-means. The global random states are left alone.
    verbose : int, default=0
        ``1`` prints one line per epoch.
    pretrained : ContrastivePretrainer, default=None
        Start the encoder from a self-supervised pretraining, as in
        :class:`~sklearn_crocs.CROCSClusterer` (the rest of the network
        starts at random): a fitted pretrainer as it is, an unfitted one
        cloned with this estimator's encoder settings and fitted in ``fit``
        on every ECG of ``X`` (with ``groups`` as its patients when ``fit``
        takes them; seeded by this estimator when the pretrainer's
        ``random_state`` is None). Wrap a fitted one in
        :class:`sklearn.frozen.FrozenEstimator` to keep it fitted through
        cloning (grid searches)."""
PRETRAINING_ATTRIBUTES_DOC = """pretrainer_ : ContrastivePretrainer or None
        The fitted pretrainer whose encoder started training (the one fitted
        in ``fit`` when ``pretrained`` was unfitted); None without
        ``pretrained``.
    pretraining_time_ : float
        Seconds that ``fit`` spent pretraining (0 when ``pretrained`` was
        None or fitted already)."""


def fill_doc(cls):
    """Substitute the shared parameter descriptions into ``cls.__doc__``."""
    cls.__doc__ = (
        cls.__doc__.replace("{training}", TRAINING_DOC)
        .replace("{early_stopping}", EARLY_STOPPING_DOC)
        .replace("{run}", RUN_DOC)
        .replace("{pretraining}", PRETRAINING_ATTRIBUTES_DOC)
    )
    return cls
