"""benchmarks/paper_tables.py: a smoke run on a small subset, and its table building."""


import numpy as np
import pandas as pd
import pytest
from threadpoolctl import threadpool_limits


@pytest.mark.slow  # every method of the paper, trained on real ECGs
def test_quick_run_writes_every_table(paper_tables, tmp_path):
    pytest.importorskip("matplotlib")
    docs = tmp_path / "paper_tables.txt"
    argv = ["--quick", "--datasets", "PTB-XL sample", "--max-ecgs", "160",
            "--output-dir", str(tmp_path / "out"), "--docs", str(docs), "--n-jobs", "1"]  # fmt: skip
    with threadpool_limits(limits=1):  # as the suite: one thread per worker
        assert paper_tables.main(argv) == 0
    out = tmp_path / "out"
    text = (out / "tables.md").read_text()
    assert docs.read_text() == text
    assert "a smoke run" in text.splitlines()[0]
    for title in paper_tables.TABLES.values():
        assert f"**{title}, PTB-XL sample (1 seed)**" in text
    for name in ("table1", "table2", "table3", "beta", "embedding", "labels10"):
        assert (out / f"{name}_ptbxl_sample.csv").is_file()
    assert (out / "figures" / "prototypes_ptbxl_sample.png").stat().st_size > 0
    raw = pd.read_csv(out / "raw.csv")
    table1 = set(raw.loc[raw["experiment"] == "table1", "method"])
    crocs_rows = {f"{kind} CROCS ({configuration})" for kind in ("CP", "TP")
                  for configuration in ("package defaults", "paper settings")}  # fmt: skip
    assert table1 == crocs_rows | {
        "Majority", "KM CROCS (package defaults)", "KM CROCS (paper settings)", "DTC", "KM raw",
        "KM EP", "DeepCluster", "IIC", "SeLA", "DTCR"}  # fmt: skip
    assert set(raw.loc[raw["experiment"] == "table2", "method"]) == crocs_rows | {
        "DTC", "Random retrieval"}  # fmt: skip
    assert set(raw.loc[raw["experiment"] == "table3", "method"]) == set(paper_tables.ABLATIONS)
    scores = raw.filter(regex="Acc$|P@")
    assert ((scores >= 0) & (scores <= 100) | scores.isna()).all().all()


def test_tables_show_mean_std_and_bold_the_best_mean(paper_tables, tmp_path):
    rows = [
        {"dataset": "D", "experiment": "table1", "method": m, "seed": s, "sex Acc": acc,
         "fit (s)": 5.0}
        for m, accs in {"A": (50, 60), "B": (70, 80)}.items()
        for s, acc in enumerate(accs)
    ]  # fmt: skip
    # A reference row seen last is shown first.
    rows += [{"dataset": "D", "experiment": "table1", "method": "Majority", "seed": s,
              "sex Acc": 40.0} for s in (0, 1)]  # fmt: skip
    # Another dataset whose attributes come in another order.
    rows += [{"dataset": "E", "experiment": "table1", "method": "A", "seed": 0, "rhythm Acc": 1.0,
              "sex Acc": 2.0}]  # fmt: skip
    text = paper_tables.write_outputs(rows, tmp_path, "header")
    assert "| A | 55.0 (7.1) | 5.0 (0.0) |" in text
    assert text.index("| Majority | 40.0 (0.0) |  |") < text.index("| A |")
    assert "| B | **75.0 (7.1)** | 5.0 (0.0) |" in text  # fit time is never bold
    assert "**Table 1: clustering of the test ECGs (%), D (2 seeds)**" in text
    assert "| Method | rhythm Acc | sex Acc |" in text
    saved = pd.read_csv(tmp_path / "table1_d.csv", header=[0, 1], index_col=0)
    assert np.allclose(saved[("mean", "sex Acc")], [40, 55, 75])
    assert np.allclose(saved[("std", "sex Acc")], [0] + [np.std([50, 60], ddof=1)] * 2)


def test_paper_rows_ablation_and_dtc_follow_the_paper(paper_tables):
    from sklearn_crocs import paper_params

    assert paper_tables.PAPER_DATASETS == {
        "PTB-XL sample": "ptbxl", "LUDB": "chapman", "PTB-XL": "ptbxl", "Chapman": "chapman"}  # fmt: skip
    # The paper's protocol (Sec. 5, App. A) on its datasets.
    assert (paper_tables.FRAME_LENGTH, paper_tables.VAL_SIZE, paper_tables.TEST_SIZE) == (
        2500, 0.2, 0.2)  # fmt: skip
    assert paper_tables.N_AGE_GROUPS == 4
    # Table 3's full loss is Eq. 3: L_reg summed over the prototype pairs.
    assert paper_tables.ABLATIONS["NCE-soft + L_reg"] == {
        "tau_w": 1.0, "beta": 0.2, "reg_reduction": "sum", "ordinal": None}  # fmt: skip
    assert paper_tables.DTC_PARAMS == {"tau_w": paper_params("ptbxl")["tau_w"]}
