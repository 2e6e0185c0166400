"""The net's data: datasets held whole or read lazily, contiguous batching, reproducible shuffling."""

import threading

import numpy as np
import pytest
import torch
from conftest import make_small_net
from skorch.callbacks import Callback

from sklearn_crocs.nn import ArrayDataset
from sklearn_crocs.nn._data import (
    BatchIterator,
    _check_finite,
    _prefetch,
    is_lazy_array,
    training_loader,
)


def _dataset(n, leads=1, length=5):
    X = np.arange(n * leads * length, dtype=np.float32).reshape(n, leads, length)
    return ArrayDataset(X, np.arange(n) % 3)


def test_array_dataset_wraps_without_copy():
    X = np.zeros((4, 2, 8), dtype=np.float32)
    dataset = ArrayDataset(X, [0, 1, 2, 0])
    assert dataset.X.data_ptr() == X.ctypes.data
    assert dataset.y.dtype == torch.long
    assert len(dataset) == 4
    with pytest.raises(ValueError, match="different lengths"):
        ArrayDataset(X, [0, 1])


def test_sequential_batches_are_views_in_order():
    dataset = _dataset(10)
    batches = list(BatchIterator(dataset, 4))
    assert [len(xb) for xb, _ in batches] == [4, 4, 2]
    torch.testing.assert_close(torch.cat([xb for xb, _ in batches]), dataset.X)
    assert batches[0][0].data_ptr() == dataset.X.data_ptr()


def test_shuffled_batches_cover_every_sample_once_and_are_reproducible():
    dataset = _dataset(23)
    first = list(BatchIterator(dataset, 5, shuffle=True, seed=3, pass_index=0))
    again = list(BatchIterator(dataset, 5, shuffle=True, seed=3, pass_index=0))
    other_epoch = list(BatchIterator(dataset, 5, shuffle=True, seed=3, pass_index=1))
    X = torch.cat([xb for xb, _ in first])
    y = torch.cat([yb for _, yb in first])
    order = X[:, 0, 0].long() // 5
    assert sorted(order.tolist()) == list(range(23))
    torch.testing.assert_close(y, dataset.y[order])
    torch.testing.assert_close(X, torch.cat([xb for xb, _ in again]))
    assert not torch.equal(X, torch.cat([xb for xb, _ in other_epoch]))


def test_every_epoch_of_a_fit_draws_a_new_order():
    """skorch builds the training iterator once per fit: each pass over it must reshuffle."""
    orders = []

    class RecordOrder(Callback):
        def on_epoch_begin(self, net, **kwargs):
            orders.append([])

        def on_batch_begin(self, net, batch=None, training=None, **kwargs):
            if training:
                orders[-1].extend(batch[0][:, 0, 0].long().tolist())

    X = np.repeat(np.arange(32, dtype=np.float32), 64).reshape(32, 1, 64)
    make_small_net(batch_size=8, max_epochs=3, train_split=None, callbacks=[RecordOrder()]).fit(
        X, np.arange(32) % 4
    )
    assert [sorted(order) for order in orders] == [list(range(32))] * 3
    assert orders[0] != orders[1] != orders[2] != orders[0]
    iterator = BatchIterator(_dataset(23), 5, shuffle=True, seed=3, pass_index=0)
    passes = [torch.cat([xb for xb, _ in iterator]) for _ in range(2)]
    next_pass = torch.cat(
        [xb for xb, _ in BatchIterator(_dataset(23), 5, shuffle=True, seed=3, pass_index=1)]
    )
    torch.testing.assert_close(passes[1], next_pass)  # the second pass is pass 1


def test_trailing_single_sample_is_merged_not_dropped():
    iterator = BatchIterator(_dataset(9), 4, shuffle=True)
    sizes = [len(xb) for xb, _ in iterator]
    assert sizes == [4, 5]
    assert len(iterator) == 2
    # Without shuffling (inference), batches keep their plain sizes.
    assert [len(xb) for xb, _ in BatchIterator(_dataset(9), 4)] == [4, 4, 1]


def test_prefetch_loads_the_next_batch_in_a_worker_thread_while_the_caller_holds_one():
    loaded = [threading.Event() for _ in range(4)]
    in_main_thread = []

    def load(i):
        in_main_thread.append(threading.current_thread() is threading.main_thread())
        loaded[i].set()
        return 10 * i

    out = []
    for value in _prefetch(iter(range(4)), load):
        out.append(value)
        i = value // 10
        if i + 1 < 4:  # the next one is loaded before the caller asks for it
            assert loaded[i + 1].wait(timeout=10)
    assert out == [0, 10, 20, 30]
    assert in_main_thread == [False] * 4


