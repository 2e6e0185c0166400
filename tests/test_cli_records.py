"""A PhysioNet/CinC-style folder of records of 10, 12 and 20 s, from Python and the CLI.

The records are the 20 real CinC 2021 records (.hea/.mat), written here with
5000, 6000 or 10000 samples each (their samples repeated), so that a folder
mixes lengths as the challenge folders do. Their ``#Dx`` SNOMED CT codes
become the paper's rhythm groups through the class map ``chapman-rhythms``.
"""

import contextlib
import io
import json

import numpy as np
import pandas as pd
import pytest
import scipy.io
import wfdb

from sklearn_crocs import CROCSClusterer, PrototypeRetriever
from sklearn_crocs.cli import main
from sklearn_crocs.datasets import load_wfdb, map_classes
from sklearn_crocs.preprocessing import SignalConditioner, make_frames

pytestmark = pytest.mark.xdist_group("cli")

LENGTHS = (5000, 6000, 10000)
TINY = ["--working-rate", "50", "--embedding-dim", "8", "--max-epochs", "2"]
TINY += ["--batch-size", "16", "--random-state", "0"]


def run(*argv):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            status = main([str(arg) for arg in argv])
        except SystemExit as exc:
            status = exc.code
    return status, out.getvalue(), err.getvalue()


def write_mat_record(folder, name, val, leads, comments):
    """A CinC-style record: ``val`` (leads x samples, int16) in a MATLAB v4 file, 1000/mV."""
    scipy.io.savemat(folder / f"{name}.mat", {"val": val}, format="4")
    lines = [f"{name} {len(leads)} 500 {val.shape[1]}"]
    for lead, row in zip(leads, val):
        checksum = int(np.sum(row, dtype=np.int64)) % 65536
        checksum -= 65536 if checksum >= 32768 else 0
        lines.append(f"{name}.mat 16+24 1000/mV 16 0 {row[0]} {checksum} 0 {lead}")
    (folder / f"{name}.hea").write_text("\n".join(lines + comments) + "\n")


@pytest.fixture(scope="module")
def mixed(shared_data, tmp_path_factory):
    folder = tmp_path_factory.mktemp("mixed") / "records"
    folder.mkdir()
    source = shared_data / "cinc2021"
    for i, header in enumerate(sorted(source.glob("*.hea"))):
        name = header.stem
        val = scipy.io.loadmat(source / f"{name}.mat")["val"]
        n = LENGTHS[i % 3]
        val = np.resize(val, (val.shape[0], n)) if val.shape[1] < n else val[:, :n]
        leads = [line.split()[-1] for line in header.read_text().splitlines()[1:13]]
        comments = [line for line in header.read_text().splitlines() if line.startswith("#")]
        write_mat_record(folder, name, val.astype(np.int16), leads, comments)
    return folder


def test_the_folder_mixes_lengths(mixed):
    lengths = {wfdb.rdheader(str(p.with_suffix(""))).sig_len for p in mixed.glob("*.hea")}
    assert lengths == set(LENGTHS)


