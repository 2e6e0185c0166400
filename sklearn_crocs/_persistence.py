"""Model files that run no code on load: safetensors tensors plus a JSON document.

A file is one safetensors file. Its header's metadata holds, under the key
``"sklearn_crocs"``, a JSON document with everything that is not a tensor:
the estimator's parameters, attribute names, categories and dtypes, the input
shape, the training history, the versions that wrote it, and a manifest of
the tensors (dtype, shape and SHA-256 of each). Reading a file parses JSON and
copies numbers into tensors; no object is unpickled, no module named in the
file is imported. Every tensor is checked against the manifest, and the
rebuilt network against the parameters, before anything is returned.

Nothing in a file derives from the training signals except the fitted
weights, prototypes, mean embeddings and each training ECG's cluster label
(``labels_``); a retriever's database embeddings are written only on request.
"""

import hashlib
import json
import math
import os
import platform
import warnings

import numpy as np
import pandas as pd
import safetensors
import sklearn
import skorch
import torch
from safetensors import SafetensorError, safe_open
from safetensors.torch import save_file
from skorch.history import History

from ._attributes import AttributeCodec
from ._utils import _atomic_path, _crocs_step, _device_problem, _python_value
from .preprocessing import SignalConditioner

__all__ = ["InvalidModelFileError"]

FORMAT_NAME = "sklearn-crocs"
#: Version of the file layout; bump it (and keep reading the old one if you can)
#: whenever the meaning of a field changes.
FORMAT_VERSION = 1
_METADATA_KEY = "sklearn_crocs"
# The document's own SHA-256, so that a changed byte in it is found too.
_DIGEST_KEY = "sklearn_crocs_sha256"


class InvalidModelFileError(ValueError):
    """A model file cannot be loaded: wrong format, version, or damaged content.

    Raised by :meth:`CROCSClusterer.load <sklearn_crocs.CROCSClusterer.load>`
    and :meth:`PrototypeRetriever.load <sklearn_crocs.PrototypeRetriever.load>`
    with a message that names the file and what does not match. It
    subclasses :class:`ValueError`.

    Read more in the :ref:`User Guide <persistence>`.

    Examples
    --------
    >>> from sklearn_crocs import InvalidModelFileError
    >>> issubclass(InvalidModelFileError, ValueError)
    True
    """


def _versions():
    from . import __version__

    return {
        "sklearn_crocs": __version__,
        "torch": torch.__version__,
        "skorch": skorch.__version__,
        "scikit-learn": sklearn.__version__,
        "numpy": np.__version__,
        "safetensors": safetensors.__version__,
        "python": platform.python_version(),
    }


# ------------------------------------------------------------- JSON values
def _encode(value, where):
    """A parameter value as JSON, with tags for tuples, devices and RandomState."""
    value = _python_value(value)
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, list):
        return [_encode(v, where) for v in value]
    if isinstance(value, tuple):
        return {"tuple": [_encode(v, where) for v in value]}
    if isinstance(value, dict):
        if not all(isinstance(k, str) for k in value):
            raise TypeError(f"{where} has non-string keys; a model file cannot store it.")
        return {"dict": {k: _encode(v, f"{where}[{k!r}]") for k, v in value.items()}}
    if isinstance(value, torch.device):
        return {"device": str(value)}
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    if isinstance(value, SignalConditioner):
        return {"SignalConditioner": _encode(value.get_params(), where)}
    if isinstance(value, np.random.RandomState):
        name, keys, pos, has_gauss, gauss = value.get_state()
        return {"random_state": [name, keys.tolist(), pos, has_gauss, gauss]}
    raise TypeError(
        f"{where} is a {type(value).__name__}, which a model file cannot store (it holds "
        "only numbers, strings, lists, tuples, dicts, torch devices, RandomState and "
        "SignalConditioner). "
        "Set it to such a value before saving."
    )


def _decode(value):
    if isinstance(value, list):
        return [_decode(v) for v in value]
    if not isinstance(value, dict):
        return value
    if len(value) != 1:
        raise ValueError(f"unknown tagged value {value!r}")
    ((tag, content),) = value.items()
    if tag == "tuple":
        return tuple(_decode(v) for v in content)
    if tag == "dict":
        return {k: _decode(v) for k, v in content.items()}
    if tag == "device":
        return torch.device(content)
    if tag == "SignalConditioner":
        params = _decode(content)
        if not isinstance(params, dict):
            raise ValueError("the conditioning step has no parameters")
        step = SignalConditioner(**params)
        step._validate_params()
        return step
    if tag == "random_state":
        name, keys, pos, has_gauss, gauss = content
        state = np.random.RandomState()
        state.set_state((name, np.asarray(keys, dtype=np.uint32), pos, has_gauss, gauss))
        return state
    raise ValueError(f"unknown tag {tag!r}")


