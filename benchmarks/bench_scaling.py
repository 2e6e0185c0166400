"""How the work grows with N: embedding, fitting and the end-to-end main job.

- *Embedding*: ``CROCSClusterer.transform`` of N single-lead 2500-sample
  frames held in a ``.npy`` memory map, against a plain loop that copies
  contiguous 256-frame slices of the same memmap into the reference layers
  (no DataLoader: the stronger baseline; ``bench_training.py`` compares with
  the usual DataLoader loop). Extra memory is the peak anonymous (non-file)
  resident memory during the first call above the level before it: beyond the
  (N, 128) result it must not grow with N (the memmap's pages are file-backed
  and reclaimable).
- *Fit*: ``CROCSClusterer.fit`` of the paper's CNN (1 epoch, validated on
  10 % of the patients) on N single-lead 2500-sample frames in a ``.npy``
  memory map on disk (10 GB at N = 10^6), read batch by batch, against the
  same fit on the array loaded into memory (``np.load`` without
  ``mmap_mode``, timed and counted with it; not run above 10^5, where it
  needs as much memory as the file). Extra memory is the peak anonymous
  resident memory during the call above the level before it; time per ECG
  must stay flat with N.
- *End to end*: the main job's pipeline (the LUDB records resampled, leads as
  instances, fit for a fixed number of epochs, CP/TP clustering and retrieval
  tables) on the LUDB training patients replicated r times, against the same
  steps with the reference plain loop doing the training.

Each row is one size; the last column compares each size with the previous
one. The embedding cases of all sizes take turns (one timed call each per
round, each in a fresh process), and speed-ups and growth are medians over
rounds of the ratios within a round, so that a drift in machine speed does
not show up as growth with N. Run ``python benchmarks/bench_scaling.py``
(``--quick`` for small sizes).
"""

import argparse
import os
import tempfile
import threading
import time

import numpy as np
import torch

from _utils import (
    fmt_ms,
    machine_summary,
    paired_ratio,
    print_table,
    repeat,
    run_isolated,
    run_rounds,
    summary,
)


def _anon_mb():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("RssAnon:"):
                return int(line.split()[1]) / 1024
    raise RuntimeError("RssAnon not found")


