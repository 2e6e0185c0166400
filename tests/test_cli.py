"""The sklearn-crocs command line, end to end on real records (tiny training settings).

WFDB folders (CinC 2021, LUDB), EDF files and arrays written here, and the
bundled data.
"""

import contextlib
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import sklearn_crocs
from sklearn_crocs.cli import _parser, main
from sklearn_crocs.datasets._base import STANDARD_LEADS

# Every test here reuses the models fitted once per module.
pytestmark = pytest.mark.xdist_group("cli")

REPOSITORY = Path(__file__).resolve().parents[1]
# 50 Hz and 5-s frames (the default): 250 samples per frame.
TINY = ["--working-rate", "50", "--embedding-dim", "8", "--max-epochs", "2"]
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
    assert "read: 100%" in err  # the reader's progress bar
    assert "epoch" in out.lower()  # one line per epoch
    # A1041 is 17 s long: 3 frames of 5 s at 50 Hz, the other records 2 each.
    assert "Trained on 41 frames of 20 records in 2 epochs" in out
    assert "sex: F, M" in out and "dx: 12 values" in out
    assert sorted(p.name for p in model.iterdir()) == ["model.safetensors", "settings.json"]
    settings = json.loads((model / "settings.json").read_text())
    assert settings["working_rate"] == 50 and settings["frame_length"] == 250
    assert settings["frame_seconds"] == 5
    # Conditioned by default, with the conditioner's defaults.
    assert settings["conditioning"] == {
        "bandpass": [0.67, 40.0],
        "notch": None,
        "normalize": "zscore",
    }
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


@pytest.mark.bad_input("Command line", "settings.json with its age groups permuted", "CommandError")
def test_permuted_age_groups_beside_the_model_are_refused(cinc, tmp_path):
    import shutil

    folder, model, _ = cinc
    copy = tmp_path / "model"
    shutil.copytree(model, copy)
    settings = json.loads((copy / "settings.json").read_text())
    labels = settings["age_groups"]["age"]["labels"]
    settings["age_groups"]["age"]["labels"] = labels[::-1]  # would label the young as old
    (copy / "settings.json").write_text(json.dumps(settings))
    for command in (["predict", "--out", tmp_path / "p.csv"], ["score", "--out-dir", tmp_path]):
        status, _, err = run(command[0], folder, "--model", copy, *command[1:], "--quiet")
        assert status == 1
        assert "age_groups of 'age' labelled" in error_line(err)
    assert not (tmp_path / "p.csv").exists()


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
    fit += [*TINY, "--working-rate", "100", "--frame-seconds", "10", "--encoder", "cnn", "--quiet"]
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
    assert status == 1 and "none does not exist; RECORDS is a folder" in error_line(err)
    status, _, err = run("predict", folder, "--model", tmp_path, "--out", tmp_path / "p")
    assert status == 1
    assert "is not a model folder written by 'sklearn-crocs fit'" in error_line(err)


def test_help_and_version():
    for command in ("fit", "predict", "search", "evaluate"):
        status, out, _ = run(command, "--help")
        assert status == 0 and out.startswith(f"usage: sklearn-crocs {command}")
    status, out, _ = run("--version")
    assert status == 0 and out.strip() == f"sklearn-crocs {sklearn_crocs.__version__}"
    # The main job's help names the subcommands.
    status, out, _ = run("--help")
    assert status == 0 and "sklearn-crocs fit, predict, search, score and evaluate" in " ".join(out.split())


def test_without_subcommand_runs_the_main_job(monkeypatch):
    calls = []
    monkeypatch.setattr(_parser, "main_job", lambda argv: calls.append(argv) or 0)
    assert main(["--dataset", "ludb", "--max-epochs", "1"]) == 0
    assert main([]) == 0
    assert calls == [["--dataset", "ludb", "--max-epochs", "1"], []]


def test_entry_points(tmp_path):
    tomllib = pytest.importorskip("tomllib")
    project = tomllib.loads((REPOSITORY / "pyproject.toml").read_text())["project"]
    assert project["scripts"]["sklearn-crocs"] == "sklearn_crocs.cli:main"
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


# ------------------------------------------------------------ other inputs


def python(code):
    """Standard output of ``python -c code`` in a fresh interpreter."""
    env = {**os.environ, "PYTHONPATH": str(REPOSITORY)}
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300
    )
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


