"""The skorch net behind :class:`~sklearn_crocs.CROCSClusterer`.

Training batches are sliced from one contiguous tensor (shuffled by a seeded
permutation each epoch) instead of going through a per-sample
``Dataset.__getitem__`` and a collate function, and inference runs under
:func:`torch.inference_mode`. On a CUDA device, each batch is gathered and
copied to the device in a background thread while the step before it runs.
"""

import warnings
from concurrent.futures import ThreadPoolExecutor
from copy import deepcopy

import numpy as np
import scipy.sparse as sp
import torch
from sklearn.utils import assert_all_finite
from skorch import NeuralNet
from skorch.callbacks import Callback, EarlyStopping
from skorch.hf import AccelerateMixin
from skorch.utils import to_device
from torch.utils.data import DataLoader, Dataset

__all__ = ["AcceleratedCROCSNet", "ArrayDataset", "CROCSNet"]

# Inference batches are sized so that their largest intermediate tensor stays
# within this many bytes (with predict_batch_size="auto", on CPU). With 16 MiB,
# glibc's allocator returned and re-mapped the buffers between batches in some
# processes (70,000 page faults per 10,240 frames of the paper's CNN, 2-4x
# slower); 8 MiB kept them mapped.
_ACTIVATION_BYTES = 8 * 2**20
# ... and hold at most this many samples (fewer Python steps per frame than
# the training batch, for small models, without unbounded batches).
_MAX_INFERENCE_BATCH = 1024


def _activation_bytes(module):
    """Bytes per sample of ``module``'s largest tensor, or None if it does not say.

    Read from the ``max_activation_size`` attribute (elements per sample) of
    the package's encoders, in the parameters' precision.
    """
    per_sample = getattr(module, "max_activation_size", None)
    if per_sample is None:
        return None
    return per_sample * next(module.parameters()).element_size()


