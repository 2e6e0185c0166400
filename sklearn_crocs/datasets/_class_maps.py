"""Class maps: diagnosis codes (SNOMED CT, PTB-XL statements) grouped into classes."""

import io
import json
import os
import re
from pathlib import Path

import numpy as np
import pandas as pd

from .._utils import _MAX_TABLE_BYTES, _read_regular
from ._chapman import CHAPMAN_SNOMED_GROUPS

#: PTB-XL's diagnostic statements and their diagnostic superclass
#: (``diagnostic_class`` of ``scp_statements.csv``, Wagner et al., 2020).
PTBXL_STATEMENT_SUPERCLASSES = {
    "NORM": "NORM",
    **dict.fromkeys(
        ["IMI", "ASMI", "ILMI", "AMI", "ALMI", "INJAS", "LMI", "INJAL", "IPLMI", "IPMI",
         "INJIN", "INJLA", "PMI", "INJIL"],
        "MI",
    ),
    **dict.fromkeys(
        ["NDT", "NST_", "DIG", "LNGQT", "ISC_", "ISCAL", "ISCIN", "ISCIL", "ISCAS", "ISCLA",
         "ANEUR", "EL", "ISCAN"],
        "STTC",
    ),
    **dict.fromkeys(
        ["LAFB", "IRBBB", "1AVB", "IVCD", "CRBBB", "CLBBB", "LPFB", "WPW", "ILBBB", "3AVB",
         "2AVB"],
        "CD",
    ),
    **dict.fromkeys(["LVH", "LAO/LAE", "RVH", "RAO/RAE", "SEHYP"], "HYP"),
}  # fmt: skip

#: The built-in class maps, by name.
CLASS_MAPS = {
    # SNOMED CT codes of #Dx comments (PhysioNet/CinC) to the paper's Chapman rhythm groups.
    "chapman-rhythms": CHAPMAN_SNOMED_GROUPS,
    # PTB-XL statements (scp_codes) to the five diagnostic superclasses.
    "ptbxl-superclasses": PTBXL_STATEMENT_SUPERCLASSES,
}

# The names a header row gives the code column (lower case, without blanks,
# "_" or "-"); no SNOMED CT code or PTB-XL statement is one of them.
_CODE_HEADERS = {"code", "codes", "dx", "snomed", "snomedct", "snomedcode", "snomedctcode",
                 "statement", "statements", "scpcode", "scpcodes", "diagnosis"}  # fmt: skip

# A code: anything between separators (commas, semicolons, bars, blanks, and
# the braces, colons and quotes of PTB-XL's scp_codes dicts).
_CODE = re.compile(r"[^\s,;|{}:'\"]+")


def read_class_map(class_map):
    """The ``{code: class}`` dict of ``class_map``: a built-in name, a dict or a file.

    Parameters
    ----------
    class_map : str, path-like or dict
        A name of :data:`CLASS_MAPS` (``"chapman-rhythms"``,
        ``"ptbxl-superclasses"``), a dict ``{code: class}``, or a ``.csv``
        file (the codes in its first column, their classes in its second;
        a first row is a header, skipped, only when its first cell names the
        code column: ``code``, ``dx``, ``snomed``, ``statement``,
        ``scp_code`` or ``diagnosis``, in any case; any other first row is
        a mapping) or a ``.json`` file
        holding one object ``{code: class}``.

    Returns
    -------
    mapping : dict of str to str
        Codes (upper case) and their classes.

    Raises
    ------
    ValueError
        For a code without a class (empty or JSON ``null``) or with two
        classes (a code given twice with the same class is fine), naming the
        code and, in a CSV file, its lines; for a file that is not a regular
        file or is larger than any class map.
    """
    if isinstance(class_map, dict):
        pairs, where = list(class_map.items()), None
    elif isinstance(class_map, str) and class_map in CLASS_MAPS:
        pairs, where = list(CLASS_MAPS[class_map].items()), None
    elif isinstance(class_map, (str, os.PathLike)):
        path = Path(os.path.expanduser(os.fspath(class_map)))
        if not os.path.lexists(path):
            raise ValueError(
                f"class map {class_map!r} is neither a built-in map "
                f"({', '.join(CLASS_MAPS)}) nor a file; give one of those names, or a .csv "
                "file of code,class rows or a .json file of {code: class}."
            )
        pairs, where = _read_pairs(path)
    else:
        raise TypeError(
            "class_map must be a built-in map name, a dict {code: class} or the path of a "
            f".csv or .json file; got {type(class_map).__name__}."
        )
    out, seen = {}, {}
    for i, (code, cls) in enumerate(pairs):
        if cls is None or (isinstance(cls, float) and np.isnan(cls)):
            raise ValueError(f"the class map gives no class for {code!r}; give each code one.")
        if isinstance(cls, (list, tuple, dict, bool)):  # JSON arrays, objects, true/false
            raise ValueError(
                f"the class map gives {code!r} the class {cls!r}, which is not a name; give "
                "each code a class name (a string)."
            )
        code, cls = str(code).strip().upper(), str(cls).strip()
        out.setdefault(code, cls)
        seen.setdefault(code, []).append((i, cls))
    empty = [k for k, v in out.items() if not k or not v]
    if empty or not out:
        raise ValueError(
            f"the class map has {'no entry' if not out else 'empty codes or classes'}; "
            "give each code a class."
        )
    conflicts = [(code, found) for code, found in seen.items() if len({c for _, c in found}) > 1]
    if conflicts:
        described = "; ".join(
            f"{code!r} on "
            + (
                "lines " + ", ".join(f"{where[i]} ({c})" for i, c in found)
                if where is not None
                else " and ".join(repr(c) for c in dict.fromkeys(c for _, c in found))
            )
            for code, found in conflicts[:5]
        )
        raise ValueError(
            f"the class map gives a code several classes: {described}. Give each code one class."
        )
    return out


