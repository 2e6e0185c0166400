"""The sklearn-crocs command line, end to end on real WFDB folders (tiny training settings)."""

import contextlib
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

import sklearn_crocs
from sklearn_crocs import _cli
from sklearn_crocs._cli import main

# Every test here reuses the models fitted once per module.
pytestmark = pytest.mark.xdist_group("cli")

REPOSITORY = Path(__file__).resolve().parents[1]
TINY = ["--fs", "50", "--frame-length", "250", "--embedding-dim", "8", "--max-epochs", "2"]
TINY += ["--batch-size", "16", "--random-state", "0"]
# CinC 2021 header values that must not be printed (attributes the user did not ask to see).
DX_CODES = ("426177001", "426783006", "164889003", "428750005")


def run(*argv):
    """``(status, stdout, stderr)`` of the command, run in this process."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            status = main([str(arg) for arg in argv])
        except SystemExit as exc:  # argparse: --help, --version, usage errors
            status = exc.code
    return status, out.getvalue(), err.getvalue()


def error_line(err):
    """The error message, checked to be a single line without a traceback."""
    lines = [line for line in err.splitlines() if line.startswith("sklearn-crocs: error:")]
    assert len(lines) == 1, err
    assert "Traceback" not in err
    return lines[0]


@pytest.fixture(scope="module")
def cinc(shared_data, tmp_path_factory):
    """A model fitted on the CinC 2021 folder, with progress output."""
    model = tmp_path_factory.mktemp("cinc") / "model"
    folder = shared_data / "cinc2021"
    result = run("fit", folder, "--attributes", "sex,age,dx", "--model", model, *TINY)
    return folder, model, result


@pytest.fixture
def ludb_with_bad_header(shared_data, tmp_path):
    """The LUDB subset (linked) plus one header that is not a WFDB header."""
    folder = tmp_path / "records"
    folder.mkdir()
    for path in (shared_data / "ludb-subset").glob("*.[hd][ea][at]"):
        os.symlink(path, folder / path.name)
    (folder / "bad.hea").write_text("this is not a WFDB header\n")
    return folder


def test_fit_cinc2021(cinc):
    folder, model, (status, out, err) = cinc
    assert status == 0, err
    # The Georgia headers (record line "E00271.mat") are repaired and reported.
    assert "warning: Repaired 3 WFDB header(s)" in err
    assert "E00271" in err
    assert "read 20 of 20 records" in err
    assert "load_wfdb" in err and "100%" in err  # the loader's progress bar
    assert "epoch" in out.lower()  # one line per epoch
    # A1041 is 17 s long: 3 frames of 5 s at 50 Hz, the other records 2 each.
    assert "Trained on 41 frames of 20 records in 2 epochs" in out
    assert "sex: F, M" in out and "dx: 12 values" in out
    assert sorted(p.name for p in model.iterdir()) == ["model.safetensors", "settings.json"]
    settings = json.loads((model / "settings.json").read_text())
    assert settings["fs"] == 50 and settings["frame_length"] == 250
    assert settings["attributes"] == ["sex", "age", "dx"]
    assert settings["class_attribute"] == "sex"
    assert len(settings["lead_names"]) == 12
    assert len(settings["age_groups"]["age"]["labels"]) == 4
    assert not any(code in out + err for code in DX_CODES)


def test_predict_one_row_per_record(cinc, tmp_path):
    folder, model, _ = cinc
    out_csv = tmp_path / "predictions.csv"
    status, out, err = run("predict", folder, "--model", model, "--out", out_csv, "--proba")
    assert status == 0, err
    assert "predict" in err and "100%" in err
    table = pd.read_csv(out_csv, dtype=str)
    names = sorted(p.stem for p in folder.glob("*.hea"))
    assert sorted(table["record"]) == names
    assert list(table.columns) == [
        "record",
        "sex",
        "age",
        "dx",
        "sex_proba",
        "age_proba",
        "dx_proba",
    ]
    settings = json.loads((model / "settings.json").read_text())
    assert set(table["sex"]) <= {"F", "M"}
    assert set(table["age"]) <= set(settings["age_groups"]["age"]["labels"])
    for column in ("sex_proba", "age_proba", "dx_proba"):
        assert table[column].astype(float).between(0, 1).all()
    # Predictions go to the file only.
    assert not any(code in out + err for code in DX_CODES)


def test_predict_without_repair_skips_georgia_records(cinc, tmp_path):
    folder, model, _ = cinc
    out_csv = tmp_path / "p.csv"
    argv = ["predict", folder, "--model", model, "--out", out_csv, "--no-repair-headers"]
    status, _, err = run(*argv, "--quiet")
    assert status == 0, err
    skipped = [line for line in err.splitlines() if line.startswith("sklearn-crocs: skipped")]
    assert len(skipped) == 3 and all("malformed WFDB header" in line for line in skipped)
    assert len(pd.read_csv(out_csv)) == 17
    # --strict stops at the first of them, with one line and no traceback.
    status, _, err = run(*argv, "--force", "--strict")
    assert status == 1
    assert "E00271.hea: malformed WFDB header" in error_line(err)


def hits(path):
    return pd.read_csv(path, dtype={"record": str, "query": str})


def test_search_full_query(cinc, tmp_path):
    folder, model, _ = cinc
    age = json.loads((model / "settings.json").read_text())["age_groups"]["age"]["labels"][-1]
    # A #Dx value with a comma: only a comma followed by "name=" starts a new pair.
    query = f"sex=F,age={age},dx=426177001,428750005"
    out_csv = tmp_path / "hits.csv"
    status, out, err = run(
        "search", folder, "--model", model, "--query", query, "--k", 5, "--out", out_csv
    )
    assert status == 0, err
    assert "embed" in err and "41/41" in err  # progress of the embedding
    table = hits(out_csv)
    assert list(table.columns) == ["query", "rank", "record", "distance"]
    assert (table["query"] == query).all()
    assert table["rank"].tolist() == [1, 2, 3, 4, 5]
    assert table["record"].is_unique  # records, not frames
    assert table["distance"].is_monotonic_increasing
    assert "Wrote the 5 nearest records for 1 query" in out


def test_search_every_prototype(cinc, tmp_path):
    folder, model, _ = cinc
    out_csv = tmp_path / "hits.csv"
    status, _, err = run("search", folder, "--model", model, "--k", 2, "--out", out_csv, "--quiet")
    assert status == 0, err
    table = hits(out_csv)
    n_ages = len(json.loads((model / "settings.json").read_text())["age_groups"]["age"]["labels"])
    assert table["query"].nunique() == 2 * n_ages * 12  # sex x age groups x dx values
    assert len(table) == 2 * table["query"].nunique()
    assert table.groupby("query")["record"].nunique().eq(2).all()


def test_search_partial_query(cinc, tmp_path):
    """A query naming some attributes retrieves by the prototypes that match it."""
    folder, model, _ = cinc
    out_csv = tmp_path / "hits.csv"
    argv = ["search", folder, "--model", model, "--query", "sex=F", "--k", 3, "--out", out_csv]
    status, _, err = run(*argv, "--quiet")
    assert status == 0, err
    table = hits(out_csv)
    assert table["query"].tolist() == ["sex=F"] * 3 and table["record"].is_unique


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ("sex=X", "'X' is not a value of 'sex' in this model; valid values: F, M."),
        ("height=1", "the model has no attribute 'height'; its attributes are sex, age, dx."),
    ],
)
def test_search_query_not_in_model(cinc, tmp_path, query, message):
    folder, model, _ = cinc
    out_csv = tmp_path / "hits.csv"
    status, _, err = run("search", folder, "--model", model, "--query", query, "--out", out_csv)
    assert status == 1
    assert message in error_line(err)
    assert not out_csv.exists()


@pytest.mark.parametrize(
    "argv",
    [
        ["--query", "sex"],  # no value
        ["--query", "sex=F,sex=M"],  # an attribute twice
        ["--k", "0"],
        [],  # no --out
    ],
)
def test_search_usage_errors(cinc, tmp_path, argv):
    folder, model, _ = cinc
    out = [] if not argv else ["--out", tmp_path / "hits.csv"]
    status, _, err = run("search", folder, "--model", model, *argv, *out)
    assert status == 2
    assert err.startswith("usage: sklearn-crocs search")


def test_outputs_are_not_overwritten_without_force(cinc, tmp_path):
    folder, model, _ = cinc
    out_csv = tmp_path / "predictions.csv"
    out_csv.write_text("keep me\n")
    argv = ["predict", folder, "--model", model, "--out", out_csv, "--quiet"]
    status, _, err = run(*argv)
    assert status == 1
    assert "exists; pass --force to overwrite it" in error_line(err)
    assert out_csv.read_text() == "keep me\n"
    assert run(*argv, "--force")[0] == 0
    assert len(pd.read_csv(out_csv)) == 20
    # A model folder that is not empty: refused before anything is read.
    status, _, err = run("fit", folder, "--attributes", "sex", "--model", model, "--quiet")
    assert status == 1
    assert f"--model {model} exists and is not empty" in error_line(err)


def test_ludb_headers_with_a_malformed_record(ludb_with_bad_header, tmp_path):
    model = tmp_path / "model"
    fit = ["fit", ludb_with_bad_header, "--attributes", "rhythm,sex,age", "--model", model]
    fit += [*TINY, "--fs", "100", "--frame-length", "1000", "--encoder", "cnn", "--quiet"]
    status, out, err = run(*fit)
    assert status == 0, err
    assert "skipped record bad: " in err and "bad.hea: invalid sampling frequency 'not'" in err
    assert "Trained on 12 frames of 12 records" in out
    out_csv = tmp_path / "predictions.csv"
    status, _, err = run("predict", ludb_with_bad_header, "--model", model, "--out", out_csv)
    assert status == 0, err
    assert len(pd.read_csv(out_csv)) == 12
    # --strict: the bad header is an error, reported on one line; nothing is written.
    status, _, err = run(*fit[:5], tmp_path / "strict", *fit[6:], "--strict")
    assert status == 1
    assert "bad.hea: invalid sampling frequency 'not'" in error_line(err)
    assert not (tmp_path / "strict").exists()


def test_ludb_labels_csv(shared_data, tmp_path):
    """Attributes from a CSV file (LUDB's sheet: cells spanning lines, all 200 records)."""
    folder = shared_data / "ludb-subset"
    model = tmp_path / "model"
    argv = ["fit", folder, "--labels", folder / "ludb.csv", "--attributes", "Rhythms,sex,age"]
    status, out, err = run(*argv, "--model", model, "--age-groups", 2, *TINY, "--quiet")
    assert status == 0, err
    assert "Trained on 24 frames of 12 records" in out
    assert "Rhythms: Atrial fibrillation, Sinus bradycardia, Sinus rhythm, Sinus tachycardia" in out
    settings = json.loads((model / "settings.json").read_text())
    assert len(settings["age_groups"]["age"]["labels"]) == 2


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--attributes", "rhythm,sex"], "no attribute 'rhythm' in the header comments; found"),
        (["--attributes", "sex", "--class-attribute", "dx"], "--class-attribute 'dx' is not"),
        (["--attributes", "sex", "--record-column", "id"], "--record-column needs --labels"),
    ],
)
def test_fit_data_errors(shared_data, tmp_path, argv, message):
    folder = shared_data / "cinc2021"
    status, _, err = run("fit", folder, *argv, "--model", tmp_path / "m", *TINY, "--quiet")
    assert status == 1
    assert message in error_line(err)


