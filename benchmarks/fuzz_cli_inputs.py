"""Crafted inputs to the command line against genuine ones: recordings in every format it
reads, --labels tables, --class-map files, settings.json files and output folders that
hold links. Each input is either used correctly or clearly refused.

Genuine inputs come from real records (``../shared/data``: PTB-XL sample frames, LUDB
and CinC 2021 WFDB records) and one small model fitted on them by ``sklearn-crocs fit``
(tiny CNN, one epoch, a code,class map and two age groups). Each crafted input changes
them by one seeded mutation: header fields (rate, gain, number of samples, format, byte
offsets), truncated or extended files, odd values, huge declared sizes, control
characters, links to ``/dev/zero``, FIFOs, sparse huge files, duplicates and nulls.

Each input runs through the real command line (``sklearn_crocs.cli.main``) in a forked
child, with its standard output and error captured; the parent reads the child's peak
memory (``wait4``) against that of a child that does nothing, kills it at a timeout
(a hang) or at 2 GB above the baseline. An input is

- ``correct``: the command ran and its outputs are consistent (one CSV row per record,
  finite probabilities, values among those the inputs hold, unique columns; for a
  settings.json, the scores of the genuine one unless a field that only changes how
  records are read was changed);
- ``refused``: exit status 1 (2: the command line) with one error line, no traceback;
- ``silent``: ran but its output is wrong, or it wrote through a link, outside its
  output or over a file without --force, or stdout/stderr carry raw control characters;
- ``crash``: a traceback, another status, a signal, or the 2-GB memory limit;
- ``hang``: the timeout.

Usage::

    OMP_NUM_THREADS=1 python benchmarks/fuzz_cli_inputs.py [--inputs 200] [--seed 0]
        [--kinds records labels class-maps settings outputs]

Prints the counts per kind and outcome with the peak memory of refused inputs above the
baseline, and the first inputs of each outcome but ``correct`` and ``refused``; exits 1
on any silent, crash or hang input, or a refused one that took 200 MB or more.
"""

import argparse
import csv
import io
import json
import os
import re
import shutil
import signal
import sys
import tempfile
import time
import traceback
import zipfile
from collections import Counter, defaultdict
from pathlib import Path

import numpy as np

import matplotlib  # isort: skip

matplotlib.use("Agg")
import edfio  # noqa: E402
import matplotlib.pyplot  # noqa: E402, F401 - imported once, before the children fork
import wfdb  # noqa: E402

import sklearn_crocs.cli._commands  # noqa: E402, F401
import sklearn_crocs.metrics  # noqa: E402, F401
import sklearn_crocs.plotting  # noqa: E402, F401
from sklearn_crocs.cli import main as cli_main  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fuzz_model_files import mutate_document  # noqa: E402

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
LEADS = "I II III aVR aVL aVF V1 V2 V3 V4 V5 V6".split()
KINDS = ("records", "labels", "class-maps", "settings", "outputs")
OUTCOMES = ("correct", "refused", "silent", "crash", "hang")
TIMEOUT, KILL_MB, REFUSED_MB = 20.0, 2048, 200
HUGE = 1 << 30  # bytes of the sparse huge files
CODES = {"164889003": "AFIB", "426783006": "SR", "426177001": "SB", "427084000": "GSVT"}
# Raw characters a terminal acts on: C0 but tab and newline, DEL, C1.
RAW = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")
ODD = ["", " ", "nan", "None", "NULL", "-1", "0", "1e308", "inf", ">89", "300", "x" * 100_000,
       "\x1b[2J\x1b[31mred", "bell\x07", "\x1b]0;title\x07", "é", ",", '"', "\n"]  # fmt: skip
CTRL = ["\x1b[2J", "\x07", "\x1b]0;t\x07", "\x9b31m", "\r"]


