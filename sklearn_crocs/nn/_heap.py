"""Keep a training loop's memory mapped between steps (Linux with glibc).

glibc's ``malloc`` serves every request above its mmap threshold (which it
raises as large blocks are freed, but never above 32 MiB on 64-bit systems)
with a fresh ``mmap`` and hands the block back to the kernel when it is
freed; and it gives the free top of its heap back to the kernel once that
exceeds the trim threshold (twice the mmap threshold). A training step
allocates the same activations and gradients every time, so for tensors over
32 MiB every step maps them again, and a step whose tensors together exceed
the trim threshold finds part of its heap handed back; either way the kernel
zero-fills each 4 KiB page on first touch. Measured on 2 CPU cores (torch
2.13): a step of the ResNet encoder on 256 12-lead 2500-sample frames,
whose activations are 41-82 MB each, took 800,000 page faults and 1.5 s of
kernel time of its 2.8 s; with the heap kept, none, and 1.5x the frames/s.
A step of the paper's CNN on 256 single-lead frames (tensors under 4 MB)
took 700-2,400 page faults and 1.5-6 ms of kernel time of its 13-20 ms;
with the heap kept, about 130 and 0.2-0.6 ms.

:func:`retained_heap` makes glibc keep freed memory in the process while a
training loop runs (``mallopt``: no ``mmap`` for large blocks, no trimming
of the heap's top), and on leaving returns the free memory to the system
(``malloc_trim``). Elsewhere (macOS, Windows, musl) it does nothing. It
helps most where training runs in the main thread: glibc serves other
threads from arenas of at most 64 MiB each, and maps any larger block
afresh whatever the settings.
"""

import contextlib
import ctypes
import functools
import platform
import threading

__all__ = ["retained_heap"]

# mallopt parameters and glibc's own limits (malloc.h, malloc.c).
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
_M_MMAP_MAX = -4
_DEFAULT_MMAP_MAX = 65536
# The largest mmap threshold glibc's dynamic adjustment reaches on 64-bit
# systems, and the trim threshold it pairs with it (twice as large).
_MMAP_THRESHOLD_MAX = 32 * 2**20
_TRIM_THRESHOLD_MAX = 2 * _MMAP_THRESHOLD_MAX
# mallopt takes an int: the largest trim threshold it can set (2 GiB).
_NO_TRIM = 2**31 - 1

_lock = threading.Lock()
_depth = 0


@functools.cache
def _glibc():
    """The C library as a ctypes handle if it is glibc with ``mallopt``, else None."""
    if platform.system() != "Linux" or platform.libc_ver()[0] != "glibc":
        return None
    try:
        libc = ctypes.CDLL(None)
        mallopt, malloc_trim = libc.mallopt, libc.malloc_trim
    except (OSError, AttributeError):  # pragma: no cover - a stripped-down libc
        return None
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    malloc_trim.argtypes, malloc_trim.restype = [ctypes.c_size_t], ctypes.c_int
    return libc


@contextlib.contextmanager
def retained_heap():
    """Context in which glibc keeps freed memory mapped, for repeated training steps.

    Inside, ``malloc`` takes large blocks from the heap rather than from
    ``mmap`` and does not give the heap's free top back to the kernel, so a
    loop that allocates the same tensors every step reuses pages already
    mapped instead of faulting in fresh zeroed ones. Peak memory is that of
    the largest step, plus whatever fragmentation the heap keeps.

    On leaving the outermost such context, the free memory goes back to the
    system (``malloc_trim``), large blocks come from ``mmap`` again and the
    heap's top is trimmed as usual. glibc cannot report its earlier limits,
    and setting any of them ends its dynamic adjustment, so they are set to
    the values that adjustment reaches in a process that handles large
    tensors (mmap threshold 32 MiB, trim threshold 64 MiB). The settings
    are process-wide, as the C library's are; nested or concurrent uses (by
    threads) share one setting, restored when the last leaves. Outside Linux
    with glibc this does nothing.

    Examples
    --------
    >>> import torch
    >>> from sklearn_crocs.nn._heap import retained_heap
    >>> with retained_heap():
    ...     for _ in range(3):
    ...         buffer = torch.ones(2**24)  # 64 MiB, mapped once
    >>> float(buffer.sum())
    16777216.0
    """
    global _depth
    libc = _glibc()
    if libc is None:
        yield
        return
    with _lock:
        _depth += 1
        if _depth == 1:
            libc.mallopt(_M_MMAP_MAX, 0)
            libc.mallopt(_M_TRIM_THRESHOLD, _NO_TRIM)
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0:
                libc.mallopt(_M_MMAP_MAX, _DEFAULT_MMAP_MAX)
                libc.mallopt(_M_MMAP_THRESHOLD, _MMAP_THRESHOLD_MAX)
                libc.mallopt(_M_TRIM_THRESHOLD, _TRIM_THRESHOLD_MAX)
                libc.malloc_trim(0)
