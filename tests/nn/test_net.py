"""The skorch net: loss parts, modes set once per call, inference batch sizes, Accelerate."""

import ast
import inspect
import textwrap

import numpy as np
import pytest
import torch
from conftest import make_small_net
from skorch import NeuralNet

from sklearn_crocs.nn import ArrayDataset, CROCSNet
from sklearn_crocs.nn._data import BatchIterator


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


def test_set_modes_sets_every_submodule_and_skips_modules_already_in_mode(monkeypatch):
    net = _net().initialize()
    calls = []
    original = torch.nn.Module.train

    def counting_train(module, mode=True):
        calls.append(type(module).__name__)
        return original(module, mode)

    monkeypatch.setattr(torch.nn.Module, "train", counting_train)
    net._set_modes(False)
    assert not any(m.training for m in net.module_.modules())
    assert not any(m.training for m in net.criterion_.modules())
    calls.clear()
    net._set_modes(False)  # already in evaluation mode: nothing to do
    assert calls == []
    net.module_.features[1].train()  # one submodule out of step with the others
    calls.clear()
    net._set_modes(False)
    assert calls[0] == "CNNEncoder"
    assert not any(m.training for m in net.module_.modules())
    net._set_modes(True)
    assert all(m.training for m in net.module_.modules())
    assert all(m.training for m in net.criterion_.modules())


def test_training_and_validation_steps_set_the_modes_without_skorch_private_method(monkeypatch):
    # skorch's _set_training is private: the net's own steps set the modes,
    # training batches in training mode and validation batches in evaluation mode.
    from skorch import NeuralNet
    from skorch.callbacks import Callback

    monkeypatch.setattr(
        NeuralNet, "_set_training", lambda self, training=True: pytest.fail("_set_training")
    )
    seen = []

    class RecordModes(Callback):
        def on_batch_end(self, net, batch=None, training=None, **kwargs):
            modules = [*net.module_.modules(), *net.criterion_.modules()]
            seen.append((training, {m.training for m in modules}))

    rng = np.random.RandomState(0)
    X = rng.randn(40, 1, 64).astype(np.float32)
    net = make_small_net(batch_size=8, max_epochs=2, callbacks=[RecordModes()])
    net.fit(X, rng.randint(4, size=40))  # 32 training and 8 validation frames per epoch
    assert seen == ([(True, {True})] * 4 + [(False, {False})]) * 2
    net.module_.train()
    net.forward(X)  # inference
    assert not any(m.training for m in net.module_.modules())


def test_inference_sets_the_modes_once_per_call_and_matches_evaluation_step(monkeypatch):
    from skorch.exceptions import NotInitializedError

    with pytest.raises(NotInitializedError):
        next(_net().forward_iter(np.zeros((2, 1, 64), dtype=np.float32)))
    rng = np.random.RandomState(0)
    X = rng.randn(20, 1, 64).astype(np.float32)
    net = _net(max_epochs=1).fit(X, rng.randint(4, size=20))
    net.module_.train()
    calls = []
    original = CROCSNet._set_modes
    monkeypatch.setattr(
        CROCSNet,
        "_set_modes",
        lambda self, training: (calls.append(training), original(self, training)),
    )
    outputs = list(net.forward_iter(X))  # 3 batches of at most 8
    assert calls == [False]
    assert not any(m.training for m in net.module_.modules())
    assert [len(o) for o in outputs] == [8, 8, 4]
    assert all(o.is_inference() and o.device.type == "cpu" for o in outputs)
    batches = BatchIterator(ArrayDataset(X), 8)
    expected = torch.cat([net.evaluation_step(batch) for batch in batches])
    torch.testing.assert_close(torch.cat(outputs), expected, rtol=0, atol=0)
    # Training mode goes through skorch's own evaluation step (modes set per
    # batch, autograd on).
    trained = list(net.forward_iter(X, training=True))
    assert all(m.training for m in net.module_.modules())
    assert all(o.requires_grad for o in trained)


def test_predict_batch_size_auto_keeps_the_largest_activation_within_budget():
    from sklearn_crocs.nn._net import _ACTIVATION_BYTES, _MAX_INFERENCE_BATCH

    net = _net(batch_size=64, predict_batch_size="auto").initialize()
    per_sample = net.module_.max_activation_size
    expected = min(_MAX_INFERENCE_BATCH, _ACTIVATION_BYTES // (4 * per_sample))
    assert net.inference_batch_size() == expected
    net.module_.max_activation_size = 1  # tiny activations: capped
    assert net.inference_batch_size() == _MAX_INFERENCE_BATCH
    net.module_.max_activation_size = _ACTIVATION_BYTES // 40  # 10 samples fit
    assert net.inference_batch_size() == 10
    net.module_.max_activation_size = 10 * _ACTIVATION_BYTES  # not even one sample
    assert net.inference_batch_size() == 1
    net.set_params(device="cuda")  # GPUs: the training batch size
    assert net.inference_batch_size() == 64
    net.set_params(device="cpu")
    del net.module_.max_activation_size  # a module without the attribute
    assert net.inference_batch_size() == 64
    net.set_params(predict_batch_size=None)
    assert net.inference_batch_size() == 64
    net.set_params(predict_batch_size=7)
    assert net.inference_batch_size() == 7


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
    augment=None, validation_fraction=0.25, random_state=0, accelerator=accelerator,
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


# ------------------------------------------------- the copies of skorch's steps
# CROCSNet copies the bodies of skorch's train_step_single and validation_step
# to set the modes only where they differ (_set_modes for skorch's private
# _set_training, before every batch) and to record the loss parts after the
# validation step. These are the only differences; an upgrade of skorch that
# changes the steps fails here, so that the copies are brought up to date.
COPY_DIFFERENCES = [("self._set_modes(", "self._set_training("), ("self._record_loss_parts()", "")]


def _body(function, replace=()):
    """AST of ``function``'s body without its docstring, after textual replacements."""
    source = textwrap.dedent(inspect.getsource(function))
    for old, new in replace:
        source = source.replace(old, new)
    body = ast.parse(source).body[0].body
    if isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body = body[1:]
    return [ast.dump(node) for node in body if not (
        isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)  # a removed call
    )]


@pytest.mark.parametrize("name", ["train_step_single", "validation_step"])
def test_copied_steps_are_the_installed_skorchs(name):
    ours = _body(getattr(CROCSNet, name), COPY_DIFFERENCES)
    assert ours == _body(getattr(NeuralNet, name))
    # Guard: the comparison sees a difference when there is one.
    assert _body(getattr(CROCSNet, name)) != _body(getattr(NeuralNet, name))
