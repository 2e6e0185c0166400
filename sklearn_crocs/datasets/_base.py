"""Shared helpers of the dataset loaders: data home, lead names, attribute parsing.

Everything here is used by more than one loader; each helper lives here once.
"""

import math
import os
import re
import shutil
import sys
from importlib import resources
from pathlib import Path

import numpy as np
import pandas as pd
from tqdm import tqdm

# The loaders import warn from here.
from .._display import EscapedMessageMixin
from .._utils import _warn

#: The twelve standard ECG leads in their conventional order and public spelling.
STANDARD_LEADS = (
    "I",
    "II",
    "III",
    "aVR",
    "aVL",
    "aVF",
    "V1",
    "V2",
    "V3",
    "V4",
    "V5",
    "V6",
)

_LEAD_BY_LOWER = {name.lower(): name for name in STANDARD_LEADS}

#: Physical units accepted in record headers (WFDB, EDF) and the factor that converts them to mV.
UNIT_SCALE = {"mv": 1.0, "uv": 1e-3, "µv": 1e-3, "μv": 1e-3, "v": 1e3}

_ON_ERROR_OPTIONS = ("raise", "skip")


class InvalidRecordError(EscapedMessageMixin, ValueError):
    """A record (signal file, header or metadata row) cannot be used.

    Raised by the loaders of :mod:`sklearn_crocs.datasets` with a message that
    names the offending file and says how to fix the problem or skip the record
    (``on_error="skip"``). It subclasses :class:`ValueError`.

    Read more in the :ref:`User Guide <reliability>`.

    Examples
    --------
    >>> from sklearn_crocs.datasets import InvalidRecordError
    >>> issubclass(InvalidRecordError, ValueError)
    True
    """


def get_data_home(data_home=None):
    """Return the path of the sklearn-crocs data directory.

    The fetchers (:func:`fetch_ptbxl`, :func:`fetch_chapman`) download into
    this folder so that the data are downloaded only once. By default it is the
    folder ``sklearn_crocs_data`` in the user's home folder; the environment
    variable ``SKLEARN_CROCS_DATA`` or the ``data_home`` argument override it.
    The ``~`` symbol is expanded. The folder is created if it does not exist.

    Read more in the :ref:`User Guide <datasets>`.

    Parameters
    ----------
    data_home : str or path-like, default=None
        The data directory. ``None`` means ``$SKLEARN_CROCS_DATA`` if set, else
        ``~/sklearn_crocs_data``.

    Returns
    -------
    data_home : str
        The absolute path of the data directory.

    Examples
    --------
    >>> import os, tempfile
    >>> from sklearn_crocs.datasets import get_data_home
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     home = get_data_home(os.path.join(tmp, "crocs"))
    ...     os.path.isdir(home)
    True
    """
    if data_home is None:
        data_home = os.environ.get("SKLEARN_CROCS_DATA", os.path.join("~", "sklearn_crocs_data"))
    if not isinstance(data_home, (str, os.PathLike)):
        raise TypeError(
            f"data_home must be a str or path-like object, got {type(data_home).__name__}."
        )
    data_home = os.path.abspath(os.path.expanduser(os.fspath(data_home)))
    if os.path.exists(data_home) and not os.path.isdir(data_home):
        raise NotADirectoryError(
            f"data_home={data_home} is a file, not a folder. Pass a folder to keep the "
            "datasets in (it is created if missing), or set SKLEARN_CROCS_DATA to one."
        )
    os.makedirs(data_home, exist_ok=True)
    return data_home


def clear_data_home(data_home=None):
    """Delete the sklearn-crocs data directory and everything in it.

    Read more in the :ref:`User Guide <datasets>`.

    Parameters
    ----------
    data_home : str or path-like, default=None
        The data directory, resolved as in :func:`get_data_home`.

    Examples
    --------
    >>> import os, tempfile
    >>> from sklearn_crocs.datasets import clear_data_home, get_data_home
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     home = get_data_home(os.path.join(tmp, "crocs"))
    ...     clear_data_home(home)
    ...     os.path.exists(home)
    False
    """
    shutil.rmtree(get_data_home(data_home))


def relative_path_problem(text):
    """Why ``text`` is not a plain relative POSIX path inside a folder, or None."""
    if not text or re.search(r"[\x00-\x1f\x7f]", text):
        return "it is empty or holds control characters"
    if "\\" in text or re.match(r"[A-Za-z]:", text):
        return "it is a Windows path (drive letter or backslash)"
    if text.startswith("/"):
        return "it is absolute"
    if any(part in ("", ".", "..") for part in text.split("/")):
        return "it is not normalised: it has '..', '.' or empty components"
    return None


def path_inside(root, relpath, source):
    """``root / relpath`` for a path read from a metadata file ``source``, or ValueError
    if it could name a file outside ``root``.

    The path must be relative, in POSIX form, without ``..``, ``.`` or empty
    components or control characters: a data set's tables name its own files
    and nothing else. Symbolic links inside the folder are the user's own
    (a tree of links to a shared copy) and are followed.
    """
    text = str(relpath)
    problem = relative_path_problem(text)
    if problem is not None:
        raise ValueError(
            f"{source} names the file {text[:100]!r}, which is not inside {root}: {problem}. "
            "The table is damaged or was altered; restore it from the data set's source."
        )
    return Path(root) / text


