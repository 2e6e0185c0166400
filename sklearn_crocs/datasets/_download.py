"""Verified, resumable downloads from a PhysioNet file tree, for the fetchers.

``fetch_ptbxl`` and ``fetch_chapman`` (in their datasets' modules) fetch files
one by one from the project's PhysioNet file tree and check them against the
project's ``SHA256SUMS.txt``:

- a file is downloaded into ``<name>.part`` and renamed to its final name only
  after its SHA256 matches, so a half-downloaded or corrupted file is never
  used;
- an interrupted download keeps its ``.part`` file; the next attempt (within
  the same call, up to ``n_retries`` times, or in a later call) resumes it with
  an HTTP ``Range`` request, and starts the file over when the server ignores
  the range or the resumed file fails the checksum;
- verified files are recorded (size, modification time, checksum) in
  ``.sklearn_crocs_verified.json``; a file whose size or modification time
  changed since is checked again, and downloaded anew if it no longer matches;
- every path named by the checksum list or the server's metadata is checked
  before any file is written: a relative POSIX path without ``..``, drive or
  root that, symbolic links resolved, stays inside the dataset's folder;
- no path is written or trusted through a link: a symbolic link at a
  ``.part`` file is removed (the link, never its target) and the file opened
  with ``O_NOFOLLOW``; any other non-regular file there, or at the checksum
  list, stops the fetch; a linked or non-regular file in place of a verified
  file is not trusted, and is replaced by the download;
- the checksum list itself is verified: against the SHA-256 the caller passes
  (``sha256sums_sha256``), else against the one recorded in
  ``<data_home>/.sklearn_crocs_checksum_lists.json`` when the list of that
  dataset version was first accepted (trust on first use, only for a list
  whose length the server announced and which arrived whole). No hash of the
  real lists is pinned in the package: none could be obtained from the real
  files when this was written.
"""

import http.client
import json
import os
import re
import stat
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from .._utils import _atomic_path, _move_into_place
from .._utils import _file_sha256 as _sha256
from ._base import progress, relative_path_problem

CHECKSUM_FILE = "SHA256SUMS.txt"
MANIFEST_FILE = ".sklearn_crocs_verified.json"
TRUST_FILE = ".sklearn_crocs_checksum_lists.json"
_CHUNK = 1 << 16


class _IncompleteDownload(OSError):
    """The connection ended before the announced number of bytes arrived."""


class _UnsafePath(OSError):
    """A path the fetcher writes or trusts is not a regular file: never retried."""


# Where the platform has it, opening a file never follows a link at its last component.
_O_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)


def _regular_size(path, *, remove_links):
    """Size of the regular file at ``path``, 0 if there is none; never follows a link.

    A symbolic link is removed (the link itself, not its target) when
    ``remove_links``, else refused like any other non-regular file (a folder,
    a device, a pipe): the fetcher writes and trusts only regular files.
    """
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return 0
    if stat.S_ISREG(st.st_mode):
        return st.st_size
    if stat.S_ISLNK(st.st_mode) and remove_links:
        os.unlink(path)
        return 0
    kind = "a symbolic link" if stat.S_ISLNK(st.st_mode) else "not a regular file"
    raise _UnsafePath(
        f"{path} is {kind}; the fetcher writes and trusts only regular files it "
        "creates. Remove it and fetch again."
    )


def _check_relpath(relpath, source):
    """Raise ValueError unless ``relpath`` is a plain relative POSIX path (no ``..``).

    Absolute paths, Windows drive letters and separators, ``.``/``..`` and
    empty components, and control characters are refused: a path from a
    checksum list or the server names a file inside the dataset folder, and
    nothing else.
    """
    problem = relative_path_problem(relpath)
    if problem is not None:
        raise ValueError(
            f"Refusing the entry {relpath!r} of {source}: {problem}. Only relative "
            "paths inside the dataset folder are accepted; the list or the server "
            "(base_url) is corrupt or malicious. Nothing was written."
        )