def test_prefetch_raises_errors_where_the_batch_would_come_and_stops_early_cleanly():
    def batches():
        yield 1
        raise ValueError("bad batch")

    iterator = _prefetch(batches(), lambda b: b)
    assert next(iterator) == 1
    with pytest.raises(ValueError, match="bad batch"):
        next(iterator)
    drawn = []
    iterator = _prefetch(iter(range(100)), lambda b: drawn.append(b) or b)
    assert next(iterator) == 0
    iterator.close()  # the worker finishes the batch it is on, and no more
    assert drawn in ([0], [0, 1])
    assert not any(t.name.startswith("crocs-batches") for t in threading.enumerate())


def test_batch_iterator_stays_in_host_memory_without_cuda():
    dataset = _dataset(10)
    for device in (None, "cpu", torch.device("cpu")):
        batches = list(BatchIterator(dataset, 4, device=device))
        assert batches[0][0].data_ptr() == dataset.X.data_ptr()  # views, no copy


def test_check_finite_batches():
    X = np.ones((6, 1, 5), dtype=np.float32)
    X[4, 0, 2] = np.nan
    dataset = ArrayDataset(X, check_finite=True)
    batches = iter(BatchIterator(dataset, 2))
    next(batches), next(batches)  # rows 0-3 are finite
    with pytest.raises(ValueError, match="Input X contains NaN"):
        next(batches)
    assert len(list(BatchIterator(ArrayDataset(X), 2))) == 3  # not checked by default
    with pytest.raises(ValueError, match="Input X contains infinity"):
        _check_finite(torch.tensor([1.0, -float("inf")]))
    # A sum that overflows is not an error: the element-wise test decides.
    _check_finite(torch.full((4,), 3e38))
    _check_finite(torch.arange(5))  # integers cannot hold NaN


def test_lazy_and_indexed_datasets_give_the_in_memory_batches(tmp_path):
    rng = np.random.default_rng(0)
    X = rng.standard_normal((30, 2, 7))
    y = np.arange(30) % 4
    rows = rng.permutation(30)[:17]
    np.save(tmp_path / "X.npy", X)
    lazy = np.load(tmp_path / "X.npy", mmap_mode="r")  # float64: read batch by batch
    flat = np.load(tmp_path / "X.npy", mmap_mode="r").reshape(30, 14)
    expected = ArrayDataset(X[rows].astype(np.float32), y[rows])
    datasets = [
        ArrayDataset(X.astype(np.float32), y, indices=rows),
        ArrayDataset(lazy, y, indices=rows),
        ArrayDataset(flat, y, indices=rows, sample_shape=(2, 7)),
    ]
    assert [d.lazy for d in datasets] == [False, True, True]
    for dataset in datasets:
        assert len(dataset) == 17
        for shuffle in (False, True):
            got = list(BatchIterator(dataset, 5, shuffle=shuffle, seed=2))
            want = list(BatchIterator(expected, 5, shuffle=shuffle, seed=2))
            for (xg, yg), (xw, yw) in zip(got, want, strict=True):
                assert xg.dtype == torch.float32 and xg.shape == xw.shape
                torch.testing.assert_close(xg, xw, rtol=0, atol=0)
                torch.testing.assert_close(yg, yw, rtol=0, atol=0)
        torch.testing.assert_close(dataset[3][0], expected[3][0], rtol=0, atol=0)
    assert is_lazy_array(lazy) and not is_lazy_array(X) and not is_lazy_array(torch.zeros(2))
    assert not is_lazy_array([[1.0]])
    # A float32 C-contiguous memory map is wrapped, not read batch by batch.
    np.save(tmp_path / "X32.npy", X.astype(np.float32))
    assert not ArrayDataset(np.load(tmp_path / "X32.npy", mmap_mode="r")).lazy


def test_training_loader_gives_the_shuffled_batches_of_the_iterator():
    # AcceleratedCROCSNet shards these: one process must train on the batches of CROCSNet.
    dataset = _dataset(21)
    for pass_index in (0, 1):
        loader = training_loader(dataset, 5, seed=3, pass_index=pass_index)
        iterator = BatchIterator(dataset, 5, shuffle=True, seed=3, pass_index=pass_index)
        got, want = list(loader), list(iterator)
        assert [len(xb) for xb, _ in got] == [5, 5, 5, 6]  # the single trailing sample merged
        for (xg, yg), (xw, yw) in zip(got, want, strict=True):
            torch.testing.assert_close(xg, xw, rtol=0, atol=0)
            torch.testing.assert_close(yg, yw, rtol=0, atol=0)