def _encode_values(values, where):
    """An array of attribute values (numbers, strings, booleans) as JSON."""
    values = np.asarray(values)
    items = [_python_value(v) for v in values.tolist()]
    for v in items:
        if not isinstance(v, (bool, int, float, str)):
            raise TypeError(
                f"{where} holds a value of type {type(v).__name__} ({v!r}); a model file "
                "stores only str, int, float and bool attribute values. Convert y "
                "(e.g. y.astype(str)) and fit again."
            )
    return {"dtype": values.dtype.str if values.dtype != object else "object", "values": items}


def _decode_values(spec):
    return np.asarray(spec["values"], dtype=np.dtype(spec["dtype"]))


def _encode_dtype(dtype, where):
    if isinstance(dtype, pd.CategoricalDtype):
        return {
            "categories": _encode_values(dtype.categories.to_numpy(), where),
            "ordered": bool(dtype.ordered),
        }
    return {"name": str(dtype)}


def _decode_dtype(spec):
    if "categories" in spec:
        return pd.CategoricalDtype(_decode_values(spec["categories"]), ordered=spec["ordered"])
    return pd.api.types.pandas_dtype(spec["name"])


def _json_default(value):
    if isinstance(value, np.generic):
        return value.item()
    raise TypeError(f"cannot store a {type(value).__name__} in a model file")


# ---------------------------------------------------------------- the file
def _text_digest(text):
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _digest(tensor):
    data = tensor.contiguous().reshape(-1).view(torch.uint8).numpy()
    return hashlib.sha256(data.tobytes()).hexdigest()


def _write(path, kind, document, tensors):
    """Write ``tensors`` and ``document`` to ``path`` atomically."""
    tensors = {
        name: (torch.from_numpy(np.ascontiguousarray(t)) if isinstance(t, np.ndarray) else t)
        .detach()
        .cpu()
        .contiguous()
        for name, t in tensors.items()
    }
    header = {
        "format": FORMAT_NAME,
        "format_version": FORMAT_VERSION,
        "kind": kind,
        "versions": _versions(),
        "tensors": {
            name: {
                "dtype": str(t.dtype).removeprefix("torch."),
                "shape": list(t.shape),
                "sha256": _digest(t),
            }
            for name, t in tensors.items()
        },
        **document,
    }
    try:
        text = json.dumps(header, default=_json_default)
    except TypeError as exc:  # e.g. an object that someone put in net_.history
        raise TypeError(f"Cannot save this {kind}: {exc}.") from exc
    metadata = {_METADATA_KEY: text, _DIGEST_KEY: _text_digest(text)}
    path = os.fspath(path)
    with _atomic_path(path) as tmp:
        save_file(tensors, os.fspath(tmp), metadata=metadata)


def _read(path, kind):
    """``(document, tensors)`` of a model file, every tensor checked against the manifest."""
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"No model file at {path}.")
    try:
        with safe_open(path, framework="pt", device="cpu") as fh:
            metadata = fh.metadata() or {}
            names = set(fh.keys())
            text = metadata.get(_METADATA_KEY)
            if text is None:
                raise InvalidModelFileError(
                    f"{path} is a safetensors file but not an sklearn-crocs model: its "
                    f"header has no {_METADATA_KEY!r} document. Save models with "
                    f"{kind}.save."
                )
            if metadata.get(_DIGEST_KEY) != _text_digest(text):
                raise InvalidModelFileError(
                    f"{path}: the model document does not match its SHA-256: the file "
                    "is damaged or was altered. Copy or save it again."
                )
            try:
                document = json.loads(text)
            except (ValueError, RecursionError) as exc:
                raise InvalidModelFileError(
                    f"{path}: the model document is not valid JSON ({exc})."
                ) from exc
            _check_header(path, kind, document)
            manifest = document["tensors"]
            if names != set(manifest):
                raise InvalidModelFileError(
                    f"{path}: the tensors in the file do not match its document: "
                    f"missing {sorted(set(manifest) - names)}, unexpected "
                    f"{sorted(names - set(manifest))}. The file was altered; save it again."
                )
            tensors = {name: fh.get_tensor(name) for name in sorted(names)}
    except SafetensorError as exc:
        raise InvalidModelFileError(
            f"{path} is not a complete safetensors file ({exc}): it is truncated or not a "
            "model file. Copy or save it again."
        ) from exc
    for name, tensor in tensors.items():
        expected = manifest[name]
        found = {
            "dtype": str(tensor.dtype).removeprefix("torch."),
            "shape": list(tensor.shape),
            "sha256": _digest(tensor),
        }
        for field in ("dtype", "shape", "sha256"):
            if found[field] != expected.get(field):
                raise InvalidModelFileError(
                    f"{path}: tensor {name!r} has {field} {found[field]}, but the model "
                    f"document says {expected.get(field)}. The file is damaged or was "
                    "altered; save it again."
                )
    return document, tensors


