"""Fit throughput of the CROCS configurations of paper_tables.py on the paper's frame shapes.

For PTB-XL (12 leads x 2500 samples, 40 attribute combinations) and Chapman
(1 lead x 2500 samples, 32 combinations), with the package defaults and with
``paper_params``, each configuration is fitted in a fresh process for
``--epochs`` epochs on random frames. An epoch's time is the fastest and the
median of the epochs after the first (which also builds the network), from
the fit's history; the throughput is training frames per second. The peak
resident memory of the process, less the frames it was given, is what
training needs besides the data (torch, the network, the batches and any
copy that fit makes). The documentation's "Reproducing the paper" page
scales both to the paper's training sets.

Usage::

    python benchmarks/paper_throughput.py [--frames 512] [--epochs 4]
"""

import argparse
import json
import os
import resource
import subprocess
import sys

import numpy as np
import pandas as pd
import torch

from sklearn_crocs import CROCSClusterer, paper_params

# (leads, classes) of each dataset's frames; sex x 4 age groups as in the paper.
SHAPES = {"ptbxl": (12, 5), "chapman": (1, 4)}
FRAME_LENGTH = 2500


def fit_once(dataset, configuration, n_frames, epochs):
    """Seconds of each epoch, this process's peak RSS and the frames' bytes."""
    n_leads, n_classes = SHAPES[dataset]
    rng = np.random.default_rng(0)
    X = rng.standard_normal((n_frames, n_leads, FRAME_LENGTH), dtype=np.float32)
    y = pd.DataFrame(
        {
            "class": rng.integers(n_classes, size=n_frames).astype(str),
            "sex": rng.choice(["M", "F"], size=n_frames),
            "age": rng.integers(4, size=n_frames).astype(str),
        }
    )
    params = paper_params(dataset) if configuration == "paper settings" else {}
    model = CROCSClusterer(**params, max_epochs=epochs, random_state=0).fit(X, y)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # KiB on Linux
    epochs = [float(s) for s in model.net_.history[:, "dur"]]
    return {"epochs": epochs, "peak_rss": peak, "data_bytes": X.nbytes}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frames", type=int, default=512)
    parser.add_argument("--epochs", type=int, default=4)
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        dataset, configuration = args.child
        print(json.dumps(fit_once(dataset, configuration, args.frames, args.epochs)))
        return 0
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, {args.frames} frames, "
          f"load average {os.getloadavg()[0]:.1f}")  # fmt: skip
    for dataset in SHAPES:
        for configuration in ("package defaults", "paper settings"):
            # A fresh process per fit: its peak memory is this fit's alone.
            child = [sys.executable, __file__, "--frames", str(args.frames), "--epochs",
                     str(args.epochs), "--child", dataset, configuration]  # fmt: skip
            output = subprocess.run(child, capture_output=True, text=True, check=True)
            run = json.loads(output.stdout.strip().splitlines()[-1])
            later = np.asarray(run["epochs"][1:])
            besides = (run["peak_rss"] - run["data_bytes"]) / 2**30
            print(f"{dataset}, {configuration}: epoch of {args.frames} frames {later.min():.2f} s "
                  f"(median {np.median(later):.2f} s): {args.frames / later.min():.0f} frames/s "
                  f"({args.frames / np.median(later):.0f} at the median); peak RSS "
                  f"{run['peak_rss'] / 2**30:.2f} GiB, {besides:.2f} GiB besides the frames",
                  flush=True)  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
