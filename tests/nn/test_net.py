"""The skorch net: contiguous batching, reproducible shuffling, loss parts and best-epoch restore."""

import threading

import numpy as np
import pytest
import torch
from conftest import make_small_net
from skorch.callbacks import Callback

from sklearn_crocs.nn import ArrayDataset, CROCSNet
from sklearn_crocs.nn._net import KeepBestState, _BatchIterator, _prefetch


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
    batches = list(_BatchIterator(dataset, 4))
    assert [len(xb) for xb, _ in batches] == [4, 4, 2]
    torch.testing.assert_close(torch.cat([xb for xb, _ in batches]), dataset.X)
    assert batches[0][0].data_ptr() == dataset.X.data_ptr()


def test_shuffled_batches_cover_every_sample_once_and_are_reproducible():
    dataset = _dataset(23)
    first = list(_BatchIterator(dataset, 5, shuffle=True, seed=3, pass_index=0))
    again = list(_BatchIterator(dataset, 5, shuffle=True, seed=3, pass_index=0))
    other_epoch = list(_BatchIterator(dataset, 5, shuffle=True, seed=3, pass_index=1))
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
    iterator = _BatchIterator(_dataset(23), 5, shuffle=True, seed=3, pass_index=0)
    passes = [torch.cat([xb for xb, _ in iterator]) for _ in range(2)]
    next_pass = torch.cat([xb for xb, _ in _BatchIterator(_dataset(23), 5, shuffle=True, seed=3, pass_index=1)])
    torch.testing.assert_close(passes[1], next_pass)  # the second pass is pass 1


def test_trailing_single_sample_is_merged_not_dropped():
    iterator = _BatchIterator(_dataset(9), 4, shuffle=True)
    sizes = [len(xb) for xb, _ in iterator]
    assert sizes == [4, 5]
    assert len(iterator) == 2
    # Without shuffling (inference), batches keep their plain sizes.
    assert [len(xb) for xb, _ in _BatchIterator(_dataset(9), 4)] == [4, 4, 1]


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
        batches = list(_BatchIterator(dataset, 4, device=device))
        assert batches[0][0].data_ptr() == dataset.X.data_ptr()  # views, no copy


def _net(**kwargs):
    return make_small_net(**{"lr": 1e-2, "batch_size": 8, "train_split": None, **kwargs})


def test_net_records_loss_parts_and_optimises_prototypes():
    rng = np.random.RandomState(0)
    X = rng.randn(40, 1, 64).astype(np.float32)
    y = rng.randint(4, size=40)
    torch.manual_seed(0)
    net = _net(max_epochs=2)
    net.initialize()
    before = net.criterion_.prototypes.detach().clone()
    net.partial_fit(X, y)
    history = net.history
    for epoch in history:
        assert epoch["train_loss"] == pytest.approx(
            np.average(
                [b["train_nce"] + b["train_reg"] for b in epoch["batches"]],
                weights=[b["train_batch_size"] for b in epoch["batches"]],
            ),
            rel=1e-5,
        )
    assert not torch.equal(before, net.criterion_.prototypes.detach())
    out = net.forward(ArrayDataset(X), training=False)
    assert out.shape == (40, 8)
    assert not out.requires_grad


def test_loss_parts_are_read_once_the_step_is_done(monkeypatch):
    # get_loss must not read values from the device (a host-device
    # synchronisation between the forward and backward passes on a GPU); the
    # parts are plain floats in the history before on_batch_end callbacks
    # run, for training and validation batches alike.
    from skorch.callbacks import Callback

    seen = []

    class ReadBatchRow(Callback):
        def on_batch_end(self, net, batch=None, training=None, **kwargs):
            row = net.history[-1, "batches", -1]
            prefix = "train" if training else "valid"
            seen.append((type(row[f"{prefix}_nce"]), type(row[f"{prefix}_reg"])))

    rng = np.random.RandomState(0)
    X = rng.randn(40, 1, 64).astype(np.float32)
    y = rng.randint(4, size=40)
    net = make_small_net(batch_size=8, max_epochs=1, callbacks=[ReadBatchRow()])
    net.initialize()
    get_loss = net.get_loss

    def get_loss_without_reads(*args, **kwargs):
        with monkeypatch.context() as patch:
            for name in ("item", "tolist", "__float__"):
                patch.setattr(torch.Tensor, name, lambda *a, **k: pytest.fail("read in get_loss"))
            return get_loss(*args, **kwargs)

    monkeypatch.setattr(net, "get_loss", get_loss_without_reads)
    net.partial_fit(X, y)
    assert len(seen) == 4 + 1  # 32 training and 8 validation frames, batches of 8
    assert set(seen) == {(float, float)}
    assert net._loss_parts is None  # no tensor is left on the net (pickles, device memory)