def _check_header(path, kind, document):
    if not isinstance(document, dict) or document.get("format") != FORMAT_NAME:
        raise InvalidModelFileError(f"{path} is not an sklearn-crocs model file.")
    version = document.get("format_version")
    written_by = (document.get("versions") or {}).get("sklearn_crocs", "an unknown version")
    if version != FORMAT_VERSION:
        from . import __version__

        raise InvalidModelFileError(
            f"{path} was written by sklearn-crocs {written_by} in model format version "
            f"{version!r}; sklearn-crocs {__version__} reads format version {FORMAT_VERSION}. "
            "Load it with the sklearn-crocs version that wrote it and save it again with "
            "this one, or install a version that reads it."
        )
    if document.get("kind") != kind:
        raise InvalidModelFileError(
            f"{path} holds a {document.get('kind')}, not a {kind}; load it with "
            f"{document.get('kind')}.load."
        )
    manifest = document.get("tensors")
    if not isinstance(manifest, dict) or not all(isinstance(v, dict) for v in manifest.values()):
        raise InvalidModelFileError(f"{path}: the model document has no valid tensor manifest.")


def _class_name(cls):
    return f"{cls.__module__}.{cls.__qualname__}"


# ------------------------------------------------------------ the clusterer
def _clusterer_state(model, prefix=""):
    """``(document, tensors)`` of a fitted CROCSClusterer."""
    params = model.get_params(deep=False)
    encoder = params.pop("encoder")
    # Callbacks and accelerators are objects of any class, which a file that runs
    # no code cannot restore; the loaded model has None (documented in save).
    params.pop("callbacks")
    params.pop("accelerator")
    codec = model.attribute_codec_
    document = {
        "class": type(model).__name__,
        "params": {k: _encode(v, f"parameter {k}") for k, v in params.items()},
        "encoder": encoder if isinstance(encoder, str) else {"class": _class_name(encoder)},
        "attribute_names": codec.names,
        "categories": [
            _encode_values(c, f"categories_ of attribute {n!r}")
            for n, c in zip(codec.names, codec.categories)
        ],
        "attribute_dtypes": [
            _encode_dtype(d, f"the dtype of attribute {n!r}")
            for n, d in zip(codec.names, codec.dtypes)
        ],
        "y_kind": codec.layout,
        "bin_edges": {name: edges.tolist() for name, edges in codec.bin_edges.items()},
        "class_index": model._class_index,
        "input_shape": list(model.input_shape_),
        "sampling_rate": model.sampling_rate_,
        "signal_scale": model.signal_scale_,
        "fit_ndim": model._fit_ndim,
        "n_features_in": model.n_features_in_,
        "feature_names_in": (
            model.feature_names_in_.tolist() if hasattr(model, "feature_names_in_") else None
        ),
        "history": model.net_.history.to_list(),
    }
    tensors = {f"encoder.{k}": v for k, v in model.net_.module_.state_dict().items()}
    tensors.update(
        {
            "criterion.prototypes": model.net_.criterion_.prototypes,
            "learned_prototypes": model._learned_prototypes,
            "mean_prototypes": model._mean_prototypes,
            "prototype_counts": model._prototype_counts.astype(np.int64),
            "labels": model.labels_.astype(np.int64),
        }
    )
    return document, {prefix + k: v for k, v in tensors.items()}


def _resolve_device(saved, device, path):
    """The device to load onto: ``device``, else the saved one if torch can use it, else CPU."""
    if device is not None:
        return device
    problem = _device_problem(saved)
    if problem is None:
        return saved
    warnings.warn(
        f"{path} was saved with device={str(saved)!r}, which is not usable here "
        f"({problem}); loading it on the CPU with device='cpu'. Pass device= to "
        "choose another.",
        UserWarning,
        stacklevel=4,
    )
    return "cpu"


