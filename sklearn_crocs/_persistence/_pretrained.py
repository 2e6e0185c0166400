"""The models that ship with the package: where their files lie and what they add.

A shipped model is an estimator's model file (:mod:`._estimator`) whose
document adds two fields: ``provenance`` (the data, its licence and
attribution, the recipe and the package version that made it) and
``lead_names`` (the leads, in the order the model takes them, by which the
command line matches a record's leads). The files lie in
``sklearn_crocs/pretrained/`` and are read as any model file: JSON and
tensors, every tensor checked against the document.
"""

from pathlib import Path

from ._estimator import estimator_from_state, estimator_state
from ._fields import is_list, is_str
from ._format import (
    InvalidModelFileError,
    check_fields,
    document_errors,
    read_model_file,
    write_model_file,
)

FOLDER = Path(__file__).resolve().parents[1] / "pretrained"
#: The shipped models by name, each with its file in ``FOLDER``.
SHIPPED = {"ptbxl": "ptbxl.safetensors"}

PRETRAINED_FIELDS = {
    "provenance": (lambda v: isinstance(v, dict), "an object", True),
    "lead_names": (is_list(is_str, 1), "a list of lead names", True),
}


def pretrained_path(name):
    """The file of the shipped model ``name``; ValueError naming the others."""
    if not isinstance(name, str) or name not in SHIPPED:
        raise ValueError(
            f"No shipped model is named {name!r}; the package ships "
            f"{', '.join(map(repr, SHIPPED))}."
        )
    return FOLDER / SHIPPED[name]


def write_pretrained(model, path, provenance, lead_names):
    """Write the fitted ``model`` as a shipped model file with its provenance and leads."""
    document, tensors = estimator_state(model)
    document.update(provenance=provenance, lead_names=list(lead_names))
    write_model_file(path, type(model).__name__, document, tensors, overwrite=True)


def read_pretrained(cls, name, *, device=None):
    """``(model, document)``: the shipped model ``name`` as a fitted ``cls``, and the
    file's document (``provenance`` and ``lead_names`` checked)."""
    path = pretrained_path(name)
    document, tensors = read_model_file(path, cls.__name__)
    with document_errors(path, cls.__name__):
        check_fields(document, PRETRAINED_FIELDS, "the shipped model's document")
        if len(document["lead_names"]) != len(set(document["lead_names"])):
            raise ValueError("the lead names are not distinct")
    model = estimator_from_state(cls, document, tensors, str(path), device=device, encoder=None)
    if len(document["lead_names"]) != model.input_shape_[0]:
        raise InvalidModelFileError(
            f"{path} names {len(document['lead_names'])} leads for a model of "
            f"{model.input_shape_[0]}; the file was altered. Reinstall sklearn-crocs."
        )
    return model, document


class PretrainedMixin:
    """``from_pretrained``: a shipped model, fitted, in one line."""

    @classmethod
    def from_pretrained(cls, name="ptbxl", *, device=None):
        """The model that ships with the package under ``name``, fitted and ready.

        ``"ptbxl"``: CROCS fitted on the 4,403 PTB-XL records of the
        development data (Wagner et al., 2020, CC BY 4.0) with the attributes
        ``class`` (NORM or ABN), ``sex`` and ``age`` (quartiles of the
        training ages). It reads 12-lead recordings (I, II, III, aVR, aVL,
        aVF, V1-V6) as they come: pass ``sampling_rate=`` to ``predict`` or
        ``transform`` for any rate, at least 5 s long; it conditions them
        (band-pass 0.67-40 Hz, z-score per lead) and embeds a longer one as
        the mean of its 5-s frames. The file is read as :meth:`load` reads
        one: nothing in it runs. See :ref:`pretrained` and
        :func:`~sklearn_crocs.pretrained_info`.

        Parameters
        ----------
        name : str, default="ptbxl"
            The shipped model.
        device : str or torch.device, default=None
            As in :meth:`load`.

        Returns
        -------
        model : CROCSClusterer
            The fitted model. Pass it (or ``name``) as ``pretrained=`` to fit
            a model of your own attributes that starts from its encoder.

        Examples
        --------
        >>> from sklearn_crocs import CROCSClusterer
        >>> from sklearn_crocs.datasets import load_ludb
        >>> model = CROCSClusterer.from_pretrained("ptbxl")
        >>> model.attribute_names_
        ['class', 'sex', 'age']
        >>> ludb = load_ludb()  # 500 Hz, 10 s, raw millivolts
        >>> model.predict(ludb.data[:3], sampling_rate=500).columns.tolist()
        ['class', 'sex', 'age']
        """
        return read_pretrained(cls, name, device=device)[0]


def pretrained_info(name):
    """Where the shipped model ``name`` comes from: its data, licence, recipe and maker.

    Read more in the :ref:`User Guide <pretrained>`.

    Parameters
    ----------
    name : str
        A shipped model's name: ``"ptbxl"``.

    Returns
    -------
    info : dict
        ``provenance`` of the file (``data``, ``license``, ``attribution``,
        ``records``, ``recipe``, ``sklearn_crocs_version``), with
        ``lead_names``, ``attribute_names`` and ``path`` added.

    Examples
    --------
    >>> from sklearn_crocs import pretrained_info
    >>> info = pretrained_info("ptbxl")
    >>> info["license"], info["attribute_names"]
    ('CC BY 4.0', ['class', 'sex', 'age'])
    """
    path = pretrained_path(name)
    document, _ = read_model_file(path, "CROCSClusterer")
    with document_errors(path, "CROCSClusterer"):
        check_fields(document, PRETRAINED_FIELDS, "the shipped model's document")
    return {
        **document["provenance"],
        "lead_names": list(document["lead_names"]),
        "attribute_names": list(document.get("attribute_names", [])),
        "path": str(path),
    }
