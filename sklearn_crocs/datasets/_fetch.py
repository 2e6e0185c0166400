"""Download PTB-XL and Chapman-Shaoxing from PhysioNet: the fetchers.

Files are fetched one by one from the project's PhysioNet file tree and
checked against the project's ``SHA256SUMS.txt``:

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
- the checksum list itself is verified: against the SHA-256 the caller passes
  (``sha256sums_sha256``), else against the one recorded in
  ``<data_home>/.sklearn_crocs_checksum_lists.json`` when the list of that
  dataset version was first accepted (trust on first use). No hash of the
  real lists is pinned in the package: none could be obtained from the real
  files when this was written.
"""

import hashlib
import http.client
import json
import os
import re
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from .._utils import _atomic_path
from ._base import _ExclusionLog, get_data_home
from ._chapman import load_chapman
from ._ptbxl import (
    _check_sampling_rate,
    load_ptbxl,
    ptbxl_record_files,
    read_ptbxl_tables,
    select_ptbxl_records,
)

PTBXL_URL = "https://physionet.org/files/ptb-xl/1.0.3/"
PTBXL_FOLDER = "ptb-xl-1.0.3"
CHAPMAN_URL = "https://physionet.org/files/ecg-arrhythmia/1.0.0/"
CHAPMAN_FOLDER = "ecg-arrhythmia-1.0.0"
CHECKSUM_FILE = "SHA256SUMS.txt"
MANIFEST_FILE = ".sklearn_crocs_verified.json"
TRUST_FILE = ".sklearn_crocs_checksum_lists.json"
_CHUNK = 1 << 16


class _IncompleteDownload(OSError):
    """The connection ended before the announced number of bytes arrived."""


def _sha256(path):
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _check_relpath(relpath, source):
    """Raise ValueError unless ``relpath`` is a plain relative POSIX path (no ``..``).

    Absolute paths, Windows drive letters and separators, ``.``/``..`` and
    empty components, and control characters are refused: a path from a
    checksum list or the server names a file inside the dataset folder, and
    nothing else.
    """
    problem = None
    if not relpath or re.search(r"[\x00-\x1f\x7f]", relpath):
        problem = "it is empty or holds control characters"
    elif "\\" in relpath or re.match(r"[A-Za-z]:", relpath):
        problem = "it is a Windows path (drive letter or backslash)"
    elif relpath.startswith("/"):
        problem = "it is absolute"
    elif any(part in ("", ".", "..") for part in relpath.split("/")):
        problem = "it is not normalised: it has '..', '.' or empty components"
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
    """One HTTP attempt, appending to ``part`` when the server honours Range."""
    offset = part.stat().st_size if part.exists() else 0
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
        with open(part, "ab" if resumed else "wb") as fh:
            try:
                for block in iter(lambda: response.read(_CHUNK), b""):
                    fh.write(block)
            except http.client.IncompleteRead as exc:
                fh.write(exc.partial)
                raise _IncompleteDownload(f"connection closed early ({exc})") from exc
    size = part.stat().st_size
    if expected is not None and size < expected:
        raise _IncompleteDownload(f"received {size} of {expected} bytes")
    return resumed


def download_file(url, target, sha256, *, n_retries=3, delay=1.0, timeout=60):
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
            resumed = _fetch_once(url, part, timeout)
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
        if sha256 is not None:
            digest = _sha256(part)
            if digest != sha256:
                part.unlink()
                last_error = OSError(
                    f"SHA256 of the downloaded file is {digest}, expected {sha256}"
                    + (" (after resuming a partial download)" if resumed else "")
                )
                continue
        os.replace(part, target)
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
            st = path.stat()
        except FileNotFoundError:
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
        with self.lock, _atomic_path(self.path) as tmp:
            tmp.write_text(json.dumps(self.entries, sort_keys=True), encoding="utf-8")


def _check_list_hash(path, digest, expected, root, name):
    """Verify the checksum list's SHA-256 (given, else trust on first use); record it."""
    trust_path = root.parent / TRUST_FILE
    try:
        trusted = json.loads(trust_path.read_text(encoding="utf-8"))
    except (FileNotFoundError, ValueError):
        trusted = {}
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
        with _atomic_path(trust_path) as tmp:
            tmp.write_text(json.dumps(trusted, indent=1, sort_keys=True), encoding="utf-8")