def test_importing_the_cli_imports_no_torch():
    """--help answers at once: the parser module imports neither torch nor numpy."""
    code = (
        "import sys, sklearn_crocs.cli; "
        "print(sorted(m for m in ('torch', 'skorch', 'numpy', 'pandas') if m in sys.modules))"
    )
    assert python(code) == "[]"


def test_the_package_imports_its_estimators_on_first_use():
    code = (
        "import sys, sklearn_crocs; before = 'torch' in sys.modules; "
        "from sklearn_crocs import CROCSClusterer, PrototypeRetriever; "
        "print(before, 'torch' in sys.modules, CROCSClusterer.__name__, "
        "set(sklearn_crocs.__all__) <= set(dir(sklearn_crocs)))"
    )
    assert python(code) == "False True CROCSClusterer True"


def test_fit_on_the_bundled_ptbxl_sample(tmp_path):
    model = tmp_path / "model"
    argv = ["fit", "bundled:ptbxl-sample", "--attributes", "class,sex,age", "--model", model]
    argv += ["--encoder", "cnn", "--embedding-dim", "8", "--max-epochs", "1", "--quiet"]
    status, out, err = run(*argv)
    assert status == 0, err
    # 10-s records at the estimator's working rate: two 5-s frames each.
    assert "Trained on 1000 frames of 500 records in 1 epochs" in out
    assert "class: ABN, NORM; sex: F, M; age: " in out
    settings = json.loads((model / "settings.json").read_text())
    assert settings["working_rate"] == _cli_default_rate()
    assert settings["frame_length"] == round(5 * settings["working_rate"])
    assert settings["lead_names"][:3] == ["I", "II", "III"]
    # predict on the same records: one row per record, named by ecg_id.
    out_csv = tmp_path / "p.csv"
    status, _, err = run("predict", "bundled:ptbxl-sample", "--model", model, "--out", out_csv)
    assert status == 0, err
    table = pd.read_csv(out_csv, dtype=str)
    assert len(table) == 500 and table["record"].str.isdigit().all()
    assert set(table["class"]) <= {"ABN", "NORM"}


def test_fit_ensemble_size_trains_that_many_nets(ludb_arrays, tmp_path):
    from sklearn_crocs import CROCSClusterer

    folder, _ = ludb_arrays
    model = tmp_path / "model"
    argv = ["fit", folder / "ludb100.npz", "--sampling-rate", 100, "--labels"]
    argv += [folder / "labels.csv", "--attributes", "rhythm,sex", "--model", model]
    argv += [*TINY, "--ensemble-size", "2", "--quiet"]
    status, _, err = run(*argv)
    assert status == 0, err
    fitted = CROCSClusterer.load(model / "model.safetensors")
    assert fitted.ensemble_size == 2 and len(fitted.nets_) == 2
    # predict reads the two nets' embeddings.
    status, _, err = run("predict", folder / "ludb100.npz", "--sampling-rate", 100,
                         "--model", model, "--out", tmp_path / "p.csv")  # fmt: skip
    assert status == 0, err
    assert len(pd.read_csv(tmp_path / "p.csv")) == 102


def _cli_default_rate():
    from sklearn_crocs import CROCSClusterer

    return CROCSClusterer().working_rate


@pytest.fixture(scope="module")
def ludb_arrays(tmp_path_factory):
    """The bundled LUDB records (500 Hz, mV) as .npz files at 500 and 100 Hz, and a labels CSV."""
    from sklearn_crocs.datasets import load_ludb
    from sklearn_crocs.preprocessing import resample_signals

    folder = tmp_path_factory.mktemp("arrays")
    ludb = load_ludb()
    ids = np.array([f"L{name}" for name in ludb.record_names])
    np.savez(folder / "ludb500.npz", X=ludb.data, record_ids=ids, lead_names=ludb.lead_names)
    X100 = resample_signals(ludb.data, 500, 100).astype(np.float32)
    np.savez(folder / "ludb100.npz", X=X100, record_ids=ids, lead_names=ludb.lead_names)
    np.save(folder / "ludb100.npy", X100)
    labels = ludb.attributes[["rhythm", "sex", "age"]].assign(id=ids)
    labels.to_csv(folder / "labels.csv", index=False)  # in the arrays' order
    labels.iloc[::-1].to_csv(folder / "shuffled.csv", index=False)  # needs --record-column
    return folder, ludb