def test_readme_raw_path(mixed):
    """The README's and user guide's raw path, unchanged, on the mixed folder."""
    data = load_wfdb(mixed, attributes={"dx": "Dx", "sex": "Sex"}, signal_length="variable")
    rhythm = map_classes(data.attributes["dx"], "chapman-rhythms")
    keep = ~pd.isna(rhythm)
    assert keep.sum() == 19  # E00271 (a bundle branch block) has no rhythm group
    attrs = pd.DataFrame({"rhythm": rhythm, "sex": data.attributes["sex"]})[keep]
    raw_records = [x for x, k in zip(data.data, keep) if k]
    patient_ids = data.record_names[keep]
    records = SignalConditioner(sampling_rate=500, target_rate=100).fit_transform(raw_records)
    X, attrs, patient_ids = make_frames(records, 500, attributes=attrs, groups=patient_ids)
    assert len(X) == sum(r.shape[-1] // 500 for r in records)
    model = CROCSClusterer(
        sampling_rate=100, embedding_dim=8, max_epochs=2, random_state=0,
        validation_fraction=None,
    ).fit(X, attrs, groups=patient_ids)
    # Whole records of any length, at their own rate: one prediction and one row each.
    model.set_params(longer_signals="average")
    assert len(model.predict(raw_records, sampling_rate=500)) == len(raw_records)
    retriever = PrototypeRetriever(model, n_neighbors=3).fit(raw_records, sampling_rate=500)
    _, indices = retriever.query({"rhythm": "SB"})
    assert indices.shape == (1, 3) and len(set(indices[0])) == 3


@pytest.fixture(scope="module")
def fitted(mixed, tmp_path_factory):
    model = tmp_path_factory.mktemp("model") / "model"
    result = run(
        "fit", mixed, "--attributes", "dx,sex", "--class-map", "chapman-rhythms",
        "--model", model, "--quiet", *TINY,
    )
    return model, result


def test_fit_with_a_class_map(fitted):
    model, (status, out, err) = fitted
    assert status == 0, err
    assert "--class-map: 1 record(s) have no class of the map" in err
    assert "dx: AFIB, GSVT, SB, SR" in out
    settings = json.loads((model / "settings.json").read_text())
    assert settings["class_map"]["426177001"] == "SB"


def test_predict_search_and_score(mixed, fitted, tmp_path):
    model, _ = fitted
    status, _, err = run("predict", mixed, "--model", model, "--out", tmp_path / "p.csv")
    assert status == 0, err
    table = pd.read_csv(tmp_path / "p.csv", dtype=str)
    assert len(table) == 20 and set(table["dx"]) <= {"AFIB", "GSVT", "SB", "SR"}

    # A query is read as fit read the headers: a SNOMED code is its rhythm, "female" is F.
    status, _, err = run(
        "search", mixed, "--model", model, "--out", tmp_path / "q.csv", "--k", "3",
        "--query", "dx=426177001,sex=female",
    )
    assert status == 0, err
    hits = pd.read_csv(tmp_path / "q.csv", dtype=str)
    assert hits["query"].unique().tolist() == ["dx=SB,sex=F"]
    assert len(hits) == 3 and hits["record"].is_unique

    # Search by example ECG: a record finds itself first.
    example = tmp_path / "example"
    example.mkdir()
    for ext in (".hea", ".mat"):
        (example / f"JS03291{ext}").write_bytes((mixed / f"JS03291{ext}").read_bytes())
    status, _, err = run(
        "search", mixed, "--model", model, "--out", tmp_path / "e.csv", "--k", "4",
        "--example", example,
    )
    assert status == 0, err
    hits = pd.read_csv(tmp_path / "e.csv", dtype=str)
    assert hits["query"].unique().tolist() == ["example=JS03291"]
    assert hits["record"].iloc[0] == "JS03291" and float(hits["distance"].iloc[0]) < 1e-3
    assert len(hits) == 4 and hits["record"].is_unique

    status, out, err = run("score", mixed, "--model", model, "--out-dir", tmp_path / "s",
                           "--k", "1", "5")
    assert status == 0, err
    assert "CP CROCS" in out and "TP CROCS" in out
    clustering = pd.read_csv(tmp_path / "s" / "clustering.csv", header=[0, 1])
    assert len(clustering) >= 2
    for png in ("prototypes.png", "retrieval.png"):
        assert (tmp_path / "s" / png).read_bytes()[:4] == b"\x89PNG"
    # Results are not overwritten without --force.
    status, _, err = run("score", mixed, "--model", model, "--out-dir", tmp_path / "s")
    assert status == 1 and "--force" in err


def test_warns_when_the_class_has_nearly_one_value_per_record(mixed, tmp_path):
    status, _, err = run(
        "fit", mixed, "--attributes", "dx,sex", "--model", tmp_path / "m", "--quiet", *TINY
    )
    assert status == 0, err
    (line,) = [ln for ln in err.splitlines() if "nearly one class" in ln]
    assert line.startswith("sklearn-crocs: warning: The class attribute 'dx' has 12 values for 20")
    assert "with --class-map chapman-rhythms" in line and "map_classes" not in line


def test_errors_and_warnings_name_the_flags(shared_data, fitted, tmp_path):
    model, _ = fitted
    cinc = shared_data / "cinc2021"
    argv = ["predict", cinc, "--model", model, "--out", tmp_path / "p.csv", "--quiet"]
    status, _, err = run(*argv)
    assert status == 0, err
    assert "Pass --no-repair-headers" in err or "pass --no-repair-headers" in err
    assert "repair_headers=False" not in err
    status, _, err = run(*argv, "--force", "--no-repair-headers", "--strict")
    assert status == 1
    assert "leave out --strict" in err and "on_error" not in err


def test_a_bad_leads_error_is_summarised(mixed, tmp_path):
    status, _, err = run(
        "fit", mixed, "--attributes", "sex", "--leads", "V7", "--model", tmp_path / "m", *TINY
    )
    assert status == 1
    (line,) = [ln for ln in err.splitlines() if "error:" in ln]
    assert "None of the 20 records could be loaded (20 unusable: A0689, A1041, E00271, ...)" in line
    assert line.count("does not have the requested lead") == 1
    # The fix is named as a flag; skipping is moot when every record was skipped.
    assert "Request with --leads leads that every record has." in line
    assert "on_error" not in line and "--strict" not in line


def test_query_and_example_are_exclusive(mixed, fitted, tmp_path):
    model, _ = fitted
    status, _, err = run(
        "search", mixed, "--model", model, "--out", tmp_path / "q.csv",
        "--query", "sex=F", "--example", mixed,
    )
    assert status == 1 and "pass one of them" in err


def test_ages_written_90_plus_are_90():
    from sklearn_crocs.datasets._base import parse_age

    assert parse_age("90+") == 90.0
    assert parse_age(">89") == 90.0
    assert np.isnan(parse_age("unknown+"))


def test_query_values_are_read_as_fit_reads_the_headers(mixed, tmp_path):
    model = tmp_path / "m"
    status, _, err = run(
        "fit", mixed, "--attributes", "sex,age", "--age-groups", "2", "--model", model,
        "--quiet", *TINY,
    )
    assert status == 0, err
    groups = json.loads((model / "settings.json").read_text())["age_groups"]["age"]
    # "female" is read as F, as fit read "Female"; an age in years is its group.
    status, _, err = run(
        "search", mixed, "--model", model, "--out", tmp_path / "q.csv", "--k", "2",
        "--query", "sex=female,age=95", "--query", "SEX=f,age=" + groups["labels"][0],
    )
    assert status == 0, err
    queries = pd.read_csv(tmp_path / "q.csv", dtype=str)["query"].unique().tolist()
    assert queries == [f"sex=F,age={groups['labels'][-1]}", f"sex=F,age={groups['labels'][0]}"]
