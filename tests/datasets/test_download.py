"""Verified, resumable downloads, through the fetchers, from a local PhysioNet.

The server (``LocalPhysioNet`` in conftest.py) serves the PTB-XL and Chapman
trees built from the real records, each with a ``SHA256SUMS.txt`` in
PhysioNet's format. It honours HTTP Range requests (or, when told, ignores
them), and can cut a file short once or every time, or serve a file that does
not match its checksum.
"""

import hashlib
import json
import re
import shutil
from pathlib import Path

import pytest

from sklearn_crocs.datasets import fetch_chapman, fetch_ptbxl
from sklearn_crocs.datasets._chapman import CHAPMAN_FOLDER
from sklearn_crocs.datasets._download import TRUST_FILE
from sklearn_crocs.datasets._ptbxl import PTBXL_FOLDER

from .conftest import sha256_of

TRUNCATED = "records500/08000/08883_hr.dat"


def _fetch(server, home, **kwargs):
    return fetch_ptbxl(data_home=home, base_url=server.url, delay=0, **kwargs)


def test_truncated_download_resumes_with_range(ptbxl_server, tmp_path):
    ptbxl_server.httpd.modes[TRUNCATED] = "truncate_once"
    bunch = _fetch(ptbxl_server, tmp_path)
    assert 8883 in bunch.ecg_ids
    size = (ptbxl_server.httpd.root / TRUNCATED).stat().st_size
    attempts = [rng for relpath, rng in ptbxl_server.requests if relpath == TRUNCATED]
    assert attempts == [None, f"bytes={size // 2}-"]
    local = tmp_path / PTBXL_FOLDER / TRUNCATED
    assert sha256_of(local) == sha256_of(ptbxl_server.httpd.root / TRUNCATED)


def test_server_ignoring_range_restarts_cleanly(ptbxl_server, tmp_path):
    ptbxl_server.httpd.modes[TRUNCATED] = "truncate_once"
    ptbxl_server.httpd.honour_range = False
    _fetch(ptbxl_server, tmp_path)
    attempts = [rng for relpath, rng in ptbxl_server.requests if relpath == TRUNCATED]
    assert len(attempts) == 2 and attempts[1] is not None  # asked, got 200
    local = tmp_path / PTBXL_FOLDER / TRUNCATED
    assert sha256_of(local) == sha256_of(ptbxl_server.httpd.root / TRUNCATED)


def test_interrupted_download_resumes_in_a_later_call(ptbxl_server, tmp_path):
    ptbxl_server.httpd.modes[TRUNCATED] = "truncate_always"
    with pytest.raises(
        OSError, match=r"08883_hr\.dat intact after 2 attempt.*partial download .* is kept"
    ):
        _fetch(ptbxl_server, tmp_path, n_retries=1)
    root = tmp_path / PTBXL_FOLDER
    part = root / (TRUNCATED + ".part")
    assert part.exists() and not (root / TRUNCATED).exists()
    kept = part.stat().st_size
    assert kept > 0
    # Files that were complete are kept and recorded as verified.
    assert (root / "records500/03000/03961_hr.dat").exists()
    ptbxl_server.httpd.modes.clear()
    ptbxl_server.requests.clear()
    bunch = _fetch(ptbxl_server, tmp_path)
    assert 8883 in bunch.ecg_ids
    assert [r for r in ptbxl_server.requests if r[0] == TRUNCATED] == [
        (TRUNCATED, f"bytes={kept}-")
    ]
    # Nothing already verified was downloaded again.
    assert {r for r, _ in ptbxl_server.requests} == {TRUNCATED}
    assert not part.exists()


def test_checksum_mismatch_is_never_used(ptbxl_server, tmp_path):
    bad = "records500/07000/07911_hr.dat"
    ptbxl_server.httpd.modes[bad] = "corrupt"
    with pytest.raises(OSError, match=r"07911_hr\.dat intact .*SHA256 of the downloaded file"):
        _fetch(ptbxl_server, tmp_path, n_retries=1)
    root = tmp_path / PTBXL_FOLDER
    assert not (root / bad).exists()
    assert not (root / (bad + ".part")).exists()
    assert [r for r, _ in ptbxl_server.requests].count(bad) == 2


