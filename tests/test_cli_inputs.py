"""The command line reads what it needs, and refuses special files (issue 45, items 5 and 13)."""

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from test_cli import error_line, run
from test_model_consistency import fit_cli_model

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def cli_model(tmp_path_factory):
    return fit_cli_model(tmp_path_factory.mktemp("cli"))


_PEAK = textwrap.dedent(
    """
    import resource, sys
    from sklearn_crocs.cli import main

    status = main(sys.argv[1:])
    print(status, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
    """
)


def _predict_peak(records, model, out):
    """``(status, peak KiB)`` of ``sklearn-crocs predict`` in a fresh process."""
    argv = ["predict", records, "--sampling-rate", "500", "--model", model, "--out", out]
    result = subprocess.run(
        [sys.executable, "-c", _PEAK, *map(str, argv), "--quiet", "--force"],
        capture_output=True, text=True, timeout=600, cwd=ROOT,
        env={**os.environ, "PYTHONPATH": os.fspath(ROOT), "OMP_NUM_THREADS": "1"},
    )  # fmt: skip
    status, peak = result.stdout.split()[-2:]
    return int(status), int(peak)


@pytest.mark.bad_input(".npz input", "1.2 GB unused member in a 1.4 MB file", "(not read)")
def test_unused_npz_members_are_not_read(cli_model, tmp_path):
    data = np.load(cli_model / "two.npz")
    arrays = {key: data[key] for key in data.files}
    np.savez_compressed(tmp_path / "genuine.npz", **arrays)
    np.savez_compressed(
        tmp_path / "bomb.npz", **arrays, junk=np.zeros(300_000_000, dtype=np.float32)
    )
    assert (tmp_path / "bomb.npz").stat().st_size < 5e6
    status, genuine = _predict_peak(tmp_path / "genuine.npz", cli_model / "model", tmp_path / "a")
    assert status == 0
    status, bomb = _predict_peak(tmp_path / "bomb.npz", cli_model / "model", tmp_path / "b")
    assert status == 0
    print(f"peak memory above a genuine file: {(bomb - genuine) / 1024:.1f} MiB")
    assert bomb - genuine < 200 * 1024  # KiB


def _huge_header(path):
    with open(path, "wb") as fh:  # 1000 x 12 x 3.3 million float32: 149 GiB declared
        shape = (1000, 12, 3_333_333)
        np.lib.format.write_array_header_1_0(
            fh, {"descr": "<f4", "fortran_order": False, "shape": shape}
        )
        fh.write(bytes(100))


@pytest.mark.bad_input(
    ".npy/.npz input", "header declaring 149 GiB, FIFO or device named .npy", "CommandError"
)
@pytest.mark.parametrize("kind", ["huge-npy", "huge-npz", "fifo", "dev-zero"])
def test_special_and_crafted_arrays_are_one_clear_line(cli_model, tmp_path, kind):
    path = tmp_path / ("x.npz" if kind == "huge-npz" else "x.npy")
    if kind == "huge-npy":
        _huge_header(path)
        message = "cannot read"
    elif kind == "huge-npz":
        _huge_header(tmp_path / "X.npy")
        import zipfile

        with zipfile.ZipFile(path, "w") as archive:
            archive.write(tmp_path / "X.npy", "X.npy")
        message = "declares 159999984000 bytes of float32 in a member of 228 bytes"
    elif kind == "fifo":
        os.mkfifo(path)
        message = "not a regular file or a folder but a FIFO"
    else:
        if not os.path.exists("/dev/zero"):
            pytest.skip("no /dev/zero")
        path.symlink_to("/dev/zero")
        message = "not a regular file or a folder but a FIFO"
    # Without --sampling-rate a special file was read as EDF, and a FIFO hung.
    rate = ["--sampling-rate", 500] if kind.startswith("huge") else []
    argv = ["predict", path, *rate, "--model", cli_model / "model"]
    status, _, err = run(*argv, "--out", tmp_path / "out.csv", "--quiet")
    assert status == 1
    assert message in error_line(err)


# ------------------------------------ item 12: terminal output escaped
@pytest.mark.bad_input(
    "Command line", "ESC sequences and U+202E in labels and record names", "(escaped)"
)
def test_control_and_bidi_characters_are_escaped(cli_model, tmp_path):
    import pandas as pd

    evil = ["\x1b[2J\x1b[31mred", "\u202eevil", "bell\x07"]
    labels = pd.DataFrame({"group": [evil[i % 3] for i in range(102)]})
    labels.to_csv(tmp_path / "labels.csv", index=False)
    argv = ["fit", cli_model / "two.npz", "--sampling-rate", 500, "--labels"]
    argv += [tmp_path / "labels.csv", "--attributes", "group", "--model", tmp_path / "m"]
    argv += ["--working-rate", 100, "--encoder", "cnn", "--embedding-dim", "8"]
    status, out, err = run(*argv, "--max-epochs", "1", "--quiet")
    assert status == 0, err
    assert "\\x1b[2J\\x1b[31mred" in out and "\\u202eevil" in out and "bell\\x07" in out
    # A record named with control characters, in an error line.
    ids = np.array([f"L\x1b]0;title\x07{i}" for i in range(102)])
    data = np.load(cli_model / "two.npz")
    np.savez(tmp_path / "ids.npz", X=data["X"], record_ids=ids)
    labels.assign(id=ids).iloc[[0, 0]].to_csv(tmp_path / "twice.csv", index=False)
    argv = ["fit", tmp_path / "ids.npz", "--sampling-rate", 500, "--labels", tmp_path / "twice.csv"]
    argv += ["--record-column", "id", "--attributes", "group", "--model", tmp_path / "m2"]
    status, _, err = run(*argv, "--quiet")
    assert status == 1
    assert "L\\x1b]0;title\\x07" in error_line(err)
    for text in (out, err):
        assert not any(c in text for c in "\x1b\x07\u202e")