def test_missing_folder_and_model(cinc, tmp_path):
    folder, model, _ = cinc
    status, _, err = run("predict", tmp_path / "none", "--model", model, "--out", tmp_path / "p")
    assert status == 1 and "is not a folder" in error_line(err)
    status, _, err = run("predict", folder, "--model", tmp_path, "--out", tmp_path / "p")
    assert status == 1
    assert "is not a model folder written by 'sklearn-crocs fit'" in error_line(err)


def test_help_and_version():
    for command in ("fit", "predict", "search"):
        status, out, _ = run(command, "--help")
        assert status == 0 and out.startswith(f"usage: sklearn-crocs {command}")
    status, out, _ = run("--version")
    assert status == 0 and out.strip() == f"sklearn-crocs {sklearn_crocs.__version__}"
    # The main job's help names the subcommands.
    status, out, _ = run("--help")
    assert status == 0 and "sklearn-crocs fit, predict and search" in " ".join(out.split())


def test_without_subcommand_runs_the_main_job(monkeypatch):
    calls = []
    monkeypatch.setattr(_cli, "main_job", lambda argv: calls.append(argv) or 0)
    assert main(["--dataset", "ludb", "--max-epochs", "1"]) == 0
    assert main([]) == 0
    assert calls == [["--dataset", "ludb", "--max-epochs", "1"], []]


def test_entry_points(tmp_path):
    tomllib = pytest.importorskip("tomllib")
    project = tomllib.loads((REPOSITORY / "pyproject.toml").read_text())["project"]
    assert project["scripts"]["sklearn-crocs"] == "sklearn_crocs._cli:main"
    # python -m sklearn_crocs: exit codes and messages as a user sees them.
    env = {**os.environ, "PYTHONPATH": str(REPOSITORY)}
    command = [sys.executable, "-m", "sklearn_crocs", "predict", "records", "--model", "m"]
    command += ["--out", "p.csv"]
    options = {"capture_output": True, "text": True, "env": env, "cwd": tmp_path, "timeout": 300}
    result = subprocess.run(command, **options)
    assert result.returncode == 1
    assert result.stderr == (
        "sklearn-crocs: error: --model m is not a model folder written by 'sklearn-crocs fit' "
        "(it needs model.safetensors and settings.json).\n"
    )
    result = subprocess.run([*command, "--debug"], **options)
    assert result.returncode == 1 and "Traceback" in result.stderr
    assert list(tmp_path.iterdir()) == []