def _read_pairs(path):
    """``(code, class)`` pairs of a class-map file, in order, and the line of each (CSV)."""
    data = _read_regular(path, limit=_MAX_TABLE_BYTES, what="class map")  # its own message
    try:
        text = data.decode("utf-8")
        if path.suffix.lower() == ".json":
            # Objects as tuples of pairs, not dicts: a key given twice is a conflict to
            # report, not a last win.
            pairs = json.loads(text, object_pairs_hook=tuple)
            if not isinstance(pairs, tuple):
                raise ValueError("it must hold one JSON object {code: class}")
            return pairs, None
        table = pd.read_csv(
            io.StringIO(text), dtype=str, header=None, keep_default_na=False, skip_blank_lines=False
        )
    except (OSError, ValueError) as exc:
        raise ValueError(f"cannot read the class map {path}: {exc}.") from exc
    if table.shape[1] < 2:
        raise ValueError(f"cannot read the class map {path}: it needs two columns, code and class.")
    table = table[(table != "").any(axis=1)]  # blank lines
    if len(table) and _is_header(table.iloc[0, :2]):
        table = table.iloc[1:]
    lines = [i + 1 for i in table.index]
    return list(zip(table.iloc[:, 0], table.iloc[:, 1])), lines


def _is_header(row):
    """Whether a CSV's first row names its columns (``code,class``) rather than mapping a code.

    Only a known name of the code column counts: a class may be any word, but
    no code is ``code`` or ``dx``, so a real mapping is never taken for a
    header; an unknown header is read as the mapping of a code no record has.
    """
    return re.sub(r"[\s_-]", "", str(row.iloc[0])).lower() in _CODE_HEADERS


def map_classes(values, class_map, *, multi_class="drop"):
    """Group diagnosis codes into classes: one class per value, NaN where none (or several).

    Each value holds codes separated by commas, semicolons, bars or blanks
    (``"426177001,164889003"``, a PhysioNet ``#Dx`` comment) or a PTB-XL
    ``scp_codes`` dict (``"{'IMI': 100.0, 'SR': 0.0}"``). A value whose
    known codes all give one class gets that class; one whose codes give no
    class gets NaN; one whose codes give several (``"IMI,CLBBB"``: MI and
    CD) gets NaN too by default, as records of several classes are left out
    of the paper's single-label setting, or, with ``multi_class``, the
    class of its first code or a class of its own. Codes not in the map
    (other findings) are ignored.

    Read more in the :ref:`User Guide <class_maps>`.

    Parameters
    ----------
    values : array-like of str
        The codes of each record.
    class_map : str, path-like or dict
        ``"chapman-rhythms"`` (SNOMED CT codes to the paper's AFIB, GSVT,
        SB and SR rhythm groups, as :func:`load_chapman`),
        ``"ptbxl-superclasses"`` (PTB-XL statements to CD, HYP, MI, NORM and
        STTC), a dict ``{code: class}``, or a ``.csv`` (code, class columns)
        or ``.json`` file of one.
    multi_class : {"drop", "first", "mixed"}, default="drop"
        The class of a value whose codes give several: ``"drop"``, none
        (NaN); ``"first"``, that of its first code of the map;
        ``"mixed"``, its classes in alphabetical order joined by ``+``
        (``"CD+MI"``), a class of its own for each combination.

    Returns
    -------
    classes : ndarray of shape (n_values,), dtype object
        The class of each value, NaN where it has none or several.

    Examples
    --------
    >>> from sklearn_crocs.datasets import map_classes
    >>> map_classes(["426177001,428750005", "164889003", "59118001"], "chapman-rhythms")
    array(['SB', 'AFIB', nan], dtype=object)
    >>> map_classes(["{'IMI': 100.0, 'SR': 0.0}", "IMI,CLBBB"], "ptbxl-superclasses")
    array(['MI', nan], dtype=object)
    >>> map_classes(["IMI,CLBBB"], "ptbxl-superclasses", multi_class="mixed")
    array(['CD+MI'], dtype=object)
    """
    if multi_class not in ("drop", "first", "mixed"):
        raise ValueError(f"multi_class must be 'drop', 'first' or 'mixed'; got {multi_class!r}.")
    mapping = read_class_map(class_map)
    out = np.full(len(values), np.nan, dtype=object)
    for i, value in enumerate(values):
        if value is None or (isinstance(value, float) and np.isnan(value)):
            continue
        codes = (c.upper() for c in _CODE.findall(str(value)))
        classes = list(dict.fromkeys(mapping[c] for c in codes if c in mapping))  # in order
        if len(classes) == 1 or (classes and multi_class == "first"):
            out[i] = classes[0]
        elif classes and multi_class == "mixed":
            out[i] = "+".join(sorted(classes))
    return out
