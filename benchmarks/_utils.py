"""Timing, memory and table helpers shared by the benchmark scripts."""

import json
import os
import platform
import subprocess
import sys
import time

import numpy as np
import torch
from torch import nn


def machine_summary(device="cpu"):
    """One line describing where the figures were measured."""
    summary = (
        f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
        f"torch {torch.__version__} ({torch.get_num_threads()} threads), "
        f"numpy {np.__version__}, python {platform.python_version()}"
    )
    if _is_cuda(device):
        summary += f"; GPU {torch.cuda.get_device_name(device)}"
    return summary


def load_average():
    """The machine's load averages, to state next to timings (as ``uptime`` prints them)."""
    return "load average " + " ".join(f"{v:.2f}" for v in os.getloadavg()) + " (1, 5, 15 min)"


def repeat(fn, repeats):
    """Wall-clock seconds of ``repeats`` calls of ``fn`` (after one untimed warm-up call)."""
    fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return np.asarray(times)


def matmul_gflops(size=2048, repeats=7, device="cpu"):
    """Median float32 GFLOP/s of a ``size`` x ``size`` matrix product (a practical peak).

    On a GPU, with torch's settings as they are (float32 products in full
    precision unless ``torch.backends.cuda.matmul.allow_tf32`` is set), timed
    until the device has finished.
    """
    a = torch.randn(size, size, device=device)
    b = torch.randn(size, size, device=device)

    def product():
        torch.mm(a, b)
        synchronize(device)

    times = repeat(product, repeats)
    return 2 * size**3 / float(np.median(times)) / 1e9


def summary(times, work=None):
    """Median and inter-quartile spread of times, or of ``work / time`` rates."""
    values = np.asarray(times) if work is None else work / np.asarray(times)
    q1, median, q3 = np.percentile(values, [25, 50, 75])
    return {"median": float(median), "q1": float(q1), "q3": float(q3)}


def paired_ratio(result, baseline):
    """Median over rounds of ``result`` / ``baseline`` rates measured in the same round.

    The cases of a round run back to back, so a change of machine speed
    between rounds (common on shared virtual machines) cancels out of each
    round's ratio; the ratio of the two medians would keep it.
    """
    return float(np.median(np.divide(result["rounds"], baseline["rounds"])))


def reset_peak_rss():
    """Reset the kernel's peak-RSS counter of this process (Linux), if possible."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def rss_mb(field="VmRSS"):
    """Current (``VmRSS``) or peak (``VmHWM``) resident memory of this process in MiB."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    raise RuntimeError(f"{field} not found in /proc/self/status")


def _is_cuda(device):
    return torch.device(device).type == "cuda"


def synchronize(device):
    """Wait for the work queued on a CUDA ``device``; nothing to wait for on CPU."""
    if _is_cuda(device):
        torch.cuda.synchronize(device)


def reset_peak_memory(device):
    """Reset the peak that :func:`peak_memory_mb` reports for ``device``."""
    if _is_cuda(device):
        torch.cuda.reset_peak_memory_stats(device)
    else:
        reset_peak_rss()


def peak_memory_mb(device):
    """Peak RSS of this process on CPU; on a GPU, the peak of torch's CUDA allocator."""
    if _is_cuda(device):
        return torch.cuda.max_memory_allocated(device) / 2**20
    return rss_mb("VmHWM")


def run_isolated(module, function, **kwargs):
    """Run ``module.function(**kwargs)`` in a fresh Python process; return its JSON result.

    Each measurement gets its own process so that peak memory and allocator
    state of one case cannot leak into the next.
    """
    code = (
        "import json, sys; "
        f"sys.path.insert(0, {os.path.dirname(os.path.abspath(__file__))!r}); "
        f"from {module} import {function} as f; "
        f"print('RESULT' + json.dumps(f(**json.loads(sys.argv[1]))))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, json.dumps(kwargs)],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"{module}.{function}({kwargs}) failed:\n{done.stderr[-3000:]}")
    line = [ln for ln in done.stdout.splitlines() if ln.startswith("RESULT")][-1]
    return json.loads(line[len("RESULT") :])


def run_rounds(module, cases, rounds, repeats=1):
    """Run ``cases`` (``(function, kwargs)`` pairs) in turn, ``rounds`` times; pool the results.

    Each call runs in a fresh process (:func:`run_isolated`) with
    ``repeats`` timed calls and returns ``{"times": {key: [seconds]}, "work":
    {key: units}, "peak_mb": MB}``. Taking turns, rather than all repeats of one
    case and then the next, exposes every case to the same drifts in machine
    speed. Returns, per case, ``{key: summary of work / time}`` for each timed
    key (with ``"rounds"``: one rate per round), the largest ``peak_mb`` and
    ``"runs"``: the results of the calls, in round order.
    """
    runs = [[] for _ in cases]
    for _ in range(rounds):
        for out, (function, kwargs) in zip(runs, cases):
            out.append(run_isolated(module, function, repeats=repeats, **kwargs))
    pooled = []
    for results in runs:
        keys = results[0]["times"]
        stats = {}
        for key in keys:
            work = results[0]["work"][key]
            stats[key] = summary(sum((r["times"][key] for r in results), []), work)
            # One rate per round, in round order, for ratios of paired rounds.
            stats[key]["rounds"] = [work / float(np.median(r["times"][key])) for r in results]
        stats["peak_mb"] = max(r["peak_mb"] for r in results)
        stats["runs"] = results
        pooled.append(stats)
    return pooled


def fmt_rate(stats, unit=""):
    """``median [q1-q3]`` for a summary dict."""
    return f"{stats['median']:,.0f} [{stats['q1']:,.0f}-{stats['q3']:,.0f}]{unit}"


def fmt_ms(stats):
    """Milliseconds ``median [q1-q3]`` for a summary of seconds."""
    return f"{1e3 * stats['median']:,.1f} [{1e3 * stats['q1']:,.1f}-{1e3 * stats['q3']:,.1f}]"


# Where print_table also appends its rows (title first), if set: see write_csv.
_csv_path = None


def write_csv(path):
    """Have :func:`print_table` also append every table to the CSV file ``path``."""
    global _csv_path
    _csv_path = path


def print_table(title, header, rows):
    """Print a plain-text table with right-aligned columns (and append it to the CSV file)."""
    if _csv_path is not None:
        import csv

        with open(_csv_path, "a", newline="") as f:
            writer = csv.writer(f)
            writer.writerow(["table", *header])
            writer.writerows([title, *row] for row in rows)
    widths = [max(len(str(c)) for c in column) for column in zip(header, *rows)]
    print(f"\n{title}")
    line = "  ".join(str(h).rjust(w) for h, w in zip(header, widths))
    print(line)
    print("-" * len(line))
    for row in rows:
        print("  ".join(str(c).rjust(w) for c, w in zip(row, widths)))


def reference_cnn(in_channels, length, embedding_dim):
    """The paper's CNN (Appendix B, Table 5) with standard torch layers."""
    layers, c_in = [], in_channels
    for c_out in (4, 16, 32):
        layers += [
            nn.Conv1d(c_in, c_out, 7, stride=3),
            nn.BatchNorm1d(c_out),
            nn.ReLU(),
            nn.MaxPool1d(2),
            nn.Dropout(0.1),
        ]
        # Output length computed, not probed: a forward pass would draw
        # dropout masks and move the batch norms' running statistics.
        c_in, length = c_out, ((length - 7) // 3 + 1) // 2
    features = nn.Sequential(*layers)
    return nn.Sequential(features, nn.Flatten(), nn.Linear(c_in * length, embedding_dim), nn.ReLU())