@pytest.fixture(scope="module")
def model_100hz(ludb_arrays, tmp_path_factory):
    """A model fitted on the LUDB records at 100 Hz, its labels in the array's order."""
    folder, _ = ludb_arrays
    model = tmp_path_factory.mktemp("model100") / "model"
    argv = ["fit", folder / "ludb100.npz", "--sampling-rate", 100, "--labels"]
    argv += [folder / "labels.csv", "--attributes", "rhythm,sex", "--model", model]
    argv += ["--working-rate", 100, "--encoder", "cnn", "--embedding-dim", "8"]
    argv += ["--max-epochs", "3", "--random-state", "0", "--quiet"]
    status, out, err = run(*argv)
    assert status == 0, err
    assert "Trained on 204 frames of 102 records" in out
    return model


def test_npz_with_labels_in_order_and_by_record_column(ludb_arrays, model_100hz, tmp_path):
    folder, _ = ludb_arrays
    settings = json.loads((model_100hz / "settings.json").read_text())
    assert settings["lead_names"][0] == "I" and settings["working_rate"] == 100
    # The same labels in another order, matched by the record ids of the .npz file.
    argv = ["fit", folder / "ludb100.npz", "--sampling-rate", 100, "--labels"]
    argv += [folder / "shuffled.csv", "--record-column", "id", "--attributes", "rhythm,sex"]
    argv += ["--model", tmp_path / "m", "--no-conditioning", *TINY, "--quiet"]
    status, out, err = run(*argv)
    assert status == 0, err
    assert "Trained on 204 frames of 102 records" in out
    settings = json.loads((tmp_path / "m" / "settings.json").read_text())
    assert settings["conditioning"] is None and settings["normalize"] == "zscore"
    # Without --record-column, a CSV in another order than the array is refused when
    # its length differs; here rows are taken in order (the user's declaration).
    short = tmp_path / "short.csv"
    pd.read_csv(folder / "labels.csv").head(10).to_csv(short, index=False)
    argv = ["fit", folder / "ludb100.npz", "--sampling-rate", 100, "--labels", short]
    status, _, err = run(*argv, "--attributes", "rhythm", "--model", tmp_path / "m2", "--quiet")
    assert status == 1
    assert "has 10 rows for the 102 records" in error_line(err)


def test_normalize_zscore_joint_is_saved_and_unit_free(ludb_arrays, tmp_path):
    """--normalize zscore-joint: one spread for all leads of a record, kept by the model."""
    folder, _ = ludb_arrays
    argv = ["fit", folder / "ludb100.npz", "--sampling-rate", 100, "--labels"]
    argv += [folder / "labels.csv", "--attributes", "rhythm,sex", "--model", tmp_path / "m"]
    status, _, err = run(*argv, "--normalize", "zscore-joint", *TINY, "--quiet")
    assert status == 0, err
    settings = json.loads((tmp_path / "m" / "settings.json").read_text())
    assert settings["conditioning"]["normalize"] == "zscore-joint"
    # The same records in microvolts are predicted alike: the scaling has no unit.
    with np.load(folder / "ludb100.npz") as arrays:
        np.savez(tmp_path / "uv.npz", **{**arrays, "X": 1000 * arrays["X"]})
    tables = []
    for name in ("ludb100.npz", "uv.npz"):
        source = folder / name if name.startswith("ludb") else tmp_path / name
        argv = ["predict", source, "--sampling-rate", 100, "--model", tmp_path / "m"]
        status, _, err = run(*argv, "--out", tmp_path / f"{name}.csv", "--proba", "--quiet")
        assert status == 0, err
        tables.append(pd.read_csv(tmp_path / f"{name}.csv"))
    np.testing.assert_allclose(tables[0]["rhythm_proba"], tables[1]["rhythm_proba"], atol=1e-4)
    # The parser lists the choices by hand (it imports no numpy): they are normalize_frames'.
    from sklearn_crocs.preprocessing._signals import NORMALIZE_METHODS

    status, out, _ = run("fit", "--help")
    assert status == 0 and f"--normalize {{{','.join([*NORMALIZE_METHODS, 'none'])}}}" in out


