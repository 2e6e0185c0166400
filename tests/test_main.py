"""The main job (README's first command) on the bundled data, shortened."""

from sklearn_crocs._main import main


def test_main_job_prints_tables_and_writes_figure(tmp_path, capsys):
    assert main(["--output-dir", str(tmp_path), "--max-epochs", "2", "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "Clustering of 252 held-out ECGs (%)" in out
    assert "CP CROCS" in out
    assert "TP CROCS" in out
    for attribute in ("rhythm", "sex", "age", "combination"):
        assert attribute in out
    assert "Retrieval of the K nearest of 252 held-out ECGs per prototype, P@K (%):" in out
    retrieval = out.split("P@K (%):\n")[1].splitlines()
    assert retrieval[0].split() == ["K", "1", "5", "10"]
    assert retrieval[1].split() == ["#", "matches", *([">=1", ">=2", "=3"] * 3)]
    assert retrieval[2].startswith("CP CROCS")
    assert retrieval[3].startswith("TP CROCS")
    assert all(0 <= float(v) <= 100 for v in retrieval[2].split()[2:])
    assert retrieval[4].startswith("Queries scored")
    assert (tmp_path / "prototypes.png").stat().st_size > 10_000
