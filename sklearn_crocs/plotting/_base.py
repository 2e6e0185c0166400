"""Shared helpers of the plotting module: the optional matplotlib import."""


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
