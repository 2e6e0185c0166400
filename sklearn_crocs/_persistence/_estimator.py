"""The estimator document: what a prototype clusterer's model file holds.

:class:`EstimatorFile` gives the prototype clusterers (``CROCSClusterer``,
``DTC``) ``save`` and ``load``. Their document adds to the format's header
(:mod:`sklearn_crocs._persistence._format`) the fields of
``ESTIMATOR_FIELDS``: the parameters (less the class's ``_not_saved``), the
encoder's name, the attributes (:func:`prototypes_state`), the input
description, the rate and scale of the signals and the training histories.
Its tensors are each net's encoder weights and prototypes, the learned and
mean prototypes, their counts and ``labels_``. A retriever's file
(:mod:`sklearn_crocs._persistence._retriever`) holds the same document under
the tensor prefix ``"estimator."``.
"""

import math
import os
from functools import partial

import numpy as np
import torch
from sklearn.utils.validation import check_is_fitted
from skorch.history import History

from .._attributes import LAYOUTS, MAX_COMBINATIONS, AttributeCodec
from .._engine._prototypes import FittedPrototypes
from ..nn import ArrayDataset
from ..nn._encoders import encoder_class
from ..preprocessing import check_signal_layout
from ..preprocessing._signals import check_bandpass
from ._fields import is_bin_edges, is_int, is_list, is_none_or_finite, is_str
from ._format import (
    ESTIMATOR_HEAD_FIELDS,
    INPUT_SHAPE_FIELD,
    InvalidModelFileError,
    check_activation,
    check_encoder_shapes,
    check_fields,
    check_load_args,
    check_probe,
    decode_dtype,
    decode_values,
    document_errors,
    encode_dtype,
    encode_values,
    head_document,
    head_estimator,
    probe_signals,
    read_model_file,
    write_model_file,
)

ESTIMATOR_FIELDS = {
    **ESTIMATOR_HEAD_FIELDS,
    "attribute_names": (is_list(is_str, 1), "a list of names", True),
    "categories": (is_list(lambda v: isinstance(v, dict), 1), "a list of value arrays", True),
    "attribute_dtypes": (is_list(lambda v: isinstance(v, dict), 1), "a list of dtypes", True),
    "y_kind": (lambda v: is_str(v) and v in LAYOUTS, f"one of {LAYOUTS}", True),
    # Files written before continuous attributes existed have no bin edges.
    "bin_edges": (is_bin_edges, "increasing numbers per attribute", False),
    "class_index": (is_int(0), "an attribute position", True),
    "input_shape": INPUT_SHAPE_FIELD,
    "fit_ndim": (lambda v: v in (2, 3) and not isinstance(v, bool), "2 or 3", True),
    "n_features_in": (is_int(1), "a positive integer", True),
    "feature_names_in": (lambda v: v is None or is_list(is_str)(v), "null or names", True),
    # One history per net of an ensemble after the first (files before ensembles: none).
    "ensemble_histories": (
        is_list(is_list(lambda v: isinstance(v, dict))), "a list of training histories", False
    ),
    "history": (is_list(lambda v: isinstance(v, dict)), "a list of epochs", True),
    # Files written before sampling rates existed have neither.
    "sampling_rate": (is_none_or_finite(0, strict=True), "null or a finite number > 0", False),
    "signal_scale": (is_none_or_finite(0, strict=False), "null or a finite number >= 0", False),
}