def test_checksum_list_mismatch(ptbxl_server, tmp_path):
    sums = ptbxl_server.httpd.root / "SHA256SUMS.txt"
    text = sums.read_text().splitlines()
    index = next(i for i, line in enumerate(text) if line.endswith("scp_statements.csv"))
    text[index] = "0" * 64 + " scp_statements.csv"
    sums.write_text("\n".join(text) + "\n")
    with pytest.raises(OSError, match=r"scp_statements\.csv to .* intact.*expected 0000"):
        _fetch(ptbxl_server, tmp_path, n_retries=0)
    assert not (tmp_path / PTBXL_FOLDER / "scp_statements.csv").exists()


def test_corrupted_local_file_is_downloaded_again(ptbxl_server, tmp_path):
    _fetch(ptbxl_server, tmp_path)
    local = tmp_path / PTBXL_FOLDER / "records500/09000/09008_hr.dat"
    local.write_bytes(b"\x00" * local.stat().st_size)  # same size, new mtime
    with pytest.raises(OSError, match="missing or corrupted"):
        _fetch(ptbxl_server, tmp_path, download_if_missing=False)
    ptbxl_server.requests.clear()
    bunch = _fetch(ptbxl_server, tmp_path)
    assert [r for r, _ in ptbxl_server.requests] == ["records500/09000/09008_hr.dat"]
    assert sha256_of(local) == sha256_of(ptbxl_server.httpd.root / "records500/09000/09008_hr.dat")
    assert 9008 in bunch.ecg_ids


def test_download_if_missing_false_and_http_errors(ptbxl_server, tmp_path):
    with pytest.raises(OSError, match="SHA256SUMS.txt is missing.*download_if_missing=False"):
        _fetch(ptbxl_server, tmp_path, download_if_missing=False)
    (ptbxl_server.httpd.root / "records500/03000/03961_hr.hea").unlink()
    with pytest.raises(OSError, match=r"03961_hr\.hea: HTTP 404"):
        _fetch(ptbxl_server, tmp_path)
    assert [r for r, _ in ptbxl_server.requests].count("records500/03000/03961_hr.hea") == 1
    with pytest.raises(ValueError, match="n_retries must be"):
        _fetch(ptbxl_server, tmp_path, n_retries=-1)
    with pytest.raises(ValueError, match="base_url must be an http"):
        fetch_ptbxl(data_home=tmp_path, base_url="ftp://example.org/ptb-xl/")


# ------------------------------------------------ paths that leave data_home
def _files_under(folder):
    return {p for p in Path(folder).rglob("*") if p.is_file() or p.is_symlink()}


def _add_listed_file(server_root, relpath, served_as, content=b"12 1 500 10\n"):
    """List ``relpath`` in the server's SHA256SUMS.txt and serve ``content`` at ``served_as``."""
    target = server_root / served_as
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(content)
    sums = server_root / "SHA256SUMS.txt"
    digest = hashlib.sha256(content).hexdigest()
    sums.write_text(sums.read_text() + f"{digest} {relpath}\n")


@pytest.mark.bad_input(
    "Fetch", "checksum-list entry outside data_home (.., absolute, drive letter)", "ValueError"
)
@pytest.mark.parametrize(
    ("entry", "problem"),
    [
        ("../../escaped/x.hea", "not normalised"),
        ("WFDBRecords/../../../escaped/x.hea", "not normalised"),
        ("./x.hea", "not normalised"),
        ("WFDBRecords//x.hea", "not normalised"),
        ("/tmp/escaped/x.hea", "absolute"),
        ("C:/escaped/x.hea", "Windows path"),
        ("c:x.hea", "Windows path"),
        ("..\\..\\escaped\\x.hea", "Windows path"),
        ("x.hea\x00.txt", "control characters"),
    ],
)
def test_checksum_entries_outside_data_home_stop_the_fetch(
    chapman_server, tmp_path, entry, problem
):
    # Reproduction 3: a mirror's SHA256SUMS.txt named files outside the
    # download folder, and the fetcher wrote them there. Now the fetch stops
    # at the list, before any file of it is written.
    server_root = chapman_server.httpd.root
    _add_listed_file(server_root, entry, "escaped/x.hea")
    home = tmp_path / "home"
    before = _files_under(tmp_path) - _files_under(server_root)
    with pytest.raises(ValueError, match=rf"Refusing the entry {re.escape(repr(entry))}.*{problem}"):
        fetch_chapman(data_home=home, base_url=chapman_server.url, delay=0)
    after = _files_under(tmp_path) - _files_under(server_root)
    assert after == before  # nothing written anywhere: not the list, not the trust record
    assert [r for r, _ in chapman_server.requests] == ["SHA256SUMS.txt"]