def test_keep_best_state_restores_module_and_prototypes():
    rng = np.random.RandomState(0)
    X = rng.randn(30, 1, 64).astype(np.float32)
    y = rng.randint(4, size=30)

    class Recorder(KeepBestState):
        def on_epoch_end(self, net, **kwargs):
            super().on_epoch_end(net, **kwargs)
            if self.best_epoch_ == net.history[-1, "epoch"]:
                self.snapshot = net.criterion_.prototypes.detach().clone()

    from skorch.helper import predefined_split

    recorder = Recorder()
    net = _net(
        max_epochs=8,
        lr=0.05,  # this data overfits after epoch 2, so the best epoch is not the last
        train_split=predefined_split(ArrayDataset(X[:10], y[:10])),
        callbacks=[recorder],
    )
    torch.manual_seed(0)
    net.fit(X[10:], y[10:])
    valid = net.history[:, "valid_loss"]
    best_epoch = int(np.argmin(valid)) + 1
    assert best_epoch < len(valid), "the test needs a best epoch before the last one"
    assert recorder.best_epoch_ == best_epoch
    torch.testing.assert_close(net.criterion_.prototypes.detach(), recorder.snapshot)
    assert recorder.best_state_ is None  # no second copy kept after training


def test_set_training_sets_every_submodule_and_skips_modules_already_in_mode(monkeypatch):
    net = _net().initialize()
    calls = []
    original = torch.nn.Module.train

    def counting_train(module, mode=True):
        calls.append(type(module).__name__)
        return original(module, mode)

    monkeypatch.setattr(torch.nn.Module, "train", counting_train)
    net._set_training(False)
    assert not any(m.training for m in net.module_.modules())
    assert not any(m.training for m in net.criterion_.modules())
    calls.clear()
    net._set_training(False)  # already in evaluation mode: nothing to do
    assert calls == []
    net.module_.features[1].train()  # one submodule out of step with the others
    calls.clear()
    net._set_training(False)
    assert calls[0] == "CNNEncoder"
    assert not any(m.training for m in net.module_.modules())
    net._set_training(True)
    assert all(m.training for m in net.module_.modules())
    assert all(m.training for m in net.criterion_.modules())


def test_inference_sets_the_modes_once_per_call_and_matches_evaluation_step(monkeypatch):
    from skorch.exceptions import NotInitializedError

    with pytest.raises(NotInitializedError):
        next(_net().forward_iter(np.zeros((2, 1, 64), dtype=np.float32)))
    rng = np.random.RandomState(0)
    X = rng.randn(20, 1, 64).astype(np.float32)
    net = _net(max_epochs=1).fit(X, rng.randint(4, size=20))
    net.module_.train()
    calls = []
    original = CROCSNet._set_training
    monkeypatch.setattr(
        CROCSNet,
        "_set_training",
        lambda self, mode=True: (calls.append(mode), original(self, mode)),
    )
    outputs = list(net.forward_iter(X))  # 3 batches of at most 8
    assert calls == [False]
    assert not any(m.training for m in net.module_.modules())
    assert [len(o) for o in outputs] == [8, 8, 4]
    assert all(o.is_inference() and o.device.type == "cpu" for o in outputs)
    batches = _BatchIterator(ArrayDataset(X), 8)
    expected = torch.cat([net.evaluation_step(batch) for batch in batches])
    torch.testing.assert_close(torch.cat(outputs), expected, rtol=0, atol=0)
    # Training mode goes through skorch's own steps (modes set per batch, autograd on).
    calls.clear()
    trained = list(net.forward_iter(X, training=True))
    assert calls == [True, True, True]
    assert all(o.requires_grad for o in trained)


