"""Training and embedding throughput: CROCSClusterer against plain PyTorch loops.

Cases, each measured in its own process on the same random data:

- *plain loop, reference layers*: what one writes from the paper — the
  paper's layers as plain torch modules (the encoder's ``reference_layers()``:
  an ``nn.Sequential`` for the CNN, the ResNet's ``Conv1d``/``BatchNorm1d``
  modules called in turn), the CROCS loss written out in a few lines,
  ``DataLoader(TensorDataset(X, y), batch_size, shuffle=True)`` and Adam;
- *plain loop, same model*: the package's encoder and ``CROCSLoss`` driven by a
  hand-written loop over contiguous batch slices (no estimator, no skorch),
  with the estimator's optimizer (fused Adam where torch supports it), to
  isolate what the estimator itself costs;
- with ``--compile``, *plain loop, torch.compile*: the same loop with the
  encoder's plain layers (``fast_path=False``) compiled by ``torch.compile``
  (the first, untimed call of each process compiles), the alternative to the
  encoders' hand-written fast path;
- ``CROCSClusterer.fit`` (no validation split) and ``transform``.

Embedding compares ``transform`` with the reference layers' forward pass in
``torch.no_grad`` over a DataLoader of batch 256, the training batch; where
``transform`` runs in other batches (up to 1024 frames, each batch's largest
activation within 8 MiB), the reference also runs in those, to show what
the batch size alone gives. Throughput is frames per second (median and
inter-quartile range over repeats), also given as GFLOP/s (the model's FLOPs per
frame, counted by ``torch.utils.flop_counter``) and as a share of a float32
matrix product's GFLOP/s measured in the same run, the machine's practical
peak; memory is the process's peak RSS. The cases
take turns (each in a fresh process, after an untimed warm-up: one timed
call of ``fit`` per round, three of an embedding pass, which is short
enough for a whole process to run at one speed: on shared virtual machines
some processes run at half speed throughout), so that a machine whose speed drifts during the run,
as shared virtual machines do, slows all cases alike; "vs reference" (and the
estimator overhead) is the median over rounds of the ratio within each round.

``--device cuda`` runs every case on the GPU (the data stays in host memory
and each batch is copied over, in the plain loops as in the estimator; the
clock stops after the device has finished); memory is then the peak of
torch's CUDA allocator, and the matrix-product peak the GPU's float32 one.

Run ``python benchmarks/bench_training.py`` (``--quick`` for a smoke run).
"""

import argparse
import functools
import itertools
import time

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from _utils import (
    fmt_rate,
    machine_summary,
    matmul_gflops,
    paired_ratio,
    peak_memory_mb,
    print_table,
    reference_cnn,
    repeat,
    reset_peak_memory,
    run_rounds,
    synchronize,
    write_csv,
)

COMBINATIONS = np.array(list(itertools.product(range(4), range(2), range(4))))  # M = 32

CONFIGS = {
    "cnn": {"leads": 1, "length": 2500, "embedding_dim": 128, "encoder": "cnn"},
    "resnet": {"leads": 12, "length": 2500, "embedding_dim": 256, "encoder": "resnet"},
}


def _data(n, leads, length, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, leads, length), dtype=np.float32)
    codes = rng.integers(0, len(COMBINATIONS), n)
    return X, COMBINATIONS[codes], codes


def reference_model(config):
    if config["encoder"] == "cnn":
        return reference_cnn(config["leads"], config["length"], config["embedding_dim"])
    from sklearn_crocs.nn import ResNet1dEncoder

    # The same layers called as plain 1-D torch modules (not the encoder's
    # faster channels-last 2-D forward).
    encoder = ResNet1dEncoder(config["leads"], config["length"], config["embedding_dim"])
    return encoder.reference_layers()


def inference_batch_size(config, batch_size=256, device="cpu"):
    """The batch size of ``CROCSClusterer.transform`` for ``config`` on ``device``."""
    from sklearn_crocs.nn import CNNEncoder, ResNet1dEncoder
    from sklearn_crocs.nn._net import _auto_batch_size

    encoder_class = CNNEncoder if config["encoder"] == "cnn" else ResNet1dEncoder
    encoder = encoder_class(config["leads"], config["length"], config["embedding_dim"])
    return _auto_batch_size(encoder, batch_size, device)


