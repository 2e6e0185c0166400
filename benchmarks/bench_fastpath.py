"""Whole ``fit`` and ``transform`` with and without the encoders' fast path, in fresh processes.

Each case runs in its own fresh process, the cases taking turns round after
round (A/B pairs, so that a machine whose speed drifts slows all alike); a
case times one whole ``CROCSClusterer.fit`` (after a small untimed warm-up
fit that loads oneDNN's kernels) and one ``transform`` of the same frames.
Cases:

- ``fast``: the default (``fast_path=True``);
- ``plain``: ``encoder_params={"fast_path": False}``, the encoders'
  ``reference_layers()``;
- ``fast, glibc keeps memory``: the default with ``MALLOC_MMAP_MAX_=0`` and
  ``MALLOC_TRIM_THRESHOLD_`` at its maximum in the process's environment, so
  that glibc serves large tensors from the heap and keeps freed pages (Linux
  with glibc; elsewhere the variables do nothing).

Ratios are medians over rounds of the per-round ratio to ``fast``.
Run ``python benchmarks/bench_fastpath.py`` (``--quick`` for a smoke run).
"""

import argparse
import json
import os
import subprocess
import sys
import time

import numpy as np

from _utils import machine_summary, print_table, write_csv

SIZES = {  # the paper's CNN on single-lead frames; the default ResNet on PTB-XL's 12 x 1000
    "cnn": {"n": 10240, "leads": 1, "length": 2500, "epochs": 4, "batch_size": 256},
    "resnet": {"n": 1024, "leads": 12, "length": 1000, "epochs": 2, "batch_size": 128},
}
MALLOC = {"MALLOC_MMAP_MAX_": "0", "MALLOC_TRIM_THRESHOLD_": str(2**31 - 1)}
CASES = {
    "fast": ({}, {}),
    "plain": ({"fast_path": False}, {}),
    "fast, glibc keeps memory": ({}, MALLOC),
}


def child(encoder, encoder_params, quick):
    from sklearn_crocs import CROCSClusterer

    size = dict(SIZES[encoder])
    if quick:
        size.update(n=size["batch_size"] * 2, epochs=1)
    rng = np.random.default_rng(0)
    X = rng.standard_normal((size["n"], size["leads"], size["length"]), dtype=np.float32)
    y = np.column_stack([rng.integers(0, k, size["n"]) for k in (4, 2, 4)])
    params = dict(
        encoder=encoder,
        encoder_params=encoder_params,
        batch_size=size["batch_size"],
        validation_fraction=None,
        random_state=0,
    )
    warm = slice(0, 2 * size["batch_size"])
    CROCSClusterer(max_epochs=1, **params).fit(X[warm], y[warm])
    start = time.perf_counter()
    model = CROCSClusterer(max_epochs=size["epochs"], **params).fit(X, y)
    fit = time.perf_counter() - start
    start = time.perf_counter()
    model.transform(X)
    return {"fit": fit, "transform": time.perf_counter() - start}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="small sizes, one round")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--csv", help="also append every table to this CSV file")
    args = parser.parse_args(argv)
    write_csv(args.csv)
    if args.child:
        encoder, params = json.loads(args.child)
        print(json.dumps(child(encoder, params, args.quick)))
        return
    print(f"Machine: {machine_summary('cpu')}")
    rounds = 1 if args.quick else args.rounds
    for encoder, size in SIZES.items():
        results = {case: [] for case in CASES}
        for _ in range(rounds):
            for case, (params, env) in CASES.items():
                command = [sys.executable, __file__, "--child", json.dumps([encoder, params])]
                if args.quick:
                    command.append("--quick")
                out = subprocess.run(
                    command, env={**os.environ, **env}, capture_output=True, text=True, check=True
                )
                results[case].append(json.loads(out.stdout.splitlines()[-1]))
        base = results["fast"]
        rows = []
        for case, runs in results.items():
            row = [case]
            for key in ("fit", "transform"):
                seconds = np.median([r[key] for r in runs])
                ratio = np.median([r[key] / b[key] for r, b in zip(runs, base)])
                row += [f"{seconds:.2f}", f"{ratio:.2f}"]
            rows.append(row)
        print_table(
            f"{encoder}: {size['n']} frames of {size['leads']} x {size['length']}, "
            f"{size['epochs']} epoch(s), batch {size['batch_size']}, {rounds} round(s)",
            ["case", "fit s (median)", "time / fast", "transform s", "time / fast"],
            rows,
        )


if __name__ == "__main__":
    main()
