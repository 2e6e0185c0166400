"""The learning curve of the "How much data" page, drawn from a results file of
``benchmarks/bench_curve.py`` (``benchmarks/results/learning_curve.csv``): each
metric of CROCSClusterer's defaults on the held-out patients against the
number of training records, mean and standard deviation over the splits,
with the supervised ceiling and the earlier defaults at full size."""

import re
from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd

# The plot directive runs this without __file__: find the repository upwards.
ROOT = next(p for p in [Path.cwd(), *Path.cwd().parents] if (p / "benchmarks" / "results").is_dir())
table = pd.read_csv(ROOT / "benchmarks" / "results" / "learning_curve.csv",
                    header=[0, 1, 2], index_col=0)  # fmt: skip
mean, std = table["mean"], table["std"]
curve = [r for r in mean.index if re.fullmatch(r"CROCS, (\d+|all) records", r)]
ceiling = next(r for r in mean.index if r.startswith("Supervised") and "whole" not in r)
before = next(r for r in mean.index if r.startswith("Before"))
n = mean.loc[curve, ("records", "n")]
panels = [(("class", "Acc"), "class accuracy (%)"), (("sex", "Acc"), "sex accuracy (%)"),
          (("age", "Acc"), "age-quartile accuracy (%)"), (("class", "AMI"), "class AMI (%)"),
          (("P@10", "=3"), "exact-match P@10, CP (%)"),
          (("combination", "Acc"), "class x sex x age accuracy (%)")]  # fmt: skip
fig, axes = plt.subplots(2, 3, figsize=(7.2, 5.2), sharex=True)
for ax, (column, title) in zip(axes.ravel(), panels):
    ax.errorbar(n, mean.loc[curve, column], yerr=std.loc[curve, column], marker="o", capsize=3,
                label="defaults")  # fmt: skip
    ax.plot(mean.loc[before, ("records", "n")], mean.loc[before, column], "s", c="C3",
            label="earlier defaults (40 epochs, constant lr)")  # fmt: skip
    if pd.notna(mean.loc[ceiling, column]):
        ax.axhline(mean.loc[ceiling, column], ls="--", c="grey", label="supervised ceiling")
    ax.set_xscale("log")
    ax.set_xticks([500, 1000, 2000, 3500], ["500", "1,000", "2,000", "3,500"], minor=False)
    ax.minorticks_off()
    ax.set_title(title, fontsize=8)
    ax.tick_params(labelsize=7)
for ax in axes[1]:
    ax.set_xlabel("training records", fontsize=8)
axes[0, 0].legend(loc="lower right", fontsize=6)
fig.suptitle("CROCS on PTB-XL, held-out patients: mean (std) over 3 splits", fontsize=10)
fig.tight_layout()
