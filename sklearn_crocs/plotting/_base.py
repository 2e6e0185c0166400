"""Shared helpers of the plotting module: the optional matplotlib import, colours, labels."""

import numpy as np


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


def class_colors(classes):
    """Map each class value to a colour of matplotlib's qualitative tab10 (tab20) map.

    The same class order gives the same colours in every display, so figures
    of one model can be read side by side.
    """
    plt = check_matplotlib("class_colors")
    classes = list(classes)
    cmap = plt.get_cmap("tab10" if len(classes) <= 10 else "tab20")
    return {c: cmap(k % cmap.N) for k, c in enumerate(classes)}


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


def format_combination(values):
    """Readable label of an attribute combination, e.g. ``"SR, F, 52-63"``."""
    return ", ".join(str(v.item() if isinstance(v, np.generic) else v) for v in values)
