"""What the command line tells a researcher about labels and classes (issue 58, items 2, 8).

``score`` reads the model's own class names as well as codes; ``fit`` counts
the prototypes no ECG supports, names the classes of few patients, and keeps
records of several classes with ``--multi-class``.
"""

import json

import numpy as np
import pytest
from test_cli import error_line, run

pytestmark = pytest.mark.xdist_group("cli")

# Codes of the LUDB rhythms (SNOMED CT), and the class map back to the rhythms.
CODES = {"SR": "426783006", "SB": "426177001", "AFIB": "164889003", "GSVT": "426761007"}
FIT = ["--working-rate", 100, "--encoder", "cnn", "--embedding-dim", "8"]
FIT += ["--max-epochs", "1", "--random-state", "0", "--quiet"]


@pytest.fixture(scope="module")
def ludb(tmp_path_factory):
    """A folder with two.npz (two leads of LUDB), codes.csv (rhythm codes; the first four
    SR records have the codes of SB and SR), classes.csv (the rhythms) and map.csv."""
    from sklearn_crocs.datasets import load_ludb

    folder = tmp_path_factory.mktemp("evaluation")
    data = load_ludb()
    ids = np.array([f"L{name}" for name in data.record_names])
    np.savez(folder / "two.npz", X=data.data[:, :2], record_ids=ids, lead_names=["I", "II"])
    labels = data.attributes[["rhythm", "sex", "age"]]
    labels.to_csv(folder / "classes.csv", index=False)
    codes = labels.assign(rhythm=labels["rhythm"].map(CODES))
    both = np.flatnonzero(labels["rhythm"] == "SR")[:4]
    codes.loc[both, "rhythm"] = f"{CODES['SB']},{CODES['SR']}"
    codes.to_csv(folder / "codes.csv", index=False)
    rows = "".join(f"{code},{name}\n" for name, code in CODES.items())
    (folder / "map.csv").write_text("code,class\n" + rows)
    return folder


def fit(folder, name, *options, attributes="rhythm"):
    argv = ["fit", folder / "two.npz", "--sampling-rate", 500, "--labels", folder / "codes.csv"]
    argv += ["--attributes", attributes, "--class-map", folder / "map.csv"]
    status, out, err = run(*argv, "--model", folder / name, *FIT, *options)
    assert status == 0, err
    return out, err


@pytest.fixture(scope="module")
def model(ludb):
    """A model of rhythm, sex and age fitted on the codes (the default --multi-class drop)."""
    return ludb / "model", fit(ludb, "model", attributes="rhythm,sex,age")


def score(folder, model, labels):
    argv = ["score", folder / "two.npz", "--sampling-rate", 500, "--labels", labels]
    return run(*argv, "--model", model, "--out-dir", folder / "scores", "--force")


def test_score_reads_the_models_class_names(ludb, model):
    status, out, err = score(ludb, model[0], ludb / "classes.csv")  # SR, SB: no codes
    assert status == 0, err
    assert "Scored on 204 frames of 102 records." in out
    assert "left out" not in err
    # Codes are read with the class map, as fit read them; SB and SR at once is no class.
    status, out, err = score(ludb, model[0], ludb / "codes.csv")
    assert status == 0, err
    assert "Scored on 196 frames of 98 records." in out
    assert "left out 4 of 102 record(s)" in err and "'426177001,426783006' (4)" in err


def test_score_names_the_labels_that_do_not_match(ludb, model, tmp_path):
    labels = (ludb / "classes.csv").read_text().splitlines()
    labels[1:4] = [line.replace("SR", "Sinus", 1).replace("SB", "Sinus", 1) for line in
                   labels[1:4]]  # fmt: skip
    (tmp_path / "labels.csv").write_text("\n".join(labels) + "\n")
    status, out, err = score(ludb, model[0], tmp_path / "labels.csv")
    assert status == 0, err
    assert "left out 3 of 102 record(s)" in err and "rhythm 'Sinus' (3)" in err
    assert "--class-map" not in err  # not an option of score
    # No record left: the error says why.
    (tmp_path / "none.csv").write_text(
        "\n".join(labels[:1] + [f"x{line[line.index(',') :]}" for line in labels[1:]]) + "\n"
    )
    status, _, err = score(ludb, model[0], tmp_path / "none.csv")
    line = error_line(err)
    assert status == 1 and "no record has labels the model knows" in line, line


def test_fit_notes_unsupported_prototypes_and_classes_of_few_patients(model):
    from sklearn_crocs import CROCSClusterer

    folder, (out, err) = model
    counts = CROCSClusterer.load(folder / "model.safetensors").prototype_counts_
    assert 0 < (counts == 0).sum() < len(counts) == 32
    assert f"{(counts == 0).sum()} of 32 prototypes have no training ECG (rhythm=" in err
    assert "fewer than 5 patients: GSVT (3)" in err
    # The four records of SB and SR at once: counted, and the option that keeps them.
    assert "4 record(s) have codes of several classes" in err
    assert "SB+SR (4)" in err and "--multi-class first or mixed" in err


@pytest.mark.parametrize(
    ("multi_class", "classes", "note"),
    [
        ("drop", "AFIB, GSVT, SB, SR", "have codes of several classes"),
        ("first", "AFIB, GSVT, SB, SR", "take the class of their first code"),
        ("mixed", "AFIB, GSVT, SB, SB+SR, SR", "take a class of their own"),
    ],
)
def test_multi_class_keeps_records_of_several_classes(ludb, multi_class, classes, note):
    out, err = fit(ludb, f"multi-{multi_class}", "--multi-class", multi_class)
    n_records = 98 if multi_class == "drop" else 102
    assert f"of {n_records} records" in out and f"(rhythm: {classes})" in out
    assert f"4 record(s) {note}" in err
    settings = json.loads((ludb / f"multi-{multi_class}" / "settings.json").read_text())
    assert settings["multi_class"] == multi_class
    # score reads the codes as fit did.
    status, out, err = score(ludb, ludb / f"multi-{multi_class}", ludb / "codes.csv")
    assert status == 0, err
    assert f"of {n_records} records." in out


def test_settings_multi_class_checked_and_drop_when_absent(ludb, model):
    path = model[0] / "settings.json"
    original = path.read_text()
    settings = json.loads(original)
    try:
        path.write_text(json.dumps({**settings, "multi_class": "all"}))
        status, _, err = score(ludb, model[0], ludb / "codes.csv")
        assert status == 1 and "multi_class 'all', not one of" in error_line(err)
        del settings["multi_class"]  # a model folder written before the option
        path.write_text(json.dumps(settings))
        status, out, err = score(ludb, model[0], ludb / "codes.csv")
        assert status == 0, err
        assert "of 98 records." in out
    finally:
        path.write_text(original)


def test_multi_class_needs_a_class_map(ludb):
    argv = ["fit", ludb / "two.npz", "--sampling-rate", 500, "--labels", ludb / "classes.csv"]
    status, _, err = run(*argv, "--attributes", "rhythm", "--multi-class", "first",
                         "--model", ludb / "no-map", *FIT)  # fmt: skip
    assert status == 1 and "--multi-class first needs --class-map." in error_line(err)
