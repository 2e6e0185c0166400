"""What the package writes and prints: never through a link, never over a file it was not
told to replace, and nothing from a file or a model that acts on a terminal (issue 57, 5-6).
"""

import contextlib
import io
import os

import numpy as np
import pandas as pd
import pytest
from test_cli import run

from sklearn_crocs import CROCSClusterer, PrototypeRetriever
from sklearn_crocs._utils import _atomic_path
from sklearn_crocs.cli._job import _figure
from sklearn_crocs.cli._job import main as job_main
from sklearn_crocs.metrics import evaluate_prototypes

pytestmark = pytest.mark.xdist_group("cli")

# An attribute name that would colour the terminal red and ring its bell.
NAME = "a\x1b[31mb\x07"


def error_line(err):
    (line,) = [ln for ln in err.splitlines() if ln.startswith("sklearn-crocs: error:")]
    return line


@pytest.fixture(scope="module")
def records(tmp_path_factory):
    """24 single-lead 10-s records at 50 Hz and their labels, one attribute named ``NAME``."""
    folder = tmp_path_factory.mktemp("records")
    rng = np.random.RandomState(0)
    ids = np.array([f"r{i}" for i in range(24)])
    np.savez(folder / "x.npz", X=rng.randn(24, 1, 500).astype(np.float32), record_ids=ids)
    labels = {"id": ids, NAME: np.repeat(["u", "v"], 12), "sex": np.tile(["F", "M"], 12)}
    pd.DataFrame(labels).to_csv(folder / "labels.csv", index=False)
    return [folder / "x.npz", "--sampling-rate", 50, "--labels", folder / "labels.csv"]


@pytest.fixture(scope="module")
def model_dir(records):
    model = records[0].parent / "m"
    status, _, err = run("fit", *records, "--attributes", f"{NAME},sex", "--model", model, *FIT)
    assert status == 0, err
    return model


FIT = ["--working-rate", 50, "--no-conditioning", "--embedding-dim", 8, "--max-epochs", 2]
FIT += ["--batch-size", 16, "--random-state", 0, "--quiet"]


# ------------------------------------------------------------ 5: no file through a link
@pytest.mark.parametrize("force", [[], ["--force"]])
def test_score_writes_no_figure_through_a_link(records, model_dir, tmp_path, force):
    out_dir = tmp_path / "scores"
    out_dir.mkdir()
    outside = tmp_path / "outside"
    outside.mkdir()
    for name in ("prototypes.png", "retrieval.png"):
        (out_dir / name).symlink_to(outside / name)  # dangling: nothing there yet
    status, _, err = run("score", *records, "--model", model_dir, "--out-dir", out_dir,
                         "--k", 1, *force)  # fmt: skip
    assert status == 1
    assert "prototypes.png is a symbolic link" in error_line(err)
    assert not any(outside.iterdir())
    assert all((out_dir / name).is_symlink() for name in ("prototypes.png", "retrieval.png"))


@pytest.mark.parametrize("force", [[], ["--force"]])
@pytest.mark.parametrize("command", ["predict", "search"])
def test_predict_and_search_write_no_table_through_a_link(
    records, model_dir, tmp_path, force, command
):
    out = tmp_path / "table.csv"
    out.symlink_to(tmp_path / "elsewhere.csv")
    status, _, err = run(command, *records[:3], "--model", model_dir, "--out", out, *force)
    assert status == 1
    assert "table.csv is a symbolic link" in error_line(err)
    assert out.is_symlink() and not (tmp_path / "elsewhere.csv").exists()


def test_fit_force_writes_no_settings_through_a_link(records, model_dir, tmp_path):
    target = tmp_path / "model"
    target.mkdir()
    (target / "settings.json").symlink_to(tmp_path / "elsewhere.json")
    status, _, err = run("fit", *records, "--attributes", "sex", "--model", target,
                         *FIT, "--force")  # fmt: skip
    assert status == 1
    assert "settings.json is a symbolic link" in error_line(err)
    assert not (tmp_path / "elsewhere.json").exists()


