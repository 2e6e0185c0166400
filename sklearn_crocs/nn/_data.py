"""Training and inference data of :class:`~sklearn_crocs.nn.CROCSNet`: datasets and batches.

Training batches are sliced from one contiguous tensor (shuffled by a seeded
permutation each epoch) instead of going through a per-sample
``Dataset.__getitem__`` and a collate function. On a CUDA device, each batch
is gathered and copied to the device in a background thread while the step
before it runs.
"""

import warnings
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import scipy.sparse as sp
import torch
from sklearn.utils import assert_all_finite
from torch.utils.data import DataLoader, Dataset

__all__ = ["ArrayDataset", "BatchIterator", "is_lazy_array", "training_loader"]


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


def training_loader(dataset, batch_size, *, seed, pass_index):
    """A :class:`~torch.utils.data.DataLoader` of the shuffled training batches of ``dataset``.

    The batches of :class:`BatchIterator` with ``shuffle=True`` (the same
    permutations from ``seed`` and ``pass_index``), as lists of positions
    that Accelerate can shard across processes; each batch is read in one
    :meth:`ArrayDataset.batch` call.
    """
    batches = _BatchSampler(
        len(dataset), batch_size, shuffle=True, seed=seed, pass_index=pass_index, lists=True
    )
    return DataLoader(_Fetcher(dataset), batch_sampler=batches, collate_fn=_identity)


class BatchIterator:
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
