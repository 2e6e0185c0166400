"""The default job end to end: the engine against plain PyTorch, and each fast-path kernel.

The job: ``CROCSClusterer()`` with its defaults (ResNet encoder, batch 128,
augmentation ``RandomWindow(crop=0.8, amplitude_jitter=0.1)``) fitted for
``EPOCHS`` epochs (the default is 40) on the 602 training frames (12 x 500)
of ``load_ptbxl_sample_frames()``, then ``transform`` of its 398 test frames
(median of ``REPEATS`` calls). Each case runs in a fresh process after an
untimed warm-up (one epoch and one embedding pass: oneDNN builds its kernels
for every batch shape); the cases take turns round after round, and ratios
are medians (min-max) over rounds of the ratio to ``default`` in the round.

- ``plain PyTorch``: the loop one writes by hand: ``ResNet1dEncoder(...,
  fast_path=False)`` (plain 1-D torch modules), the package's ``CROCSLoss``
  with the estimator's parameters, ``torch.optim.Adam``,
  ``DataLoader(TensorDataset(X, target), 128, shuffle=True)``, the crop and
  jitter written plainly, then one embedding pass over the training frames
  (``fit`` embeds them for ``labels_``); ``transform``: ``torch.no_grad()``
  and ``encoder.eval()`` over batches of 128, L2-normalised;
- ``fast path off``: ``encoder_params={"fast_path": False}``;
- one kernel of the default path off, in the child process only, by
  rebinding the name the library calls (:func:`_switch_off`; no switch in
  the library; a name that is gone raises, and
  ``tests/test_bench_engine.py`` checks that each switch takes effect):
  ``channels-last off``: ``_fastpath``'s ``torch.channels_last`` reads as
  ``torch.contiguous_format`` (the same 2-D steps in the default layout);
  ``batch slicing off``: ``BatchIterator`` is a ``DataLoader``
  over the dataset's samples; ``auto inference batch off``:
  ``_auto_batch_size`` returns the training batch size.

The ``default`` child checks, untimed, that the plain loop does the same job
(:func:`_check_same_job`: augmentation, targets, loss, embeddings to 1e-4);
the plain child, that its loss decreased. Run ``python
benchmarks/bench_engine.py`` (``--quick``: 256 frames, 2 epochs, one round).
"""

import argparse
import datetime
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

from _utils import load_average, machine_summary, print_table, repeat, run_isolated, write_csv

EPOCHS, REPEATS = 3, 7
CROP, JITTER = 0.8, 0.1  # the estimator's default augmentation (checked: _check_same_job)
CASES = ["default", "plain PyTorch", "fast path off", "channels-last off", "batch slicing off",
         "auto inference batch off"]  # fmt: skip


def _rebind(name, value, set_attr):
    """Bind ``name`` to ``value`` in every loaded sklearn_crocs module that has it."""
    modules = [m for n, m in list(sys.modules.items()) if n.startswith("sklearn_crocs.")]
    found = [m for m in modules if name in vars(m)]
    if not found:
        raise RuntimeError(f"no sklearn_crocs module has {name!r}: update bench_engine.py")
    for module in found:
        set_attr(module, name, value)


class _DefaultLayoutTorch:
    """``torch``, with ``channels_last`` meaning the default layout."""

    channels_last = torch.contiguous_format

    def __getattr__(self, name):
        return getattr(torch, name)


def _switch_off(case, set_attr=setattr):
    """Switch off the kernel of ``case`` (see the module description), if it names one."""
    from sklearn_crocs import CROCSClusterer  # noqa: F401 (loads the modules to rebind in)
    from sklearn_crocs.nn import _fastpath

    if case == "channels-last off":
        set_attr(_fastpath, "torch", _DefaultLayoutTorch())
    elif case == "batch slicing off":
        _rebind("BatchIterator", lambda dataset, batch_size, *, shuffle=False, **_: DataLoader(
            dataset, batch_size, shuffle=shuffle), set_attr)  # fmt: skip
    elif case == "auto inference batch off":
        _rebind("_auto_batch_size", lambda module, batch_size, device="cpu": batch_size, set_attr)


