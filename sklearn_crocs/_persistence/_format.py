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

A file describes a model; it never directs the package. It names no path that
is used (``embeddings_path`` is not saved, and refused if a file has it),
every size it declares is checked against the tensors actually in the file
and against fixed limits before anything is allocated from it, and dtypes are
taken only from a fixed list of names. The document's SHA-256 detects damage,
not tampering: whoever edits a file can recompute it (``load(sha256=...)``
checks the whole file against a hash obtained from the model's source).
"""

import hashlib
import json
import os
import platform
import re
import types
from contextlib import contextmanager

import numpy as np
import pandas as pd
import safetensors
import safetensors.torch
import sklearn
import skorch
import torch
from safetensors import SafetensorError, safe_open
from safetensors.torch import save_file

from .._display import EscapedMessageMixin
from .._guards import activation_size
from .._utils import (
    _MAX_MODEL_BYTES,
    _atomic_path,
    _device_problem,
    _python_value,
    _read_regular,
    _regular_size,
    _warn,
)
from ..nn._augment import RandomWindow
from ..preprocessing import SignalConditioner
from ._fields import is_int, is_str

__all__ = ["InvalidModelFileError"]

FORMAT_NAME = "sklearn-crocs"
#: Version of the file layout; bump it (and keep reading the old one if you can)
#: whenever the meaning of a field changes.
FORMAT_VERSION = 1
_METADATA_KEY = "sklearn_crocs"
# The document's own SHA-256, so that a changed byte in it is found too.
_DIGEST_KEY = "sklearn_crocs_sha256"

# Tensor dtypes a model file may hold (torch names); the tensors' bytes are in
# the file, so reading them allocates no more than the file's size.
_TENSOR_DTYPES = frozenset(
    ["float16", "bfloat16", "float32", "float64", "int8", "int16", "int32", "int64"]
    + ["uint8", "bool"]
)
# Dtype names of attributes: fixed names only (NumPy numbers, bool and object;
# pandas' string and nullable numbers, which pandas gives DataFrame columns).
# No parameterised dtype: "datetime64[ns, dateutil/<path>]" makes pandas open
# the file named in it, and others build objects from their parameters.
_ATTRIBUTE_DTYPES = frozenset(
    ["object", "bool", "str", "string", "boolean"]
    + [f"{kind}{bits}" for kind in ("int", "uint", "Int", "UInt") for bits in (8, 16, 32, 64)]
    + [f"{kind}{bits}" for kind in ("float", "Float") for bits in (16, 32, 64)]
)
# Dtypes of arrays of attribute values, as numpy writes them (dtype.str).
_VALUE_DTYPE = re.compile(r"[<>|=]?(?:b1|[iu][1248]|f[248]|U(\d{1,9}))")
# Largest input a loaded model accepts: 4096 leads, 2**31 samples per lead.
MAX_LEADS, MAX_TIMEPOINTS = 4096, 2**31
# Largest tensor (elements) of a one-ECG forward pass that a model file may
# describe: 8 MiB of float32, a 64-channel ResNet stem over 65,536 samples
# (over 10 minutes at 100 Hz). Loading probes the model on 4 frames, and the
# command line builds a blank frame, from the declared input shape, so a
# document that asks for more is refused before anything is allocated from it.
MAX_ACTIVATION = 2**21
# Nesting of FrozenEstimator and Pipeline in a retriever's estimator.
MAX_NESTING = 16
# Largest magnitude of a stored value. No trained value nears it, and one beyond overflows
# float32 in any output it reaches, even one the load's probe leaves at 0.
MAX_VALUE = 1e18


class InvalidModelFileError(EscapedMessageMixin, ValueError):
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
    from .. import __version__

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
def encode_value(value, where):
    """A parameter value as JSON, with tags for tuples, devices and RandomState."""
    value = _python_value(value)
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, list):
        return [encode_value(v, where) for v in value]
    if isinstance(value, tuple):
        return {"tuple": [encode_value(v, where) for v in value]}
    if isinstance(value, dict):
        if not all(isinstance(k, str) for k in value):
            raise TypeError(f"{where} has non-string keys; a model file cannot store it.")
        return {"dict": {k: encode_value(v, f"{where}[{k!r}]") for k, v in value.items()}}
    if isinstance(value, torch.device):
        return {"device": str(value)}
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    if isinstance(value, SignalConditioner):
        return {"SignalConditioner": encode_value(value.get_params(), where)}
    if isinstance(value, RandomWindow):
        params = {"crop": value.crop, "amplitude_jitter": value.amplitude_jitter}
        return {"RandomWindow": encode_value(params, where)}
    if isinstance(value, np.random.RandomState):
        name, keys, pos, has_gauss, gauss = value.get_state()
        return {"random_state": [name, keys.tolist(), pos, has_gauss, gauss]}
    raise TypeError(
        f"{where} is a {type(value).__name__}, which a model file cannot store (it holds "
        "only numbers, strings, lists, tuples, dicts, torch devices, RandomState, "
        "SignalConditioner and RandomWindow). "
        "Set it to such a value before saving."
    )


def decode_value(value):
    if isinstance(value, list):
        return [decode_value(v) for v in value]
    if not isinstance(value, dict):
        return value
    if len(value) != 1:
        raise ValueError(f"unknown tagged value {value!r}")
    ((tag, content),) = value.items()
    if tag == "tuple":
        return tuple(decode_value(v) for v in content)
    if tag == "dict":
        return {k: decode_value(v) for k, v in content.items()}
    if tag == "device":
        return torch.device(content)
    if tag == "SignalConditioner":
        params = decode_value(content)
        if not isinstance(params, dict):
            raise ValueError("the conditioning step has no parameters")
        step = SignalConditioner(**params)
        step._validate_params()
        return step
    if tag == "RandomWindow":
        params = decode_value(content)
        if not isinstance(params, dict) or set(params) != {"crop", "amplitude_jitter"}:
            raise ValueError("the augmentation has no crop and amplitude_jitter")
        return RandomWindow(**params)
    if tag == "random_state":
        name, keys, pos, has_gauss, gauss = content
        state = np.random.RandomState()
        state.set_state((name, np.asarray(keys, dtype=np.uint32), pos, has_gauss, gauss))
        return state
    raise ValueError(f"unknown tag {tag!r}")


def encode_values(values, where):
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


def decode_values(spec):
    """The array ``encode_values`` wrote; its dtype checked before it is allocated."""
    if not isinstance(spec, dict) or set(spec) != {"dtype", "values"}:
        raise ValueError("an array of attribute values is not {'dtype', 'values'}")
    values, dtype = spec["values"], spec["dtype"]
    if not isinstance(values, list) or not all(
        isinstance(v, (bool, int, float, str)) for v in values
    ):
        raise ValueError("attribute values are not a list of numbers, strings and booleans")
    match = _VALUE_DTYPE.fullmatch(dtype) if isinstance(dtype, str) else None
    if dtype != "object" and match is None:
        raise ValueError(
            f"attribute values have the dtype {dtype!r}, which a model file cannot use"
        )
    if match is not None and match.group(1) is not None:
        # A string dtype's width is the longest value's: "<U100000000" with
        # short values would allocate 400 MB per value.
        longest = max((len(v) for v in values if isinstance(v, str)), default=0)
        if int(match.group(1)) > max(longest, 1):
            raise ValueError(
                f"attribute values declare the dtype {dtype!r}, wider than their longest "
                f"value ({longest} characters)"
            )
    return np.asarray(values, dtype=np.dtype(dtype))


def encode_dtype(dtype, where):
    if isinstance(dtype, pd.CategoricalDtype):
        return {
            "categories": encode_values(dtype.categories.to_numpy(), where),
            "ordered": bool(dtype.ordered),
        }
    if str(dtype) not in _ATTRIBUTE_DTYPES:
        raise TypeError(
            f"{where} is {dtype}, which a model file cannot store (it stores numbers, "
            "booleans, strings, objects and categoricals). Convert that column of y "
            "(e.g. y.astype({name: str})) and fit again."
        )
    return {"name": str(dtype)}


def decode_dtype(spec):
    if not isinstance(spec, dict):
        raise ValueError("an attribute dtype is not an object")
    if set(spec) == {"categories", "ordered"} and isinstance(spec["ordered"], bool):
        return pd.CategoricalDtype(decode_values(spec["categories"]), ordered=spec["ordered"])
    if set(spec) != {"name"} or spec["name"] not in _ATTRIBUTE_DTYPES:
        raise ValueError(
            f"an attribute has the dtype {str(spec.get('name'))[:80]!r}; a model file may "
            f"name only {sorted(_ATTRIBUTE_DTYPES)} or a categorical"
        )
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


def _is_model_file(path):
    """Whether ``path`` is a regular file holding an sklearn-crocs model document."""
    if os.path.islink(path) or not os.path.isfile(path):
        return False
    try:
        with safe_open(path, framework="pt", device="cpu") as fh:
            return _METADATA_KEY in (fh.metadata() or {})
    except Exception:  # any file that safetensors cannot read is not a model file
        return False


def write_model_file(path, kind, document, tensors, *, overwrite=False):
    """Write ``tensors`` and ``document`` to ``path`` atomically."""
    path = os.fspath(path)
    own = os.path.isfile(path) and not os.path.islink(path) and _is_model_file(path)
    if not (overwrite or own or os.path.islink(path)) and os.path.lexists(path):
        raise FileExistsError(  # a link: refused by _atomic_path, whatever overwrite says
            f"{path} exists and is not an sklearn-crocs model file; save replaces only model "
            "files it wrote. Choose another path, or pass overwrite=True to replace it."
        )
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
    with _atomic_path(path, replace=overwrite or own) as tmp:
        save_file(tensors, os.fspath(tmp), metadata=metadata)


def check_load_args(device, encoder, sha256):
    """Raise on a bad argument of ``load`` before the file is read.

    These are the caller's mistakes, reported as such: never as a damaged file.
    """
    if device is not None:
        problem = _device_problem(device)
        if problem is not None:
            raise ValueError(
                f"load(device={str(device)!r}): {problem}. Pass device='cpu', another "
                "device torch can use here, or None (the saved device when usable, "
                "else the CPU)."
            )
    if encoder is not None and not (
        isinstance(encoder, type) and issubclass(encoder, torch.nn.Module)
    ):
        raise TypeError(
            f"load(encoder=...) takes the encoder class (a torch.nn.Module subclass) of a "
            f"model fitted with a custom encoder; got {encoder!r}."
        )
    if sha256 is not None and not (
        isinstance(sha256, str) and re.fullmatch(r"[0-9a-fA-F]{64}", sha256)
    ):
        raise ValueError(f"sha256 must be None or 64 hexadecimal digits; got {sha256!r}.")


# safetensors' dtype names, as torch names.
_SAFETENSORS_DTYPES = {
    "F16": "float16", "BF16": "bfloat16", "F32": "float32", "F64": "float64",
    "I8": "int8", "I16": "int16", "I32": "int32", "I64": "int64", "U8": "uint8", "BOOL": "bool",
}  # fmt: skip


class _Bytes:
    """What read_model_file uses of ``safe_open``, over the bytes of a whole file."""

    def __init__(self, data):
        self._tensors = safetensors.torch.load(data)  # checks the layout as safe_open does
        size = int.from_bytes(data[:8], "little")
        self._metadata = json.loads(data[8 : 8 + size]).get("__metadata__")

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        return False

    def metadata(self):
        return self._metadata

    def keys(self):
        return self._tensors.keys()

    def get_slice(self, name):
        tensor = self._tensors[name]
        return types.SimpleNamespace(
            get_dtype=lambda: str(tensor.dtype).removeprefix("torch."),
            get_shape=lambda: list(tensor.shape),
        )

    def get_tensor(self, name):
        return self._tensors[name]


def _check_manifest_entry(path, name, expected, found):
    for field in ("dtype", "shape"):
        if found[field] != expected.get(field):
            raise InvalidModelFileError(
                f"{path}: tensor {name!r} has {field} {found[field]}, but the model "
                f"document says {expected.get(field)}. The file is damaged or was "
                "altered; save it again."
            )


def read_model_file(path, kind, sha256=None):
    """``(document, tensors)`` of a model file, every tensor checked against the manifest."""
    path = os.fspath(path)
    if not os.path.exists(path):
        raise FileNotFoundError(f"No model file at {path}.")
    _regular_size(path, limit=_MAX_MODEL_BYTES, what="model file")  # no FIFO, device, folder
    if sha256 is not None:
        # The bytes hashed are the bytes parsed, never a file replaced after the hash.
        data = _read_regular(path, limit=_MAX_MODEL_BYTES, what="model file")
        digest = hashlib.sha256(data).hexdigest()
        if digest != sha256.lower():
            raise InvalidModelFileError(
                f"{path} has SHA-256 {digest}, not the expected sha256={sha256!r}: it is "
                "not the file that the hash was published for. Obtain the file again."
            )
    try:
        opened = (
            safe_open(path, framework="pt", device="cpu") if sha256 is None else _Bytes(data)
        )
        with opened as fh:
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
            tensors = {}
            for name in sorted(names):
                # Dtype and shape from the file's header, before the bytes are read.
                view = fh.get_slice(name)
                found = {
                    "dtype": _SAFETENSORS_DTYPES.get(view.get_dtype(), view.get_dtype()),
                    "shape": list(view.get_shape()),
                }
                _check_manifest_entry(path, name, manifest[name], found)
                # A copy: safetensors < 0.5 returns tensors mapped from the file,
                # which a later in-place rewrite of the file would change.
                tensors[name] = fh.get_tensor(name).clone()
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
        _check_manifest_entry(path, name, expected, found)
        if found["sha256"] != expected.get("sha256"):
            raise InvalidModelFileError(
                f"{path}: tensor {name!r} has sha256 {found['sha256']}, but the model "
                f"document says {expected.get('sha256')}. The file is damaged or was "
                "altered; save it again."
            )
        # Mean prototypes are NaN for combinations without training ECGs (by design);
        # their other rows are checked against the counts on rebuild.
        exempt = name.endswith("mean_prototypes")
        if tensor.is_floating_point() and not exempt and not (tensor.abs() <= MAX_VALUE).all():
            raise InvalidModelFileError(
                f"{path}: tensor {name!r} holds NaN or infinite values, or values beyond "
                f"{MAX_VALUE:g}, which no fitted model has; the file was altered or saved from "
                "a failed fit. Fit and save the model again."
            )
    return document, tensors


def _check_header(path, kind, document):
    if not isinstance(document, dict) or document.get("format") != FORMAT_NAME:
        raise InvalidModelFileError(f"{path} is not an sklearn-crocs model file.")
    version = document.get("format_version")
    written_by = (document.get("versions") or {}).get("sklearn_crocs", "an unknown version")
    if version != FORMAT_VERSION:
        from .. import __version__

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
    if not isinstance(manifest, dict) or not all(
        isinstance(v, dict)
        and v.get("dtype") in _TENSOR_DTYPES
        and isinstance(v.get("shape"), list)
        and all(isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in v["shape"])
        for v in manifest.values()
    ):
        raise InvalidModelFileError(f"{path}: the model document has no valid tensor manifest.")


def class_name(cls):
    return f"{cls.__module__}.{cls.__qualname__}"


class CallerError(ValueError):
    """A load argument that does not fit the file: the caller's error, not a damaged file."""


@contextmanager
def document_errors(path, what):
    """Report any error that rebuilding a ``what`` from a file raises as an InvalidModelFileError.

    What a document can make go wrong (a wrong type, size or value; an
    InvalidParameterError is a ValueError, ``load_state_dict`` raises
    RuntimeError) is the file's fault, not the caller's.
    """
    try:
        yield
    except (InvalidModelFileError, CallerError):
        raise
    except (AttributeError, KeyError, TypeError, ValueError, IndexError, RuntimeError,
            ArithmeticError) as exc:  # fmt: skip
        raise InvalidModelFileError(
            f"{path}: the model document and tensors do not describe a valid {what} "
            f"({type(exc).__name__}: {exc}). The file was altered or written by an "
            "incompatible version."
        ) from exc


# The fields that open the documents of an estimator with an encoder (the
# estimator's and the pretrainer's), and the shape of its input.
ESTIMATOR_HEAD_FIELDS = {
    "class": (is_str, "a class name", True),
    "params": (lambda v: isinstance(v, dict), "an object of parameters", True),
    "encoder": (
        lambda v: isinstance(v, str) or (isinstance(v, dict) and is_str(v.get("class"))),
        "an encoder name or {'class': name}",
        True,
    ),
}
INPUT_SHAPE_FIELD = (
    lambda v: isinstance(v, list)
    and len(v) == 2
    and is_int(1, MAX_LEADS)(v[0])
    and is_int(1, MAX_TIMEPOINTS)(v[1])
    and v[0] * v[1] <= MAX_ACTIVATION,
    f"[leads <= {MAX_LEADS}, samples] with leads x samples <= {MAX_ACTIVATION}",
    True,
)


def head_document(estimator, not_saved):
    """The ``ESTIMATOR_HEAD_FIELDS`` of ``estimator``: its class, parameters and encoder.

    ``not_saved`` names the parameters left out: objects of any class, which
    a file that runs no code cannot restore (the loaded estimator has None),
    and the encoder, which is stored by name.
    """
    params = estimator.get_params(deep=False)
    encoder = params["encoder"]
    return {
        "class": type(estimator).__name__,
        "params": {
            k: encode_value(v, f"parameter {k}") for k, v in params.items() if k not in not_saved
        },
        "encoder": encoder if isinstance(encoder, str) else {"class": class_name(encoder)},
    }


def head_estimator(cls, document, not_saved, path, *, device, encoder, verb="fitted"):
    """An unfitted ``cls`` with the parameters of the document's head, validated."""
    params = decode_params(document, not_saved, path)
    params["encoder"] = resolve_encoder(document["encoder"], encoder, path, cls.__name__, verb)
    params["device"] = resolve_device(params.get("device", "cpu"), device, path)
    estimator = cls(**params)
    estimator._validate_params()
    return estimator


def check_fields(document, fields, what):
    """Raise ValueError naming the first field of ``document`` that ``fields`` refuses."""
    if not isinstance(document, dict):
        raise ValueError(f"{what} is not a JSON object")
    for name, (check, described, required) in fields.items():
        if name not in document:
            if required:
                raise ValueError(f"{what} has no {name!r}")
        elif not check(document[name]):
            raise ValueError(f"{what}: {name!r} is not {described}")


def decode_params(document, not_saved, path):
    """The parameters of a document, refusing those that only the caller sets.

    ``not_saved`` names the parameters that saving leaves out: objects of any
    class, which a file that runs no code cannot restore, and paths on the
    user's machine, which only the caller names.
    """
    params = document["params"]
    refused = [k for k in not_saved if k in params]
    if refused:
        raise InvalidModelFileError(
            f"{path}: the model document sets {refused[0]!r}, which a model file never "
            f"sets (save leaves out {list(not_saved)}: paths on "
            "this machine and objects are given by the caller). The file was altered; "
            "use a file written by save."
        )
    return {k: decode_value(v) for k, v in params.items()}


def resolve_encoder(saved, encoder, path, cls_name, verb="fitted"):
    """The ``encoder`` parameter of a loaded model: the saved built-in name, or the
    class the caller names. The class is never imported from the file."""
    if isinstance(saved, str):
        if encoder is not None:
            raise CallerError(
                f"{path} was {verb} with the built-in encoder {saved!r}; load it "
                f"without encoder= (got encoder={class_name(encoder)})."
            )
        return saved
    name = saved["class"]
    if encoder is None or class_name(encoder) != name:
        raise InvalidModelFileError(
            f"{path} was {verb} with the encoder class {name}; pass that class as "
            f"{cls_name}.load(path, encoder={name.rsplit('.', 1)[-1]}) (got "
            f"{'none' if encoder is None else class_name(encoder)})."
        )
    return encoder


def resolve_device(saved, device, path):
    """The device to load onto: ``device``, else the saved one if torch can use it, else CPU."""
    if device is not None:
        return device
    problem = _device_problem(saved)
    if problem is None:
        return saved
    _warn(
        f"{path} was saved with device={str(saved)!r}, which is not usable here "
        f"({problem}); loading it on the CPU with device='cpu'. Pass device= to "
        "choose another.",
        UserWarning,
    )
    return "cpu"


def check_encoder_shapes(build, weights):
    """Compare the encoder that ``build()`` makes from the saved parameters with the
    weights, allocating nothing.

    The module is built on the meta device (shapes without storage), so that
    parameters describing a huge network are refused before it exists.
    """
    with torch.device("meta"):
        module = build()
    expected = {k: tuple(v.shape) for k, v in module.state_dict().items()}
    found = {k: tuple(v.shape) for k, v in weights.items()}
    if expected.keys() != found.keys():
        raise ValueError(
            f"the encoder's parameters build the weights {sorted(expected)}, but the file "
            f"holds {sorted(found)}"
        )
    for name, shape in expected.items():
        if found[name] != shape:
            raise ValueError(
                f"encoder weight {name!r} has shape {found[name]}, but the parameters "
                f"build {shape}"
            )


def check_activation(encoder, input_shape, embedding_dim, encoder_params):
    """Raise ValueError if one ECG's forward pass would hold a tensor beyond MAX_ACTIVATION.

    Measured on the meta device, so that nothing is allocated from the document.
    """
    size = activation_size(encoder, *input_shape, embedding_dim, encoder_params or {})
    if size > MAX_ACTIVATION:
        raise ValueError(
            f"input_shape {list(input_shape)} makes a forward pass of one ECG hold "
            f"{size} values in one tensor, more than the {MAX_ACTIVATION} a model file may "
            "describe"
        )


def probe_signals(n_leads, n_samples, rate=None, scale=None):
    """Four ECG-like frames (float32, ``(4, n_leads, n_samples)``) to probe a loaded model.

    Beats of P, QRS and T waves at 60 and 100 bpm, and the same inverted (as
    in lead aVR), at ``rate`` Hz (500 when unknown), scaled to the median
    lead standard deviation ``scale`` of the training signals when known.
    Both polarities, so that a channel that a ReLU silences for one is open
    for the other.
    """
    t = np.arange(n_samples) / (rate or 500.0)
    # (centre in s from the R peak, width in s, amplitude in mV) of each wave.
    waves = [(-0.2, 0.025, 0.15), (-0.03, 0.01, -0.1), (0.0, 0.01, 1.0),
             (0.03, 0.01, -0.25), (0.3, 0.05, 0.3)]  # fmt: skip
    frames = []
    for period in (1.0, 0.6):
        since = (t + 0.3) % period - 0.3  # seconds from the nearest R peak
        beat = sum(a * np.exp(-(((since - c) / w) ** 2)) for c, w, a in waves)
        frames.append([(1 + 0.1 * lead) * beat for lead in range(n_leads)])
    X = np.asarray(frames)
    X = np.concatenate([X, -X])
    spread = float(np.median(X.reshape(-1, n_samples).std(axis=1)))
    if scale and spread:
        X *= scale / spread
    return X.astype(np.float32)


def check_probe(path, outputs):
    """Refuse a loaded model whose raw encoder ``outputs`` (a tensor, one row per frame of
    :func:`probe_signals`) are not finite or too large to normalise to unit length.

    A probe finds weights that break every input, not each input that some
    weights break: real ECGs can still reach a channel the probe leaves at 0.
    """
    # The norm that F.normalize divides by: an infinite one makes every embedding 0.
    if not bool(torch.isfinite(outputs.detach().float().norm(dim=1)).all()):
        raise InvalidModelFileError(
            f"{path}: the model's outputs on ECG-like signals are NaN, infinite or too large "
            "to normalise, so every prediction would be meaningless (its weights are finite "
            "but do not describe a working network, e.g. a negative BatchNorm running_var "
            "or values near the float32 limit). The file was altered or saved from a failed "
            "fit; fit and save the model again."
        )
