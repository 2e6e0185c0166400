"""Paths read from a data set's tables stay inside its folder (issue 45, item 10)."""

import shutil

import pandas as pd
import pytest

from sklearn_crocs.datasets import InvalidRecordError, load_chapman, load_ptbxl, load_wfdb


def _outside_copy(tree, relpath, outside):
    """A genuine record copied outside the data set's folder: what a crafted table points to."""
    outside.mkdir(exist_ok=True)
    for suffix in (".hea", ".dat", ".mat"):
        source = (tree / relpath).with_name((tree / relpath).name + suffix)
        if source.exists():
            shutil.copy(source, outside / source.name)
    return outside / (tree / relpath).name


@pytest.mark.bad_input(
    "Read", "table path absolute or with '..' (PTB-XL)", "ValueError"
)
@pytest.mark.parametrize("kind", ["absolute", "parent"])
def test_ptbxl_table_paths_stay_inside(ptbxl_dir, copy_tree, tmp_path, kind):
    folder = copy_tree(ptbxl_dir)
    path = folder / "ptbxl_database.csv"
    table = pd.read_csv(path)
    relpath = table.loc[0, "filename_hr"]
    target = _outside_copy(folder, relpath, tmp_path / "outside")
    value = str(target) if kind == "absolute" else "../outside/" + target.name
    table.loc[0, "filename_hr"] = value
    table.to_csv(path, index=False)
    with pytest.raises(ValueError, match=r"\(column filename_hr\) names the file .* not inside"):
        load_ptbxl(folder)


@pytest.mark.bad_input("Read", "table FileName with '..' (Chapman)", "ValueError")
def test_chapman_table_paths_stay_inside(chapman_original_dir, copy_tree, tmp_path):
    folder = copy_tree(chapman_original_dir)
    table = pd.read_excel(folder / "Diagnostics.xlsx")
    name = table.loc[0, "FileName"]
    (tmp_path / "outside").mkdir()
    shutil.copy(folder / "ECGData" / f"{name}.csv", tmp_path / "outside" / f"{name}.csv")
    table.loc[0, "FileName"] = f"../../outside/{name}"
    table.to_excel(folder / "Diagnostics.xlsx", index=False, sheet_name="Sheet1")
    with pytest.raises(ValueError, match=r"\(column FileName\) names the file .* not inside"):
        load_chapman(folder, layout="original")


@pytest.mark.bad_input("Read", "WFDB header names a signal file with '..'", "InvalidRecordError")
def test_wfdb_signal_file_names_stay_inside(ludb_dir, tmp_path):
    # WFDB's header grammar allows no path separator in a signal file name, so a
    # header cannot make load_wfdb read a file outside the record's folder; this
    # pins that (a wfdb that relaxed its grammar would fail here).
    folder = tmp_path / "records"
    folder.mkdir()
    shutil.copy(ludb_dir / "11.dat", tmp_path / "outside.dat")
    for suffix in (".hea", ".dat"):  # a genuine record beside the crafted one
        shutil.copy(ludb_dir / f"12{suffix}", folder / f"12{suffix}")
    text = (ludb_dir / "11.hea").read_text()
    (folder / "11.hea").write_text(text.replace("\n11.dat ", "\n../outside.dat "))
    with pytest.raises(InvalidRecordError, match=r"11\.hea: malformed WFDB header"):
        load_wfdb(folder)
    with pytest.warns(UserWarning, match="Skipped 1 of 2"):
        assert load_wfdb(folder, on_error="skip").excluded["record"].tolist() == ["11"]
