"""Shared helpers of the plotting module: the optional matplotlib import, colours, labels."""

import re

import numpy as np

from .._utils import _with_longer_signals

# tab10 without its green and red, which RetrievalDisplay keeps for "class
# matches the query" and "does not"; tab20 without them for more classes.
_CLASS_COLORS = {
    "tab10": [0, 1, 4, 5, 6, 7, 9, 8],
    "tab20": [0, 1, 2, 3, 8, 9, 10, 11, 12, 13, 14, 15, 18, 19, 16, 17],
}
# Width of new figures, in inches: 700 px at matplotlib's 100 dpi, which fits
# the content column of the documentation (and of most notebooks).
FIGURE_WIDTH = 7.0
_COMPARISON = re.compile(r"(<=|>=|<|>)\s*(.+)")


def check_matplotlib(caller):
    """Import ``matplotlib.pyplot`` or raise an ImportError that says how to install it."""
    try:
        import matplotlib.pyplot as plt
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError(
            f"{caller} requires matplotlib, an optional dependency of sklearn-crocs. "
            "Install it with: pip install 'sklearn-crocs[plot]' (or pip install matplotlib)."
        ) from exc
    return plt


def embedding_model(estimator):
    """``estimator`` as every display embeds ECGs with it: whole records averaged.

    The one rule of the displays, that of ``PrototypeRetriever``'s default
    ``longer_signals="auto"``: a model fitted with ``sampling_rate`` embeds
    an ECG longer than its frames (at the rate declared with
    ``sampling_rate=``, else the model's) as the mean of its frames' embeddings,
    whatever its own ``longer_signals``. ``estimator`` is not changed.
    """
    return _with_longer_signals(estimator, "auto")


def class_colors(classes):
    """Map each class value to a colour of matplotlib's qualitative tab10 (tab20) map.

    The same class order gives the same colours in every display, so figures
    of one model can be read side by side. Green and red are left out: they
    mean match and no match in the retrieval figure.
    """
    plt = check_matplotlib("class_colors")
    classes = list(classes)
    name = "tab10" if len(classes) <= len(_CLASS_COLORS["tab10"]) else "tab20"
    cmap, order = plt.get_cmap(name), _CLASS_COLORS[name]
    return {c: cmap(order[k % len(order)]) for k, c in enumerate(classes)}


def attribute_index(attribute_names, attribute):
    """Position of an attribute given by name or position."""
    if isinstance(attribute, str):
        if attribute not in attribute_names:
            raise ValueError(f"{attribute!r} is not one of {list(attribute_names)}.")
        return list(attribute_names).index(attribute)
    index = int(attribute)
    if not 0 <= index < len(attribute_names):
        raise ValueError(
            f"attribute position {index} is out of range for the "
            f"{len(attribute_names)} attribute(s) {list(attribute_names)}."
        )
    return index


def ordered_values(values, categories=None):
    """Distinct ``values`` in the order of ``categories``, then any others sorted."""
    present = set(np.asarray(values, dtype=object).tolist())
    order = [v for v in (categories if categories is not None else []) if v in present]
    return order + sorted(present - set(order), key=str)


def format_attribute(name, value):
    """Readable label of one attribute value: ``"sex = F"``, ``"age <= 37"``, ``"age = 38-52"``."""
    value = str(value.item() if isinstance(value, np.generic) else value)
    comparison = _COMPARISON.fullmatch(value)
    if comparison:  # an open-ended age group such as "<=37"
        return f"{name} {comparison[1]} {comparison[2]}"
    return f"{name} {'in' if value[:1] in ('[', '(') else '='} {value}"


def format_combination(values):
    """Readable label of an attribute combination, e.g. ``"SR, F, 52-63"``."""
    return ", ".join(str(v.item() if isinstance(v, np.generic) else v) for v in values)
