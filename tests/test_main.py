"""The main job (README's first command) on the bundled data, shortened."""

import pytest

from sklearn_crocs.cli._job import main


@pytest.mark.slow  # the main job trains on the bundled records
@pytest.mark.parametrize(
    ("dataset", "n_test", "attributes"),
    [("ptbxl", 398, ("class", "sex", "age")), ("ludb", 252, ("rhythm", "sex", "age"))],
)
def test_main_job_prints_tables_and_writes_figure(tmp_path, capsys, dataset, n_test, attributes):
    argv = ["--dataset", dataset, "--output-dir", str(tmp_path), "--max-epochs", "2", "--quiet"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert f"Clustering of {n_test} held-out ECGs (%)" in out
    clustering = out.split("ECGs (%):\n")[1].splitlines()
    assert clustering[0].split() == ["attribute", *attributes, "combination"]
    assert [line.split()[0] for line in clustering[2:5]] == ["CP", "TP", "Majority"]
    assert f"Retrieval of the K nearest of {n_test} held-out ECGs per prototype, P@K (%):" in out
    retrieval = out.split("P@K (%):\n")[1].splitlines()
    assert retrieval[0].split() == ["K", "1", "5", "10"]
    assert retrieval[1].split() == ["#", "matches", *([">=1", ">=2", "=3"] * 3)]
    assert retrieval[2].startswith("CP CROCS")
    assert retrieval[3].startswith("TP CROCS")
    assert retrieval[4].startswith("Random")
    assert all(0 <= float(v) <= 100 for v in retrieval[2].split()[2:])
    assert retrieval[5].startswith("Queries that at least one held-out ECG matches")
    assert "Trained 2 epochs" in out
    assert (tmp_path / "prototypes.png").stat().st_size > 10_000