def _clusterer_from_state(cls, document, tensors, path, *, device, encoder, prefix=""):
    """Rebuild a fitted CROCSClusterer; every inconsistency is an InvalidModelFileError."""
    try:
        return _rebuild_clusterer(cls, document, tensors, path, device, encoder, prefix)
    except InvalidModelFileError:
        raise
    except (AttributeError, KeyError, TypeError, ValueError, IndexError, RuntimeError) as exc:
        # InvalidParameterError is a ValueError; load_state_dict raises RuntimeError.
        raise InvalidModelFileError(
            f"{path}: the model document and tensors do not describe a valid "
            f"{cls.__name__} ({type(exc).__name__}: {exc}). The file was altered or "
            "written by an incompatible version."
        ) from exc


def _rebuild_clusterer(cls, document, tensors, path, device, encoder, prefix):
    if document["class"] != cls.__name__:
        raise InvalidModelFileError(f"{path} holds a {document['class']}, not a {cls.__name__}.")
    params = {k: _decode(v) for k, v in document["params"].items()}
    saved_encoder = document["encoder"]
    if isinstance(saved_encoder, str):
        if encoder is not None:
            raise ValueError(
                f"the model uses the built-in encoder {saved_encoder!r}; do not pass encoder="
            )
        params["encoder"] = saved_encoder
    else:
        # The class is never imported from the file: the caller names it.
        name = saved_encoder["class"]
        if encoder is None or _class_name(encoder) != name:
            raise InvalidModelFileError(
                f"{path} was fitted with the encoder class {name}; pass that class as "
                f"{cls.__name__}.load(path, encoder={name.rsplit('.', 1)[-1]}) (got "
                f"{'none' if encoder is None else _class_name(encoder)})."
            )
        params["encoder"] = encoder
    params["device"] = _resolve_device(params["device"], device, path)
    model = cls(**params)
    model._validate_params()

    codec = model.attribute_codec_ = AttributeCodec(
        document["attribute_names"],
        [_decode_values(c) for c in document["categories"]],
        [_decode_dtype(d) for d in document["attribute_dtypes"]],
        document["y_kind"],
        # Files written before continuous attributes existed have no bin edges.
        document.get("bin_edges"),
    )
    model._class_index = int(document["class_index"])
    model.input_shape_ = tuple(int(n) for n in document["input_shape"])
    model._fit_ndim = int(document["fit_ndim"])
    model.n_features_in_ = int(document["n_features_in"])
    model.sampling_rate_ = _positive_or_none(document.get("sampling_rate"), "sampling_rate")
    model.signal_scale_ = _positive_or_none(document.get("signal_scale"), "signal_scale")
    if document["feature_names_in"] is not None:
        model.feature_names_in_ = np.asarray(document["feature_names_in"], dtype=object)
    if (
        not 0 <= model._class_index < len(codec.names)
        or len(model.input_shape_) != 2
        or model.n_features_in_ != math.prod(model.input_shape_)
    ):
        raise ValueError("inconsistent attribute or input description")

    t = {k[len(prefix) :]: v for k, v in tensors.items() if k.startswith(prefix)}
    n_combinations = len(codec.combinations)
    learned = t["learned_prototypes"].numpy()
    means = t["mean_prototypes"].numpy()
    counts = t["prototype_counts"].numpy()
    labels = t["labels"].numpy()
    shape = (n_combinations, model.embedding_dim)
    if learned.shape != shape or means.shape != shape or counts.shape != (n_combinations,):
        raise ValueError(
            f"prototype tensors do not have the shape {shape} that the categories and "
            "embedding_dim give"
        )
    with torch.random.fork_rng(devices=[]):  # the weights are overwritten below
        net = model._build_net(*model.input_shape_, 0, None)
        net.initialize()
    net.module_.load_state_dict(
        {k.removeprefix("encoder."): v for k, v in t.items() if k.startswith("encoder.")},
        strict=True,
    )
    prototypes = t["criterion.prototypes"]
    if tuple(prototypes.shape) != shape:
        raise ValueError(f"criterion.prototypes has shape {tuple(prototypes.shape)}, not {shape}")
    with torch.no_grad():
        net.criterion_.prototypes.copy_(prototypes)
    history = document["history"]
    if not (isinstance(history, list) and all(isinstance(e, dict) for e in history)):
        raise ValueError("the training history is not a list of epochs")
    net.history = History(history)
    model.net_ = net
    model.n_iter_ = len(net.history)
    model._learned_prototypes = learned
    model._mean_prototypes = means
    model._prototype_counts = counts
    model._select_prototypes()
    if labels.ndim != 1 or not np.all((labels >= 0) & (labels < len(model.prototypes_))):
        raise ValueError("labels do not index the prototypes")
    model.labels_ = labels
    return model