def _auto_batch_size(module, batch_size, device="cpu"):
    """Inference batch size: on CPU, as many samples as keep activations in the caches.

    At most ``_MAX_INFERENCE_BATCH`` samples, and fewer where ``module``'s
    largest tensor per batch (see :func:`_activation_bytes`) would exceed
    ``_ACTIVATION_BYTES``; ``batch_size`` on other devices, or for modules
    that do not say their activation size.
    """
    per_sample = _activation_bytes(module)
    if per_sample is None or torch.device(device).type != "cpu":
        return batch_size
    return max(1, min(_MAX_INFERENCE_BATCH, _ACTIVATION_BYTES // per_sample))


def is_lazy_array(X):
    """Whether ``X`` is read batch by batch instead of loaded whole.

    Memory maps and array-likes with ``shape``, ``dtype`` and slicing that
    are not in-memory arrays (``h5py.Dataset``, ``zarr.Array``, dask arrays)
    are lazy; in-memory ndarrays, tensors, lists, DataFrames and sparse
    matrices are not.
    """
    if isinstance(X, np.memmap):
        return True
    if isinstance(X, (np.ndarray, torch.Tensor)) or hasattr(X, "iloc") or sp.issparse(X):
        return False
    return all(hasattr(X, name) for name in ("shape", "dtype", "__getitem__"))


def _take(X, rows):
    """Rows ``rows`` (increasing int64 ndarray) of an array-like, as an ndarray."""
    if hasattr(X, "oindex"):  # zarr: integer arrays go through orthogonal selection
        return np.asarray(X.oindex[rows])
    return np.asarray(X[rows])  # numpy, memmap, h5py (increasing rows only), dask


class ArrayDataset(Dataset):
    """Signals and prototype indices, held whole or read batch by batch.

    Read more in the :ref:`User Guide <method>`.

    Parameters
    ----------
    X : array-like of shape (n_samples, n_leads, n_timepoints)
        Signals. An in-memory ndarray or tensor is wrapped as one tensor
        (without a copy when it is C-contiguous float32), and so is a
        C-contiguous float32 memory map. Other memory maps and lazy
        array-likes (``h5py.Dataset``, ``zarr.Array``, dask array: anything
        with ``shape``, ``dtype`` and integer-array indexing) are read batch
        by batch, only the rows a batch needs, and converted to float32.
    y : array-like of shape (n_samples,), default=None
        Index of each sample's attribute combination.
    indices : array-like of int, default=None
        The rows of ``X`` (and ``y``) that make up this dataset, in this
        order; ``None`` means all. Training and validation sets of one
        array share it this way instead of copying it.
    sample_shape : tuple of int, default=None
        Shape each sample is given, for example ``(1, n_timepoints)`` for
        the rows of a 2-D ``X``; ``None`` keeps ``X.shape[1:]``.
    check_finite : bool, default=False
        Raise ``ValueError`` (scikit-learn's messages) when a batch drawn by
        :class:`CROCSNet` holds NaN or infinity. Each batch is checked just
        before the network reads it, while it is in the CPU caches, instead
        of in a separate pass over the whole (possibly memory-mapped) input.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_crocs.nn import ArrayDataset
    >>> dataset = ArrayDataset(np.zeros((4, 1, 2500), dtype=np.float32), [0, 1, 1, 2])
    >>> len(dataset)
    4
    >>> signal, target = dataset[1]
    >>> tuple(signal.shape), int(target)
    ((1, 2500), 1)
    >>> part = ArrayDataset(np.zeros((4, 2500)), [0, 1, 1, 2], indices=[3, 0],
    ...                     sample_shape=(1, 2500))
    >>> len(part), int(part[0][1])
    (2, 2)
    """

    def __init__(self, X, y=None, *, indices=None, sample_shape=None, check_finite=False):
        self.check_finite = check_finite
        # A float32 C-contiguous memory map is wrapped like an in-memory array:
        # torch reads its pages as batches gather rows, without a copy.
        wrappable = isinstance(X, np.memmap) and X.dtype == np.float32 and X.flags.c_contiguous
        self.lazy = is_lazy_array(X) and not wrappable
        n = X.shape[0] if hasattr(X, "shape") else len(X)
        self.sample_shape = tuple(X.shape[1:]) if sample_shape is None else tuple(sample_shape)
        if self.lazy:
            self.X = X
        else:
            with warnings.catch_warnings():
                # Read-only arrays (memory maps) are wrapped as they are: the net
                # only ever reads its inputs, so torch's warning does not apply.
                warnings.filterwarnings("ignore", message="The given NumPy array is not writable")
                self.X = torch.as_tensor(X)
            if sample_shape is not None:
                self.X = self.X.view(n, *self.sample_shape)
        self.y = None if y is None else torch.as_tensor(y, dtype=torch.long)
        if self.y is not None and len(self.y) != n:
            raise ValueError(f"X and y have different lengths: {n} and {len(self.y)}.")
        self.indices = None if indices is None else np.asarray(indices, dtype=np.int64)
        self._n_rows = n

    def __len__(self):
        return self._n_rows if self.indices is None else len(self.indices)

    def __getitem__(self, i):
        X, y = self.batch(np.array([i]))
        return X[0], (y[0] if y is not None else torch.tensor(0))

    def batch(self, positions):
        """Signals and targets (or None) at ``positions``: a slice or an int ndarray.

        The signals are checked for NaN and infinity when ``check_finite``.
        """
        rows = positions if self.indices is None else self.indices[positions]
        if isinstance(rows, slice):
            X = self.X[rows]
            if self.lazy:
                X = torch.from_numpy(self._as_samples(np.asarray(X)))
        elif not self.lazy:
            X = self.X.index_select(0, torch.from_numpy(rows))
        else:
            # Storage is read in increasing row order (h5py requires it; disks
            # prefer it); the batch keeps its drawn order.
            order = np.argsort(rows, kind="stable")
            X = np.empty((len(rows), *self.sample_shape), dtype=np.float32)
            X[order] = self._as_samples(_take(self.X, rows[order]))
            X = torch.from_numpy(X)
        if self.check_finite:
            _check_finite(X)
        if self.y is None:
            return X, None
        return X, self.y[rows if isinstance(rows, slice) else torch.from_numpy(rows)]

    def _as_samples(self, block):
        return np.ascontiguousarray(block, dtype=np.float32).reshape(-1, *self.sample_shape)


_END = object()


def _prefetch(batches, load):
    """Yield ``load(batch)`` for each of ``batches``, the next one prepared in a background thread.

    While the caller works on one batch, a worker thread draws the next from
    ``batches`` and calls ``load`` on it; an exception raised there is raised
    here, where that batch would have been yielded. One batch at most is
    prepared ahead.
    """
    iterator = iter(batches)

    def next_loaded():
        batch = next(iterator, _END)
        return batch if batch is _END else load(batch)

    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="crocs-batches") as pool:
        pending = pool.submit(next_loaded)
        while (batch := pending.result()) is not _END:
            pending = pool.submit(next_loaded)
            yield batch


def _to_cuda_loader(device):
    """``load`` for :func:`_prefetch`: pinned host copy, then an asynchronous copy to ``device``.

    The copies are queued on the stream current at the call (the caller's),
    so that the steps queued after them on that stream see the batch.
    """
    stream = torch.cuda.current_stream(device)

    def load(batch):
        with torch.cuda.stream(stream):
            return tuple(
                None if t is None else t.pin_memory().to(device, non_blocking=True) for t in batch
            )

    return load


class _BatchSampler:
    """The positions of each mini-batch of one pass over ``n`` samples.

    With ``shuffle=True`` each pass draws a new permutation from
    ``np.random.default_rng([seed, pass_index])``; ``pass_index`` counts up
    from its initial value with every pass (skorch builds the training
    iterator once per fit and iterates over it once per epoch). A trailing
    batch of a single sample is merged into the previous one during training,
    because batch normalisation cannot train on one sample; no sample is
    dropped. Batches are slices in order, or int64 arrays of the permutation;
    with ``lists=True``, lists, as a ``batch_sampler`` of
    :class:`torch.utils.data.DataLoader` that Accelerate can shard.
    """

    drop_last = False

    def __init__(self, n, batch_size, *, shuffle=False, seed=0, pass_index=0, lists=False):
        self.n = n
        self.batch_size = batch_size
        self.shuffle = shuffle
        self.seed = seed
        self.pass_index = pass_index
        self.lists = lists

    def _bounds(self):
        starts = list(range(0, self.n, self.batch_size))
        stops = starts[1:] + [self.n]
        if self.shuffle and len(starts) > 1 and stops[-1] - starts[-1] == 1:
            starts.pop()
            stops.pop(-2)
        return list(zip(starts, stops))

    def __len__(self):
        return len(self._bounds())

    def __iter__(self):
        order = np.arange(self.n) if self.lists else None
        if self.shuffle:
            rng = np.random.default_rng([self.seed, self.pass_index])
            self.pass_index += 1
            order = rng.permutation(self.n)
        for start, stop in self._bounds():
            if order is None:
                yield slice(start, stop)
            else:
                yield order[start:stop].tolist() if self.lists else order[start:stop]


class _Fetcher(Dataset):
    """An :class:`ArrayDataset` for a ``DataLoader``: one read per batch of positions."""

    def __init__(self, dataset):
        self.dataset = dataset

    def __len__(self):
        return len(self.dataset)

    def __getitems__(self, positions):
        return self.dataset.batch(np.asarray(positions, dtype=np.int64))


def _identity(batch):
    return batch


class _BatchIterator:
    """Iterate over an :class:`ArrayDataset` in the mini-batches of a :class:`_BatchSampler`.

    In order, batches are views of contiguous rows; shuffled, each is gathered
    with one ``index_select`` (or, for a lazy array, one read of its rows).

    With a CUDA ``device``, batches are yielded on that device: each is
    gathered, pinned and copied there in a background thread while the caller
    works on the one before (see :func:`_prefetch`). A training step ends
    with skorch reading its loss, which waits for the device; gathering the
    next batch only then and
    copying it from pageable memory would leave the GPU idle meanwhile.
    """

    def __init__(self, dataset, batch_size, *, shuffle=False, seed=0, pass_index=0, device=None):
        self.dataset = dataset
        self.batches = _BatchSampler(
            len(dataset), batch_size, shuffle=shuffle, seed=seed, pass_index=pass_index
        )
        self.device = device

    def __len__(self):
        return len(self.batches)

    def __iter__(self):
        device = torch.device(self.device or "cpu")
        if device.type == "cuda":
            return _prefetch(self._host_batches(), _to_cuda_loader(device))
        return self._host_batches()

    def _host_batches(self):
        for positions in self.batches:
            yield self.dataset.batch(positions)


def _check_finite(X):
    """Raise scikit-learn's ``ValueError`` if the tensor ``X`` holds NaN or infinity.

    The sum of finite values is finite unless it overflows, so one torch sum
    clears almost every batch, several times faster than
    :func:`sklearn.utils.assert_all_finite`; only when the sum is not finite
    does scikit-learn's check decide, with its own message.
    """
    if X.is_floating_point() and not torch.isfinite(X.sum()):
        assert_all_finite(X.numpy(force=True), input_name="X")


class KeepBestState(Callback):
    """Restore the encoder *and* the prototypes of the epoch with the best monitored score.

    skorch's ``EarlyStopping(load_best=True)`` restores only ``module_``; the
    prototypes live in ``criterion_`` and must be restored with it.

    Parameters
    ----------
    monitor : str, default="valid_loss"
        History key whose ``<monitor>_best`` flag (set by skorch's scoring
        callbacks) marks the best epoch.
    """

    def __init__(self, monitor="valid_loss"):
        self.monitor = monitor

    def initialize(self):
        self.best_state_ = None
        self.best_epoch_ = None
        return self

    def on_epoch_end(self, net, **kwargs):
        if net.history[-1].get(f"{self.monitor}_best"):
            self.best_epoch_ = net.history[-1, "epoch"]
            self.best_state_ = {
                "module": deepcopy(net.module_.state_dict()),
                "criterion": deepcopy(net.criterion_.state_dict()),
            }

    def on_train_end(self, net, **kwargs):
        if self.best_state_ is not None:
            if self.best_epoch_ != net.history[-1, "epoch"]:
                net.module_.load_state_dict(self.best_state_["module"])
                net.criterion_.load_state_dict(self.best_state_["criterion"])
            self.best_state_ = None  # do not carry a second copy into pickles


def early_stopping_callbacks(monitor, patience, sink):
    """Named skorch callbacks: stop when ``monitor`` has not improved by a relative
    1e-4 for ``patience`` epochs, and keep the weights of the best epoch."""
    stop = EarlyStopping(
        monitor=monitor, patience=patience, threshold=1e-4, threshold_mode="rel", sink=sink
    )
    return [("early_stopping", stop), ("keep_best", KeepBestState(monitor=monitor))]


class CROCSNet(NeuralNet):
    """skorch ``NeuralNet`` whose criterion is a :class:`~sklearn_crocs.nn.CROCSLoss`.

    Differences from :class:`skorch.NeuralNet`:

    - the two parts of the loss (``*_nce`` and ``*_reg``) are recorded in
      the history, so that they can be printed and plotted; they are read
      from the device once the step is done, with one synchronisation (not
      in the middle of the step, between forward and backward passes);
    - :meth:`get_iterator` slices batches from contiguous tensors of an
      :class:`ArrayDataset`, shuffled reproducibly from ``shuffle_seed``; on
      a CUDA ``device`` a background thread gathers the next batch, pins it
      and copies it to the device while the current step runs;
    - inference runs under :func:`torch.inference_mode`, with the modules
      set to evaluation mode once per call rather than before every batch;
    - modules already in the requested training or evaluation mode are left
      as they are (skorch sets the mode before every batch, and
      ``Module.train`` walks every submodule).

    Read more in the :ref:`User Guide <method>`.

    Parameters
    ----------
    *args, **kwargs
        Passed to :class:`skorch.NeuralNet`.
    shuffle_seed : int, default=0
        Seed of the per-epoch permutations and of ``augment``'s draws.
    augment : callable or None, default=None
        ``augment(X, generator)`` returns a perturbed copy of a training
        batch ``X`` (for example :class:`~sklearn_crocs.nn.RandomWindow`),
        drawing its random numbers from ``generator`` (a
        :class:`torch.Generator` seeded from ``shuffle_seed`` when training
        starts). Validation and inference batches are left as they are.
    predict_batch_size : int, "auto" or None, default=None
        Batch size for inference and validation. ``None`` means
        ``batch_size``; ``"auto"`` means, on CPU, as many samples (at most
        1024) as keep a batch's largest intermediate tensor within 8 MiB,
        read from the module's ``max_activation_size`` attribute (elements
        per sample; the package's encoders have one), and ``batch_size`` on
        other devices or for modules without the attribute. Tensors that stay in the CPU caches make
        inference faster (:ref:`performance`). Evaluation-mode outputs do
        not depend on the batch size, up to float rounding.

    Examples
    --------
    >>> import numpy as np
    >>> import torch
    >>> from sklearn_crocs.nn import CNNEncoder, CROCSLoss, CROCSNet
    >>> rng = np.random.RandomState(0)
    >>> X, y = rng.randn(32, 1, 500).astype(np.float32), rng.randint(0, 4, 32)
    >>> net = CROCSNet(module=CNNEncoder, module__in_channels=1, module__n_timepoints=500,
    ...                module__embedding_dim=8, criterion=CROCSLoss,
    ...                criterion__combinations=[[0, 0], [0, 1], [1, 0], [1, 1]],
    ...                criterion__embedding_dim=8, optimizer=torch.optim.Adam, max_epochs=2,
    ...                batch_size=16, train_split=None, verbose=0).fit(X, y)
    >>> sorted(net.history[-1, "batches", 0])
    ['train_batch_size', 'train_loss', 'train_nce', 'train_reg']
    >>> tuple(net.forward(X[:3]).shape)
    (3, 8)
    """

    def __init__(
        self,
        *args,
        shuffle_seed=0,
        augment=None,
        predict_batch_size=None,
        **kwargs,
    ):
        super().__init__(*args, **kwargs)
        self.shuffle_seed = shuffle_seed
        self.augment = augment
        self.predict_batch_size = predict_batch_size

    def _batch_device(self):
        """The device batches are sent to."""
        return self.device

    def get_iterator(self, dataset, training=False):
        if not isinstance(dataset, ArrayDataset):
            return super().get_iterator(dataset, training=training)
        if training:
            return _BatchIterator(
                dataset,
                self.batch_size,
                shuffle=True,
                seed=self.shuffle_seed,
                pass_index=len(self.history),
                device=self._batch_device(),
            )
        return _BatchIterator(dataset, self._inference_batch_size(), device=self._batch_device())

    def fit_loop(self, X, y=None, epochs=None, **fit_params):
        """skorch's fit loop, with a generator for ``augment`` seeded from ``shuffle_seed``."""
        # Lives as long as the loop: a generator cannot be pickled with the net.
        self._augment_generator = torch.Generator().manual_seed(self._augment_seed())
        try:
            return super().fit_loop(X, y, epochs, **fit_params)
        finally:
            del self._augment_generator

    def _augment_seed(self):
        return self.shuffle_seed

    def _inference_batch_size(self):
        """Resolve ``predict_batch_size`` (see the class description)."""
        if self.predict_batch_size != "auto":
            return self.predict_batch_size or self.batch_size
        return _auto_batch_size(self.module_, self.batch_size, self._batch_device() or "cpu")

    def get_loss(self, y_pred, y_true, X=None, training=False):
        y_true = y_true.to(y_pred.device)
        # Through forward: a DistributedDataParallel wrapper (Accelerate) syncs
        # the prototypes' gradients only then.
        nce, reg = self.criterion_(y_pred, y_true, return_parts=True)
        # Recorded when the step is done (_record_loss_parts): reading them
        # here would make the host wait for the device in mid-step.
        self._loss_parts = ("train" if training else "valid", nce.detach(), reg.detach())
        return nce + reg

    def _record_loss_parts(self):
        """Record the loss parts of the last :meth:`get_loss` in the history, in one device read."""
        parts, self._loss_parts = getattr(self, "_loss_parts", None), None
        if parts is not None:
            prefix, *values = parts
            nce, reg = torch.stack(values).tolist()
            self.history.record_batch(f"{prefix}_nce", nce)
            self.history.record_batch(f"{prefix}_reg", reg)

    def train_step(self, batch, **fit_params):
        if self.augment is not None:
            Xi, yi = batch
            batch = (self.augment(Xi, self._augment_generator), yi)
        step = super().train_step(batch, **fit_params)
        self._record_loss_parts()
        return step

    def validation_step(self, batch, **fit_params):
        step = super().validation_step(batch, **fit_params)
        self._record_loss_parts()
        return step

    def _set_training(self, training=True):
        for name in self._modules + self._criteria:
            module = getattr(self, name + "_")
            if isinstance(module, torch.nn.Module) and any(
                m.training != training for m in module.modules()
            ):
                module.train(training)

    def evaluation_step(self, batch, training=False):
        if training:
            return super().evaluation_step(batch, training=True)
        self.check_is_fitted()
        self._set_training(False)
        return self._infer_batch(batch)

    def _infer_batch(self, batch):
        """The module's output for a batch, under :func:`torch.inference_mode`."""
        with torch.inference_mode():
            return self.infer(batch[0])

    def forward_iter(self, X, training=False, device="cpu"):
        """Yield the module's outputs batch by batch (see :meth:`skorch.NeuralNet.forward_iter`).

        In inference (``training=False``) the net is checked and its modules
        set to evaluation mode once per call, not before every batch as
        :meth:`evaluation_step` does (3 % of a ``transform`` of 256-frame
        batches of the paper's CNN); each batch runs under
        :func:`torch.inference_mode`.
        """
        if training:
            yield from super().forward_iter(X, training=True, device=device)
            return
        self.check_is_fitted()
        iterator = self.get_iterator(self.get_dataset(X), training=False)
        self._set_training(False)
        for batch in iterator:
            yield to_device(self._infer_batch(batch), device=device)


class AcceleratedCROCSNet(AccelerateMixin, CROCSNet):
    """:class:`CROCSNet` trained through Hugging Face Accelerate (skorch's ``AccelerateMixin``).

    Training batches come from a :class:`torch.utils.data.DataLoader` over
    the same batch sampler as :class:`CROCSNet`'s, which Accelerate shards
    across processes: with ``n`` processes, each step trains on ``n``
    batches of ``batch_size``, and the encoder's and the prototypes'
    gradients are averaged over them. Each process draws its own
    augmentations (``augment``), and batch normalisation normalises each
    process's batch by its own statistics (``torch.nn.SyncBatchNorm``, for
    GPUs, would use the joint batch's). Validation and inference batches are
    not sharded: every process computes the whole validation loss (so that
    early stopping stops all of them at the same epoch) and whole
    embeddings, on ``accelerator.device``.

    Read more in the :ref:`User Guide <accelerate>`.

    Parameters
    ----------
    *args, **kwargs
        Passed to :class:`CROCSNet`. With ``dataset=ArrayDataset``,
        validation and inference batches go to ``accelerator.device``.
    accelerator : accelerate.Accelerator
        The accelerator that shards the training batches, wraps the module
        and the criterion and places them.
    device : str, torch.device or None, default=None
        ``None`` when the accelerator places the model (its default).
    unwrap_after_train : bool, default=True
        Unwrap the module and the criterion from the accelerator's wrappers
        when training ends.
    callbacks__print_log__sink : callable or "auto", default="auto"
        Where the epoch log goes; ``"auto"``: ``accelerator.print`` (the
        main process prints). A sink other than ``print`` prints whatever
        ``verbose`` says.

    Examples
    --------
    One process here; the same code runs in each process of ``torchrun`` or
    ``accelerate launch``.

    >>> import numpy as np
    >>> import torch
    >>> from accelerate import Accelerator
    >>> from sklearn_crocs.nn import AcceleratedCROCSNet, ArrayDataset, CNNEncoder, CROCSLoss
    >>> rng = np.random.RandomState(0)
    >>> X, y = rng.randn(32, 1, 500).astype(np.float32), rng.randint(0, 4, 32)
    >>> net = AcceleratedCROCSNet(
    ...     module=CNNEncoder, module__in_channels=1, module__n_timepoints=500,
    ...     module__embedding_dim=8, criterion=CROCSLoss,
    ...     criterion__combinations=[[0, 0], [0, 1], [1, 0], [1, 1]],
    ...     criterion__embedding_dim=8, optimizer=torch.optim.Adam, max_epochs=2,
    ...     batch_size=16, dataset=ArrayDataset, train_split=None, verbose=0,
    ...     callbacks__print_log__sink=print, accelerator=Accelerator(cpu=True)).fit(X, y)
    >>> tuple(net.forward(X[:3]).shape)
    (3, 8)
    """

    def _batch_device(self):
        return self.accelerator.device

    def _augment_seed(self):
        # Each process perturbs its own ECGs: the same draws in every process
        # would perturb the ECGs of one step alike.
        seeds = np.random.SeedSequence([self.shuffle_seed, self.accelerator.process_index])
        return int(seeds.generate_state(1)[0])

    def get_iterator(self, dataset, training=False):
        if not training:
            return CROCSNet.get_iterator(self, dataset, training=False)
        if not isinstance(dataset, ArrayDataset):
            return super().get_iterator(dataset, training=True)  # AccelerateMixin's
        batches = _BatchSampler(
            len(dataset),
            self.batch_size,
            shuffle=True,
            seed=self.shuffle_seed,
            pass_index=len(self.history),
            lists=True,
        )
        loader = DataLoader(_Fetcher(dataset), batch_sampler=batches, collate_fn=_identity)
        return self.accelerator.prepare(loader)

    def evaluation_step(self, batch, training=False):
        # Inference batches are not sharded (see get_iterator): nothing to gather.
        return CROCSNet.evaluation_step(self, batch, training=training)