def test_predict_batch_size_auto_keeps_the_largest_activation_within_budget():
    from sklearn_crocs.nn._net import _ACTIVATION_BYTES, _MAX_INFERENCE_BATCH

    net = _net(batch_size=64, predict_batch_size="auto").initialize()
    per_sample = net.module_.max_activation_size
    expected = min(_MAX_INFERENCE_BATCH, _ACTIVATION_BYTES // (4 * per_sample))
    assert net._inference_batch_size() == expected
    net.module_.max_activation_size = 1  # tiny activations: capped
    assert net._inference_batch_size() == _MAX_INFERENCE_BATCH
    net.module_.max_activation_size = _ACTIVATION_BYTES // 40  # 10 samples fit
    assert net._inference_batch_size() == 10
    net.module_.max_activation_size = 10 * _ACTIVATION_BYTES  # not even one sample
    assert net._inference_batch_size() == 1
    net.set_params(device="cuda")  # GPUs: the training batch size
    assert net._inference_batch_size() == 64
    net.set_params(device="cpu")
    del net.module_.max_activation_size  # a module without the attribute
    assert net._inference_batch_size() == 64
    net.set_params(predict_batch_size=None)
    assert net._inference_batch_size() == 64
    net.set_params(predict_batch_size=7)
    assert net._inference_batch_size() == 7


def test_check_finite_batches():
    from sklearn_crocs.nn._net import _check_finite

    X = np.ones((6, 1, 5), dtype=np.float32)
    X[4, 0, 2] = np.nan
    dataset = ArrayDataset(X, check_finite=True)
    batches = iter(_BatchIterator(dataset, 2))
    next(batches), next(batches)  # rows 0-3 are finite
    with pytest.raises(ValueError, match="Input X contains NaN"):
        next(batches)
    assert len(list(_BatchIterator(ArrayDataset(X), 2))) == 3  # not checked by default
    with pytest.raises(ValueError, match="Input X contains infinity"):
        _check_finite(torch.tensor([1.0, -float("inf")]))
    # A sum that overflows is not an error: the element-wise test decides.
    _check_finite(torch.full((4,), 3e38))
    _check_finite(torch.arange(5))  # integers cannot hold NaN


def test_lazy_and_indexed_datasets_give_the_in_memory_batches(tmp_path):
    from sklearn_crocs.nn._net import is_lazy_array

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
            got = list(_BatchIterator(dataset, 5, shuffle=shuffle, seed=2))
            want = list(_BatchIterator(expected, 5, shuffle=shuffle, seed=2))
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


_ACCELERATE_JOB = '''
import sys

import numpy as np
import torch
from torch import nn

from sklearn_crocs import CROCSClusterer


class Encoder(nn.Module):  # no batch norm, no dropout: nothing that differs per process
    def __init__(self, in_channels, n_timepoints, embedding_dim):
        super().__init__()
        self.conv = nn.Conv1d(in_channels, 4, 9, stride=4)
        self.head = nn.Linear(4 * ((n_timepoints - 9) // 4 + 1), embedding_dim)

    def forward(self, x):
        return self.head(torch.relu(self.conv(x)).flatten(1))


out, batch_size, accelerate = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "accelerate"
accelerator = None
if accelerate:
    from accelerate import Accelerator

    accelerator = Accelerator(cpu=True)
rng = np.random.default_rng(0)
y = rng.integers(0, 2, (128, 2))
X = (rng.standard_normal((128, 1, 200)) + y[:, :1, None]).astype(np.float32)
model = CROCSClusterer(
    encoder=Encoder, embedding_dim=8, max_epochs=3, batch_size=batch_size, lr=1e-2,
    amplitude_jitter=0, validation_fraction=0.25, random_state=0, accelerator=accelerator,
).fit(X, y, groups=np.arange(128) // 2)
if accelerator is None or accelerator.is_main_process:
    np.savez(
        out, prototypes=model.prototypes_, embeddings=model.transform(X), labels=model.labels_,
        valid_loss=[h["valid_loss"] for h in model.net_.history],
        processes=1 if accelerator is None else accelerator.num_processes,
    )
'''


def test_two_accelerate_processes_train_as_one_with_their_joint_batch(tmp_path):
    # Two CPU processes (gloo) with batches of 16 take the same steps as one
    # process with batches of 32: each step's batch is the same 32 ECGs, split
    # in two, and the gradients are averaged. Up to float rounding. (Without
    # batch norm and augmentation, which work per process.)
    import os
    import socket
    import subprocess
    import sys

    import sklearn_crocs

    pytest.importorskip("accelerate")
    job = tmp_path / "job.py"
    job.write_text(_ACCELERATE_JOB)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    # The processes import the sklearn_crocs under test.
    env = {**os.environ, "PYTHONPATH": os.path.dirname(os.path.dirname(sklearn_crocs.__file__))}
    run = {"check": True, "capture_output": True, "text": True, "timeout": 300, "env": env}
    subprocess.run([sys.executable, job, tmp_path / "one.npz", "32", "plain"], **run)
    # accelerate launch runs several CPU processes through mpirun only; torchrun
    # starts them with gloo, and Accelerator(cpu=True) joins them.
    launch = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2"]
    launch += ["--master_addr", "127.0.0.1", "--master_port", str(port)]
    done = subprocess.run([*launch, job, tmp_path / "two.npz", "16", "accelerate"], **run)
    one, two = np.load(tmp_path / "one.npz"), np.load(tmp_path / "two.npz")
    assert two["processes"] == 2, done.stdout + done.stderr
    np.testing.assert_allclose(two["prototypes"], one["prototypes"], atol=1e-6)
    np.testing.assert_allclose(two["embeddings"], one["embeddings"], atol=1e-6)
    np.testing.assert_allclose(two["valid_loss"], one["valid_loss"], rtol=1e-5)
    np.testing.assert_array_equal(two["labels"], one["labels"])