def _check_inside(root, relpaths, source):
    """Raise ValueError if a path under ``root``, symbolic links resolved, leaves data_home."""
    top = Path(root).parent.resolve()
    for relpath in relpaths:
        _check_relpath(relpath, source)
        target = (Path(root) / relpath).resolve()
        if not target.is_relative_to(top):
            raise ValueError(
                f"Refusing the entry {relpath!r} of {source}: it resolves to {target}, "
                f"outside data_home {top}: a symbolic link in the dataset folder points "
                "elsewhere. Remove the link, or choose a data_home where the data can "
                "be. Nothing was written."
            )


def _parse_checksums(path):
    """``{relative path: sha256}`` from a PhysioNet ``SHA256SUMS.txt``; paths checked."""
    sums = {}
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        parts = line.strip().split(maxsplit=1)
        if len(parts) != 2 or len(parts[0]) != 64:
            raise OSError(
                f"{path}, line {number}: expected '<sha256> <path>', got "
                f"{line!r}. Delete the file to download it again."
            )
        relpath = parts[1].lstrip("*").strip()
        _check_relpath(relpath, f"{path}, line {number}")
        sums[relpath] = parts[0].lower()
    return sums


def _fetch_once(url, part, timeout):
    """One HTTP attempt, appending to ``part`` when the server honours Range.

    Returns ``(resumed, length_known)``: whether it resumed, and whether the
    server announced the length, so that a short file is told from a whole one.
    """
    offset = _regular_size(part, remove_links=True)
    headers = {"User-Agent": "sklearn-crocs"}
    if offset:
        headers["Range"] = f"bytes={offset}-"
    request = urllib.request.Request(url, headers=headers)
    with urllib.request.urlopen(request, timeout=timeout) as response:
        resumed = offset > 0 and response.status == 206
        if resumed:
            content_range = response.headers.get("Content-Range", "")
            if not content_range.startswith(f"bytes {offset}-"):
                resumed = False
        if not resumed:
            offset = 0  # the server sent the whole file: start over cleanly
        length = response.headers.get("Content-Length")
        expected = offset + int(length) if length is not None else None
        _regular_size(part, remove_links=True)  # a link planted since the first check
        flags = os.O_WRONLY | os.O_CREAT | _O_NOFOLLOW | (os.O_APPEND if resumed else os.O_TRUNC)
        with os.fdopen(os.open(part, flags, 0o666), "ab" if resumed else "wb") as fh:
            try:
                for block in iter(lambda: response.read(_CHUNK), b""):
                    fh.write(block)
            except http.client.IncompleteRead as exc:
                fh.write(exc.partial)
                raise _IncompleteDownload(f"connection closed early ({exc})") from exc
    size = _regular_size(part, remove_links=False)
    if expected is not None and size < expected:
        raise _IncompleteDownload(f"received {size} of {expected} bytes")
    return resumed, expected is not None


def download_file(
    url, target, sha256, *, n_retries=3, delay=1.0, timeout=60, require_length=False
):
    """Download ``url`` to ``target`` and check its SHA256; resume if needed.

    Parameters
    ----------
    url : str
    target : path-like
        Final location; created only once the checksum matches.
    sha256 : str or None
        Expected hex digest; None skips the check (only for the checksum list
        itself).
    n_retries : int
        Further attempts after a failed one (network error, truncated
        transfer, checksum mismatch of a resumed file).
    delay : float
        Seconds to wait before each retry.
    timeout : float
        Socket timeout in seconds.
    require_length : bool
        Refuse a response without ``Content-Length``: without the length a
        file cut short cannot be told from a whole one (for a checksum list
        about to be trusted on first use, which no hash checks).

    Raises
    ------
    OSError
        When the file cannot be downloaded intact; the message says whether a
        ``.part`` file was kept for resuming.
    """
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    part = target.with_name(target.name + ".part")
    last_error = None
    for attempt in range(n_retries + 1):
        if attempt:
            time.sleep(delay)
        try:
            resumed, length_known = _fetch_once(url, part, timeout)
        except _UnsafePath:
            raise
        except urllib.error.HTTPError as exc:
            exc.close()
            if exc.code == 416:  # range not satisfiable: the .part is unusable
                part.unlink(missing_ok=True)
                last_error = exc
                continue
            if 400 <= exc.code < 500:
                raise OSError(f"Cannot download {url}: HTTP {exc.code} {exc.reason}.") from exc
            last_error = exc
            continue
        except (urllib.error.URLError, OSError, http.client.HTTPException) as exc:
            last_error = exc
            continue
        if require_length and not length_known:
            part.unlink()
            raise OSError(
                f"{url} was served without its length (no Content-Length header), so a "
                "copy cut short cannot be told from the whole file, and no hash checks "
                "it. Pass sha256sums_sha256= (the SHA-256 that PhysioNet shows for "
                "SHA256SUMS.txt), or use a server that sends Content-Length. Nothing "
                "was recorded."
            )
        if sha256 is not None:
            digest = _sha256(part)
            if digest != sha256:
                part.unlink()
                last_error = OSError(
                    f"SHA256 of the downloaded file is {digest}, expected {sha256}"
                    + (" (after resuming a partial download)" if resumed else "")
                )
                continue
        _move_into_place(part, target, "cache")  # a link there is replaced, not followed
        return target
    kept = (
        f" The partial download {part} is kept; calling again resumes it." if part.exists() else ""
    )
    raise OSError(
        f"Could not download {url} to {target} intact after {n_retries + 1} "
        f"attempt(s): {last_error}.{kept}"
    )


