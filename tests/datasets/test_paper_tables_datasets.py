"""benchmarks/paper_tables.py --dataset ptbxl|chapman, end to end on miniature PhysioNet trees.

The trees are in the layouts that ``load_ptbxl`` and ``load_chapman`` read
(PTB-XL: ``ptbxl_database.csv`` with all 28 columns, ``scp_statements.csv``
and WFDB records under ``records500/``; Chapman: WFDB records with ``#Age``,
``#Sex`` and ``#Dx`` comments under ``WFDBRecords/``). Their signals are the
real CinC 2021 records, repeated under new record names (rotated in time, so
that no two frames are equal); the attributes
cycle through every class, both sexes and spread ages, so that the paper's
40 and 32 attribute combinations occur.
"""

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from threadpoolctl import threadpool_limits

from .conftest import (
    CHAPMAN_RECORDS,
    PTBXL_COLUMNS,
    PTBXL_LEADS,
    PTBXL_ROWS,
    SCP_COLUMNS,
    SCP_ROWS,
    cinc_digital,
    write_wfdb,
)

# One diagnostic statement of each superclass (real scp_statements.csv rows).
PTBXL_CODES = {"NORM": "NORM", "MI": "IMI", "HYP": "LVH", "CD": "CLBBB", "STTC": "NDT"}
CHAPMAN_CODES = {"SR": "426783006", "SB": "426177001", "GSVT": "427084000", "AFIB": "164889003"}
N_PTBXL, N_CHAPMAN = 50, 40