@pytest.mark.bad_input("Fetch", "symbolic link in the cache pointing outside", "ValueError")
@pytest.mark.parametrize("link", ["WFDBRecords", "WFDBRecords/01/010/JS05457.hea", "."])
def test_symlink_in_the_cache_stops_the_fetch(chapman_server, tmp_path, link):
    home, outside = tmp_path / "home", tmp_path / "outside"
    outside.mkdir()
    root = home / CHAPMAN_FOLDER
    if link == ".":
        home.mkdir()
        root.symlink_to(outside, target_is_directory=True)
    else:
        (root / link).parent.mkdir(parents=True, exist_ok=True)
        (root / link).symlink_to(outside / "target", target_is_directory=link == "WFDBRecords")
    with pytest.raises(ValueError, match=r"resolves to .*outside data_home"):
        fetch_chapman(data_home=home, base_url=chapman_server.url, delay=0)
    assert _files_under(outside) == set()
    assert not any(r.startswith("WFDBRecords") for r, _ in chapman_server.requests)


# ------------------------------------------------------- the checksum list
def _trusted(home):
    return json.loads((Path(home) / TRUST_FILE).read_text())


@pytest.mark.bad_input("Fetch", "checksum list changed since first use", "ValueError")
def test_checksum_list_trusted_on_first_use(chapman_server, tmp_path):
    home = tmp_path / "home"
    sums = chapman_server.httpd.root / "SHA256SUMS.txt"
    first = sha256_of(sums)
    fetch_chapman(data_home=home, base_url=chapman_server.url, delay=0, records=["JS05457"])
    assert _trusted(home) == {CHAPMAN_FOLDER: first}
    # The server now serves another list (a file added): a fresh download of
    # the list is refused, naming both hashes.
    _add_listed_file(chapman_server.httpd.root, "WFDBRecords/01/010/JS99999.hea", "x")
    second = sha256_of(sums)
    local = home / CHAPMAN_FOLDER / "SHA256SUMS.txt"
    local.unlink()
    with pytest.raises(ValueError, match=rf"SHA-256 {second}.*first used .* had SHA-256 {first}"):
        fetch_chapman(data_home=home, base_url=chapman_server.url, delay=0)
    assert not local.exists() and not local.with_name("SHA256SUMS.txt.new").exists()
    # The same for a list changed on disk.
    fetch_chapman(data_home=tmp_path / "other", base_url=chapman_server.url, delay=0,
                  records=["JS05457"], sha256sums_sha256=second)  # fmt: skip
    shutil.copyfile(sums, local)
    with pytest.raises(ValueError, match=rf"SHA-256 {second}.*had SHA-256 {first}"):
        fetch_chapman(data_home=home, base_url=chapman_server.url, delay=0)
    # Vouching for the new list with its hash accepts it and records it.
    fetch_chapman(data_home=home, base_url=chapman_server.url, delay=0, records=["JS05457"],
                  sha256sums_sha256=second.upper())  # fmt: skip
    assert _trusted(home) == {CHAPMAN_FOLDER: second}


@pytest.mark.bad_input("Fetch", "checksum list not matching sha256sums_sha256", "ValueError")
def test_checksum_list_against_the_given_hash(chapman_server, tmp_path):
    good = sha256_of(chapman_server.httpd.root / "SHA256SUMS.txt")
    wrong = "ab" * 32
    with pytest.raises(ValueError, match=rf"has SHA-256 {good}, but sha256sums_sha256='{wrong}'"):
        fetch_chapman(data_home=tmp_path, base_url=chapman_server.url, sha256sums_sha256=wrong)
    assert not (tmp_path / TRUST_FILE).exists()
    assert not (tmp_path / CHAPMAN_FOLDER / "SHA256SUMS.txt").exists()
    with pytest.raises(ValueError, match="64 hexadecimal digits"):
        fetch_chapman(data_home=tmp_path, base_url=chapman_server.url, sha256sums_sha256="abc")
    bunch = fetch_chapman(data_home=tmp_path, base_url=chapman_server.url, delay=0,
                          records=["JS05457"], sha256sums_sha256=good)  # fmt: skip
    assert bunch.data.shape[0] == 1