class PlainCROCSLoss(nn.Module):
    """NCE-soft + regulariser written plainly (weights table built once)."""

    def __init__(self, embedding_dim, tau_s=0.1, tau_w=1.0, beta=0.2):
        super().__init__()
        from sklearn_crocs.nn import attribute_weight_table

        self.prototypes = nn.Parameter(F.normalize(torch.randn(len(COMBINATIONS), embedding_dim)))
        self.register_buffer(
            "weights", torch.as_tensor(attribute_weight_table(COMBINATIONS, tau_w=tau_w)).float()
        )
        same = COMBINATIONS[:, None, 0] == COMBINATIONS[None, :, 0]
        j, k = np.nonzero(np.triu(same, 1))
        hamming = (COMBINATIONS[j] != COMBINATIONS[k]).sum(1)
        self.register_buffer("j", torch.as_tensor(j))
        self.register_buffer("k", torch.as_tensor(k))
        self.register_buffer("target", torch.as_tensor(beta * hamming).float())
        self.tau_s = tau_s

    def forward(self, v, codes):
        p = F.normalize(self.prototypes, dim=1)
        logits = F.normalize(v, dim=1) @ p.T / self.tau_s
        nce = -(self.weights[codes] * F.log_softmax(logits, dim=1)).sum(1).mean()
        reg = 2 * (((p[self.j] - p[self.k]).norm(dim=1) - self.target) ** 2).sum()
        return nce + reg


def train_plain(
    config, n, epochs, repeats, same_model, batch_size=256, device="cpu", compile=False
):
    """Frames/s of a hand-written training loop."""
    X, _, codes = _data(n, config["leads"], config["length"])
    torch.manual_seed(0)
    if same_model:
        from sklearn_crocs.nn import CNNEncoder, CROCSLoss, ResNet1dEncoder

        encoder_cls = CNNEncoder if config["encoder"] == "cnn" else ResNet1dEncoder
        model = encoder_cls(
            config["leads"], config["length"], config["embedding_dim"], fast_path=not compile
        )
        criterion = CROCSLoss(COMBINATIONS, config["embedding_dim"])
        X_t, y_t = torch.from_numpy(X), torch.from_numpy(codes)

        def batches():
            order = torch.randperm(n)
            for start in range(0, n, batch_size):
                idx = order[start : start + batch_size]
                yield X_t.index_select(0, idx).to(device), y_t[idx].to(device)
    else:
        model = reference_model(config)
        criterion = PlainCROCSLoss(config["embedding_dim"])
        loader = DataLoader(
            TensorDataset(torch.from_numpy(X), torch.from_numpy(codes)),
            batch_size=batch_size,
            shuffle=True,
        )

        def batches():
            for xb, yb in loader:
                yield xb.to(device), yb.to(device)

    model.to(device)
    criterion.to(device)
    # Plain Adam, as the estimator (its fused variant was dropped: it moved no fit by 10 %).
    optimizer = torch.optim.Adam([*model.parameters(), *criterion.parameters()], lr=1e-4)
    model.train()
    if compile:
        model = torch.compile(model)

    def steps():
        for _ in range(epochs):
            for xb, yb in batches():
                optimizer.zero_grad()
                loss = criterion(model(xb), yb)
                loss.backward()
                optimizer.step()

    def run():
        steps()
        synchronize(device)

    reset_peak_memory(device)
    times = repeat(run, repeats)
    return {
        "times": {"rate": times.tolist()},
        "work": {"rate": epochs * n},
        "peak_mb": peak_memory_mb(device),
    }