def _data(quick):
    from sklearn_crocs.datasets import load_ptbxl_sample_frames

    data = load_ptbxl_sample_frames()
    n = 256 if quick else len(data.X_train)
    return data.X_train[:n], data.y_train.iloc[:n], data.X_test


def _target_and_loss(y, embedding_dim):
    """Combination number of each ECG (last attribute fastest) and the estimator's CROCSLoss."""
    from sklearn_crocs import CROCSClusterer
    from sklearn_crocs.nn import CROCSLoss

    columns = [pd.Categorical(y[c]).remove_unused_categories() for c in y]
    shape = [len(c.categories) for c in columns]
    target = np.ravel_multi_index([c.codes for c in columns], shape)
    params = CROCSClusterer().get_params()
    criterion = CROCSLoss(
        np.indices(shape).reshape(len(shape), -1).T,
        embedding_dim,
        ordinal=[c.ordered for c in columns],
        **{k: params[k] for k in ("tau_s", "tau_w", "beta", "loss", "reg_reduction")},
    )
    return torch.from_numpy(target), criterion


def plain_augment(xb):
    """A random window of ``CROP`` of each ECG, times a factor drawn from N(1, JITTER**2)."""
    n, _, length = xb.shape
    window = round(CROP * length)
    starts = torch.randint(length - window + 1, (n,)).tolist()
    xb = torch.stack([x[:, s : s + window] for x, s in zip(xb, starts)])
    return xb * (1 + JITTER * torch.randn(n, 1, 1))


def plain_embed(encoder, X, batch_size):
    encoder.eval()
    with torch.no_grad():
        batches = torch.from_numpy(X).split(batch_size)
        return torch.cat([F.normalize(encoder(xb), dim=1) for xb in batches]).numpy()


def plain_fit(X, y, epochs):
    """Train the default ResNet by hand; return it, ``labels_`` and each epoch's mean loss."""
    from sklearn_crocs import CROCSClusterer
    from sklearn_crocs.nn import ResNet1dEncoder

    params = CROCSClusterer().get_params()
    torch.manual_seed(0)
    encoder = ResNet1dEncoder(X.shape[1], X.shape[2], params["embedding_dim"], fast_path=False)
    target, criterion = _target_and_loss(y, params["embedding_dim"])
    parameters = [*encoder.parameters(), *criterion.parameters()]
    optimizer = torch.optim.Adam(parameters, lr=params["lr"])
    loader = DataLoader(
        TensorDataset(torch.from_numpy(X), target), params["batch_size"], shuffle=True
    )
    losses = []
    for _ in range(epochs):
        encoder.train()
        total = 0.0
        for xb, yb in loader:
            loss = criterion(encoder(plain_augment(xb)), yb)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            total += loss.item() * len(xb)
        losses.append(total / len(X))
    prototypes = F.normalize(criterion.prototypes.detach(), dim=1).numpy()
    labels = (plain_embed(encoder, X, params["batch_size"]) @ prototypes.T).argmax(1)
    return encoder, labels, losses


def _check_same_job(model, X, y, X_test):
    """Assert that the plain loop trains and embeds as the fitted estimator ``model`` does."""
    torch.manual_seed(0)  # the estimator's augmentation draws the same numbers in turn
    ours = plain_augment(torch.from_numpy(X[:128]))
    theirs = model.net_.augment(torch.from_numpy(X[:128]), torch.Generator().manual_seed(0))
    assert ours.shape == theirs.shape, model.net_.augment
    assert torch.allclose(ours, theirs), model.net_.augment
    target, criterion = _target_and_loss(y, model.embedding_dim)
    assert (model.get_prototypes()[1][target.numpy()] == y.to_numpy()).all()
    module, fitted = model.net_.module_, model.net_.criterion_
    with torch.no_grad():
        criterion.prototypes.copy_(fitted.prototypes)
        embeddings = module.eval()(torch.from_numpy(X[:128]))
        ours, theirs = criterion(embeddings, target[:128]), fitted(embeddings, target[:128])
    assert torch.allclose(ours, theirs, atol=1e-5), (ours, theirs)
    plain = type(module)(*X.shape[1:], model.embedding_dim, fast_path=False)
    plain.load_state_dict(module.state_dict())
    gap = np.abs(plain_embed(plain, X_test, model.batch_size) - model.transform(X_test)).max()
    assert gap < 1e-4, gap