class EstimatorFile:
    """``save`` and ``load`` of a prototype clusterer, and its fields of the model file.

    The document's fields are ``ESTIMATOR_FIELDS``; the class that mixes it
    in names in ``_not_saved`` the parameters that a file leaves out.
    """

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
            A symbolic link at ``path`` is refused either way: no file is
            written through a link or in place of one.

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
        document, tensors = self._file_state()
        write_model_file(path, type(self).__name__, document, tensors, overwrite=overwrite)
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
        check_load_args(device, encoder, sha256)
        document, tensors = read_model_file(path, cls.__name__, sha256)
        return estimator_from_state(
            cls, document, tensors, os.fspath(path), device=device, encoder=encoder
        )

    def _check_activation(self):
        """ValueError if one ECG's forward pass is beyond what a model file may describe."""
        check_activation(
            encoder_class(self.encoder), self.input_shape_, self.embedding_dim,
            self.encoder_params,
        )  # fmt: skip

    def _file_state(self, prefix=""):
        """``(document, tensors)`` of the fitted model, for a model file."""
        try:  # load refuses a file beyond the limits: refuse it before it is written
            self._check_activation()
        except ValueError as exc:
            raise ValueError(
                f"This model cannot be saved: {exc}, so load would refuse the file. Fit it on "
                "shorter frames (make_frames) to save it."
            ) from exc
        prototypes_document, prototype_tensors = prototypes_state(self._fitted)
        document = {
            **head_document(self, self._not_saved),
            **prototypes_document,
            "input_shape": list(self.input_shape_),
            "sampling_rate": self.sampling_rate_,
            "signal_scale": self.signal_scale_,
            "fit_ndim": self._fit_ndim,
            "n_features_in": self.n_features_in_,
            "feature_names_in": (
                self.feature_names_in_.tolist() if hasattr(self, "feature_names_in_") else None
            ),
            "history": self.net_.history.to_list(),
            "ensemble_histories": [net.history.to_list() for net in self.nets_[1:]],
        }
        tensors = {}
        for k, net in enumerate(self.nets_):
            # The first net keeps the names of a single model's file.
            name = "" if k == 0 else f"ensemble.{k}."
            tensors.update({f"{name}encoder.{n}": v for n, v in net.module_.state_dict().items()})
            tensors[f"{name}criterion.prototypes"] = net.criterion_.prototypes
        tensors.update(prototype_tensors)
        tensors["labels"] = self.labels_.astype(np.int64)
        return document, {prefix + k: v for k, v in tensors.items()}

    @classmethod
    def _from_file_state(cls, document, tensors, path, device, encoder, prefix):
        """A ``cls`` rebuilt from the document and the tensors under ``prefix``."""
        check_fields(document, ESTIMATOR_FIELDS, "the model document")
        if document["class"] != cls.__name__:
            raise InvalidModelFileError(
                f"{path} holds a {document['class']}, not a {cls.__name__}."
            )
        model = head_estimator(
            cls, document, cls._not_saved, path, device=device, encoder=encoder
        )
        t = {k[len(prefix) :]: v for k, v in tensors.items() if k.startswith(prefix)}
        return model._restore(document, t, path)

    def _restore(self, document, t, path):
        """Set the fitted attributes from the document and the tensors ``t``; checked."""
        fitted = prototypes_from_state(
            document, t, embedding_dim=self._output_dim, kind=self.prototypes, path=path
        )
        self.input_shape_ = tuple(document["input_shape"])
        self._fit_ndim = document["fit_ndim"]
        self.n_features_in_ = document["n_features_in"]
        self.sampling_rate_ = document.get("sampling_rate")
        self.signal_scale_ = document.get("signal_scale")
        if document["feature_names_in"] is not None:
            self.feature_names_in_ = np.asarray(document["feature_names_in"], dtype=object)
        names_in = getattr(self, "feature_names_in_", None)
        if self.n_features_in_ != math.prod(self.input_shape_) or (
            names_in is not None and len(names_in) != self.n_features_in_
        ):
            raise ValueError("inconsistent input description")
        # The encoder's rate follows from the parameters; a document that says
        # otherwise would have new signals resampled to a rate the model never saw.
        rates = self._signal_rates()
        if self.sampling_rate_ != rates.model_rate():
            raise ValueError(
                f"sampling_rate {self.sampling_rate_} is not the rate the parameters give the "
                f"encoder ({rates.model_rate()})"
            )
        if self.sampling_rate_ is not None:
            check_signal_layout((1, *self.input_shape_), self.sampling_rate_, name="input_shape")
        if rates.conditioning is not None:  # the rates that fit gave it
            check_bandpass(rates.conditioning.bandpass, rates.sampling_rate, self.sampling_rate_)
        self._check_activation()

        shape = (len(fitted.learned), self.embedding_dim)
        labels = t["labels"].numpy()
        histories = [document["history"], *document.get("ensemble_histories", [])]
        n_nets = self._ensemble().size
        if len(histories) != n_nets:
            raise ValueError(f"{len(histories)} training histories for {n_nets} nets")
        nets = []
        for k, history in enumerate(histories):
            name = "" if k == 0 else f"ensemble.{k}."
            prototypes = t[f"{name}criterion.prototypes"]
            if tuple(prototypes.shape) != shape:
                raise ValueError(
                    f"{name}criterion.prototypes has shape {tuple(prototypes.shape)}, not {shape}"
                )
            net = self._build_net(
                *self.input_shape_, 0, None, codec=fitted.codec, class_index=fitted.class_index
            )
            net.set_params(optimizer=PredictionOnly)
            weights = {
                n.removeprefix(f"{name}encoder."): v
                for n, v in t.items()
                if n.startswith(f"{name}encoder.")
            }
            check_encoder_shapes(partial(net.module, **net.get_params_for("module")), weights)
            with torch.random.fork_rng(devices=[]):  # the weights are overwritten below
                net.initialize()
            net.module_.load_state_dict(weights, strict=True)
            with torch.no_grad():
                net.criterion_.prototypes.copy_(prototypes)
            net.history = History(history)
            nets.append(net)
        self.net_, self.nets_ = nets[0], nets
        self.n_iter_ = len(nets[0].history)
        self._fitted = fitted
        if labels.ndim != 1 or not np.all((labels >= 0) & (labels < len(self.prototypes_))):
            raise ValueError("labels do not index the prototypes")
        self.labels_ = labels
        # Not in the file: the encoder's weights hold what the pretraining gave.
        self.pretrainer_ = self.pretraining_time_ = None
        probe = probe_signals(*self.input_shape_, self.sampling_rate_, self.signal_scale_)
        for net in nets:
            check_probe(path, net.forward(ArrayDataset(probe), training=False, device="cpu"))
        return self



