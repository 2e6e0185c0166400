"""Private helpers shared by more than one module of the package; each lives here once."""

import contextlib
import copy
import hashlib
import os
import re
import socket
import sys
import uuid
import warnings
import zlib
from pathlib import Path

import numpy as np
import torch
from sklearn.frozen import FrozenEstimator
from sklearn.pipeline import Pipeline
from sklearn.utils import check_random_state

from ._display import escape


def _python_value(value):
    """A numpy scalar as the Python scalar it holds, for readable messages and JSON."""
    return value.item() if isinstance(value, np.generic) else value


def _crocs_step(estimator):
    """The CROCSClusterer in ``estimator``: itself, or inside a FrozenEstimator or Pipeline."""
    step = estimator
    while isinstance(step, (FrozenEstimator, Pipeline)):
        step = step.estimator if isinstance(step, FrozenEstimator) else step[-1]
    if not hasattr(step, "get_prototypes"):
        raise TypeError(
            "estimator must be a CROCSClusterer, a Pipeline ending in one or either "
            f"wrapped in sklearn.frozen.FrozenEstimator; got {type(step).__name__}, "
            "which has no get_prototypes method."
        )
    return step


def _with_longer_signals(estimator, longer_signals):
    """``estimator`` as it embeds with its CROCSClusterer's ``longer_signals`` set to this.

    ``estimator`` itself is not changed: where the value differs, the
    clusterer and the Pipeline around it are shallow copies, which share the
    fitted nets and steps (a FrozenEstimator is looked through). A model
    without the option (a baseline) is returned as it is. ``"auto"``:
    ``"average"`` for a model that knows its sampling rate, else its own setting.
    """
    if longer_signals == "auto":
        # Without a rate, a longer ECG may be one at a higher rate: averaging it is garbage.
        if getattr(_crocs_step(estimator), "sampling_rate_", None) is None:
            return estimator
        longer_signals = "average"
    if isinstance(estimator, FrozenEstimator):
        inner = _with_longer_signals(estimator.estimator, longer_signals)
        return estimator if inner is estimator.estimator else inner
    if isinstance(estimator, Pipeline):
        *before, (name, last) = estimator.steps
        inner = _with_longer_signals(last, longer_signals)
        if inner is last:
            return estimator
        view = copy.copy(estimator)
        view.steps = [*before, (name, inner)]
        return view
    if getattr(estimator, "longer_signals", longer_signals) == longer_signals:
        return estimator
    view = copy.copy(estimator)
    view.longer_signals = longer_signals
    return view


def _length_groups(X):
    """Rows of a list of records grouped by shape, or None when ``X`` is not ragged.

    Records of different lengths (a list of ``(n_samples_i,)`` or ``(n_leads,
    n_samples_i)`` arrays, as the loaders return with
    ``signal_length="variable"``) cannot be one array; each group of one shape
    can, so estimators process them group by group and put rows back in order.
    """
    if not isinstance(X, (list, tuple)) or not X or not all(hasattr(x, "shape") for x in X):
        return None
    groups = {}
    for i, x in enumerate(X):
        groups.setdefault(tuple(x.shape), []).append(i)
    return list(groups.values()) if len(groups) > 1 else None


def _nearest(embeddings, prototypes, counts):
    """Index of the most similar prototype (cosine; both sides are unit vectors).

    An all-zero embedding (an encoder that ends in a ReLU can output one) is
    equally near every prototype; it gets the prototype with the most
    training ECGs (``counts``), the best guess without evidence, rather than
    whichever comes first.
    """
    nearest = np.argmax(embeddings @ prototypes.T, axis=1)
    nearest[~embeddings.any(axis=1)] = np.argmax(counts)
    return nearest


def _device_problem(device):
    """Why torch cannot use ``device`` here, or None if it can."""
    try:
        device = torch.device(device)
    except (RuntimeError, TypeError) as exc:
        return f"it is not a torch device ({exc})"
    if device.type == "cpu":
        return None
    backend = torch.backends.mps if device.type == "mps" else getattr(torch, device.type, None)
    is_available = getattr(backend, "is_available", None)
    if is_available is None or not is_available():
        return (
            f"torch.{device.type}.is_available() is False: this PyTorch build or this "
            f"machine has no {device.type} device"
        )
    count = getattr(backend, "device_count", None)
    if device.index is not None and count is not None and device.index >= count():
        return f"only {count()} {device.type} device(s) are visible"
    return None


