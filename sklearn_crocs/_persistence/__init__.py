"""Model files that run no code on load, and what each kind of file holds.

- :mod:`~sklearn_crocs._persistence._format`: the file format (a safetensors
  file with a JSON document), the encoding of values and the checks that
  every document shares;
- :mod:`~sklearn_crocs._persistence._estimator`: the estimator document
  (``CROCSClusterer``, ``DTC``: ``save`` and ``load``);
- :mod:`~sklearn_crocs._persistence._retriever`: the retriever document;
- :mod:`~sklearn_crocs._persistence._pretrainer`: the pretrainer document.
"""

from ._format import InvalidModelFileError

__all__ = ["InvalidModelFileError"]