def _positive_or_none(value, name):
    """A rate or scale read from a document: a finite number >= 0, or None."""
    if value is None:
        return None
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not (math.isfinite(value) and value >= 0)
    ):
        raise ValueError(f"{name} is {value!r}, not a finite non-negative number")
    return float(value)


def save_clusterer(model, path):
    document, tensors = _clusterer_state(model)
    _write(path, "CROCSClusterer", document, tensors)


def load_clusterer(cls, path, *, device=None, encoder=None):
    document, tensors = _read(path, "CROCSClusterer")
    return _clusterer_from_state(
        cls, document, tensors, os.fspath(path), device=device, encoder=encoder
    )


# ------------------------------------------------------------ the retriever
def _estimator_spec(estimator, tensors):
    """The JSON spec of a retriever's estimator; the clusterer's tensors go to ``tensors``."""
    from sklearn.frozen import FrozenEstimator
    from sklearn.pipeline import Pipeline

    from ._clusterer import CROCSClusterer
    from .preprocessing import FrameNormalizer

    if type(estimator) is CROCSClusterer:  # not a subclass such as baselines.DTC
        document, state = _clusterer_state(estimator, prefix="estimator.")
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


def _estimator_from_spec(spec, tensors, path, device, encoder):
    from sklearn.frozen import FrozenEstimator
    from sklearn.pipeline import Pipeline

    from ._clusterer import CROCSClusterer
    from .preprocessing import FrameNormalizer

    ((kind, content),) = spec.items()
    if kind == "CROCSClusterer":
        return _clusterer_from_state(
            CROCSClusterer,
            content,
            tensors,
            path,
            device=device,
            encoder=encoder,
            prefix="estimator.",
        )
    if kind == "FrozenEstimator":
        return FrozenEstimator(_estimator_from_spec(content, tensors, path, device, encoder))
    if kind == "Pipeline":
        steps = [
            (str(name), _estimator_from_spec(step, tensors, path, device, encoder))
            for name, step in content["steps"]
        ]
        return Pipeline(steps, verbose=bool(content["verbose"]))
    if kind == "FrameNormalizer":
        if content["method"] not in ("zscore", "minmax"):
            raise ValueError(f"unknown FrameNormalizer method {content['method']!r}")
        step = FrameNormalizer(method=content["method"])
        if "n_features_in" in content:
            step.n_features_in_ = int(content["n_features_in"])
        return step
    raise ValueError(f"unknown estimator kind {kind!r}")


def save_retriever(retriever, path, *, include_embeddings):
    tensors = {}
    document = {
        "class": "PrototypeRetriever",
        "params": {
            k: _encode(v, f"parameter {k}")
            for k, v in retriever.get_params(deep=False).items()
            if k != "estimator"
        },
        "estimator": _estimator_spec(retriever.estimator_, tensors),
        "indexed": bool(include_embeddings),
    }
    if include_embeddings:
        tensors["embeddings"] = retriever.embeddings_
    _write(path, "PrototypeRetriever", document, tensors)


def load_retriever(cls, path, *, device=None, encoder=None):
    document, tensors = _read(path, "PrototypeRetriever")
    path = os.fspath(path)
    try:
        estimator = _estimator_from_spec(document["estimator"], tensors, path, device, encoder)
        params = {k: _decode(v) for k, v in document["params"].items()}
        retriever = cls(estimator, **params)
        retriever._validate_params()
        indexed = document["indexed"]
        if indexed:
            embeddings = tensors["embeddings"].numpy()
            crocs = _crocs_step(estimator)
            if embeddings.ndim != 2 or embeddings.shape[1] != crocs.embedding_dim:
                raise ValueError(
                    f"embeddings have shape {embeddings.shape}, not (n, {crocs.embedding_dim})"
                )
            retriever._set_fitted(estimator, embeddings)
    except InvalidModelFileError:
        raise
    except (AttributeError, KeyError, TypeError, ValueError, IndexError, RuntimeError) as exc:
        raise InvalidModelFileError(
            f"{path}: the model document and tensors do not describe a valid "
            f"PrototypeRetriever ({type(exc).__name__}: {exc}). The file was altered or "
            "written by an incompatible version."
        ) from exc
    return retriever