class PredictionOnly:
    """The optimizer of a net rebuilt from a file, which predicts and never trains.

    A torch optimizer would import torch's compiler stack on its first
    construction in a process (seconds) for nothing: a model refits with new
    nets, and fine-tuning copies the weights.
    """

    def __init__(self, params, **options):
        self.param_groups = [dict(group, **options) for group in params]
        self.state = {}

    def zero_grad(self, set_to_none=True):
        self.step()

    def step(self, closure=None):
        raise RuntimeError(
            "This net was rebuilt from a model file to predict; it does not train. Fit the "
            "estimator, or pass it as pretrained= to a new one."
        )

    def state_dict(self):
        return {"state": {}, "param_groups": []}


def estimator_state(model, prefix=""):
    """``(document, tensors)`` of a fitted prototype clusterer, tensor names under ``prefix``."""
    return model._file_state(prefix)


def estimator_from_state(cls, document, tensors, path, *, device, encoder, prefix=""):
    """Rebuild a fitted ``cls``; every inconsistency is an InvalidModelFileError."""
    with document_errors(path, cls.__name__):
        return cls._from_file_state(document, tensors, path, device, encoder, prefix)


def prototypes_state(fitted):
    """``(document, tensors)`` of a :class:`FittedPrototypes`: its fields of the document."""
    codec = fitted.codec
    document = {
        "attribute_names": codec.names,
        "categories": [
            encode_values(c, f"categories_ of attribute {n!r}")
            for n, c in zip(codec.names, codec.categories)
        ],
        "attribute_dtypes": [
            encode_dtype(d, f"the dtype of attribute {n!r}")
            for n, d in zip(codec.names, codec.dtypes)
        ],
        "y_kind": codec.layout,
        "bin_edges": {name: edges.tolist() for name, edges in codec.bin_edges.items()},
        "class_index": fitted.class_index,
    }
    tensors = {
        "learned_prototypes": fitted.learned,
        "mean_prototypes": fitted.means,
        "prototype_counts": fitted.counts.astype(np.int64),
    }
    return document, tensors


def prototypes_from_state(document, tensors, *, embedding_dim, kind, path):
    """The :class:`FittedPrototypes` of :func:`prototypes_state`'s fields, checked together.

    The document's fields have been type-checked; a size that does not
    match raises ``ValueError``, values no fit produces an
    :class:`~sklearn_crocs.InvalidModelFileError`.
    """
    categories = [decode_values(c) for c in document["categories"]]
    names = document["attribute_names"]
    if len(set(names)) != len(names):
        raise ValueError(f"the attribute names {names[:20]} are not distinct")
    for name, values in zip(names, categories):
        # True == 1 in a set, as in the pandas index that query() builds from them.
        items = values.tolist()
        if len(set(items)) != len(items) or len({type(v) for v in items}) > 1:
            raise ValueError(
                f"the categories of {name!r} ({items[:10]}) are not distinct values of one type"
            )
    dtypes = [decode_dtype(d) for d in document["attribute_dtypes"]]
    n_combinations = math.prod(len(c) for c in categories)
    shape = (n_combinations, embedding_dim)
    learned = tensors["learned_prototypes"]
    # Sizes the document declares, against the tensors, before anything is
    # allocated from them.
    if n_combinations > MAX_COMBINATIONS or tuple(learned.shape) != shape:
        raise ValueError(
            f"the categories give {n_combinations} attribute combinations and "
            f"embedding_dim={embedding_dim}, but the learned prototypes have shape "
            f"{tuple(learned.shape)}"
        )
    codec = AttributeCodec(
        document["attribute_names"], categories, dtypes, document["y_kind"],
        document.get("bin_edges"),
    )  # fmt: skip
    if not 0 <= document["class_index"] < len(codec.names):
        raise ValueError("inconsistent attribute description")
    means = tensors["mean_prototypes"].numpy()
    counts = tensors["prototype_counts"].numpy()
    if means.shape != shape or counts.shape != (n_combinations,):
        raise ValueError(
            f"prototype tensors do not have the shape {shape} that the categories and "
            "embedding_dim give"
        )
    if (counts < 0).any() or not np.isfinite(means[counts > 0]).all():
        raise InvalidModelFileError(
            f"{path}: tensor 'mean_prototypes' holds NaN or infinite values for attribute "
            "combinations with training ECGs (or prototype_counts is negative), which no "
            "fitted model has; the file was altered. Fit and save the model again."
        )
    # Both sets are stored L2-normalised: a row of another length (3e38, or
    # zeros) would make every similarity to it infinite, NaN or 0.
    for name, rows in (
        ("learned_prototypes", learned.numpy()),
        ("mean_prototypes", means[counts > 0]),
    ):
        norms = np.linalg.norm(rows.astype(np.float64), axis=1)
        if not np.all(np.abs(norms - 1) <= 1e-3):
            raise InvalidModelFileError(
                f"{path}: tensor {name!r} holds rows that are not unit vectors (lengths "
                f"up to {norms.max():.3g}), which no fitted model has; the file was "
                "altered. Fit and save the model again."
            )
    return FittedPrototypes(codec, document["class_index"], learned.numpy(), means, counts, kind)
