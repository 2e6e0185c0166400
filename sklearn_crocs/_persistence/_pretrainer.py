"""The pretrainer document: what a :class:`~sklearn_crocs.ContrastivePretrainer` file holds.

Its document adds to the format's header
(:mod:`sklearn_crocs._persistence._format`) the fields of
``PRETRAINER_FIELDS``: the parameters (a custom encoder class by name only),
``input_shape_``, the number of leads and ``loss_curve_``; its tensors are
the encoder's weights.
"""

import os
from functools import partial

import torch

from ..nn._encoders import encoder_class
from ._fields import is_int, is_list, is_number
from ._format import (
    ESTIMATOR_HEAD_FIELDS,
    INPUT_SHAPE_FIELD,
    MAX_LEADS,
    check_activation,
    check_encoder_shapes,
    check_fields,
    check_load_args,
    check_probe,
    document_errors,
    head_document,
    head_estimator,
    probe_signals,
    read_model_file,
    write_model_file,
)

PRETRAINER_FIELDS = {
    **ESTIMATOR_HEAD_FIELDS,
    "input_shape": INPUT_SHAPE_FIELD,
    "n_features_in": (is_int(1, MAX_LEADS), "a number of leads", True),
    "loss_curve": (is_list(is_number, 1), "a list of numbers", True),
}


class PretrainerFile:
    """Writing and reading a pretrainer's model file; its fields are ``PRETRAINER_FIELDS``."""

    def _write_file(self, path, overwrite):
        """Write the fitted pretrainer to ``path``."""
        document = {
            **head_document(self, ("encoder",)),
            "input_shape": list(self.input_shape_),
            "n_features_in": self.n_features_in_,
            "loss_curve": [float(v) for v in self.loss_curve_],
        }
        tensors = {f"encoder.{k}": v for k, v in self.encoder_.state_dict().items()}
        write_model_file(path, type(self).__name__, document, tensors, overwrite=overwrite)

    @classmethod
    def _read_file(cls, path, *, device, encoder, sha256):
        """The pretrainer of the file at ``path``; any inconsistency: InvalidModelFileError."""
        check_load_args(device, encoder, sha256)
        path = os.fspath(path)
        document, tensors = read_model_file(path, cls.__name__, sha256)
        with document_errors(path, cls.__name__):
            return cls._from_document(document, tensors, path, device, encoder)

    @classmethod
    def _from_document(cls, document, tensors, path, device, encoder):
        """A ``cls`` of the document's parameters, with the encoder of the tensors."""
        check_fields(document, PRETRAINER_FIELDS, "the pretrainer document")
        pretrainer = head_estimator(
            cls, document, ("encoder",), path, device=device, encoder=encoder, verb="pretrained"
        )
        return pretrainer._restore(document, tensors, path)

    def _restore(self, document, tensors, path):
        """Set the fitted encoder from the document and tensors; checked."""
        input_shape = tuple(document["input_shape"])
        n_leads = document["n_features_in"]
        # The views' channels: every lead, or one lead where the method splits them.
        lead_views = self.method in ("cmlc", "cmsmlc")
        if input_shape[0] != (1 if lead_views else n_leads) or (lead_views and n_leads < 2):
            raise ValueError(
                f"input_shape {list(input_shape)} is not the views method={self.method!r} "
                f"makes of {n_leads} lead(s)"
            )
        check_activation(
            encoder_class(self.encoder), input_shape, self.embedding_dim,
            self.encoder_params,
        )  # fmt: skip
        weights = {k.removeprefix("encoder."): v for k, v in tensors.items()}
        check_encoder_shapes(partial(self._build_encoder, input_shape), weights)
        module = self._build_encoder(input_shape)
        module.load_state_dict(weights, strict=True)
        self.encoder_ = module.to(self.device).eval()
        self.input_shape_ = input_shape
        self.n_features_in_ = n_leads
        self.loss_curve_ = list(document["loss_curve"])
        self.n_iter_ = len(self.loss_curve_)
        with torch.inference_mode():
            probe = torch.from_numpy(probe_signals(*input_shape)).to(self.device)
            check_probe(path, self.encoder_(probe).cpu())
        return self
