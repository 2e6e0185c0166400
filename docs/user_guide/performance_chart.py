"""The Performance page's chart, drawn from a results file of the benchmarks.

Reads ``benchmarks/results/<RUN>.csv`` (written by ``bench_training.py`` and
``bench_retrieval.py`` with ``--csv``): training and embedding throughput of
the paper's CNN relative to a plain PyTorch loop, and the time of a retrieval
as the database grows.
"""

import csv
import re
from pathlib import Path

import matplotlib.pyplot as plt

RUN = "cpu-2026-11-27"
# The plot directive runs this without __file__: find the repository upwards.
ROOT = next(p for p in [Path.cwd(), *Path.cwd().parents] if (p / "benchmarks" / "results").is_dir())


def _number(text):
    return float(re.match(r"[\d,.]+", text.strip()).group().replace(",", ""))


tables = {}
with open(ROOT / "benchmarks" / "results" / f"{RUN}.csv", newline="") as f:
    header = None
    for row in csv.reader(f):
        if row[0] == "table":
            header = row[1:]
            continue
        tables.setdefault(row[0], []).append(dict(zip(header, row[1:])))


def _table(prefix):
    return next(rows for title, rows in tables.items() if title.startswith(prefix))


# Stacked, 7 in (700 px) wide: the width of the page's text column.
fig, (speed, search) = plt.subplots(2, 1, figsize=(7, 7), layout="constrained")
rows = _table("Training, cnn") + _table("Embedding, cnn")
labels = [r["case"] for r in rows]
ratios = [_number(r["vs reference"]) for r in rows]
speed.barh(range(len(rows)), ratios, color=["0.6" if x == 1 else "C0" for x in ratios])
speed.set_yticks(range(len(rows)), labels, fontsize=7)
speed.invert_yaxis()
speed.axvline(1, color="0.3", lw=0.8)
speed.set_xlabel("frames/s relative to the plain PyTorch loop")
speed.set_title("The paper's CNN, 1 lead x 2500 samples", fontsize=9)

rows = _table("Retrieval")
n = [_number(r["N"]) for r in rows]
# No green or red: the documentation keeps them for match and no match.
for column, label, color in [
    ("kneighbors", "PrototypeRetriever.query", "C0"),
    ("sklearn brute", "scikit-learn brute force", "C1"),
    ("torch mm+topk", "blockwise torch.mm + topk", "C4"),
]:
    search.plot(n, [_number(r[column]) for r in rows], marker="o", label=label, color=color)
search.set_xscale("log")
search.set_yscale("log")
search.set_xlabel("database embeddings (128-dim)")
search.set_ylabel("ms per search of 40 queries, k = 10")
search.set_title("Exact retrieval", fontsize=9)
search.legend(fontsize=7)