# This machine, in the names of temporary files: process ids are only
# meaningful on the machine that gave them.
_HOST = format(zlib.crc32(socket.gethostname().encode("utf-8", "replace")), "08x")


def _process_alive(pid):
    """Whether process ``pid`` may still be running (unknown counts as running)."""
    if pid == os.getpid() or os.name == "nt":  # Windows' os.kill(pid, 0) terminates pid
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (OSError, OverflowError, ValueError):  # no permission, or a platform without it
        return True
    return True


def _remove_stale_temporaries(path):
    """Delete temporaries of ``path`` whose writer was killed (no ``finally`` ran).

    They are copies of what was being written (a model, embeddings), so they
    are not left to accumulate; only regular files of the exact pattern, named
    after a process of this machine that no longer runs, are removed (a
    folder shared between machines may hold another machine's live ones).
    """
    pattern = re.compile(rf"\.{re.escape(path.name)}\.{_HOST}-(\d+)-[0-9a-f]{{32}}\.tmp")
    try:
        entries = list(os.scandir(path.parent))
    except OSError:
        return
    for entry in entries:
        match = pattern.fullmatch(entry.name)
        if match is None or not entry.is_file(follow_symlinks=False):
            continue
        if not _process_alive(int(match.group(1))):
            with contextlib.suppress(OSError):
                os.unlink(entry.path)


@contextlib.contextmanager
def _atomic_path(path):
    """Yield a temporary path next to ``path``; move it into place on success.

    The temporary file lives in the same folder so that the final
    :func:`os.replace` is atomic. On error the temporary file is removed and
    ``path`` is left as it was. Its name holds the writer's machine and
    process id, so that temporaries left by a killed writer are recognised as
    stale and removed by the next write to ``path``.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    _remove_stale_temporaries(path)
    # A unique name (not mkstemp, whose 0600 mode would survive the rename):
    # the caller creates the file, so it gets the usual umask-based mode.
    tmp = path.with_name(f".{path.name}.{_HOST}-{os.getpid()}-{uuid.uuid4().hex}.tmp")
    try:
        yield tmp
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
        raise


def _silent(*args, **kwargs):
    """Sink for the training log when ``verbose=0``."""


def _draw_seed(random_state):
    """A torch seed from ``random_state`` (``None``: fresh OS entropy, not the global state)."""
    if random_state is None:
        return int(np.random.SeedSequence().generate_state(1)[0] >> 1)
    return int(check_random_state(random_state).randint(2**31 - 1))


# scikit-learn's wrappers that stand between a public method or function of the
# package and its caller: _fit_context around fit, set_output's around
# transform and fit_transform, validate_params around functions.
_WRAPPERS = {
    (os.path.join("sklearn", "base.py"), "wrapper"),
    (os.path.join("sklearn", "utils", "_set_output.py"), "wrapped"),
    (os.path.join("sklearn", "utils", "_param_validation.py"), "wrapper"),
}
_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep


def _warn(message, category=UserWarning):
    """Warn at the line that called into the package: every warning of the package goes here.

    The location is the frame above the outermost frame of the package on the
    stack, past scikit-learn's wrappers of that entry point, so that it does
    not depend on how deep inside the package, or behind which library
    (skorch calling back), the warning is raised.
    """
    frames = []
    frame = sys._getframe(1)  # the caller of _warn, i.e. stacklevel=2
    while frame is not None:
        frames.append(frame)
        frame = frame.f_back
    inside = [os.path.abspath(f.f_code.co_filename).startswith(_PACKAGE_DIR) for f in frames]
    level = max(i for i, is_inside in enumerate(inside) if is_inside) + 1
    while level < len(frames) and _is_wrapper(frames[level].f_code):
        level += 1
    if isinstance(message, str):
        message = escape(message, lines=True)
    warnings.warn(message, category, stacklevel=level + 2)


def _is_wrapper(code):
    return any(
        code.co_filename.endswith(os.sep + path) and code.co_name == name
        for path, name in _WRAPPERS
    )


def _file_sha256(path):
    """SHA-256 of a file's bytes, read 1 MiB at a time (hashlib.file_digest needs 3.11)."""
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()
