"""Fixtures shared by the dataset tests: the real ECG records in ../shared/data."""

from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
SHARED_DATA = REPO_ROOT.parent / "shared" / "data"


def _shared_subdir(name):
    path = SHARED_DATA / name
    if not path.is_dir():
        pytest.skip(
            f"the real ECG records are not available at {path} (expected at "
            f"../shared/data relative to the repository root)"
        )
    return path


@pytest.fixture(scope="session")
def ludb_dir():
    """The LUDB WFDB originals (.hea/.dat and ludb.csv)."""
    return _shared_subdir("ludb")


@pytest.fixture(scope="session")
def cinc_dir():
    """The 20 CinC 2021 records (.hea/.mat): Chapman, PTB-XL, Georgia, CPSC."""
    return _shared_subdir("cinc2021")