class _Manifest:
    """The record of verified files (thread-safe, written atomically)."""

    def __init__(self, root):
        self.path = Path(root) / MANIFEST_FILE
        self.lock = threading.Lock()
        try:
            self.entries = json.loads(self.path.read_text(encoding="utf-8"))
        except (FileNotFoundError, ValueError):
            self.entries = {}

    def is_verified(self, root, relpath, sha256):
        path = Path(root) / relpath
        try:
            st = os.lstat(path)
        except FileNotFoundError:
            return False
        if not stat.S_ISREG(st.st_mode):  # a link or special file is downloaded over
            return False
        entry = self.entries.get(relpath)
        if entry == [st.st_size, st.st_mtime_ns, sha256]:
            return True
        if _sha256(path) == sha256:  # present but unrecorded or touched
            self.record(root, relpath, sha256)
            return True
        return False

    def record(self, root, relpath, sha256):
        st = (Path(root) / relpath).stat()
        with self.lock:
            self.entries[relpath] = [st.st_size, st.st_mtime_ns, sha256]

    def save(self):
        with self.lock, _atomic_path(self.path, replace="cache") as tmp:
            tmp.write_text(json.dumps(self.entries, sort_keys=True), encoding="utf-8")


def _trusted_lists(trust_path):
    """The recorded hashes of the checksum lists first used in a data_home."""
    try:
        trusted = json.loads(trust_path.read_text(encoding="utf-8"))
    except (FileNotFoundError, ValueError):
        return {}
    return trusted if isinstance(trusted, dict) else {}


def _check_list_hash(path, digest, expected, root, name):
    """Verify the checksum list's SHA-256 (given, else trust on first use); record it."""
    trust_path = root.parent / TRUST_FILE
    trusted = _trusted_lists(trust_path)
    if expected is not None:
        if digest != expected.lower():
            raise ValueError(
                f"The {name} checksum list {path} has SHA-256 {digest}, but "
                f"sha256sums_sha256={expected!r}. The list was altered, or the server "
                "(base_url) serves another one; nothing from it was used."
            )
    elif root.name in trusted and trusted[root.name] != digest:
        raise ValueError(
            f"The {name} checksum list {path} has SHA-256 {digest}, but the list of "
            f"{root.name} first used in {root.parent} had SHA-256 {trusted[root.name]} "
            f"(recorded in {trust_path}). The list was altered, or the server (base_url) "
            "serves another one; nothing from it was used. If the new list is genuine, "
            "pass its hash as sha256sums_sha256=."
        )
    if trusted.get(root.name) != digest:
        trusted[root.name] = digest
        with _atomic_path(trust_path, replace="cache") as tmp:
            tmp.write_text(json.dumps(trusted, indent=1, sort_keys=True), encoding="utf-8")