def test_model_and_embeddings_are_not_saved_onto_a_link(model_dir, tmp_path):
    model = CROCSClusterer.load(model_dir / "model.safetensors")
    link = tmp_path / "model.safetensors"
    link.symlink_to(tmp_path / "elsewhere")
    for overwrite in (False, True):
        with pytest.raises(FileExistsError, match="model.safetensors .*symbolic link"):
            model.save(link, overwrite=overwrite)
    embeddings = tmp_path / "embeddings.npy"
    embeddings.symlink_to(tmp_path / "elsewhere")
    X = np.random.RandomState(0).randn(6, 1, 250)
    with pytest.raises(FileExistsError, match="embeddings.npy is a symbolic link"):
        PrototypeRetriever(model, embeddings_path=embeddings).fit(X)
    assert link.is_symlink() and embeddings.is_symlink()
    assert not (tmp_path / "elsewhere").exists()


def test_the_job_writes_no_figure_through_a_link(model_dir, tmp_path):
    pytest.importorskip("matplotlib")
    model = CROCSClusterer.load(model_dir / "model.safetensors")
    X = np.random.RandomState(0).randn(8, 1, 250)
    y = pd.DataFrame({NAME: ["u", "v"] * 4, "sex": ["F"] * 4 + ["M"] * 4})
    link = tmp_path / "prototypes.png"
    link.symlink_to(tmp_path / "elsewhere.png")
    with pytest.raises(FileExistsError, match="prototypes.png is a symbolic link"):
        _figure(model, X, y, NAME, "title", link)
    assert not (tmp_path / "elsewhere.png").exists()
    # The job refuses it before training.
    with pytest.raises(SystemExit), contextlib.redirect_stderr(io.StringIO()) as err:
        job_main(["--output-dir", str(tmp_path), "--max-epochs", "1", "--quiet"])
    assert "prototypes.png is a symbolic link" in err.getvalue()
    # A figure of an earlier run is the job's own: replaced.
    link.unlink()
    link.write_bytes(b"an earlier figure")
    _figure(model, X, y, NAME, "title", link)
    assert link.read_bytes()[:4] == b"\x89PNG"


def test_the_writer_replaces_only_what_it_is_told_to(tmp_path):
    path = tmp_path / "results.csv"
    path.write_text("the user's\n")
    with pytest.raises(FileExistsError, match="results.csv exists"):
        with _atomic_path(path) as tmp:
            tmp.write_text("new\n")
    assert path.read_text() == "the user's\n"
    assert os.listdir(tmp_path) == ["results.csv"]  # no temporary left
    with _atomic_path(path, replace=True) as tmp:
        tmp.write_text("new\n")
    assert path.read_text() == "new\n"
    # A link is never written through; a cache replaces the link itself, not its target.
    victim = tmp_path / "victim.txt"
    victim.write_text("kept\n")
    link = tmp_path / "link.txt"
    link.symlink_to(victim)
    for replace in (False, True):
        with pytest.raises(FileExistsError, match="link.txt is a symbolic link"):
            with _atomic_path(link, replace=replace) as tmp:
                tmp.write_text("new\n")
    with _atomic_path(link, replace="cache") as tmp:
        tmp.write_text("cache\n")
    assert not link.is_symlink() and link.read_text() == "cache\n"
    assert victim.read_text() == "kept\n"


# ---------------------------------------------------- 6: nothing raw reaches a terminal
def test_score_prints_attribute_names_escaped(records, model_dir, tmp_path):
    status, out, err = run("score", *records, "--model", model_dir, "--out-dir",
                           tmp_path / "s", "--k", 1)  # fmt: skip
    assert status == 0, err
    assert "\x1b" not in out + err and "\x07" not in out + err
    assert "a\\x1b[31mb\\x07" in out  # shown, as escapes
    # The file keeps the name as it is.
    assert NAME in (tmp_path / "s" / "clustering.csv").read_text()


def test_evaluate_prototypes_prints_values_escaped(model_dir):
    model = CROCSClusterer.load(model_dir / "model.safetensors")
    X = np.random.RandomState(0).randn(8, 1, 250)
    y = pd.DataFrame({NAME: ["u", "v"] * 4, "sex": ["F"] * 4 + ["M"] * 4})
    file = io.StringIO()
    evaluate_prototypes(model, X, y, k=1, file=file)
    assert "\x1b" not in file.getvalue() and "a\\x1b[31mb\\x07" in file.getvalue()
