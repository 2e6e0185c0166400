"""Shared helpers of the loaders: data home, lead names, attribute parsing, progress."""

import math

import pytest

from sklearn_crocs.datasets import clear_data_home, get_data_home
from sklearn_crocs.datasets._base import (
    check_leads,
    parse_age,
    parse_comments,
    parse_sex,
    progress,
)


def test_data_home(tmp_path, monkeypatch):
    monkeypatch.setenv("SKLEARN_CROCS_DATA", str(tmp_path / "from-env"))
    assert get_data_home() == str(tmp_path / "from-env")
    assert (tmp_path / "from-env").is_dir()
    assert get_data_home(tmp_path / "explicit") == str(tmp_path / "explicit")
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("SKLEARN_CROCS_DATA")
    assert get_data_home() == str(tmp_path / "sklearn_crocs_data")
    clear_data_home(tmp_path / "explicit")
    assert not (tmp_path / "explicit").exists()
    with pytest.raises(TypeError, match="data_home must be a str"):
        get_data_home(3)


def test_lead_names_are_checked_and_spelled_canonically():
    assert check_leads(None) is None
    assert check_leads("avr") == ["aVR"]
    assert check_leads(["ii", "V1", "X9"]) == ["II", "V1", "X9"]
    with pytest.raises(ValueError, match="duplicates"):
        check_leads(["II", "ii"])
    with pytest.raises(ValueError, match="at least one lead"):
        check_leads([])
    with pytest.raises(TypeError, match="list of lead names"):
        check_leads(3)


@pytest.mark.parametrize(
    ("value", "age"),
    [(51, 51.0), ("51.5", 51.5), (">89", 90.0), ("NaN", math.nan), ("Unknown", math.nan),
     ("", math.nan), (None, math.nan)],
)  # fmt: skip
def test_parse_age(value, age):
    assert parse_age(value) == pytest.approx(age, nan_ok=True)


def test_parse_sex_and_comments():
    assert [parse_sex(v) for v in ("Male", "f", " FEMALE ", "M")] == ["M", "F", "F", "M"]
    assert math.isnan(parse_sex("unknown")) and math.isnan(parse_sex(None))
    comments = ["<age>: 51", "<sex>: F", "Rhythm: Sinus rhythm.", "no colon", "<age>: 60"]
    assert parse_comments(comments) == {"age": "51", "sex": "F", "Rhythm": "Sinus rhythm."}


def test_progress_bar_on_stderr_only_when_verbose(capsys):
    assert list(progress(range(3), verbose=0, desc="quiet")) == [0, 1, 2]
    assert capsys.readouterr() == ("", "")
    assert list(progress(range(3), verbose=1, desc="loud", unit="file")) == [0, 1, 2]
    out, err = capsys.readouterr()
    assert out == ""
    assert "loud" in err and "3/3" in err and "file/s" in err