def _checksums(root, base_url, *, download_if_missing, n_retries, delay, name, expected_sha256):
    """The verified checksum list of ``root`` (downloaded first if missing)."""
    path = root / CHECKSUM_FILE
    _check_inside(root, [CHECKSUM_FILE, CHECKSUM_FILE + ".new"], f"the files of {name}")
    source = path
    if not path.exists():
        if not download_if_missing:
            raise OSError(
                f"{name} is not in {root} ({CHECKSUM_FILE} is missing) and "
                f"download_if_missing=False."
            )
        # Kept under another name until its hash and every path in it are checked.
        source = root / (CHECKSUM_FILE + ".new")
        download_file(
            urllib.parse.urljoin(base_url, CHECKSUM_FILE),
            source,
            None,
            n_retries=n_retries,
            delay=delay,
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
    if verbose:
        print(f"Downloading {len(missing)} file(s) of {name} to {root}")
    start = time.perf_counter()
    failures = []

    def fetch(relpath):
        url = urllib.parse.urljoin(base_url, urllib.parse.quote(relpath))
        try:
            download_file(url, root / relpath, checksums[relpath], n_retries=n_retries, delay=delay)
        except OSError as exc:
            failures.append(exc)  # keep going: every good file is progress
            return
        manifest.record(root, relpath, checksums[relpath])

    def report(done):
        if verbose and (done % 500 == 0 or done == len(missing)):
            elapsed = time.perf_counter() - start
            print(f"  {done}/{len(missing)} files ({elapsed:.0f} s)")

    try:
        if n_jobs == 1:
            for done, relpath in enumerate(missing, start=1):
                fetch(relpath)
                report(done)
        else:
            with ThreadPoolExecutor(max_workers=n_jobs) as pool:
                for done, _ in enumerate(pool.map(fetch, missing), start=1):
                    report(done)
    finally:
        manifest.save()
    if failures:
        more = f" ({len(failures) - 1} more file(s) failed too)" if len(failures) > 1 else ""
        raise OSError(f"{failures[0]}{more}") from failures[0]


def _check_fetch_args(n_retries, delay, n_jobs, base_url, sha256sums_sha256=None):
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


def fetch_ptbxl(
    data_home=None,
    *,
    download_if_missing=True,
    sampling_rate=500,
    folds=None,
    ecg_ids=None,
    leads=None,
    single_label=True,
    on_error="raise",
    cache_dir=None,
    n_retries=3,
    delay=1.0,
    n_jobs=1,
    base_url=PTBXL_URL,
    sha256sums_sha256=None,
    verbose=0,
    return_X_y=False,
):
    """Download PTB-XL 1.0.3 from PhysioNet (if needed) and load it.

    Downloads ``SHA256SUMS.txt``, the two metadata tables and then only the
    WFDB files of the records that the selection (``sampling_rate``,
    ``folds``, ``ecg_ids``, ``single_label``) needs, into
    ``<data_home>/ptb-xl-1.0.3``. Every file is verified against
    ``SHA256SUMS.txt``; interrupted downloads resume (see the module notes).
    Once everything is there it works offline. The result is
    :func:`load_ptbxl` of the downloaded folder.

    Parameters
    ----------
    data_home : str or path-like, default=None
        Download folder, see :func:`get_data_home`.
    download_if_missing : bool, default=True
        If False, raise an OSError instead of downloading missing files.
    sampling_rate, folds, ecg_ids, leads, single_label, on_error, cache_dir, \
return_X_y
        As in :func:`load_ptbxl`.
    n_retries : int, default=3
        Further attempts per file after a failure.
    delay : float, default=1.0
        Seconds between attempts.
    n_jobs : int, default=1
        Files downloaded in parallel (threads).
    base_url : str, default="https://physionet.org/files/ptb-xl/1.0.3/"
        Where the PhysioNet file tree is served (a mirror, or a local server).
    sha256sums_sha256 : str, default=None
        SHA-256 (hex) of the release's ``SHA256SUMS.txt``, e.g. from
        PhysioNet's project page. ``None``: the hash recorded the first time
        the list was used in ``data_home`` (trust on first use); a list that
        differs from it is refused.
    verbose : int, default=0
        Print download and loading progress when > 0.

    Returns
    -------
    data : :class:`~sklearn.utils.Bunch`
        As returned by :func:`load_ptbxl`.

    Examples
    --------
    >>> from sklearn_crocs.datasets import fetch_ptbxl
    >>> ptbxl = fetch_ptbxl(folds=[10])  # doctest: +SKIP
    """
    sampling_rate = _check_sampling_rate(sampling_rate)
    base_url = _check_fetch_args(n_retries, delay, n_jobs, base_url, sha256sums_sha256)
    root = Path(get_data_home(data_home)) / PTBXL_FOLDER
    options = {
        "download_if_missing": download_if_missing,
        "n_retries": n_retries,
        "delay": delay,
        "name": "PTB-XL",
    }
    checksums = _checksums(root, base_url, expected_sha256=sha256sums_sha256, **options)
    ensure_files(
        root,
        base_url,
        ["ptbxl_database.csv", "scp_statements.csv"],
        checksums,
        n_jobs=1,
        verbose=verbose,
        **options,
    )
    selected = select_ptbxl_records(
        read_ptbxl_tables(root),
        folds=folds,
        ecg_ids=ecg_ids,
        single_label=single_label,
        log=_ExclusionLog(),
    )
    ensure_files(
        root,
        base_url,
        ptbxl_record_files(root, sampling_rate, selected),
        checksums,
        n_jobs=n_jobs,
        verbose=verbose,
        **options,
    )
    return load_ptbxl(
        root,
        sampling_rate=sampling_rate,
        folds=folds,
        ecg_ids=ecg_ids,
        leads=leads,
        single_label=single_label,
        on_error=on_error,
        cache_dir=cache_dir,
        verbose=verbose,
        return_X_y=return_X_y,
    )


def fetch_chapman(
    data_home=None,
    *,
    download_if_missing=True,
    records=None,
    leads=None,
    target_fs=None,
    unmapped="drop",
    rhythm_groups=None,
    on_error="raise",
    cache_dir=None,
    n_retries=3,
    delay=1.0,
    n_jobs=1,
    base_url=CHAPMAN_URL,
    sha256sums_sha256=None,
    verbose=0,
    return_X_y=False,
):
    """Download Chapman-Shaoxing (WFDB form) from PhysioNet and load it.

    Fetches the ``.hea``/``.mat`` files of PhysioNet's "A large scale 12-lead
    electrocardiogram database for arrhythmia study" (ecg-arrhythmia 1.0.0,
    Zheng et al.; 45,152 records that include the Chapman-Shaoxing records of
    the paper) into ``<data_home>/ecg-arrhythmia-1.0.0``, verified against its
    ``SHA256SUMS.txt``, with resumable downloads. The original figshare
    release (``Diagnostics.xlsx`` + ``ECGData``) has no checksum list; download
    it yourself and use :func:`load_chapman`.

    Parameters
    ----------
    data_home : str or path-like, default=None
        Download folder, see :func:`get_data_home`.
    download_if_missing : bool, default=True
        If False, raise an OSError instead of downloading missing files.
    records : list of str, default=None
        Only download and load these records (e.g. ``["JS00001"]``).
    leads, target_fs, unmapped, rhythm_groups, on_error, cache_dir, return_X_y
        As in :func:`load_chapman`.
    n_retries : int, default=3
        Further attempts per file after a failure.
    delay : float, default=1.0
        Seconds between attempts.
    n_jobs : int, default=1
        Files downloaded in parallel (threads).
    base_url : str, default="https://physionet.org/files/ecg-arrhythmia/1.0.0/"
        Where the PhysioNet file tree is served.
    sha256sums_sha256 : str, default=None
        SHA-256 (hex) of the release's ``SHA256SUMS.txt``; ``None``: trust on
        first use, as in :func:`fetch_ptbxl`.
    verbose : int, default=0
        Print progress when > 0.

    Returns
    -------
    data : :class:`~sklearn.utils.Bunch`
        As returned by :func:`load_chapman`.

    Examples
    --------
    >>> from sklearn_crocs.datasets import fetch_chapman
    >>> chapman = fetch_chapman(target_fs=250)  # doctest: +SKIP
    """
    base_url = _check_fetch_args(n_retries, delay, n_jobs, base_url, sha256sums_sha256)
    root = Path(get_data_home(data_home)) / CHAPMAN_FOLDER
    options = {
        "download_if_missing": download_if_missing,
        "n_retries": n_retries,
        "delay": delay,
        "name": "Chapman-Shaoxing",
    }
    checksums = _checksums(root, base_url, expected_sha256=sha256sums_sha256, **options)
    wanted = None if records is None else {str(r) for r in records}
    relpaths = [
        p
        for p in checksums
        if p.endswith((".hea", ".mat")) and (wanted is None or Path(p).stem in wanted)
    ]
    if wanted is not None:
        unknown = sorted(wanted - {Path(p).stem for p in relpaths})
        if unknown:
            raise ValueError(f"records {unknown[:10]} are not listed in {root / CHECKSUM_FILE}.")
    if not relpaths:
        raise OSError(f"{root / CHECKSUM_FILE} lists no .hea/.mat files.")
    ensure_files(
        root,
        base_url,
        relpaths,
        checksums,
        n_jobs=n_jobs,
        verbose=verbose,
        **options,
    )
    return load_chapman(
        root,
        layout="wfdb",
        records=None if records is None else [str(r) for r in records],
        leads=leads,
        target_fs=target_fs,
        unmapped=unmapped,
        rhythm_groups=rhythm_groups,
        on_error=on_error,
        cache_dir=cache_dir,
        verbose=verbose,
        return_X_y=return_X_y,
    )
