"""The retriever document: what a :class:`~sklearn_crocs.PrototypeRetriever` file holds.

Its document adds to the format's header
(:mod:`sklearn_crocs._persistence._format`) the fields ``params`` (less
``_NOT_SAVED``), ``estimator`` (a nested ``{kind: content}`` spec whose
``CROCSClusterer`` holds the estimator document of
:mod:`sklearn_crocs._persistence._estimator`, its tensors under
``"estimator."``) and ``indexed``; the tensor ``embeddings`` holds the
database when ``indexed`` is true. The estimator is stored when it is a
CROCSClusterer, optionally after FrameNormalizer steps in a Pipeline and
wrapped in FrozenEstimator.
"""

import os

from sklearn.frozen import FrozenEstimator
from sklearn.pipeline import Pipeline

from .._clusterer import CROCSClusterer
from .._utils import _crocs_step
from ..preprocessing import FrameNormalizer
from ..preprocessing._signals import NORMALIZE_METHODS
from ._estimator import estimator_from_state, estimator_state
from ._format import (
    MAX_NESTING,
    check_load_args,
    decode_params,
    document_errors,
    encode_value,
    read_model_file,
    write_model_file,
)

# Parameters that a file never sets: an object of any class, which a file that
# runs no code cannot restore, and a path on the user's machine, which only the
# caller names. Saving leaves them out; a file that has them is refused.
_NOT_SAVED = ("estimator", "embeddings_path")


def _estimator_spec(estimator, tensors):
    """The JSON spec of a retriever's estimator; the clusterer's tensors go to ``tensors``."""
    if type(estimator) is CROCSClusterer:  # not a subclass such as baselines.DTC
        document, state = estimator_state(estimator, prefix="estimator.")
        tensors.update(state)
        return {"CROCSClusterer": document}
    if isinstance(estimator, FrozenEstimator):
        return {"FrozenEstimator": _estimator_spec(estimator.estimator, tensors)}
    if isinstance(estimator, Pipeline) and estimator.memory is None:
        steps = [[str(name), _estimator_spec(step, tensors)] for name, step in estimator.steps]
        return {"Pipeline": {"steps": steps, "verbose": bool(estimator.verbose)}}
    if type(estimator) is FrameNormalizer:
        spec = {"method": estimator.method}
        if hasattr(estimator, "n_features_in_"):
            spec["n_features_in"] = estimator.n_features_in_
        return {"FrameNormalizer": spec}
    raise TypeError(
        f"PrototypeRetriever.save cannot store a {type(estimator).__name__} without pickle: "
        "it stores a CROCSClusterer, optionally after FrameNormalizer steps in a Pipeline "
        "and wrapped in FrozenEstimator. Use those, or persist this retriever with joblib "
        "(see the user guide on model persistence for the risk)."
    )


def _estimator_from_spec(spec, tensors, path, device, encoder, depth=0):
    if not isinstance(spec, dict) or len(spec) != 1 or depth > MAX_NESTING:
        raise ValueError("the estimator is not one {kind: content} object of a known depth")
    ((kind, content),) = spec.items()
    if kind == "CROCSClusterer":
        return estimator_from_state(
            CROCSClusterer,
            content,
            tensors,
            path,
            device=device,
            encoder=encoder,
            prefix="estimator.",
        )
    if kind == "FrozenEstimator":
        return FrozenEstimator(
            _estimator_from_spec(content, tensors, path, device, encoder, depth + 1)
        )
    if kind == "Pipeline":
        steps = [
            (str(name), _estimator_from_spec(step, tensors, path, device, encoder, depth + 1))
            for name, step in content["steps"]
        ]
        # What save writes: FrameNormalizer steps, then the clusterer (which
        # _crocs_step finds in the last step, or refuses).
        *before, (_, last) = steps
        shape = _crocs_step(last).input_shape_
        for name, step in before:
            if type(step) is not FrameNormalizer:
                raise ValueError(
                    f"pipeline step {name!r} before the clusterer is not a FrameNormalizer"
                )
            # X's second axis: the leads of 3-D X, the samples of 2-D X.
            if getattr(step, "n_features_in_", shape[0]) not in shape:
                raise ValueError(
                    f"pipeline step {name!r} was fitted on {step.n_features_in_} features, but "
                    f"the clusterer on {shape[0]} lead(s) of {shape[1]} samples"
                )
        return Pipeline(steps, verbose=bool(content["verbose"]))
    if kind == "FrameNormalizer":
        if content["method"] not in NORMALIZE_METHODS:
            raise ValueError(f"unknown FrameNormalizer method {content['method']!r}")
        step = FrameNormalizer(method=content["method"])
        if "n_features_in" in content:
            width = content["n_features_in"]
            if not isinstance(width, int) or isinstance(width, bool) or width < 1:
                raise ValueError(f"FrameNormalizer n_features_in {str(width)[:30]} is not a count")
            step.n_features_in_ = width
        return step
    raise ValueError(f"unknown estimator kind {kind!r}")


def save_retriever(retriever, path, *, include_embeddings, overwrite=False):
    tensors = {}
    document = {
        "class": "PrototypeRetriever",
        "params": {
            k: encode_value(v, f"parameter {k}")
            for k, v in retriever.get_params(deep=False).items()
            if k not in _NOT_SAVED
        },
        "estimator": _estimator_spec(retriever.estimator_, tensors),
        "indexed": bool(include_embeddings),
    }
    if include_embeddings:
        tensors["embeddings"] = retriever.embeddings_
    write_model_file(path, "PrototypeRetriever", document, tensors, overwrite=overwrite)


def load_retriever(cls, path, *, device=None, encoder=None, sha256=None):
    """The retriever of the file, and its database embeddings (None if not saved)."""
    check_load_args(device, encoder, sha256)
    document, tensors = read_model_file(path, "PrototypeRetriever", sha256)
    path = os.fspath(path)
    with document_errors(path, "PrototypeRetriever"):
        if not isinstance(document.get("params"), dict):
            raise ValueError("the retriever's parameters are not an object")
        params = decode_params(document, _NOT_SAVED, path)
        estimator = _estimator_from_spec(document["estimator"], tensors, path, device, encoder)
        retriever = cls(estimator, **params)
        retriever._validate_params()
        embeddings = None
        # The database embeddings are in the file exactly when it says it is indexed.
        if not isinstance(document["indexed"], bool) or document["indexed"] != (
            "embeddings" in tensors
        ):
            raise ValueError("'indexed' does not say whether the file holds the embeddings")
        if document["indexed"]:
            embeddings = tensors["embeddings"].numpy()
            # As wide as transform's output: embedding_dim per net of an ensemble.
            width = _crocs_step(estimator).prototypes_.shape[1]
            if embeddings.ndim != 2 or embeddings.shape[1] != width:
                raise ValueError(f"embeddings have shape {embeddings.shape}, not (n, {width})")
    return retriever, embeddings