def test_predict_at_another_rate_than_the_model(ludb_arrays, model_100hz, tmp_path):
    """Records at 500 Hz given to a 100 Hz model are prepared as the 100 Hz ones."""
    folder, _ = ludb_arrays
    tables = {}
    for rate in (100, 500):
        out_csv = tmp_path / f"p{rate}.csv"
        argv = ["predict", folder / f"ludb{rate}.npz", "--sampling-rate", rate]
        status, _, err = run(*argv, "--model", model_100hz, "--out", out_csv, "--proba", "--quiet")
        assert status == 0, err
        tables[rate] = pd.read_csv(out_csv, dtype={"record": str})
    a, b = tables[100], tables[500]
    assert a["record"].tolist() == b["record"].tolist()
    # Conditioning the 500 Hz records and their 100 Hz copies (resampled without
    # filtering) agrees within 0.015 SD inside the records but not at their ends
    # (0.2-0.3 SD in the first and last half second, where filtering and
    # resampling settle differently at the two rates, and LUDB's last samples
    # are noisy). Measured:
    # 92-95 % of the records get the same rhythm and sex (the others are near
    # ties), with a median difference of 0.013 in the predicted rhythm's probability.
    assert (a["rhythm"] == b["rhythm"]).mean() >= 0.85
    assert (a["sex"] == b["sex"]).mean() >= 0.85
    assert (a["rhythm_proba"] - b["rhythm_proba"]).abs().median() < 0.03
    # The unnamed .npy array of the same records: its leads are taken in the model's order.
    out_csv = tmp_path / "npy.csv"
    argv = ["predict", folder / "ludb100.npy", "--sampling-rate", 100, "--model", model_100hz]
    status, _, err = run(*argv, "--out", out_csv, "--proba", "--quiet")
    assert status == 0, err
    npy = pd.read_csv(out_csv)
    assert npy["record"].tolist() == list(range(102))
    assert (npy["rhythm"].to_numpy() == a["rhythm"].to_numpy()).all()


@pytest.mark.parametrize(
    ("shape", "extra", "message"),
    [
        (
            (4, 1000, 12),
            ["--sampling-rate", "100"],
            "X has shape (4, 1000, 12): 1000 leads of 12 samples each. Signals go "
            "channel-first, (n_ecgs, n_leads, n_samples); an array stacked from wfdb.rdsamp "
            "is (n_ecgs, n_samples, n_leads): pass np.swapaxes(X, 1, 2).",
        ),
        (
            (4, 12, 1000),
            [],
            "arrays carry no sampling rate; pass --sampling-rate HZ",
        ),
        (
            (4, 12, 100),
            ["--sampling-rate", "500"],
            "X has 100 samples per lead, 0.2 s at the declared 500 Hz: too short for an ECG.",
        ),
        (
            (4, 1000),
            ["--sampling-rate", "100"],
            "For one lead, save X[:, np.newaxis, :].",
        ),
    ],
)
def test_arrays_refused(tmp_path, shape, extra, message):
    path = tmp_path / "X.npy"
    np.save(path, np.zeros(shape, dtype=np.float32))
    argv = ["fit", path, *extra, "--attributes", "sex", "--model", tmp_path / "m", "--quiet"]
    status, _, err = run(*argv)
    assert status == 1
    assert message in error_line(err)
    assert not (tmp_path / "m").exists()


def test_option_errors(ludb_arrays, tmp_path):
    folder, _ = ludb_arrays
    base = ["--attributes", "rhythm", "--model", tmp_path / "m", "--quiet"]
    cases = [
        (
            [folder / "ludb100.npz", "--sampling-rate", 100, "--no-conditioning", "--notch", 50],
            "--notch is part of the conditioning; leave out --no-conditioning.",
        ),
        (["bundled:ptbxl-sample", "--sampling-rate", 100], "has its own rate"),
        (["bundled:nothing"], "unknown bundled data 'bundled:nothing'"),
        (
            [folder / "ludb100.npz", "--sampling-rate", 100],
            "has no attributes of its own; pass --labels CSV",
        ),
    ]
    for argv, message in cases:
        status, _, err = run("fit", *argv, *base)
        assert status == 1, argv
        assert message in error_line(err)


@pytest.fixture(scope="module")
def edf_folder(ludb_arrays, tmp_path_factory):
    """LUDB records as EDF+ files in uV with 'ECG <lead>' labels, and a labels CSV."""
    edfio = pytest.importorskip("edfio")
    folder, ludb = ludb_arrays
    edf = tmp_path_factory.mktemp("edf")
    names = [f"rec{name}" for name in ludb.record_names[:30]]
    for name, signal in zip(names, ludb.data):
        microvolts = signal.astype(float) * 1000
        span = float(np.abs(microvolts).max()) + 1
        edfio.Edf(
            [
                edfio.EdfSignal(
                    x,
                    500,
                    label=f"ECG {lead}",
                    physical_dimension="uV",
                    physical_range=(-span, span),
                )
                for x, lead in zip(microvolts, ludb.lead_names)
            ],
            annotations=[edfio.EdfAnnotation(0.0, None, "recording start")],
        ).write(edf / f"{name}.edf")
    labels = ludb.attributes.iloc[:30][["rhythm", "sex", "age"]].assign(record=names)
    labels[["record", "rhythm", "sex", "age"]].to_csv(edf / "labels.csv", index=False)
    return edf