def train_estimator(config, n, epochs, repeats, batch_size=256, device="cpu"):
    """Frames/s of CROCSClusterer.fit (whole fit, and its training epochs alone)."""
    from sklearn_crocs import CROCSClusterer

    X, y, _ = _data(n, config["leads"], config["length"])
    model = CROCSClusterer(
        encoder=config["encoder"],
        embedding_dim=config["embedding_dim"],
        max_epochs=epochs,
        batch_size=batch_size,
        validation_fraction=None,
        device=device,
        random_state=0,
    )
    epoch_times = []

    def run():
        model.fit(X, y)
        epoch_times.extend(model.net_.history[:, "dur"])

    reset_peak_memory(device)
    times = repeat(run, repeats)  # fit ends with the embeddings in host memory
    epoch_times = epoch_times[epochs:]  # drop the warm-up fit
    return {
        "times": {"rate": times.tolist(), "epoch_rate": list(epoch_times)},
        "work": {"rate": epochs * n, "epoch_rate": n},
        "peak_mb": peak_memory_mb(device),
    }


def embed(config, n, repeats, estimator, batch_size=256, device="cpu"):
    """Frames/s of the reference forward pass or of CROCSClusterer.transform."""
    X, y, codes = _data(n, config["leads"], config["length"])
    if estimator:
        from sklearn_crocs import CROCSClusterer

        small = slice(0, 512)
        model = CROCSClusterer(
            encoder=config["encoder"],
            embedding_dim=config["embedding_dim"],
            max_epochs=1,
            validation_fraction=None,
            device=device,
            random_state=0,
        ).fit(X[small], y[small])

        def run():
            model.transform(X)
    else:
        torch.manual_seed(0)
        model = reference_model(config).eval().to(device)
        loader = DataLoader(TensorDataset(torch.from_numpy(X)), batch_size=batch_size)

        def run():  # the embeddings in host memory, as transform returns them
            with torch.no_grad():
                for (xb,) in loader:
                    F.normalize(model(xb.to(device)), dim=1).cpu()

    reset_peak_memory(device)
    times = repeat(run, repeats)
    return {
        "times": {"rate": times.tolist()},
        "work": {"rate": n},
        "peak_mb": peak_memory_mb(device),
    }


def flops_per_frame(config, training):
    """FLOPs of one frame through the model (convolutions and matrix products).

    Counted by ``torch.utils.flop_counter`` on the reference layers: the
    forward pass, or a training step's forward and backward passes with the
    loss (no gradient for the input signal).
    """
    from torch.utils.flop_counter import FlopCounterMode

    batch = 8
    torch.manual_seed(0)
    model = reference_model(config).train(training)
    x = torch.randn(batch, config["leads"], config["length"])
    with FlopCounterMode(display=False) as counter:
        if training:
            criterion = PlainCROCSLoss(config["embedding_dim"])
            criterion(model(x), torch.randint(0, len(COMBINATIONS), (batch,))).backward()
        else:
            with torch.no_grad():
                model(x)
    return counter.get_total_flops() / batch


