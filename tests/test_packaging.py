"""What the distribution ships beside the code: the typing marker and the citation file."""

from pathlib import Path

import pytest

import sklearn_crocs

PACKAGE = Path(sklearn_crocs.__file__).parent
ROOT = PACKAGE.parent


def test_the_package_is_marked_as_typed():
    # PEP 561: type checkers read an installed package's annotations only
    # where a py.typed file lies next to it, so the wheel must include it.
    assert (PACKAGE / "py.typed").is_file()
    if not (ROOT / "pyproject.toml").is_file():
        pytest.skip("pyproject.toml is not available (installed package)")
    tomllib = pytest.importorskip("tomllib")
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert "py.typed" in config["tool"]["setuptools"]["package-data"]["sklearn_crocs"]


def test_citation_file_cites_the_package_and_the_paper():
    if not (ROOT / "CITATION.cff").is_file():
        pytest.skip("CITATION.cff is not available (installed package)")
    yaml = pytest.importorskip("yaml")
    citation = yaml.safe_load((ROOT / "CITATION.cff").read_text())
    assert citation["cff-version"] == "1.2.0"
    assert citation["type"] == "software"
    assert citation["version"] == sklearn_crocs.__version__
    paper = citation["preferred-citation"]
    assert paper["title"].startswith("CROCS: Clustering and Retrieval of Cardiac Signals")
    assert [a["family-names"] for a in paper["authors"]] == ["Kiyasseh", "Zhu", "Clifton"]
    assert paper["year"] == 2021
