"""The class attribute read with fit's class map, and the notes that tell a researcher
what ``fit`` and ``score`` leave out or learn from too little (used by
:mod:`sklearn_crocs.cli._commands`)."""

import numpy as np
import pandas as pd

from ..datasets._class_maps import map_classes
from ._common import note

# fit's --multi-class choices, as settings.json keeps them; "drop" is the paper's setting.
MULTI_CLASS = ("drop", "first", "mixed")
# A class of fewer patients is too small to learn or score reliably.
FEW_PATIENTS = 5


def read_classes(written, class_map, multi_class, names):
    """The class of each value of the class attribute, under ``class_map``.

    A value that is one of ``names`` (the classes, in any case) is that
    class, so that labels may give the classes (``SR``, as ``search --query``
    takes) as well as codes; any other value's codes are mapped.
    """
    written = pd.Series(written, dtype=object)
    if class_map is None:
        return written.to_numpy()
    by_lower = {str(name).lower(): name for name in names}
    named = written.map(lambda v: by_lower.get(v.lower()) if isinstance(v, str) else None)
    mapped = map_classes(written.to_numpy(), class_map, multi_class=multi_class)
    return np.where(named.notna(), named.to_numpy(), mapped)


def counted(values, quote=True, limit=5):
    """``'a' (3), 'b' (1) and 2 more``: the commonest of ``values``, with their counts."""
    texts = pd.Series(values, dtype=object).map(
        lambda v: "no value" if pd.isna(v) else repr(v) if quote else str(v)
    )
    counts = texts.value_counts()
    shown = ", ".join(f"{value} ({n})" for value, n in counts.head(limit).items())
    return shown + (f" and {len(counts) - limit} more" if len(counts) > limit else "")


def note_class_map(written, classes, class_map, multi_class, attribute):
    """fit's notes on the records whose codes give no class of the map, or several."""
    if class_map is None:
        return
    written = pd.Series(written, dtype=object).to_numpy()
    first = map_classes(written, class_map, multi_class="first")
    several = pd.isna(map_classes(written, class_map)) & pd.notna(first)
    none = pd.notna(written) & pd.isna(classes) & ~several
    if none.any():
        note(
            f"--class-map: {int(none.sum())} record(s) have no class of the map in "
            f"{attribute!r}: {counted(written[none])}"
        )
    if not several.any():
        return
    combinations = counted(map_classes(written[several], class_map, multi_class="mixed"), False)
    n = int(several.sum())
    if multi_class == "drop":
        note(
            f"--class-map: {n} record(s) have codes of several classes in {attribute!r} "
            f"({combinations}), so no class; --multi-class first or mixed keeps them (the "
            "class of their first code, or one class for each combination)"
        )
    elif multi_class == "first":
        note(
            f"--multi-class first: {n} record(s) take the class of their first code, having "
            f"codes of several classes in {attribute!r} ({combinations})"
        )
    else:
        note(
            f"--multi-class mixed: {n} record(s) take a class of their own, having codes of "
            f"several classes in {attribute!r}: {combinations}"
        )


def note_support(model, classes, groups):
    """fit's notes on what the model learned from too little: prototypes that no
    training ECG has, and classes of fewer than ``FEW_PATIENTS`` patients."""
    empty = np.flatnonzero(model.prototype_counts_ == 0)
    if len(empty):
        attributes = model.get_prototypes()[1]
        # Named as fit names the categories: only attributes of at most 10 values.
        shown = ""
        if all(len(c) <= 10 for c in model.categories_):
            shown = " (" + "; ".join(
                ",".join(f"{name}={value}" for name, value in zip(model.attribute_names_, row))
                for row in attributes[empty[:3]]
            ) + (" and more" if len(empty) > 3 else "") + ")"
        note(
            f"{len(empty)} of {len(attributes)} prototypes have no training ECG{shown}: no "
            "record has these values together, so a prediction of them or a search for "
            "them rests on no example"
        )
    known = pd.notna(classes)
    patients = pd.Series(groups[known]).groupby(np.asarray(classes)[known]).nunique()
    few = patients[patients < FEW_PATIENTS]
    if len(few):
        note(
            f"classes of {model.attribute_names_[model.class_index_]!r} with fewer than "
            f"{FEW_PATIENTS} patients: {', '.join(f'{c} ({n})' for c, n in few.items())}: "
            "too few to learn or score reliably; add records of them, or merge them into "
            "other classes with --class-map"
        )


def note_left_out(written, y, known, model, class_map):
    """score's note on the records left out: the labels that did not match, per attribute."""
    if known.all():
        return
    details = []
    for j, name in enumerate(model.attribute_names_):
        wrong = ~(pd.notna(y[name]) & y[name].isin(list(model.categories_[j]))).to_numpy()
        if wrong.any():
            details.append(f"{name} {counted(written[name].to_numpy()[wrong])}")
    note(
        f"left out {int((~known).sum())} of {len(known)} record(s) with labels the model "
        f"was not fitted on, or none: {'; '.join(details)}. Give the model's values (fit "
        f"printed them){', or codes of its class map' if class_map else ''}"
    )
