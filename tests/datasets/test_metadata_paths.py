"""Paths read from a data set's tables stay inside its folder (issue 45, item 10)."""

import shutil

import pandas as pd
import pytest

from sklearn_crocs.datasets import load_chapman, load_ptbxl


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
