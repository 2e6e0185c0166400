"""Class maps: diagnosis codes (SNOMED CT, PTB-XL statements) grouped into classes."""

import json
import os
import re
from pathlib import Path

import numpy as np
import pandas as pd

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
        file (the codes in its first column, their classes in its second,
        under a header row) or a ``.json`` file holding one object
        ``{code: class}``.

    Returns
    -------
    mapping : dict of str to str
        Codes (upper case) and their classes.
    """
    if isinstance(class_map, dict):
        mapping = class_map
    elif isinstance(class_map, str) and class_map in CLASS_MAPS:
        mapping = CLASS_MAPS[class_map]
    elif isinstance(class_map, (str, os.PathLike)):
        path = Path(os.path.expanduser(os.fspath(class_map)))
        if not path.is_file():
            raise ValueError(
                f"class map {class_map!r} is neither a built-in map "
                f"({', '.join(CLASS_MAPS)}) nor a file; give one of those names, or a .csv "
                "file of code,class rows or a .json file of {code: class}."
            )
        try:
            if path.suffix.lower() == ".json":
                mapping = json.loads(path.read_text(encoding="utf-8"))
            else:
                table = pd.read_csv(path, dtype=str, keep_default_na=False)
                if table.shape[1] < 2:
                    raise ValueError("it needs two columns, code and class")
                mapping = dict(zip(table.iloc[:, 0], table.iloc[:, 1]))
        except (OSError, ValueError) as exc:
            raise ValueError(f"cannot read the class map {path}: {exc}.") from exc
        if not isinstance(mapping, dict):
            raise ValueError(f"the class map {path} must hold one JSON object {{code: class}}.")
    else:
        raise TypeError(
            "class_map must be a built-in map name, a dict {code: class} or the path of a "
            f".csv or .json file; got {type(class_map).__name__}."
        )
    out = {str(k).strip().upper(): str(v).strip() for k, v in mapping.items()}
    empty = [k for k, v in out.items() if not k or not v]
    if empty or not out:
        raise ValueError(
            f"the class map has {'no entry' if not out else 'empty codes or classes'}; "
            "give each code a class."
        )
    return out


def map_classes(values, class_map):
    """Group diagnosis codes into classes: one class per value, NaN where none or several.

    Each value holds codes separated by commas, semicolons, bars or blanks
    (``"426177001,164889003"``, a PhysioNet ``#Dx`` comment) or a PTB-XL
    ``scp_codes`` dict (``"{'IMI': 100.0, 'SR': 0.0}"``). A value whose
    known codes all give one class gets that class; one whose codes give no
    class, or several (``"IMI,CLBBB"``: MI and CD), gets NaN, as records
    with no class or several are left out of the paper's single-label
    setting. Codes not in the map (other findings) are ignored.

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
    """
    mapping = read_class_map(class_map)
    out = np.full(len(values), np.nan, dtype=object)
    for i, value in enumerate(values):
        if value is None or (isinstance(value, float) and np.isnan(value)):
            continue
        classes = {mapping[c.upper()] for c in _CODE.findall(str(value)) if c.upper() in mapping}
        if len(classes) == 1:
            out[i] = classes.pop()
    return out