def _row(label, result, baseline, key="rate", flops=None, peak=None):
    ratio = paired_ratio(result[key], baseline["rate"])
    memory = f"{result['peak_mb']:.0f}" if key == "rate" else ""
    gflops = result[key]["median"] * flops / 1e9
    share = 100 * gflops / peak
    return [
        label,
        fmt_rate(result[key]),
        f"{ratio:.2f}x",
        f"{gflops:,.1f} ({share:.0f} %)" if share >= 1 else f"{gflops:,.1f} ({share:.2f} %)",
        memory,
    ]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, one repeat")
    parser.add_argument("--only", choices=sorted(CONFIGS), help="run one encoder only")
    parser.add_argument("--device", default="cpu", help='torch device, e.g. "cuda" (default: cpu)')
    parser.add_argument(
        "--compile", action="store_true", help="also time torch.compile'd plain layers"
    )
    parser.add_argument("--csv", help="also append every table to this CSV file")
    args = parser.parse_args(argv)
    write_csv(args.csv)
    device = args.device
    gpu = torch.device(device).type == "cuda"
    print(f"Machine: {machine_summary(device)}")
    sizes = {
        "cnn": {"n": 2048 if args.quick else 10240, "epochs": 1 if args.quick else 4, "rounds": 7},
        # The ResNet runs at tens of frames/s on 2 cores: fewer frames, more
        # epochs, so that the one embedding pass that ends every fit (for the
        # mean prototypes and labels_) weighs as in a real fit of many epochs.
        "resnet": {"n": 128 if args.quick else 256, "epochs": 1 if args.quick else 8, "rounds": 3},
    }
    if gpu and not args.quick:  # a GPU does in a second what takes minutes on 2 cores
        sizes = {
            "cnn": {"n": 20480, "epochs": 4, "rounds": 3},
            "resnet": {"n": 2560, "epochs": 4, "rounds": 3},
        }
    for name, config in CONFIGS.items():
        if args.only and name != args.only:
            continue
        n, epochs = sizes[name]["n"], sizes[name]["epochs"]
        repeats = 1 if args.quick else sizes[name]["rounds"]
        start = time.perf_counter()
        peak = matmul_gflops(4096 if gpu else 2048, device=device)
        train_flops, forward_flops = flops_per_frame(config, True), flops_per_frame(config, False)
        common = {"config": config, "n": n, "device": device}
        cases = [
            ("train_plain", dict(common, epochs=epochs, same_model=False)),
            ("train_plain", dict(common, epochs=epochs, same_model=True)),
            ("train_estimator", dict(common, epochs=epochs)),
        ]
        if args.compile:
            compiled = dict(common, epochs=epochs, same_model=True, compile=True)
            cases.append(("train_plain", compiled))
        ref, same, est, *compiled = run_rounds("bench_training", cases, repeats)
        header = [
            "case",
            "frames/s median [IQR]",
            "vs reference",
            "GFLOP/s (% of matmul)",
            "peak GPU MB" if gpu else "peak RSS MB",
        ]
        train_row = functools.partial(_row, flops=train_flops, peak=peak)
        print_table(
            f"Training, {name}: {config['leads']} lead(s) x {config['length']} samples, "
            f"batch 256, {n} frames x {epochs} epoch(s), {repeats} round(s)",
            header,
            [
                train_row("plain loop, reference layers + DataLoader", ref, ref),
                train_row("plain loop, same model, sliced batches", same, ref),
                train_row("CROCSClusterer.fit (whole fit)", est, ref),
                train_row("CROCSClusterer.fit (training epochs)", est, ref, key="epoch_rate"),
                *(train_row("plain loop, torch.compile'd plain layers", c, ref) for c in compiled),
            ],
        )
        print(
            "Estimator overhead: fit / same-model plain loop = "
            f"{paired_ratio(est['rate'], same['rate']):.2f} (whole fit), "
            f"{paired_ratio(est['epoch_rate'], same['rate']):.2f} (training epochs)"
        )
        # transform's batch size (at most 256; fewer where the largest activation
        # would leave the CPU caches): the reference also runs at that size, to
        # show how much of the gain the batch size alone gives.
        batch = inference_batch_size(config, device=device)
        cases = [("embed", dict(common, estimator=False)), ("embed", dict(common, estimator=True))]
        if batch != 256:
            cases.append(("embed", dict(common, estimator=False, batch_size=batch)))
        ref_fwd, est_fwd, *ref_same_batch = run_rounds(
            "bench_training", cases, repeats, repeats=1 if args.quick else 3
        )
        forward = {"flops": forward_flops, "peak": peak}
        rows = [
            _row("reference layers, no_grad + DataLoader", ref_fwd, ref_fwd, **forward),
            *(
                _row(f"the same in batches of {batch}", r, ref_fwd, **forward)
                for r in ref_same_batch
            ),
            _row(f"CROCSClusterer.transform (batches of {batch})", est_fwd, ref_fwd, **forward),
        ]
        print_table(f"Embedding, {name}: {n} frames, batch 256", header, rows)
        print(
            f"Work per frame (torch.utils.flop_counter): {train_flops / 1e6:,.2f} MFLOP per "
            f"training step, {forward_flops / 1e6:,.2f} MFLOP forward; float32 matmul "
            f"on this {'GPU' if gpu else 'machine'} now: {peak:,.0f} GFLOP/s"
        )
        print(f"({time.perf_counter() - start:.0f} s)")


if __name__ == "__main__":
    main()
