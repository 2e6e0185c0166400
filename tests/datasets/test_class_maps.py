"""Class maps: diagnosis codes grouped into the paper's classes, or a user's."""

import json
import warnings

import numpy as np
import pytest

from sklearn_crocs.datasets import map_classes


def test_chapman_rhythms_from_snomed_codes():
    classes = map_classes(
        ["426177001,428750005", "164890007", "427084000", "426783006 427393009",
         "164889003,426177001", "59118001", None],
        "chapman-rhythms",
    )  # fmt: skip
    assert classes[:4].tolist() == ["SB", "AFIB", "GSVT", "SR"]
    # Two groups (AF and SB), no group, no value: no class.
    assert all(isinstance(c, float) and np.isnan(c) for c in classes[4:])


def test_ptbxl_superclasses_from_statements():
    classes = map_classes(
        ["{'NORM': 100.0, 'SR': 0.0}", "{'IMI': 100.0, 'ASMI': 15.0}", "LAO/LAE", "NST_",
         "IMI,CLBBB", "SR"],
        "ptbxl-superclasses",
    )  # fmt: skip
    assert classes[:4].tolist() == ["NORM", "MI", "HYP", "STTC"]
    assert np.isnan(classes[4]) and np.isnan(classes[5])


def test_a_users_map_as_dict_csv_or_json(tmp_path):
    values = ["a1;b2", "B2", "c3"]
    expected = ["X", "X", "Y"]
    assert map_classes(values, {"a1": "X", "b2": "X", "c3": "Y"}).tolist() == expected
    (tmp_path / "map.csv").write_text("code,class\na1,X\nb2,X\nc3,Y\n")
    assert map_classes(values, tmp_path / "map.csv").tolist() == expected
    (tmp_path / "map.json").write_text(json.dumps({"a1": "X", "b2": "X", "c3": "Y"}))
    assert map_classes(values, str(tmp_path / "map.json")).tolist() == expected


def test_bad_maps():
    with pytest.raises(ValueError, match="neither a built-in map"):
        map_classes(["1"], "chapman")
    with pytest.raises(TypeError, match="class_map must be"):
        map_classes(["1"], 3)
    with pytest.raises(ValueError, match="no entry"):
        map_classes(["1"], {})


def test_fit_warns_when_the_class_has_nearly_one_value_per_patient():
    from sklearn_crocs import CROCSClusterer

    rng = np.random.RandomState(0)
    X = rng.randn(24, 1, 200).astype(np.float32)
    codes = np.array([f"{400000 + i % 12}" for i in range(24)])  # 12 "diagnoses"
    groups = np.arange(24) // 2  # 12 patients
    model = CROCSClusterer(embedding_dim=4, max_epochs=1, validation_fraction=None)
    with pytest.warns(UserWarning, match=r"'attribute_0' has 12 values for 12 patients.*map_classes"):
        model.fit(X, codes, groups=groups)
    grouped = np.where(np.arange(24) % 2 == 0, "SR", "AFIB")
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        model.fit(X, grouped, groups=groups)


def test_a_csv_class_map_with_or_without_a_header_row(tmp_path):
    from sklearn_crocs.datasets._class_maps import read_class_map

    path = tmp_path / "map.csv"
    path.write_text("426177001,SB\n164889003,AFIB\n")  # no header: both rows are mappings
    assert read_class_map(path) == {"426177001": "SB", "164889003": "AFIB"}
    for header in ("code,class", "SNOMED CT , Rhythm", "Dx,group"):
        path.write_text(f"{header}\n426177001,SB\n164889003,AFIB\n")
        assert read_class_map(path) == {"426177001": "SB", "164889003": "AFIB"}
    # Conflicts still name the file's lines, with or without a header.
    path.write_text("IMI,MI\n\nimi,NORM\n")
    with pytest.raises(ValueError, match=r"'IMI' on lines 1 \(MI\), 3 \(NORM\)"):
        read_class_map(path)
    # A first row that may be a mapping stays one (its class is any word).
    path.write_text("426177001,class\n164889003,AFIB\n")
    assert read_class_map(path) == {"426177001": "class", "164889003": "AFIB"}


def test_multi_class_keeps_values_of_several_classes():
    values = ["IMI,CLBBB", "CLBBB IMI NORM", "IMI", "SR"]
    first = map_classes(values, "ptbxl-superclasses", multi_class="first")
    assert first[:3].tolist() == ["MI", "CD", "MI"]
    mixed = map_classes(values, "ptbxl-superclasses", multi_class="mixed")
    assert mixed[:3].tolist() == ["CD+MI", "CD+MI+NORM", "MI"] and np.isnan(mixed[3])
    with pytest.raises(ValueError, match="multi_class must be"):
        map_classes(values, "ptbxl-superclasses", multi_class="all")