def child(case, quick):
    """Time one case: ``fit`` (seconds), ``transform`` (median seconds), epoch losses."""
    from sklearn_crocs import CROCSClusterer

    X, y, X_test = _data(quick)
    epochs, repeats = (2, 1) if quick else (EPOCHS, REPEATS)
    if case == "plain PyTorch":
        plain_fit(X, y, 1)  # warm-up
        start = time.perf_counter()
        encoder, _, losses = plain_fit(X, y, epochs)
        fit = time.perf_counter() - start
        assert losses[-1] < losses[0], losses
        batch_size = CROCSClusterer().batch_size
        times = repeat(lambda: plain_embed(encoder, X_test, batch_size), repeats)
    else:
        _switch_off(case)
        params = {"encoder_params": {"fast_path": False}} if case == "fast path off" else {}
        CROCSClusterer(max_epochs=1, random_state=0, **params).fit(X, y).transform(X_test)
        start = time.perf_counter()
        model = CROCSClusterer(max_epochs=epochs, random_state=0, **params).fit(X, y)
        fit = time.perf_counter() - start
        times = repeat(lambda: model.transform(X_test), repeats)
        losses = list(model.net_.history[:, "train_loss"])
        if case == "default":
            _check_same_job(model, X, y, X_test)
    return {"fit": fit, "transform": float(np.median(times)), "loss": [losses[0], losses[-1]],
            "frames": [len(X), len(X_test)], "epochs": epochs, "repeats": repeats}  # fmt: skip


def _ratio(runs, base, key):
    ratios = [r[key] / b[key] for r, b in zip(runs, base)]
    return f"{np.median(ratios):.2f} [{min(ratios):.2f}-{max(ratios):.2f}]"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="256 frames, 2 epochs, one round")
    parser.add_argument("--csv", help="CSV file the table is appended to (default: under "
                        "benchmarks/results/, none with --quick)")  # fmt: skip
    args = parser.parse_args(argv)
    default_csv = Path(__file__).parent / "results" / f"engine-cpu-{datetime.date.today()}.csv"
    write_csv(args.csv or (None if args.quick else default_csv))
    print(f"Machine: {machine_summary()}; {load_average()}")
    rounds = 1 if args.quick else args.rounds
    results = {case: [] for case in CASES}
    start = time.perf_counter()
    for _ in range(rounds):
        for case in CASES:
            results[case].append(run_isolated("bench_engine", "child", case=case, quick=args.quick))
    base = results["default"]
    rows = []
    for case, runs in results.items():
        first, last = np.median([r["loss"] for r in runs], axis=0)
        rows.append([
            case,
            f"{np.median([r['fit'] for r in runs]):.2f}",
            _ratio(runs, base, "fit"),
            f"{1e3 * np.median([r['transform'] for r in runs]):.0f}",
            _ratio(runs, base, "transform"),
            f"{first:.3f} -> {last:.3f}",
        ])  # fmt: skip
    (n, n_test), epochs, repeats = base[0]["frames"], base[0]["epochs"], base[0]["repeats"]
    print_table(
        f"Default job, PTB-XL sample: fit on {n} frames of 12 x 500 ({epochs} epochs, "
        f"batch 128), transform of {n_test} (median of {repeats}); {rounds} round(s); "
        "ratios: median [min-max] over rounds of the ratio to default in the round",
        ["case", "fit s", "fit / default", "transform ms", "transform / default",
         "train loss, epoch 1 -> last"],
        rows,
    )  # fmt: skip
    print(f"{load_average()}; {time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()
