"""The skorch net behind :class:`~sklearn_crocs.CROCSClusterer`.

Its data (datasets, batches) are in ``_data.py`` and its callbacks in
``_callbacks.py``. Inference runs under :func:`torch.inference_mode`, in
batches sized by the module's largest activation on CPU.
"""

import numpy as np
import torch
from skorch import NeuralNet
from skorch.dataset import unpack_data
from skorch.hf import AccelerateMixin
from skorch.utils import to_device

from .._display import DocLinkMixin
from ._data import ArrayDataset, BatchIterator, training_loader

__all__ = ["AcceleratedCROCSNet", "CROCSNet"]

# Inference batches are sized so that their largest intermediate tensor stays
# within this many bytes (with predict_batch_size="auto", on CPU): with 16 MiB,
# glibc returned the buffers to the kernel and mapped them again between
# batches in some processes (the Performance page has the figures).
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


class CROCSNet(DocLinkMixin, NeuralNet):
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
    - its training, validation and inference steps set ``module_`` and
      ``criterion_`` to training or evaluation mode only where they are not
      in it already (skorch sets the mode before every batch, and
      ``Module.train`` walks every submodule); modules that a subclass
      registers besides these two are the subclass's to set.

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
            return BatchIterator(
                dataset,
                self.batch_size,
                shuffle=True,
                seed=self.shuffle_seed,
                pass_index=len(self.history),
                device=self._batch_device(),
            )
        return BatchIterator(dataset, self.inference_batch_size(), device=self._batch_device())

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

    def inference_batch_size(self):
        """The number of ECGs per batch in inference: ``predict_batch_size`` resolved.

        Returns
        -------
        batch_size : int
            ``predict_batch_size``; ``batch_size`` when it is ``None``; with
            ``"auto"``, on CPU the size described above, else ``batch_size``.
        """
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

    def train_step_single(self, batch, **fit_params):
        """skorch's single training step, with the modes set only where they differ."""
        self._set_modes(True)
        Xi, yi = unpack_data(batch)
        y_pred = self.infer(Xi, **fit_params)
        loss = self.get_loss(y_pred, yi, X=Xi, training=True)
        loss.backward()
        return {"loss": loss, "y_pred": y_pred}

    def validation_step(self, batch, **fit_params):
        """skorch's validation step, with the modes set only where they differ."""
        self._set_modes(False)
        Xi, yi = unpack_data(batch)
        with torch.no_grad():
            y_pred = self.infer(Xi, **fit_params)
            loss = self.get_loss(y_pred, yi, X=Xi, training=False)
        self._record_loss_parts()
        return {"loss": loss, "y_pred": y_pred}

    def _set_modes(self, training):
        """Set ``module_`` and ``criterion_`` to training or evaluation mode, where they are not.

        Called before every batch (as skorch does); a module whose
        submodules are all in that mode already is left as it is.
        """
        for module in (self.module_, self.criterion_):
            if isinstance(module, torch.nn.Module) and any(
                m.training != training for m in module.modules()
            ):
                module.train(training)

    def evaluation_step(self, batch, training=False):
        if training:
            return super().evaluation_step(batch, training=True)
        self.check_is_fitted()
        self._set_modes(False)
        return self._infer_batch(batch)

    def _infer_batch(self, batch):
        """The module's output for a batch, under :func:`torch.inference_mode`."""
        with torch.inference_mode():
            return self.infer(batch[0])

    def forward_iter(self, X, training=False, device="cpu"):
        """Yield the module's outputs batch by batch (see :meth:`skorch.NeuralNet.forward_iter`).

        In inference (``training=False``) the net is checked and its modules
        set to evaluation mode once per call, not before every batch as
        :meth:`evaluation_step` does; each batch runs under
        :func:`torch.inference_mode`.
        """
        if training:
            yield from super().forward_iter(X, training=True, device=device)
            return
        self.check_is_fitted()
        iterator = self.get_iterator(self.get_dataset(X), training=False)
        self._set_modes(False)
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
        loader = training_loader(
            dataset, self.batch_size, seed=self.shuffle_seed, pass_index=len(self.history)
        )
        return self.accelerator.prepare(loader)

    def evaluation_step(self, batch, training=False):
        # Inference batches are not sharded (see get_iterator): nothing to gather.
        return CROCSNet.evaluation_step(self, batch, training=training)