def build_ptbxl(root, cinc_dir):
    """N_PTBXL single-label records of as many patients, one two-label and one ageless record."""
    signals = [cinc_digital(cinc_dir, f"HR{row[0]:05d}")[0] for row in PTBXL_ROWS]
    classes = list(PTBXL_CODES)
    rows = []
    for i in range(N_PTBXL + 2):
        ecg_id = 20001 + i
        codes = {PTBXL_CODES[classes[i % 5]]: 100.0, "SR": 0.0}
        if i == N_PTBXL:  # two superclasses: the paper's single-label rule drops it
            codes = {"IMI": 100.0, "CLBBB": 100.0}
        hr = f"records500/20000/{ecg_id:05d}_hr"
        (root / hr).parent.mkdir(parents=True, exist_ok=True)
        digital = np.roll(signals[i % len(signals)], 97 * i, axis=0)
        write_wfdb((root / hr).parent, Path(hr).name, digital, PTBXL_LEADS, 500)
        row = dict(zip(PTBXL_COLUMNS, PTBXL_ROWS[i % len(PTBXL_ROWS)] + (None, None)))
        row.update(
            ecg_id=ecg_id, patient_id=float(30000 + i), sex=(i // 5) % 2,
            age=None if i == N_PTBXL + 1 else float(20 + (7 * i) % 70),
            scp_codes=str(codes), strat_fold=i % 10 + 1, filename_hr=hr,
            filename_lr=f"records100/20000/{ecg_id:05d}_lr",
        )  # fmt: skip
        rows.append(row)
    pd.DataFrame(rows, columns=PTBXL_COLUMNS).to_csv(root / "ptbxl_database.csv", index=False)
    pd.DataFrame(SCP_ROWS, columns=SCP_COLUMNS).to_csv(root / "scp_statements.csv", index=False)
    return root


def build_chapman(root, cinc_dir):
    """N_CHAPMAN records (one per patient) in the ecg-arrhythmia WFDB layout, at 500 Hz."""
    folder = root / "WFDBRecords" / "01" / "010"
    folder.mkdir(parents=True)
    rhythms = list(CHAPMAN_CODES)
    for i in range(N_CHAPMAN):
        digital, record = cinc_digital(cinc_dir, CHAPMAN_RECORDS[i % len(CHAPMAN_RECORDS)])
        comments = [f"Age: {20 + (7 * i) % 70}", f"Sex: {('Male', 'Female')[(i // 4) % 2]}",
                    f"Dx: {CHAPMAN_CODES[rhythms[i % 4]]}"]  # fmt: skip
        digital = np.roll(digital, 97 * i, axis=0)
        write_wfdb(folder, f"JS{50001 + i}", digital, record.sig_name, 500, comments=comments)
    (root / "RECORDS").write_text("WFDBRecords/01/010/\n")
    return root


@pytest.mark.slow  # every method of the paper, on 2500-sample frames
@pytest.mark.parametrize(
    ("dataset", "build", "name", "classes", "combinations"),
    [
        ("ptbxl", build_ptbxl, "PTB-XL", "diagnostic_superclass", 40),
        ("chapman", build_chapman, "Chapman", "rhythm", 32),
    ],
)
def test_runner_on_the_papers_datasets(
    paper_tables, tmp_path, cinc_dir, dataset, build, name, classes, combinations
):
    pytest.importorskip("matplotlib")
    tree = build(tmp_path / "tree", cinc_dir)
    out = tmp_path / "out"
    argv = ["--dataset", dataset, "--data-home", str(tree), "--quick", "--output-dir", str(out),
            "--n-jobs", "1"]  # fmt: skip
    with threadpool_limits(limits=1):  # as the suite: one thread per worker
        assert paper_tables.main(argv) == 0
    raw = pd.read_csv(out / "raw.csv")
    assert set(raw["dataset"].dropna()) == {name}  # the run row has none
    data = raw[raw["experiment"] == "data"].iloc[0]
    assert data["combinations"] == combinations
    # 60:20:20 by patient: the scored part (the validation patients, as the paper
    # scored) is 20 % of the patients, rounded up, as is the unused test part.
    n_patients = N_PTBXL if dataset == "ptbxl" else N_CHAPMAN
    assert data["test patients"] == -(-n_patients // 5)
    assert data["train patients"] == n_patients - 2 * data["test patients"]
    frames = {"ptbxl": 2, "chapman": 12}[dataset]  # per record: two 5-s frames, or 12 leads
    assert data["train ECGs"] == frames * data["train patients"]
    assert data["test ECGs"] == frames * data["test patients"]
    table1 = set(raw.loc[raw["experiment"] == "table1", "method"])
    crocs = {f"{kind} CROCS ({configuration})" for kind in ("CP", "TP", "KM")
             for configuration in ("untrained", "package defaults", "paper settings")}  # fmt: skip
    assert table1 == crocs | {
        "Majority", "DTC", "KM raw", "KM EP", "DeepCluster", "IIC", "SeLA", "DTCR"}  # fmt: skip
    assert set(raw.loc[raw["experiment"] == "table3", "method"]) == set(paper_tables.ABLATIONS)
    assert f"{classes} Acc" in raw.columns and "age AMI" in raw.columns
    assert not {"beta", "embedding", "labels10"} & set(raw["experiment"])  # sample only
    text = (out / "tables.md").read_text()
    assert f"{combinations} attribute combinations" in text
    for title in ("table1", "table2", "table3"):
        assert f"**{paper_tables.TABLES[title]}, {name} (1 seed)**" in text
        assert (out / f"{title}_{paper_tables.slug(name)}.csv").is_file()


def test_data_home_is_the_dataset_folder_or_the_fetchers(paper_tables, tmp_path):
    (tmp_path / "ptb-xl-1.0.3").mkdir()
    find = paper_tables.find_dataset_folder
    assert find(tmp_path, "ptbxl", "ptbxl_database.csv") == tmp_path / "ptb-xl-1.0.3"
    (tmp_path / "ptbxl_database.csv").touch()
    assert find(tmp_path, "ptbxl", "ptbxl_database.csv") == tmp_path
    with pytest.raises(SystemExit):
        paper_tables.main(["--dataset", "chapman"])  # no --data-home