# ----------------------------------------------------------- a command in a child
def run(argvs, workdir, timeout=TIMEOUT):
    """Run the commands ``argvs`` in turn (stopping at the first that fails) in a forked
    child; ``dict(status, out, err, mb, why)``: ``mb`` is the child's peak RSS."""
    out_path, err_path = workdir / ".stdout", workdir / ".stderr"
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:  # the child: never returns
        status = 0
        try:
            null = os.open(os.devnull, os.O_RDONLY)
            os.dup2(null, 0)
            os.dup2(os.open(out_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC), 1)
            os.dup2(os.open(err_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC), 2)
            for argv in argvs:
                try:
                    status = cli_main([str(a) for a in argv])
                except SystemExit as exc:
                    status = exc.code if isinstance(exc.code, int) else 2
                if status != 0:
                    break
        except BaseException:  # noqa: BLE001 - what the fuzz looks for
            traceback.print_exc()
            status = 70
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(status if isinstance(status, int) and 0 <= status < 256 else 71)
    start, why, rss = time.monotonic(), None, 0
    while True:
        done, status, usage = os.wait4(pid, os.WNOHANG)
        if done:
            break
        try:
            text = Path(f"/proc/{pid}/status").read_text()
            rss = max(rss, int(re.search(r"VmRSS:\s+(\d+)", text).group(1)) // 1024)
        except (OSError, AttributeError):
            pass
        if why is None and rss - BASELINE[0] > KILL_MB:
            why = f"killed at {KILL_MB} MB above the baseline"
        elif why is None and time.monotonic() - start > timeout:
            why = "hang"
        if why is not None:
            os.kill(pid, signal.SIGKILL)
        time.sleep(0.005)
    read = lambda p: p.read_bytes().decode("utf-8", "replace") if p.exists() else ""  # noqa: E731
    code = os.waitstatus_to_exitcode(status)
    return {"status": code, "out": read(out_path), "err": read(err_path),
            "mb": max(rss, usage.ru_maxrss // 1024) - BASELINE[0], "why": why}  # fmt: skip


BASELINE = [0]


def classify(result, check=lambda: [], invariant=lambda: []):
    """``(outcome, detail)``: ``check()`` lists the problems of a run that succeeded,
    ``invariant()`` those of any run (files written where they must not be)."""
    err, status = result["err"], result["status"]
    if result["why"] == "hang":
        return "hang", f"no end after {TIMEOUT:g} s"
    if result["why"]:
        return "crash", result["why"]
    problems = invariant()
    raw = RAW.search(result["out"] + err)
    if raw:
        problems.append(f"raw control character {raw.group(0)!r} in stdout/stderr")
    last = err.strip().splitlines()[-1][-160:] if err.strip() else ""
    if "Traceback" in err or status not in (0, 1, 2):
        return "crash", f"status {status}: {last}"
    if status == 0:
        problems += check()
        return ("silent", "; ".join(problems)) if problems else ("correct", "")
    errors = [line for line in err.splitlines() if "error:" in line]
    if len(errors) != 1:
        return "crash", f"status {status} with {len(errors)} error lines: {last}"
    return ("silent", "; ".join(problems)) if problems else ("refused", errors[0][-160:])


# ----------------------------------------------------------- files
def pick(rng, values):
    return values[int(rng.integers(len(values)))]


def special(path, how):
    """Put at ``path`` a link to /dev/zero, a FIFO, a sparse huge file, a dangling link or
    a folder."""
    if path.is_symlink() or path.is_file():
        path.unlink()
    if how == "devzero":
        os.symlink("/dev/zero", path)
    elif how == "fifo":
        os.mkfifo(path)
    elif how == "huge":
        with open(path, "wb") as fh:
            fh.truncate(HUGE)
    elif how == "dangling":
        os.symlink(path.parent / "nowhere", path)
    else:
        path.mkdir()
    return how


SPECIALS = ("devzero", "fifo", "huge", "dangling", "folder")


def cut_or_extend(rng, path):
    data = path.read_bytes()
    if rng.random() < 0.6:
        n = int(rng.integers(0, len(data)))
        path.write_bytes(data[:n])
        return f"cut to {n} of {len(data)} bytes"
    path.write_bytes(data + bytes(rng.integers(0, 256, int(rng.integers(1, 5000)), np.uint8)))
    return "extended"


def read_csv_rows(path):
    try:
        with open(path, newline="", encoding="utf-8") as fh:
            return list(csv.reader(fh))
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        return exc


def check_predictions(out, names, allowed, n_records=None):
    """Problems of a predict --proba CSV: ``allowed[attr]`` are its possible values."""
    rows = read_csv_rows(out)
    if isinstance(rows, Exception) or not rows:
        return [f"no readable output: {rows}"]
    header, body = rows[0], rows[1:]
    problems = []
    if len(set(header)) != len(header) or header[0] != "record":
        problems.append(f"columns {header[:8]} not unique, or not 'record' first")
    if n_records is not None and len(body) != n_records:
        problems.append(f"{len(body)} rows for {n_records} records")
    if any(len(row) != len(header) for row in body):
        return problems + ["ragged rows"]
    column = {name: [row[j] for row in body] for j, name in enumerate(header)}
    got = column.get("record", [])
    if len(set(got)) != len(got) or (names is not None and not set(got) <= set(names)):
        problems.append(f"record column {got[:3]} not the records' names")
    for attr, values in allowed.items():
        if attr not in column or f"{attr}_proba" not in column:
            problems.append(f"no column {attr!r} or its probability")
            continue
        if values is not None and not set(column[attr]) <= set(values):
            problems.append(f"{attr!r} values {sorted(set(column[attr]) - set(values))[:3]}")
        try:
            proba = np.array(column[f"{attr}_proba"], dtype=float)
            if not np.all((proba >= 0) & (proba <= 1 + 1e-6)):
                problems.append(f"{attr}_proba not finite in [0, 1]")
        except ValueError:
            problems.append(f"{attr}_proba not numbers")
    return problems


# ----------------------------------------------------------- genuine inputs
def prepare(base):
    """Genuine inputs and the model, in ``base``; the ``env`` of every kind."""
    signals = np.load(DATA / "ptbxl-sample" / "signals.npz")
    X = signals["X"][:16].astype(np.float32)  # 10 s at 100 Hz
    import pandas as pd

    table = pd.read_csv(DATA / "ptbxl-sample" / "records.csv").iloc[:16]
    ids = [f"r{i}" for i in range(16)]
    np.savez(base / "frames.npz", X=X, record_ids=np.array(ids), lead_names=np.array(LEADS))
    codes = list(CODES)
    dx = [codes[i % 4] for i in range(16)]
    labels = pd.DataFrame({"id": ids, "dx": dx, "sex": table["sex"], "age": table["age"]})
    labels.to_csv(base / "labels.csv", index=False)
    (base / "map.csv").write_text("code,class\n" + "".join(f"{c},{k}\n" for c, k in CODES.items()))
    result = run([fit_argv(base / "frames.npz", base / "labels.csv", base / "model",
                           "dx,sex,age", "--class-map", base / "map.csv")], base, 300)  # fmt: skip
    assert result["status"] == 0, result["err"]
    settings = json.loads((base / "model" / "settings.json").read_text())
    allowed = {"dx": sorted(set(CODES.values())), "sex": ["F", "M"],
               "age": settings["age_groups"]["age"]["labels"]}  # fmt: skip
    result = run([score_argv(base / "model", base / "score")], base, 300)
    assert result["status"] == 0, result["err"]
    return {"base": base, "X": X, "ids": ids, "labels": labels, "allowed": allowed,
            "settings": settings}  # fmt: skip


def fit_argv(records, labels, model, attributes, *more):
    return ["fit", records, "--sampling-rate", 100, "--labels", labels, "--record-column",
            "id", "--attributes", attributes, "--model", model, "--working-rate", 100,
            "--encoder", "cnn", "--embedding-dim", 8, "--max-epochs", 1, "--ensemble-size",
            1, "--age-groups", 2, "--quiet", *more]  # fmt: skip


def predict_argv(records, model, out, *more):
    return ["predict", records, "--model", model, "--out", out, "--proba", "--quiet", *more]


def score_argv(model, out_dir, base=None, *more):
    base = model.parent if base is None else base
    return ["score", base / "frames.npz", "--sampling-rate", 100, "--model", model, "--labels",
            base / "labels.csv", "--record-column", "id", "--out-dir", out_dir, "--k", 1, 5,
            "--quiet", *more]  # fmt: skip


# ----------------------------------------------------------- recordings
def wfdb_record(rng, env, folder):
    """A genuine WFDB record in ``folder``: written from a PTB-XL frame (formats 16, 212,
    24, FLAC 516), or a real LUDB or CinC record; ``(header path, what)``."""
    source = pick(rng, ["16", "212", "24", "516", "16", "ludb", "cinc"])
    if source == "ludb":
        for suffix in (".hea", ".dat"):
            shutil.copy(DATA / "ludb-subset" / f"11{suffix}", folder / f"11{suffix}")
        return folder / "11.hea", "LUDB 11"
    if source == "cinc":
        for suffix in (".hea", ".mat"):
            shutil.copy(DATA / "cinc2021" / f"A0689{suffix}", folder / f"A0689{suffix}")
        return folder / "A0689.hea", "CinC A0689"
    signal_ = env["X"][int(rng.integers(16))].T.astype(np.float64)
    wfdb.wrsamp(
        "rec",
        fs=100,
        units=["mV"] * 12,
        sig_name=LEADS,
        p_signal=signal_,
        fmt=[source] * 12,
        write_dir=str(folder),
        comments=["Age: 50", "Sex: F"],
    )
    return folder / "rec.hea", f"fmt {source}"


def mutate_header(rng, header):
    lines = header.read_text(encoding="latin-1").splitlines()
    record, signals = lines[0].split(), [i for i, x in enumerate(lines[1:], 1) if x[:1] != "#"]
    field = pick(rng, ["fs", "n_samples", "n_signals", "fmt", "gain", "baseline", "offset",
                        "file", "comment", "lead", "record name"])  # fmt: skip
    line = signals[int(rng.integers(len(signals)))]
    tokens = lines[line].split()
    if field == "fs":
        record[2] = str(pick(rng, [2, 0.5, 0.01, 1e-300, 0, -100, "nan", "inf", 1e9, 5, 20]))
    elif field == "n_samples":
        record[3] = str(pick(rng, [0, 1, 499, 1001, 10**9, 10**12, 2**63, -5]))
    elif field == "n_signals":
        record[1] = str(pick(rng, [0, 1, 11, 13, 10**6]))
    elif field == "fmt":
        tokens[1] = str(pick(rng, ["8", "80", "310", "311", "61", "160", "0", "999", "508"]))
    elif field == "gain":
        value = pick(rng, ["0", "-1", "1e-300", "1e300", "nan", "inf"])
        tokens[2] = re.sub(r"^[^(/]+", value, tokens[2])
    elif field == "baseline":
        tokens[2] = re.sub(r"^([^(/]+)(\([^)]*\))?", rf"\1({pick(rng, [2**40, -(2**40)])})",
                           tokens[2])  # fmt: skip
    elif field == "offset":
        tokens[1] = re.sub(r"\+.*", "", tokens[1]) + f"+{pick(rng, [10**15, 1, 23999, 7])}"
    elif field == "file":
        tokens[0] = str(pick(rng, ["/dev/zero", "../../etc/passwd", "nothere.dat", "a\x1bb"]))
    elif field == "comment":
        lines.append(f"#Age: {pick(rng, ODD)}")
        lines.append(f"#Sex: {pick(rng, CTRL)}F")
    elif field == "lead":
        tokens[-1] = f"V{pick(rng, CTRL)}1" if len(tokens) > 8 else tokens[-1]
    else:
        record[0] = f"rec{pick(rng, CTRL)}"
        os.rename(header, header.with_name(f"{record[0]}.hea"))
        header = header.with_name(f"{record[0]}.hea")
    lines[0], lines[line] = " ".join(record), " ".join(tokens)
    header.write_text("\n".join(lines) + "\n", encoding="latin-1")
    return f"header {field}"


def signal_files(header):
    return [p for p in header.parent.iterdir() if p.suffix in (".dat", ".mat")]


def make_wfdb(rng, env, folder):
    header, what = wfdb_record(rng, env, folder)
    how = pick(rng, ["header", "header", "header", "signal", "special", "spike", "copies"])
    if how == "header":
        return f"{what}, {mutate_header(rng, header)}"
    target = pick(rng, signal_files(header) + [header]) if how == "special" else None
    if how == "signal":
        return f"{what}, signal {cut_or_extend(rng, pick(rng, signal_files(header)))}"
    if how == "special":
        return f"{what}, {target.name} {special(target, pick(rng, SPECIALS))}"
    if how == "spike":  # one sample at the format's extreme
        dat = pick(rng, signal_files(header))
        data = bytearray(dat.read_bytes())
        at = int(rng.integers(100, max(101, len(data) - 100)))
        data[at : at + 2] = b"\xff\x7f"
        dat.write_bytes(bytes(data))
        return f"{what}, one spike in {dat.name}"
    sub = folder / "sub"
    sub.mkdir()
    for p in list(folder.iterdir()):
        if p.is_file():
            shutil.copy(p, sub / p.name)
    return f"{what}, the same record twice"


EDF_FIELDS = {"header bytes": (184, 8), "n records": (236, 8), "duration": (244, 8),
              "n signals": (252, 4)}  # fmt: skip
EDF_PER_SIGNAL = {
    "label": (0, 16),
    "physical min": (104, 8),
    "physical max": (112, 8),
    "digital min": (120, 8),
    "digital max": (128, 8),
    "samples": (216, 8),
}


def make_edf(rng, env, folder):
    signal_ = env["X"][int(rng.integers(16))].astype(np.float64)
    path = folder / "rec.edf"
    notes = [edfio.EdfAnnotation(1.0, None, f"beat{pick(rng, CTRL)}")]
    notes = notes if rng.random() < 0.3 else None
    edfio.Edf([edfio.EdfSignal(x, sampling_frequency=100, label=name, physical_dimension="mV")
               for x, name in zip(signal_, LEADS)], annotations=notes).write(path)  # fmt: skip
    how = pick(rng, ["field", "field", "field", "signal field", "file", "special"])
    if how == "file":
        return f"EDF {cut_or_extend(rng, path)}"
    if how == "special":
        return f"EDF file {special(path, pick(rng, SPECIALS[:3]))}"
    data = bytearray(path.read_bytes())
    odd = ["-1", "0", "99999999", "1e-9", "1e9", "nan", "abc", "", "1", "2", "0.01"]
    value = str(pick(rng, odd + CTRL))
    if how == "field":
        name = pick(rng, list(EDF_FIELDS))
        start, width = EDF_FIELDS[name]
    else:
        name = pick(rng, list(EDF_PER_SIGNAL))
        offset, width = EDF_PER_SIGNAL[name]
        n_signals = int(data[252:256].decode().strip())
        start = 256 + offset * n_signals + width * int(rng.integers(n_signals))
    data[start : start + width] = value.encode("latin-1").ljust(width)[:width]
    path.write_bytes(bytes(data))
    return f"EDF {name} {value!r}"


def npy_bytes(rng, X, mutate=True):
    """The bytes of an .npy file of ``X``, its header or data changed when ``mutate``."""
    descr, shape, data = np.lib.format.dtype_to_descr(X.dtype), list(X.shape), X.tobytes()
    fortran, what = False, "genuine"
    if mutate:
        what = pick(rng, ["shape", "descr", "fortran", "data", "values", "axes"])
        if what == "shape":
            shape[int(rng.integers(3))] = int(pick(rng, [0, 10**6, 10**12, -1]))
            shape = shape if rng.random() < 0.7 else shape[: int(rng.integers(4))]
        elif what == "descr":
            descr = str(pick(rng, ["|O", "<c16", "<U8", "|b1", "<f2", ">f4", "<i8", "|V4"]))
        elif what == "fortran":
            fortran = True
        elif what == "data":
            data = data[: int(rng.integers(len(data)))]
        elif what == "values":
            Y = X.astype(np.float64)
            value = pick(rng, [np.nan, np.inf, 1e38, 1e300, -1e300, 0.0])
            where = pick(rng, ["one", "record", "all"])
            if where == "one":
                Y[int(rng.integers(len(Y))), int(rng.integers(12)), int(rng.integers(1000))] = value
            else:
                Y[: len(Y) if where == "all" else 1] = value
            descr, data = "<f8", Y.tobytes()
        else:
            shape, data = [shape[0], shape[2], shape[1]], X.transpose(0, 2, 1).tobytes()
    header = f"{{'descr': '{descr}', 'fortran_order': {fortran}, 'shape': {tuple(shape)}, }}"
    header += " " * ((-(10 + len(header) + 1)) % 64) + "\n"
    return b"\x93NUMPY\x01\x00" + len(header).to_bytes(2, "little") + header.encode(), data, what


def make_npy(rng, env, folder):
    X = env["X"][: int(rng.integers(1, 6))]
    path = folder / "rec.npy"
    header, data, what = npy_bytes(rng, X)
    path.write_bytes(header + data)
    if rng.random() < 0.15:
        return f".npy {special(path, pick(rng, SPECIALS[:3]))}"
    return f".npy {what}"


def bomb(base, shape=(8, 12, 800_000)):
    """An .npz whose X (zeros, 600 MB) compresses to under 1 MB, made once."""
    path = base / "bomb.npz"
    if not path.exists():
        header = np.lib.format.header_data_from_array_1_0(np.zeros(1))
        header["shape"] = shape
        with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED, compresslevel=1) as archive:
            with archive.open("X.npy", "w", force_zip64=True) as fh:
                buffer = io.BytesIO()
                np.lib.format.write_array_header_1_0(buffer, header)
                fh.write(buffer.getvalue())
                left, chunk = int(np.prod(shape)) * 8, bytes(1 << 24)
                while left > 0:
                    fh.write(chunk[: min(left, len(chunk))])
                    left -= len(chunk)
    return path


def make_npz(rng, env, folder):
    path = folder / "rec.npz"
    n = int(rng.integers(1, 6))
    X, ids, leads = env["X"][:n], np.array(env["ids"][:n]), np.array(LEADS)
    how = pick(rng, ["X", "X", "ids", "leads", "members", "zip", "bomb", "special"])
    if how == "bomb":
        shutil.copy(bomb(env["base"]), path)
        return ".npz bomb: 600 MB of zeros in under 1 MB"
    members, what = {}, how
    header, data, what = npy_bytes(rng, X, mutate=how == "X")
    members["X.npy"] = header + data
    if how == "ids":
        ids = pick(
            rng,
            [
                ids[:-1],
                np.repeat(ids[:1], n),
                np.array([f"r{c}" for c in rng.choice(CTRL, n)]),
                np.array(["x" * 100_000] * n),
                ids.astype(object),
            ],
        )
    elif how == "leads":
        leads = pick(rng, [leads[:-1], np.array(["I"] * 12), np.array([f"L{c}" for c in
                     rng.choice(CTRL, 12)]), leads[::-1].copy()])  # fmt: skip
    for name, value in (("record_ids", ids), ("lead_names", leads)):
        buffer = io.BytesIO()
        np.save(buffer, value, allow_pickle=True)
        members[f"{name}.npy"] = buffer.getvalue()
    if how == "members":
        dropped = pick(rng, list(members))
        members.pop(dropped)
        what = f"no {dropped}"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, value in members.items():
            archive.writestr(name, value)
    if how == "zip":
        what = f"zip {cut_or_extend(rng, path)}"
    elif how == "special":
        what = special(path, pick(rng, SPECIALS[:3]))
    return f".npz {how}: {what}"


def make_other(rng, env, folder):
    """Folders mixing formats, and files the command line does not read."""
    how = pick(rng, ["csv", "mixed", "empty folder", "nested"])
    if how == "csv":
        np.savetxt(folder / "rec.csv", env["X"][0].T, delimiter=",")
        return "a .csv recording"
    if how == "mixed":
        make_edf(rng, env, folder)
        wfdb_record(rng, env, folder)
        return "WFDB and EDF in one folder"
    if how == "nested":
        deep = folder.joinpath(*["d"] * 40)
        deep.mkdir(parents=True)
        wfdb_record(rng, env, deep)
        os.symlink(folder, deep / "loop")
        return "a record 40 folders deep, and a link back up"
    return "an empty folder"


FORMATS = {"wfdb": make_wfdb, "edf": make_edf, "npy": make_npy, "npz": make_npz,
           "other": make_other}  # fmt: skip


def records_input(rng, env, work, i):
    fmt = list(FORMATS)[i % len(FORMATS)]
    folder = work / "in"
    folder.mkdir()
    what = FORMATS[fmt](rng, env, folder)
    files = [p for p in folder.iterdir() if p.suffix in (".npy", ".npz", ".edf")]
    target = files[0] if fmt in ("npy", "npz") or (fmt == "edf" and rng.random() < 0.5) else folder
    more = ["--sampling-rate", 100] if fmt in ("npy", "npz") else []
    out = work / "out.csv"
    result = run([predict_argv(target, env["base"] / "model", out, *more)], work)
    names = env["ids"] if fmt == "npz" and not re.search("ids|bomb|record_ids", what) else None
    return result, lambda: check_predictions(out, names, env["allowed"]), what


# ----------------------------------------------------------- labels and class maps
def mutate_table(rng, table):
    """A changed --labels table (list of rows) and the attributes to ask for."""
    rows, attributes = [list(r) for r in table], ["dx", "sex", "age"]
    how = pick(rng, ["cells", "cells", "duplicate", "drop", "column name", "one class"])
    if how == "cells":
        for _ in range(int(rng.integers(1, 6))):
            rows[int(rng.integers(1, len(rows)))][int(rng.integers(4))] = str(pick(rng, ODD))
    elif how == "duplicate":
        row = list(rows[int(rng.integers(1, len(rows)))])
        row[1] = pick(rng, [row[1], "164889003"])
        rows.insert(int(rng.integers(1, len(rows))), row)
    elif how == "drop":
        rows = [rows[0]] + [r for r in rows[1:] if rng.random() < 0.6]
    elif how == "column name":
        j = int(rng.integers(1, 4))
        new = str(pick(rng, ["record", "dx_proba", "sex_proba", "Dx", "", f"a{pick(rng, CTRL)}",
                              rows[0][(j % 3) + 1]]))  # fmt: skip
        rows[0][j] = new
        attributes[j - 1] = new if new else attributes[j - 1]
    else:
        for row in rows[1:]:
            row[1] = "426783006"
    return rows, attributes, how


def write_rows(rng, path, rows, how):
    buffer = io.StringIO()
    csv.writer(buffer).writerows(rows)
    text = buffer.getvalue()
    if how == "bytes":
        form = pick(rng, ["bom", "latin1", "nul", "cut", "semicolon", "ragged", "empty"])
        data = {"bom": "\ufeff" + text, "cut": text[: int(rng.integers(len(text)))],
                "semicolon": text.replace(",", ";"), "ragged": text + "x,y,z,w,v,u\n",
                "empty": "", "nul": text.replace("\n", "\x00\n", 3)}.get(form)  # fmt: skip
        path.write_bytes(text.encode("latin-1", "replace") + b"\xff\xfe" if data is None
                         else data.encode())  # fmt: skip
        return form
    path.write_text(text)
    return ""


def labels_input(rng, env, work, i):
    path = work / "labels.csv"
    table = [list(env["labels"].columns)] + env["labels"].astype(str).values.tolist()
    rows, attributes, how = mutate_table(rng, table)
    form = pick(rng, ["text", "text", "text", "bytes", "special"])
    what = f"{how} {write_rows(rng, path, rows, form)}"
    if form == "special":
        what = f"labels {special(path, pick(rng, SPECIALS))}"
    more = ["--class-map", env["base"] / "map.csv"] if attributes[0] == "dx" else []
    model, out = work / "model", work / "out.csv"
    argvs = [
        fit_argv(env["base"] / "frames.npz", path, model, ",".join(attributes), *more),
        predict_argv(env["base"] / "frames.npz", model, out, "--sampling-rate", 100),
    ]
    result = run(argvs, work)

    def check():
        allowed = {}
        values = {r[0]: r for r in rows[1:] if len(r) == len(rows[0])}  # nulls never allowed
        for j, name in enumerate(rows[0][1:], 1):
            if name in attributes:
                seen = {v[j].strip() for v in values.values()} - {"", "nan", "None", "NULL"}
                known = {"dx": set(CODES.values()), "sex": {"M", "F"}, "age": None}
                allowed[name] = known.get(name.lower(), seen)  # age groups: fit's own
        return check_predictions(out, env["ids"], allowed, 16)

    return result, check, what


def class_map_input(rng, env, work, i):
    pairs = list(CODES.items())
    how = pick(rng, ["two classes", "null", "odd values", "control", "one class", "empty",
                      "structure", "special"])  # fmt: skip
    if how == "two classes":
        code = pairs[int(rng.integers(4))][0]
        pairs.append((pick(rng, [code, f" {code} ", code.lower() + "x"]), "OTHER"))
    elif how in ("null", "odd values", "control"):
        j = int(rng.integers(4))
        odd = [0, 1.5, [], {}, True, "", " ", "x" * 100_000]
        value = {"null": None, "control": f"AF{pick(rng, CTRL)}"}.get(how, pick(rng, odd))
        pairs[j] = (pairs[j][0], value) if rng.random() < 0.7 else (str(value), pairs[j][1])
    elif how == "one class":
        pairs = [(c, "SR") for c, _ in pairs]
    elif how == "empty":
        pairs = []
    suffix = pick(rng, [".json", ".csv"])
    path = work / f"map{suffix}"
    if how == "structure":
        text = pick(rng, ["[1, 2]", "[" * 100_000, '{"a": "b"', "\xff\xfe", "code\n1\n", "{}",
                           '"text"', "code,class\n" + "1,2,3\n" * 3])  # fmt: skip
        path.write_bytes(text.encode("latin-1"))
    elif how == "special":
        special(path, pick(rng, SPECIALS))
    elif suffix == ".json":
        text = "{" + ", ".join(f"{json.dumps(c)}: {json.dumps(k)}" for c, k in pairs) + "}"
        path.write_text(text)
    else:
        rows = [["code", "class"]] + [[c, "" if k is None else k] for c, k in pairs]
        write_rows(rng, path, rows, "text")
    model, out = work / "model", work / "out.csv"
    argvs = [
        fit_argv(
            env["base"] / "frames.npz",
            env["base"] / "labels.csv",
            model,
            "dx,sex,age",
            "--class-map",
            path,
        ),
        predict_argv(env["base"] / "frames.npz", model, out, "--sampling-rate", 100),
    ]
    result = run(argvs, work)

    # A CSV cell is text ("[]" is a name there); in JSON a number is a name too,
    # but null, an array, an object or a boolean is no class.
    def is_name(value):
        if suffix == ".csv":
            return value is not None
        return isinstance(value, (str, int, float)) and not isinstance(value, bool)

    def check():
        classes, problems = {}, []
        saved = json.loads((model / "settings.json").read_text())["class_map"] or {}
        for code, name in pairs:
            key = str(code).strip().upper()
            if not is_name(name):
                if key in saved:
                    problems.append(f"class {name!r} of {key[:20]!r} kept as {saved[key]!r}")
            elif classes.setdefault(key, str(name).strip()) != str(name).strip():
                problems.append(f"code {key[:20]!r} in two classes accepted")
        allowed = dict(env["allowed"], dx={str(n).strip() for _, n in pairs if is_name(n)})
        return problems + check_predictions(out, env["ids"], allowed, 16)

    return result, check, f"{suffix} {how}"


# ----------------------------------------------------------- settings.json
# Fields that only change how records and labels are read: other scores are no
# error there. A class map with two codes' classes swapped, another class name
# for a code, or no map, is a consistent claim about the labels, as a negated
# weight tensor is one about the signals (fuzz_model_files counts it loaded):
# nothing in a folder can tell it from the author's (the user guide's trust page).
READING = ("conditioning", "normalize", "lead_names", "frame_seconds", "class map", "class_map")


def settings_input(rng, env, work, i):
    settings = json.loads(json.dumps(env["settings"]))
    how = pick(rng, ["attributes", "class attribute", "age groups", "class map", "document",
                      "document", "file"])  # fmt: skip
    field = how
    if how == "attributes":
        order = list(rng.permutation(3))
        settings["attributes"] = [settings["attributes"][j] for j in order]
        if order == [0, 1, 2]:
            settings["attributes"][1] = "Sex"
    elif how == "class attribute":
        settings["class_attribute"] = pick(rng, ["sex", "age", "DX", "none", None])
    elif how == "age groups":
        groups = settings["age_groups"]["age"]
        change = pick(rng, ["edges", "labels", "swap", "extra", "drop", "name"])
        if change == "edges":
            groups["edges"] = [groups["edges"][0] + float(pick(rng, [-20, 20, np.nan, 1e308]))]
        elif change == "labels":
            groups["labels"] = ["young", "old"]
        elif change == "swap":
            groups["labels"] = groups["labels"][::-1]
        elif change == "extra":
            groups["edges"].append(80.0)
            groups["labels"].append(">=80")
        elif change == "drop":
            settings["age_groups"] = {}
        else:
            settings["age_groups"] = {"sex": groups}
        field = f"age groups {change}"
    elif how == "class map":
        codes = list(settings["class_map"])
        a, b = rng.choice(len(codes), 2, replace=False)
        class_map = settings["class_map"]
        class_map[codes[a]], class_map[codes[b]] = class_map[codes[b]], class_map[codes[a]]
        if rng.random() < 0.3:
            settings["class_map"] = None
    elif how == "document":
        settings, field = mutate_document(np.random.RandomState(rng.integers(2**31)), settings)
    model = work / "model"
    shutil.copytree(env["base"] / "model", model)
    path = model / "settings.json"
    if how == "file":
        field = pick(rng, SPECIALS + ("deep", "bom", "control"))
        if field in SPECIALS:
            special(path, field)
        else:
            text = {
                "deep": "[" * 100_000,
                "bom": "\ufeff" + json.dumps(settings),
                "control": json.dumps(settings).replace('"V1"', '"V1\x1b[2J"'),
            }[field]
            path.write_text(text)
    else:
        path.write_text(json.dumps(settings, indent=2))
    out = work / "score"
    result = run([score_argv(model, out, env["base"])], work)

    def check():
        problems = []
        for name in ("clustering.csv", "retrieval.csv"):
            got, genuine = read_csv_rows(out / name), read_csv_rows(env["base"] / "score" / name)
            if isinstance(got, Exception) or not got:
                problems.append(f"no {name}")
            elif got != genuine and not any(key in field for key in READING):
                problems.append(f"{name} differs from the genuine settings' scores")
        return problems

    return result, check, field


# ----------------------------------------------------------- output folders
def outputs_input(rng, env, work, i):
    base = env["base"]
    command = pick(rng, ["predict", "predict", "score", "fit"])
    outside = work / "outside"
    outside.mkdir()
    victim = outside / "victim.txt"
    victim.write_text("keep me")
    folder = work / "out"
    folder.mkdir()
    force = rng.random() < 0.5
    if command == "predict":
        name = pick(rng, ["out.csv", f"o{pick(rng, CTRL)}.csv"])
        names, argv = [name], predict_argv(base / "frames.npz", base / "model", folder / name,
                                           "--sampling-rate", 100)  # fmt: skip
    elif command == "score":
        names = ["clustering.csv", "retrieval.csv", "prototypes.png", "retrieval.png"]
        argv = score_argv(base / "model", folder, base)
    else:
        names = ["model.safetensors", "settings.json"]
        argv = fit_argv(base / "frames.npz", base / "labels.csv", folder, "dx,sex",
                        "--class-map", base / "map.csv")  # fmt: skip
    planted = {}
    for name in rng.choice(names, int(rng.integers(1, len(names) + 1)), replace=False):
        how = pick(rng, ["dangling", "to victim", "file", "fifo", "to folder"])
        path = folder / name
        if how == "dangling":
            os.symlink(outside / f"new-{name}", path)
        elif how == "to victim":
            os.symlink(victim, path)
        elif how == "file":
            path.write_text("earlier result")
        elif how == "fifo":
            os.mkfifo(path)
        else:
            os.symlink(outside, path)
        planted[name] = how
    result = run([argv + (["--force"] if force else [])], work)

    def invariant():
        problems = []
        if victim.read_bytes() != b"keep me" or sorted(os.listdir(outside)) != ["victim.txt"]:
            problems.append("wrote through a link, outside the output folder")
        if not force:  # nothing planted may be replaced
            for name, how in planted.items():
                path = folder / name
                kept = (path.is_symlink() if how in ("dangling", "to victim", "to folder")
                        else path.is_fifo() if how == "fifo"
                        else path.is_file() and path.read_bytes() == b"earlier result")  # fmt: skip
                if not kept:
                    problems.append(f"replaced {how} {name} without --force")
        return problems

    def check():
        problems = []
        for name in names:
            path = folder / name
            if not (path.is_file() and not path.is_symlink() and path.stat().st_size):
                problems.append(f"{name} not written as a file")
        if command == "predict" and not problems:
            problems += check_predictions(folder / names[0], env["ids"], env["allowed"], 16)
        return problems

    what = f"{command}{' --force' if force else ''}: " + ", ".join(
        f"{str(n)!r} {h}" for n, h in planted.items()
    )
    return result, check, what, invariant


MAKERS = {"records": records_input, "labels": labels_input, "class-maps": class_map_input,
          "settings": settings_input, "outputs": outputs_input}  # fmt: skip


# ----------------------------------------------------------------- main
def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--inputs", type=int, default=200, help="per kind (default 200)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--kinds", nargs="+", choices=KINDS, default=list(KINDS))
    args = parser.parse_args(argv)
    counts, examples, memory = defaultdict(Counter), defaultdict(list), defaultdict(dict)
    with tempfile.TemporaryDirectory(prefix="fuzz-cli-") as top:
        top = Path(top)
        (top / "base").mkdir()
        BASELINE[0] = run([], top)["mb"]
        env = prepare(top / "base")
        for kind in args.kinds:
            start = time.monotonic()
            BASELINE[0] = 0
            BASELINE[0] = run([], top)["mb"]
            for i in range(args.inputs):
                rng = np.random.default_rng([args.seed, KINDS.index(kind), i])
                work = top / f"{kind}-{i}"
                work.mkdir()
                result, check, what, *invariant = MAKERS[kind](rng, env, work, i)
                outcome, detail = classify(result, check, *invariant)
                counts[kind][outcome] += 1
                examples[(kind, outcome)].append(f"{what!r}: {detail}"[:300])
                key = "refused" if outcome == "refused" else "any"
                memory[kind][key] = max(memory[kind].get(key, 0), result["mb"])
                shutil.rmtree(work, ignore_errors=True)
            memory[kind]["seconds"] = time.monotonic() - start
    print(f"{'kind':<12}" + "".join(f"{o:>9}" for o in OUTCOMES)
          + f"{'MB refused':>12}{'MB other':>10}{'seconds':>9}")  # fmt: skip
    for kind, counter in counts.items():
        m = memory[kind]
        print(f"{kind:<12}" + "".join(f"{counter[o]:>9}" for o in OUTCOMES)
              + f"{m.get('refused', 0):>12}{m.get('any', 0):>10}{m['seconds']:>9.0f}")  # fmt: skip
    for (kind, outcome), items in sorted(examples.items()):
        if outcome != "correct":
            shown = 3 if outcome == "refused" else 8
            print(f"\n{kind}, {outcome} (first {shown} of {len(items)}):")
            for item in items[:shown]:
                print(f"  {item.encode('unicode_escape').decode()}")
    bad = any(c[o] for c in counts.values() for o in ("silent", "crash", "hang"))
    return 1 if bad or any(m.get("refused", 0) >= REFUSED_MB for m in memory.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
