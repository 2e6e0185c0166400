"""Private helpers shared by more than one module of the package; each lives here once."""

import contextlib
import copy
import hashlib
import os
import re
import socket
import stat
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


def _n_rows(X):
    """Number of ECGs in X: an array's first dimension, else its length (a list of records)."""
    return X.shape[0] if hasattr(X, "shape") else len(X)


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


# ------------------------------------------------------------- writing files
# Every file the package writes (tables, figures, JSON, model files, caches)
# is written by _atomic_path and put in place by _move_into_place.

_O_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)  # where the platform has it


def _check_target(path, replace):
    """Raise FileExistsError unless ``path`` may be written under ``replace`` (see
    :func:`_atomic_path`); ``lstat``, so that a link, even dangling, counts as there."""
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return
    if replace == "cache":
        return
    if stat.S_ISLNK(mode):
        raise FileExistsError(
            f"{path} is a symbolic link; sklearn-crocs writes no file through a link nor in "
            "place of one. Remove the link or choose another path."
        )
    if not stat.S_ISREG(mode):
        raise FileExistsError(f"{path} exists and is not a regular file; choose another path.")
    if not replace:
        raise FileExistsError(
            f"{path} exists; sklearn-crocs replaces a file only when told to. Choose another "
            "path, or remove the file first."
        )


def _move_into_place(tmp, path, replace):
    """Rename the finished temporary ``tmp`` to ``path`` if ``replace`` allows (see
    :func:`_atomic_path`); the rename replaces a link itself, never its target."""
    _check_target(path, replace)  # again: something may have appeared while writing
    os.replace(tmp, path)


@contextlib.contextmanager
def _atomic_path(path, *, replace=False):
    """Yield a new temporary file next to ``path``; move it into place on success.

    The one way the package writes a file. The temporary file lives in the
    same folder so that the final :func:`os.replace` is atomic; it is created
    here, new (``O_EXCL``, not through a link planted at its name), and the
    caller writes into it by name (with an explicit format where the writer
    reads one from the suffix: the name ends in ``.tmp``). On error it is
    removed and ``path`` is left as it was. Its name holds the writer's
    machine and process id, so that temporaries left by a killed writer are
    recognised as stale and removed by the next write to ``path``.

    What may already be at ``path`` is checked before the caller writes and
    again before the rename:

    - ``replace=False``: nothing. A file that the package was not told to
      replace is the user's, and is kept.
    - ``replace=True``: a regular file, which is replaced. The caller was told
      to (``--force``, ``overwrite=True``) or the file is its own by rule
      (a model file of the package, the job's figure, ``embeddings_path``).
    - ``replace="cache"``: anything, replaced itself: for the package's caches
      and downloads in its own folders, where a link or a damaged entry in
      place of a cache file is rebuilt over.

    Except with ``"cache"``, a symbolic link at ``path`` (dangling or not) or
    any other non-regular file is refused, whatever ``replace`` says: no file
    is ever written through a link. The refusals are :class:`FileExistsError`
    naming ``path``.
    """
    path = Path(path)
    _check_target(path, replace)  # before the work, which may be long
    path.parent.mkdir(parents=True, exist_ok=True)
    _remove_stale_temporaries(path)
    # A unique name (not mkstemp, whose 0600 mode would survive the rename):
    # created with the usual umask-based mode.
    tmp = path.with_name(f".{path.name}.{_HOST}-{os.getpid()}-{uuid.uuid4().hex}.tmp")
    os.close(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _O_NOFOLLOW, 0o666))
    try:
        yield tmp
        _move_into_place(tmp, path, replace)
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


# ------------------------------------------------------------ reading files
# Every file the package reads by path goes through these: a device (a link to
# /dev/zero) or a FIFO has no size that bounds what reading it returns, or
# blocks forever, and a regular file far larger than its kind ever is would be
# read whole into memory.

# Labels, class maps, settings: text tables of one row per record or code.
_MAX_TABLE_BYTES = 64 << 20
# Model files: a retriever's database embeddings dominate, and 30 million ECGs
# of 128 float32 dimensions fit; an estimator's nets are far smaller.
_MAX_MODEL_BYTES = 16 << 30


def _refuse_irregular(st, path, limit, what):
    if not stat.S_ISREG(st.st_mode):
        raise ValueError(
            f"{what} {path} is not a regular file (a FIFO, device, socket or folder, or a "
            "link to one), which could block or never end; give a regular file."
        )
    if st.st_size > limit:
        raise ValueError(
            f"{what} {path} has {st.st_size} bytes, more than the {limit} bytes a {what} "
            "may have: it is not one, or is damaged."
        )


def _regular_size(path, *, limit, what):
    """Size of ``path``, refused (ValueError) unless a regular file of at most ``limit`` bytes.

    For files that another library opens by path; links are followed, and
    stat opens nothing, so a FIFO does not block. OSError (a missing file)
    passes through.
    """
    st = os.stat(path)
    _refuse_irregular(st, path, limit, what)
    return st.st_size


def _open_regular(path, *, limit, what):
    """``path`` opened for reading in binary, refused as :func:`_regular_size` refuses.

    Opened without blocking (a FIFO would wait for a writer) and checked on
    the open descriptor, so that the file checked is the file read.
    """
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0))
    try:
        _refuse_irregular(os.fstat(fd), path, limit, what)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def _read_regular(path, *, limit, what):
    """The bytes of ``path``, refused as :func:`_regular_size` refuses.

    At most ``limit + 1`` bytes are read: a file that grows while it is read
    is refused too.
    """
    with _open_regular(path, limit=limit, what=what) as fh:
        data = fh.read(limit + 1)
    if len(data) > limit:
        raise ValueError(f"{what} {path} grew beyond {limit} bytes while it was read.")
    return data
