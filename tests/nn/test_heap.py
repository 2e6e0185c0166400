"""retained_heap: freed memory stays mapped inside, the C library's settings come back outside."""

import json
import subprocess
import sys
import threading

import numpy as np
import pytest
import torch
from conftest import make_small_net
from skorch.callbacks import Callback

from sklearn_crocs.nn import _heap
from sklearn_crocs.nn._heap import retained_heap
from sklearn_crocs.nn._net import _heap_retention_helps


class _RecordingLibc:
    """Stands in for glibc: records mallopt and malloc_trim calls."""

    def __init__(self):
        self.calls = []

    def mallopt(self, param, value):
        self.calls.append(("mallopt", param, value))
        return 1

    def malloc_trim(self, pad):
        self.calls.append(("malloc_trim", pad))
        return 1


@pytest.fixture
def fake_libc(monkeypatch):
    libc = _RecordingLibc()
    monkeypatch.setattr(_heap, "_glibc", lambda: libc)
    return libc


# Run in a fresh process, where glibc's heap holds no large free block yet
# and the buffers come from the main thread's heap (a test worker may run
# tests in a thread whose arena cannot hold 64 MiB at all).
_FAULTS_SCRIPT = """
import json, resource, torch
from sklearn_crocs.nn._heap import retained_heap

torch.set_num_threads(1)

def faults():
    # A step: three 64 MiB buffers written, then all freed, which leaves
    # the heap a free top of 192 MiB (trimmed at glibc's usual thresholds).
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    buffers = [torch.ones(2**24) for _ in range(3)]
    del buffers
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before

before = [faults() for _ in range(3)]
with retained_heap():
    inside = [faults() for _ in range(12)]
print(json.dumps([before, inside]))
"""


def _transparent_huge_pages_always():
    try:
        with open("/sys/kernel/mm/transparent_hugepage/enabled") as f:
            return "[always]" in f.read()
    except OSError:
        return False


def test_sets_and_restores_the_limits_once_around_nested_uses(fake_libc):
    with retained_heap():
        entered = list(fake_libc.calls)
        with retained_heap():
            pass
        assert fake_libc.calls == entered  # the inner use changes nothing
    assert entered == [
        ("mallopt", _heap._M_MMAP_MAX, 0),
        ("mallopt", _heap._M_TRIM_THRESHOLD, _heap._NO_TRIM),
    ]
    assert fake_libc.calls[len(entered) :] == [
        ("mallopt", _heap._M_MMAP_MAX, _heap._DEFAULT_MMAP_MAX),
        ("mallopt", _heap._M_MMAP_THRESHOLD, 32 * 2**20),
        ("mallopt", _heap._M_TRIM_THRESHOLD, 64 * 2**20),
        ("malloc_trim", 0),
    ]
    assert _heap._depth == 0


def test_restores_after_an_error_and_across_threads(fake_libc):
    with pytest.raises(RuntimeError, match="boom"):
        with retained_heap():
            raise RuntimeError("boom")
    assert fake_libc.calls[-1] == ("malloc_trim", 0)
    assert _heap._depth == 0

    fake_libc.calls.clear()
    inside, release = threading.Event(), threading.Event()

    def worker():
        with retained_heap():
            inside.set()
            release.wait(10)

    thread = threading.Thread(target=worker)
    thread.start()
    inside.wait(10)
    with retained_heap():
        release.set()
        thread.join(10)
    # The thread left first: the limits were restored only when this use ended.
    assert [call[0] for call in fake_libc.calls] == ["mallopt"] * 2 + ["mallopt"] * 3 + [
        "malloc_trim"
    ]
    assert _heap._depth == 0


def test_does_nothing_without_glibc(monkeypatch):
    monkeypatch.setattr(_heap, "_glibc", lambda: None)
    with retained_heap():
        assert _heap._depth == 0


@pytest.mark.skipif(_heap._glibc() is None, reason="needs Linux with glibc")
def test_large_buffers_reuse_mapped_pages_inside():
    # Buffers of 64 MiB: over the largest mmap threshold glibc ever sets by
    # itself (32 MiB). Pages written per step:
    pages = 3 * 2**26 // 4096
    run = subprocess.run(
        [sys.executable, "-c", _FAULTS_SCRIPT], capture_output=True, text=True, check=True
    )
    before, inside = json.loads(run.stdout)
    if not _transparent_huge_pages_always():
        # Without the context glibc maps a fresh zeroed block every time (4 KiB
        # pages, no transparent huge pages for malloc by default).
        assert min(before) > pages // 2, before
    # Inside, once the heap has grown to hold the buffer and the small blocks
    # allocated between steps (a few steps), each step reuses mapped pages.
    assert sum(inside[6:]) < pages, inside


def _tiny_net(**kwargs):
    return make_small_net(batch_size=16, max_epochs=2, **kwargs)


def _data():
    rng = np.random.RandomState(0)
    return rng.randn(32, 1, 64).astype(np.float32), rng.randint(4, size=32)


def test_net_trains_inside_and_leaves_the_heap_as_it_was(fake_libc):
    depths = []

    class RecordDepth(Callback):
        def on_batch_begin(self, net, batch=None, training=None, **kwargs):
            depths.append((training, _heap._depth))

    net = _tiny_net(retain_heap=True, callbacks=[RecordDepth()]).fit(*_data())
    assert {depth for training, depth in depths} == {1}
    assert {training for training, depth in depths} == {True, False}  # and validation
    assert _heap._depth == 0
    assert fake_libc.calls[-1] == ("malloc_trim", 0)
    calls = len(fake_libc.calls)
    net.forward(_data()[0])  # inference does not touch the heap settings
    assert len(fake_libc.calls) == calls


def test_auto_retains_on_cpu_and_false_never(fake_libc):
    # Even the small tensors of a CPU step are faulted in again every step
    # once glibc trims its heap's top, so "auto" keeps the heap on CPU.
    X, y = _data()
    _tiny_net(retain_heap="auto").fit(X, y)
    assert fake_libc.calls[0] == ("mallopt", _heap._M_MMAP_MAX, 0)
    assert fake_libc.calls[-1] == ("malloc_trim", 0)
    fake_libc.calls.clear()
    _tiny_net(retain_heap=False).fit(X, y)
    assert fake_libc.calls == []
    assert _heap_retention_helps("cpu") and _heap_retention_helps(torch.device("cpu"))
    assert not _heap_retention_helps("cuda") and not _heap_retention_helps("meta")
    with pytest.raises(ValueError, match="retain_heap must be True, False or 'auto'"):
        _tiny_net(retain_heap="always").fit(X, y)