class _PeakAnon:
    """Sample the anonymous resident memory every millisecond in a thread."""

    def __enter__(self):
        self.base, self.peak, self._stop = _anon_mb(), 0.0, threading.Event()

        def sample():
            while not self._stop.is_set():
                self.peak = max(self.peak, _anon_mb())
                time.sleep(0.001)

        self._thread = threading.Thread(target=sample, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
        self.extra = max(0.0, self.peak - self.base)


def _frames_file(n, seed=0):
    """A .npy file of n random single-lead 2500-sample float32 frames, written out to disk."""
    rng = np.random.default_rng(seed)
    path = os.path.join(tempfile.mkdtemp(), "frames.npy")
    frames = np.lib.format.open_memmap(path, mode="w+", dtype=np.float32, shape=(n, 1, 2500))
    for start in range(0, n, 4096):
        stop = min(n, start + 4096)
        frames[start:stop] = rng.standard_normal((stop - start, 1, 2500), dtype=np.float32)
    frames.flush()
    del frames
    with open(path, "rb+") as f:
        os.fsync(f.fileno())
    return path


def embed(n, repeats, estimator):
    from bench_training import CONFIGS, reference_model

    # The file is written out first, so that the kernel's writeback does not
    # run during the timed reads; the untimed calls below load the page cache.
    path = _frames_file(n)
    rng = np.random.default_rng(0)
    database = np.load(path, mmap_mode="r")
    if estimator:
        from sklearn_crocs import CROCSClusterer

        y = np.column_stack([rng.integers(0, 4, 512), rng.integers(0, 2, 512)])
        model = CROCSClusterer(max_epochs=1, validation_fraction=None, random_state=0)
        model.fit(np.asarray(database[:512]), y)

        def run():
            return model.transform(database)
    else:
        torch.manual_seed(0)
        model = reference_model(CONFIGS["cnn"]).eval()

        def run():
            with torch.no_grad():
                return torch.cat(
                    [
                        model(torch.from_numpy(np.array(database[i : i + 256])))
                        for i in range(0, n, 256)
                    ]
                )

    # Memory on the first call, before the allocator holds freed blocks that
    # later calls would reuse; the (n, 128) float32 result is counted.
    with _PeakAnon() as memory:
        run()
    times = repeat(run, repeats)
    os.remove(path)
    return {"times": {"frames": times.tolist()}, "work": {"frames": n}, "peak_mb": memory.extra}


def fit(n, in_memory):
    from sklearn_crocs import CROCSClusterer

    path = _frames_file(n)
    rng = np.random.default_rng(1)
    y = np.column_stack([rng.integers(0, 4, n), rng.integers(0, 2, n)])
    groups = np.arange(n) // 4  # 4 ECGs per patient
    model = CROCSClusterer(encoder="cnn", max_epochs=1, validation_fraction=0.1, random_state=0)
    try:
        with _PeakAnon() as memory:
            start = time.perf_counter()
            X = np.load(path) if in_memory else np.load(path, mmap_mode="r")
            model.fit(X, y, groups=groups)
            seconds = time.perf_counter() - start
    finally:
        os.remove(path)
    return {"seconds": seconds, "peak_mb": memory.extra}


def end_to_end(replicas, epochs, plain):
    from sklearn_crocs import CROCSClusterer
    from sklearn_crocs.datasets import load_ludb_instances
    from sklearn_crocs.metrics import evaluate_prototypes

    start = time.perf_counter()
    data = load_ludb_instances(random_state=0)
    X = np.concatenate([data.X_train] * replicas)
    y = data.y_train.loc[np.tile(np.arange(len(data.y_train)), replicas)].reset_index(drop=True)
    groups = np.concatenate([data.groups_train + 1000 * r for r in range(replicas)])
    X_test, y_test = data.X_test, data.y_test
    if plain:
        from bench_training import PlainCROCSLoss, reference_cnn

        codes = torch.as_tensor(np.zeros(len(X), dtype=np.int64))  # same cost as real codes
        model = reference_cnn(1, 2500, 128)
        criterion = PlainCROCSLoss(128)
        optimizer = torch.optim.Adam([*model.parameters(), *criterion.parameters()], lr=1e-3)
        loader = torch.utils.data.DataLoader(
            torch.utils.data.TensorDataset(torch.from_numpy(X), codes), batch_size=256, shuffle=True
        )
        for _ in range(epochs):
            for xb, yb in loader:
                optimizer.zero_grad()
                criterion(model(xb), yb).backward()
                optimizer.step()
        with torch.no_grad():
            model.eval()(torch.from_numpy(X_test))
    else:
        model = CROCSClusterer(lr=1e-3, max_epochs=epochs, validation_fraction=None, random_state=0)
        model.fit(X, y, groups=groups)
        evaluate_prototypes(model, X_test, y_test)
    return {"seconds": time.perf_counter() - start, "n": len(X)}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument(
        "--only", choices=["embed", "fit", "end_to_end"], help="run one of the three parts"
    )
    args = parser.parse_args(argv)
    print(f"Machine: {machine_summary()}")
    if args.only in (None, "fit"):
        fit_table(args.quick)
    if args.only in (None, "embed"):
        embed_table(args.quick)
    if args.only in (None, "end_to_end"):
        end_to_end_table(args.quick)


def fit_table(quick):
    sizes = [2_000, 20_000] if quick else [10_000, 100_000, 1_000_000]
    rows, previous = [], None
    for n in sizes:
        lazy = run_isolated("bench_scaling", "fit", n=n, in_memory=False)
        loaded = None if n > 100_000 else run_isolated("bench_scaling", "fit", n=n, in_memory=True)
        per_ecg = lazy["seconds"] / n
        rows.append(
            [
                f"{n:,}",
                f"{n * 2500 * 4 / 1e9:.2f}",
                "not run" if loaded is None else f"{loaded['seconds']:.1f}",
                f"{lazy['seconds']:.1f}",
                f"{1e6 * per_ecg:.0f}",
                "" if previous is None else f"{per_ecg / previous:.2f}",
                "not run" if loaded is None else f"{loaded['peak_mb']:.0f}",
                f"{lazy['peak_mb']:.0f}",
            ]
        )
        previous = per_ecg
    print_table(
        "Fit on N single-lead 2500-sample frames (1 epoch, 10 % validation patients)",
        [
            "N",
            "file GB",
            "loaded: s",
            "memmap: s",
            "memmap: us per ECG",
            "per ECG vs previous N",
            "loaded: extra MB",
            "memmap: extra MB",
        ],
        rows,
    )


def embed_table(quick):
    rounds = 1 if quick else 5
    sizes = [5_000, 10_000] if quick else [10_000, 20_000, 40_000, 80_000]
    # All sizes and both cases take turns, one timed call each per round, so that
    # a change of machine speed hits every size alike; ratios are taken within
    # each round, then the median over rounds.
    cases = [
        ("embed", {"n": n, "estimator": estimator}) for n in sizes for estimator in (False, True)
    ]
    results = run_rounds("bench_scaling", cases, rounds)
    rows, previous = [], None
    for i, n in enumerate(sizes):
        ref, est = results[2 * i]["frames"], results[2 * i + 1]["frames"]
        ref_mb, est_mb = results[2 * i]["peak_mb"], results[2 * i + 1]["peak_mb"]
        est_times = np.divide(n, est["rounds"])  # seconds per round
        growth = "" if previous is None else f"{np.median(est_times / previous):.2f}"
        rows.append(
            [
                f"{n:,}",
                fmt_ms(summary(np.divide(n, ref["rounds"]))),
                fmt_ms(summary(est_times)),
                f"{paired_ratio(est, ref):.2f}x",
                f"{ref_mb:.0f} / {est_mb:.0f} ({4 * 128 * n / 2**20:.0f})",
                growth,
            ]
        )
        previous = est_times
    print_table(
        f"Embedding N single-lead 2500-sample frames from a .npy memmap ({rounds} rounds, ms)",
        [
            "N",
            "plain forward, sliced batches",
            "transform",
            "speed-up",
            "extra MB plain / transform (its output)",
            "time vs previous N",
        ],
        rows,
    )


def end_to_end_table(quick):
    rows, previous = [], None
    epochs = 1 if quick else 5
    for replicas in [1, 2] if quick else [2, 4, 8, 16]:
        ref = run_isolated(
            "bench_scaling", "end_to_end", replicas=replicas, epochs=epochs, plain=True
        )
        est = run_isolated(
            "bench_scaling", "end_to_end", replicas=replicas, epochs=epochs, plain=False
        )
        growth = "" if previous is None else f"{est['seconds'] / previous:.2f}"
        rows.append(
            [
                f"{est['n']:,}",
                f"{ref['seconds']:.1f}",
                f"{est['seconds']:.1f}",
                f"{ref['seconds'] / est['seconds']:.2f}x",
                growth,
            ]
        )
        previous = est["seconds"]
    print_table(
        f"End to end on LUDB replicated (train instances, {epochs} epochs, seconds)",
        [
            "N train",
            "plain loop pipeline",
            "sklearn-crocs pipeline",
            "speed-up",
            "time vs previous N",
        ],
        rows,
    )


if __name__ == "__main__":
    main()
