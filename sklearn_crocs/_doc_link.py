"""The link from an estimator's HTML representation to its page of the API reference."""

import itertools
import sys

__all__ = ["DocLinkMixin"]


class DocLinkMixin:
    """Give the HTML representation of a public estimator a "?" link to its API page.

    scikit-learn's HTML representation (Jupyter, the example gallery) links
    the estimators of ``_doc_link_module`` to ``_doc_link_template``, filled
    with the public module (``sklearn_crocs.baselines`` for a class defined
    in ``sklearn_crocs.baselines._dtc``) and the class name. The
    documentation has no fixed web address, so the link is relative: it
    resolves from the documentation's pages one folder below its root (the
    example gallery, the user guide), where ``generated/`` holds the API
    pages. Classes that have no page (not in their public module's
    ``__all__``, or defined outside the package) get no link.
    """

    _doc_link_module = "sklearn_crocs"

    @property
    def _doc_link_template(self):
        cls = type(self)
        parts = itertools.takewhile(lambda p: not p.startswith("_"), cls.__module__.split("."))
        public = getattr(sys.modules.get(".".join(parts)), "__all__", ())
        if cls.__name__ not in public:
            return ""  # scikit-learn shows no link for an empty address
        return "../generated/{estimator_module}.{estimator_name}.html"