def checksum_list(root, base_url, *, download_if_missing, n_retries, delay, name, expected_sha256):
    """The verified checksum list of ``root`` (downloaded first if missing)."""
    path = root / CHECKSUM_FILE
    _check_inside(root, [CHECKSUM_FILE, CHECKSUM_FILE + ".new"], f"the files of {name}")
    source = path
    _regular_size(path, remove_links=False)  # a link or special file is not trusted
    if not path.exists():
        if not download_if_missing:
            raise OSError(
                f"{name} is not in {root} ({CHECKSUM_FILE} is missing) and "
                f"download_if_missing=False."
            )
        # Kept under another name until its hash and every path in it are checked.
        source = root / (CHECKSUM_FILE + ".new")
        first_use = (
            expected_sha256 is None and root.name not in _trusted_lists(root.parent / TRUST_FILE)
        )
        download_file(
            urllib.parse.urljoin(base_url, CHECKSUM_FILE),
            source,
            None,
            n_retries=n_retries,
            delay=delay,
            require_length=first_use,
        )
    try:
        checksums = _parse_checksums(source)
        _check_list_hash(source, _sha256(source), expected_sha256, root, name)
    except BaseException:
        if source != path:
            source.unlink(missing_ok=True)
        raise
    if source != path:
        os.replace(source, path)
    return checksums


def ensure_files(
    root,
    base_url,
    relpaths,
    checksums,
    *,
    download_if_missing,
    n_retries,
    delay,
    n_jobs,
    verbose,
    name,
):
    """Make every ``relpath`` present and verified under ``root``."""
    _check_inside(root, relpaths, f"the files of {name}")
    unknown = [p for p in relpaths if p not in checksums]
    if unknown:
        raise OSError(
            f"{len(unknown)} file(s) of {name} are not listed in "
            f"{root / CHECKSUM_FILE} and cannot be verified, e.g. {unknown[:3]}. "
            f"Delete that file to download a fresh list."
        )
    manifest = _Manifest(root)
    missing = [p for p in relpaths if not manifest.is_verified(root, p, checksums[p])]
    if missing and not download_if_missing:
        raise OSError(
            f"{len(missing)} of {len(relpaths)} file(s) of {name} are missing or "
            f"corrupted in {root} (e.g. {missing[:3]}) and "
            f"download_if_missing=False."
        )
    if not missing:
        manifest.save()
        return
    failures = []

    def fetch(relpath):
        url = urllib.parse.urljoin(base_url, urllib.parse.quote(relpath))
        try:
            download_file(url, root / relpath, checksums[relpath], n_retries=n_retries, delay=delay)
        except OSError as exc:
            failures.append(exc)  # keep going: every good file is progress
            return
        manifest.record(root, relpath, checksums[relpath])

    bar = {"verbose": verbose, "desc": f"Downloading {name}", "total": len(missing), "unit": "file"}
    try:
        if n_jobs == 1:
            for relpath in progress(missing, **bar):
                fetch(relpath)
        else:
            with ThreadPoolExecutor(max_workers=n_jobs) as pool:
                for _ in progress(pool.map(fetch, missing), **bar):
                    pass
    finally:
        manifest.save()
    if failures:
        more = f" ({len(failures) - 1} more file(s) failed too)" if len(failures) > 1 else ""
        raise OSError(f"{failures[0]}{more}") from failures[0]


def check_fetch_args(n_retries, delay, n_jobs, base_url, sha256sums_sha256=None):
    if not isinstance(base_url, str) or not base_url.startswith(("http://", "https://")):
        raise ValueError(f"base_url must be an http(s) URL, got {base_url!r}.")
    if not isinstance(n_retries, int) or n_retries < 0:
        raise ValueError(f"n_retries must be an int >= 0, got {n_retries!r}.")
    if not isinstance(delay, (int, float)) or delay < 0:
        raise ValueError(f"delay must be a number >= 0, got {delay!r}.")
    if not isinstance(n_jobs, int) or n_jobs < 1:
        raise ValueError(f"n_jobs must be an int >= 1, got {n_jobs!r}.")
    if sha256sums_sha256 is not None and not (
        isinstance(sha256sums_sha256, str) and re.fullmatch(r"[0-9a-fA-F]{64}", sha256sums_sha256)
    ):
        raise ValueError(
            f"sha256sums_sha256 must be None or 64 hexadecimal digits, got {sha256sums_sha256!r}."
        )
    # urljoin drops the last path segment of a base without a final slash.
    return base_url if base_url.endswith("/") else base_url + "/"