def test_fit_and_search_on_edf_files(edf_folder, tmp_path):
    model = tmp_path / "model"
    argv = ["fit", edf_folder, "--labels", edf_folder / "labels.csv"]
    argv += ["--attributes", "sex,age", "--age-groups", 2, "--model", model, *TINY]
    status, out, err = run(*argv)
    assert status == 0, err
    assert "read 30 of 30 records of" in err and "12 leads x 250 samples at 50 Hz" in err
    assert "Trained on 60 frames of 30 records" in out
    settings = json.loads((model / "settings.json").read_text())
    assert settings["lead_names"] == list(STANDARD_LEADS)
    # One EDF file on its own, and a search over the folder.
    one = sorted(edf_folder.glob("*.edf"))[0]
    status, _, err = run("predict", one, "--model", model, "--out", tmp_path / "p.csv", "--quiet")
    assert status == 0, err
    assert pd.read_csv(tmp_path / "p.csv")["record"].tolist() == [one.stem]
    out_csv = tmp_path / "hits.csv"
    argv = ["search", edf_folder, "--model", model, "--query", "sex=F", "--k", 3, "--out", out_csv]
    status, _, err = run(*argv, "--quiet")
    assert status == 0, err
    assert pd.read_csv(out_csv)["record"].str.startswith("rec").all()


def test_edf_without_the_extra(edf_folder, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "edfio", None)  # import edfio now raises ImportError
    argv = ["fit", edf_folder, "--labels", edf_folder / "labels.csv", "--attributes", "sex"]
    status, _, err = run(*argv, "--model", tmp_path / "m", "--quiet")
    assert status == 1
    assert "pip install sklearn-crocs[edf]" in error_line(err)


def test_a_record_too_short_to_condition_is_skipped(edf_folder, model_100hz, tmp_path):
    edfio = pytest.importorskip("edfio")
    folder = tmp_path / "records"
    folder.mkdir()
    for path in sorted(edf_folder.glob("*.edf"))[:3]:
        os.symlink(path, folder / path.name)
    # 0.1 s: too short for the band-pass, and refused as too short for an ECG.
    leads = ["I", "II", "III", "aVR", "aVL", "aVF", "V1", "V2", "V3", "V4", "V5", "V6"]
    signals = [
        edfio.EdfSignal(
            np.zeros(50), 500, label=lead, physical_dimension="mV", physical_range=(-1, 1)
        )
        for lead in leads
    ]
    edfio.Edf(signals, data_record_duration=0.1).write(folder / "short.edf")
    out_csv = tmp_path / "p.csv"
    status, _, err = run("predict", folder, "--model", model_100hz, "--out", out_csv)
    assert status == 0, err
    assert "skipped record short: " in err and "too short for an ECG" in err
    assert len(pd.read_csv(out_csv)) == 3
    strict = ["predict", folder, "--model", model_100hz, "--out", tmp_path / "s.csv", "--strict"]
    status, _, err = run(*strict)
    assert status == 1 and "short.edf: " in error_line(err)


@pytest.mark.parametrize("name", ["cinc2021", "ludb-subset"])
def test_the_cli_and_the_python_path_predict_the_same(cinc, shared_data, tmp_path, name):
    """The shared WFDB records through ``sklearn-crocs predict`` and through the Python API."""
    from sklearn_crocs import CROCSClusterer
    from sklearn_crocs.datasets import load_wfdb
    from sklearn_crocs.preprocessing import SignalConditioner, make_frames

    _, model_dir, _ = cinc
    folder = shared_data / name
    out_csv = tmp_path / "p.csv"
    status, _, err = run("predict", folder, "--model", model_dir, "--out", out_csv, "--quiet")
    assert status == 0, err
    cli = pd.read_csv(out_csv, dtype=str).set_index("record")

    # The documented Python path: records in mV at their own rate, conditioned
    # whole to the model's rate, 5-s frames, the mean probability per record.
    model = CROCSClusterer.load(model_dir / "model.safetensors")
    data = load_wfdb(folder, leads=json.loads((model_dir / "settings.json").read_text())[
        "lead_names"], signal_length="variable")  # fmt: skip
    conditioner = SignalConditioner(sampling_rate=data.fs, target_rate=model.sampling_rate_)
    records = [conditioner.fit_transform(x[np.newaxis])[0] for x in data.data]
    frame_length = model.input_shape_[1]
    kept = [i for i, x in enumerate(records) if x.shape[-1] >= frame_length]
    frames, _, record = make_frames([records[i] for i in kept], frame_length,
                                    groups=np.arange(len(kept)))  # fmt: skip
    proba = model.predict_proba(frames)
    mean = np.stack([proba[record == r].mean(axis=0) for r in range(len(kept))])
    python = pd.DataFrame(model.get_prototypes()[1][mean.argmax(axis=1)].astype(str),
                          index=data.record_names[kept], columns=model.attribute_names_)  # fmt: skip
    assert sorted(cli.index) == sorted(python.index) and len(cli) >= 10
    pd.testing.assert_frame_equal(cli.loc[python.index, python.columns], python, check_names=False)


