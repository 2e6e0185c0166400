"""Settings of the package that concern the process, not one estimator (as sklearn's config).

The values live in a :class:`contextvars.ContextVar`, so that each thread
(and each asyncio task) sees its own: :func:`config_context` in one thread
does not change what another sees.
"""

import contextvars
from contextlib import contextmanager
from numbers import Integral

__all__ = ["config_context", "get_config", "set_config"]

_DEFAULTS = {"memory_budget": "auto"}
_config = contextvars.ContextVar("sklearn_crocs_config", default=_DEFAULTS)
_UNSET = object()  # a parameter left out: None is a value (no memory check)


def _check_memory_budget(value):
    if value is None or (isinstance(value, str) and value == "auto"):
        return
    if isinstance(value, Integral) and not isinstance(value, bool) and value >= 1:
        return
    raise ValueError(
        f"memory_budget must be 'auto', a positive int (bytes) or None; got {value!r}."
    )


def get_config():
    """Return the current values of the package's settings.

    Read more in the :ref:`User Guide <memory_budget>`.

    Returns
    -------
    config : dict
        Keys are the parameters of :func:`set_config`.

    See Also
    --------
    config_context : Settings for a block of code.
    set_config : Change the settings.

    Examples
    --------
    >>> import sklearn_crocs
    >>> sklearn_crocs.get_config()
    {'memory_budget': 'auto'}
    """
    return dict(_config.get())


def set_config(*, memory_budget=_UNSET):
    """Change the package's settings in the current thread (or context).

    Read more in the :ref:`User Guide <memory_budget>`.

    Parameters
    ----------
    memory_budget : "auto", int or None, default=unchanged
        Bytes of memory a fit of a prototype clusterer
        (:class:`~sklearn_crocs.CROCSClusterer`,
        :class:`~sklearn_crocs.baselines.DTC`) may need. Before allocating
        anything, ``fit`` estimates its peak memory (the M x M weight tables
        of the M attribute combinations, the regulariser's prototype pairs,
        the prototypes with their optimiser state, one batch's activations
        and logits) and raises a ``ValueError`` naming the parameter or
        attribute responsible when the estimate exceeds the budget. A
        resampling of signals (:func:`~sklearn_crocs.preprocessing.resample_signals`
        and every reader, conditioner and estimator that brings signals to
        another rate) is bounded the same way.
        ``"auto"`` (the initial value): half of the memory available when
        ``fit`` or the resampling starts. ``None`` turns the check off. Left out, the current
        value stays. Processes started for parallel work (joblib's default
        backend, dask workers) have their own setting, ``"auto"`` unless
        they set it.
        scikit-learn's ``working_memory`` is another setting: it bounds the
        chunks that scikit-learn's own functions (and the retriever's search)
        process at once, not a whole fit.

    See Also
    --------
    config_context : Settings for a block of code.
    get_config : The current settings.

    Examples
    --------
    >>> import sklearn_crocs
    >>> sklearn_crocs.set_config(memory_budget=8 * 10**9)
    >>> sklearn_crocs.get_config()["memory_budget"]
    8000000000
    >>> sklearn_crocs.set_config(memory_budget="auto")
    """
    config = dict(_config.get())
    if memory_budget is not _UNSET:
        _check_memory_budget(memory_budget)
        config["memory_budget"] = memory_budget
    _config.set(config)



@contextmanager
def config_context(*, memory_budget=_UNSET):
    """Settings of the package for a block of code; the previous ones come back after it.

    Read more in the :ref:`User Guide <memory_budget>`.

    Parameters
    ----------
    memory_budget : "auto", int or None, default=unchanged
        Bytes of memory a fit may need (see :func:`set_config`); ``None``
        turns the check off. Left out, the current value stays.

    Yields
    ------
    None

    See Also
    --------
    get_config : The current settings.
    set_config : Change the settings.

    Examples
    --------
    >>> import sklearn_crocs
    >>> with sklearn_crocs.config_context(memory_budget=None):
    ...     sklearn_crocs.get_config()["memory_budget"] is None
    True
    >>> sklearn_crocs.get_config()["memory_budget"]
    'auto'
    """
    config = dict(_config.get())
    if memory_budget is not _UNSET:
        _check_memory_budget(memory_budget)
        config["memory_budget"] = memory_budget
    token = _config.set(config)
    try:
        yield
    finally:
        _config.reset(token)
