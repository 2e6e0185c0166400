"""Fetchers use no path they did not create, and trust no list they cannot tell is whole.

Links are planted in ``data_home`` where a fetch writes (``<file>.part``) or
trusts (the checksum list, a verified file); the fetch must write through
none of them, and leave their targets untouched.
"""

import json
import os

import pytest

from sklearn_crocs.datasets import fetch_chapman, get_data_home
from sklearn_crocs.datasets._chapman import CHAPMAN_FOLDER
from sklearn_crocs.datasets._download import TRUST_FILE

from .conftest import sha256_of

RECORD = "WFDBRecords/01/010/JS05457"


def _fetch(server, home, **kwargs):
    return fetch_chapman(data_home=home, base_url=server.url, delay=0, **kwargs)


@pytest.mark.bad_input(
    "Fetch", "symbolic link planted at a .part file the fetch writes", "(link removed)"
)
@pytest.mark.parametrize("planted", [RECORD + ".hea.part", "SHA256SUMS.txt.new.part"])
def test_link_at_a_part_file_is_not_followed(chapman_server, tmp_path, planted):
    home = tmp_path / "home"
    victim = home / "victim.txt"  # inside data_home: the existing checks let it pass
    root = home / CHAPMAN_FOLDER
    (root / planted).parent.mkdir(parents=True)
    victim.write_text("the user's own file\n")
    (root / planted).symlink_to(victim)
    bunch = _fetch(chapman_server, home, records=["JS05457"])
    assert victim.read_text() == "the user's own file\n"
    assert list(bunch.record_names) == ["JS05457"]
    for relpath in (RECORD + ".hea", "SHA256SUMS.txt"):
        local = root / relpath
        assert not local.is_symlink()
        assert sha256_of(local) == sha256_of(chapman_server.httpd.root / relpath)


@pytest.mark.bad_input("Fetch", "verified file replaced by a symbolic link", "(downloaded again)")
def test_linked_verified_file_is_not_trusted(chapman_server, tmp_path):
    home = tmp_path / "home"
    _fetch(chapman_server, home, records=["JS05457"])
    local = home / CHAPMAN_FOLDER / (RECORD + ".hea")
    decoy = home / "decoy.hea"
    decoy.write_bytes(local.read_bytes())  # same bytes: the checksum alone would pass it
    local.unlink()
    local.symlink_to(decoy)
    _fetch(chapman_server, home, records=["JS05457"])
    assert not local.is_symlink()
    assert sha256_of(local) == sha256_of(chapman_server.httpd.root / (RECORD + ".hea"))


@pytest.mark.bad_input("Fetch", "checksum list that is a link or not a regular file", "OSError")
@pytest.mark.parametrize("kind", ["link", "folder"])
def test_checksum_list_must_be_a_regular_file(chapman_server, tmp_path, kind):
    home = tmp_path / "home"
    root = home / CHAPMAN_FOLDER
    root.mkdir(parents=True)
    if kind == "link":
        copy = home / "copy.txt"
        copy.write_bytes((chapman_server.httpd.root / "SHA256SUMS.txt").read_bytes())
        (root / "SHA256SUMS.txt").symlink_to(copy)
    else:
        (root / "SHA256SUMS.txt").mkdir()
    with pytest.raises(OSError, match="SHA256SUMS.txt is .*; the fetcher writes and trusts only"):
        _fetch(chapman_server, home)


@pytest.mark.bad_input(
    "Fetch", "checksum list served short without Content-Length on first use", "OSError"
)
def test_list_of_unknown_length_is_not_trusted_on_first_use(chapman_server, tmp_path):
    home = tmp_path / "home"
    chapman_server.httpd.modes["SHA256SUMS.txt"] = "no_length_truncated"
    with pytest.raises(OSError, match="without its length .* Pass sha256sums_sha256="):
        _fetch(chapman_server, home)
    assert not (home / TRUST_FILE).exists()
    assert not list((home / CHAPMAN_FOLDER).iterdir())
    # Once the list is served whole, it is accepted; and with its hash given,
    # a list of unknown length is checked by that hash instead.
    chapman_server.httpd.modes.clear()
    bunch = _fetch(chapman_server, home)
    assert len(bunch.record_names) == 9
    good = json.loads((home / TRUST_FILE).read_text())[CHAPMAN_FOLDER]
    chapman_server.httpd.modes["SHA256SUMS.txt"] = "no_length_truncated"
    with pytest.raises(ValueError, match="but sha256sums_sha256="):
        _fetch(chapman_server, tmp_path / "other", sha256sums_sha256=good)


@pytest.mark.bad_input("Fetch", "data_home that is a file", "NotADirectoryError")
def test_data_home_that_is_a_file(tmp_path):
    path = tmp_path / "notes.txt"
    path.write_text("x")
    with pytest.raises(NotADirectoryError, match="data_home=.*notes.txt is a file, not a folder"):
        get_data_home(path)
    with pytest.raises(NotADirectoryError, match="is a file, not a folder"):
        fetch_chapman(data_home=path, download_if_missing=False)
    assert os.path.isfile(path)


@pytest.mark.bad_input("Fetch", "records given as one string", "(one record)")
def test_records_as_one_string_is_one_record(chapman_server, tmp_path):
    # Was split into its characters: "records ['0', '1', ...] are not listed".
    bunch = _fetch(chapman_server, tmp_path, records="JS05457")
    assert list(bunch.record_names) == ["JS05457"]