# ------------------------------------------------------- the shipped model
def test_predict_and_search_with_the_shipped_model(shared_data, tmp_path):
    """``--model bundled:ptbxl``: no training, no download; raw WFDB records of another
    hospital (LUDB, 500 Hz) are read as the model's settings say."""
    folder = shared_data / "ludb-subset"
    out = tmp_path / "predicted.csv"
    status, _, err = run("predict", folder, "--model", "bundled:ptbxl", "--out", out, "--quiet")
    assert status == 0, err
    table = pd.read_csv(out, dtype=str)
    assert list(table.columns) == ["record", "class", "sex", "age"]
    assert len(table) == 12
    assert set(table["class"]) <= {"ABN", "NORM"} and set(table["sex"]) <= {"F", "M"}
    found = tmp_path / "found.csv"
    argv = ["search", folder, "--model", "bundled:ptbxl", "--query", "sex=F,age=75"]
    status, _, err = run(*argv, "--out", found, "--k", 3, "--quiet")
    assert status == 0, err
    hits = pd.read_csv(found, dtype=str)
    assert len(hits) == 3 and hits["query"].str.startswith("sex=F,age=").all()


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["predict", "--model", "bundled:ptb"], "bundled:ptb is not a shipped model; the package "
         "ships bundled:ptbxl"),
        (["fit", "--from", "bundled:ptbxl", "--working-rate", 50], "--from bundled:ptbxl read its "
         "records with working_rate 100.0; this fit would use 50.0"),
        (["fit", "--from", "bundled:ptbxl", "--no-conditioning"], "read its records with "
         "conditioning"),
        (["fit", "--from", "bundled:ptbxl", "--leads", "I,II"], "reads the leads I,II,III"),
    ],
)
def test_shipped_model_errors(shared_data, tmp_path, argv, message):
    command, *options = argv
    extra = ["--attributes", "Rhythms,sex,age", "--model", tmp_path / "model"]
    if command == "predict":
        extra = ["--out", tmp_path / "out.csv"]
    status, _, err = run(command, shared_data / "ludb-subset", *options, *extra, "--quiet")
    assert status == 1
    assert message in error_line(err)


def test_fit_from_the_shipped_model_with_scarce_diagnoses(shared_data, tmp_path):
    """``fit --from bundled:ptbxl`` fine-tunes; records whose rhythm is unknown but whose sex
    and age are known train with the rhythm summed out, and are not left out."""
    folder = shared_data / "ludb-subset"
    labels = pd.read_csv(folder / "ludb.csv", dtype=str)
    labels["Rhythms"] = labels["Rhythms"].where(labels.index % 2 == 0)
    labels.to_csv(tmp_path / "labels.csv", index=False)
    model = tmp_path / "model"
    argv = ["fit", folder, "--labels", tmp_path / "labels.csv", "--attributes", "Rhythms,sex,age"]
    argv += ["--from", "bundled:ptbxl", "--age-groups", 2, "--max-epochs", 1, "--model", model]
    status, out, err = run(*argv, "--random-state", 0, "--quiet")
    assert status == 0, err
    assert "record(s) train with the attributes they have; unknown: Rhythms" in err
    assert "Trained on 24 frames of 12 records" in out
    predicted = tmp_path / "predicted.csv"
    status, _, err = run("predict", folder, "--model", model, "--out", predicted, "--quiet")
    assert status == 0, err
    assert list(pd.read_csv(predicted).columns) == ["record", "Rhythms", "sex", "age"]