def canonical_lead_name(name):
    """Public spelling of a lead name ("avr" -> "aVR"); unknown names unchanged."""
    name = str(name).strip()
    return _LEAD_BY_LOWER.get(name.lower(), name)


def check_leads(leads):
    """Validate a user's ``leads`` argument; return canonical names or None."""
    if leads is None:
        return None
    if isinstance(leads, str):
        leads = [leads]
    try:
        leads = [canonical_lead_name(lead) for lead in leads]
    except TypeError:
        raise TypeError(
            f"leads must be None or a list of lead names such as ['I', 'II', 'V1'], got {leads!r}."
        ) from None
    if not leads:
        raise ValueError("leads must name at least one lead, got an empty list.")
    if len(set(leads)) != len(leads):
        raise ValueError(f"leads contains duplicates: {leads}.")
    return leads


def check_on_error(on_error):
    if on_error not in _ON_ERROR_OPTIONS:
        raise ValueError(
            f"on_error must be 'raise' (stop at the first unusable record) or "
            f"'skip' (leave it out with a warning), got {on_error!r}."
        )
    return on_error


def parse_age(value):
    """Age in years as a float; ``>89`` and ``90+`` style caps become 90.0, unknown NaN.

    Accepts numbers and strings such as ``"51"``, ``"51.0"``, ``">89"``, ``"90+"``,
    ``"NaN"``, ``"Unknown"`` or the empty string.
    """
    if value is None:
        return math.nan
    if isinstance(value, (int, float, np.integer, np.floating)):
        age = float(value)
    else:
        text = str(value).strip()
        if text.startswith(">"):  # ">89": over the cap
            text, offset = text[1:], 1.0
        elif text.endswith("+"):  # "90+": 90 or over, the cap, as PTB-XL's 300 becomes 90
            text, offset = text[:-1], 0.0
        else:
            offset = 0.0
        try:
            age = float(text) + offset
        except ValueError:
            return math.nan
    # "inf" or "-1" is no age: unknown, as a missing one, not a failure later.
    return age if math.isfinite(age) and age >= 0 else math.nan


_SEX_CODES = {
    "m": "M",
    "male": "M",
    "f": "F",
    "female": "F",
}


def parse_sex(value):
    """``"M"``/``"F"`` from Male/Female/M/F/MALE/FEMALE (any case), else NaN."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return math.nan
    return _SEX_CODES.get(str(value).strip().lower(), math.nan)


def attribute_parser(name):
    """The normaliser of an attribute named ``name``: :func:`parse_sex`, :func:`parse_age` or None.

    Every loader and the command line read a ``sex`` or ``age`` attribute
    (any case) alike, so that ``"Female"``, ``"F"`` and ``"female"`` are one
    value whatever the source; other attributes have no normaliser.
    """
    return {"sex": parse_sex, "age": parse_age}.get(str(name).strip().lower())


def parse_comments(comments):
    """``{key: value}`` from WFDB header comments of the form ``key: value``.

    Keys are stripped of surrounding whitespace and of the angle brackets that
    LUDB uses (``<age>: 51`` -> ``age``); lines without a colon are ignored.
    The first occurrence of a key wins.
    """
    parsed = {}
    for line in comments:
        key, sep, value = str(line).partition(":")
        if not sep:
            continue
        key = key.strip().strip("<>").strip()
        if key and key not in parsed:
            parsed[key] = value.strip()
    return parsed


def load_descr(name):
    """Text of ``descr/<name>`` shipped with the package."""
    return (
        resources.files("sklearn_crocs.datasets")
        .joinpath("descr", name)
        .read_text(encoding="utf-8")
    )


def data_file(name):
    """Path (as a traversable) of a file in the package's ``data`` folder."""
    return resources.files("sklearn_crocs.datasets").joinpath("data", name)


def progress(iterable, *, verbose, desc, total=None, unit="record"):
    """``iterable``, with a tqdm progress bar on stderr when ``verbose`` is truthy."""
    return tqdm(iterable, desc=desc, total=total, unit=unit, disable=not verbose, file=sys.stderr)


class ExclusionLog:
    """Records left out by a loader, with the reason, warned about together.

    ``kind="skipped"`` entries are unreadable records dropped because the user
    asked for ``on_error="skip"``; ``kind="filtered"`` entries are records that
    a documented option of the loader excludes (e.g. PTB-XL records without
    exactly one diagnostic superclass). Both end up in the Bunch's ``excluded``
    DataFrame, so nothing disappears without a trace.
    """

    def __init__(self):
        self._rows = []

    def add(self, record, reason, *, kind):
        self._rows.append({"record": str(record), "reason": str(reason), "kind": kind})

    def count(self, kind):
        return sum(row["kind"] == kind for row in self._rows)

    def warn_skipped(self, n_total, *, what="records"):
        skipped = [row for row in self._rows if row["kind"] == "skipped"]
        if not skipped:
            return
        first = skipped[0]["reason"].rstrip(".")
        more = f" (and {len(skipped) - 1} more)" if len(skipped) > 1 else ""
        _warn(
            f"Skipped {len(skipped)} of {n_total} {what} that could not be used "
            f"(on_error='skip'): {first}{more}. The full list is in the returned "
            f"Bunch's 'excluded' DataFrame."
        )

    def frame(self):
        return pd.DataFrame(self._rows, columns=["record", "reason", "kind"])
