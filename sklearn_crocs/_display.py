"""What the package shows its users: the link from an estimator's HTML representation to its
page of the API reference, and text from files made safe for a terminal.

It imports no third-party module: the command line uses it before anything heavy.
"""

import itertools
import re
import sys

__all__ = ["DocLinkMixin", "EscapedMessageMixin", "escape"]


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


# Characters that act on a terminal instead of showing: C0 and C1 controls
# (ESC starts colour and cursor sequences), DEL, and the bidirectional marks
# and overrides (U+202E shows the text after it backwards).
_BIDI = "\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069"
_UNSAFE = re.compile(f"[\x00-\x1f\x7f-\x9f{_BIDI}]")
_UNSAFE_IN_TEXT = re.compile(f"[\x00-\x08\x0b-\x1f\x7f-\x9f{_BIDI}]")  # keeps \t and \n


def escape(text, *, lines=False):
    """``text`` with control and bidi characters as ``repr`` escapes (``\\x1b``, ``\\u202e``).

    Labels, header values and record names come from the user's files and
    reach the terminal in the lines the command line prints (``lines=False``:
    one line, everything escaped) and in the package's exception and warning
    texts (``lines=True``: line breaks and tabs kept).
    """
    pattern = _UNSAFE_IN_TEXT if lines else _UNSAFE
    return pattern.sub(lambda match: repr(match.group())[1:-1], str(text))


class EscapedMessageMixin:
    """An exception whose text (``str``, as tracebacks show it) is :func:`escape`-d.

    File names, header values and labels in the message come from files.
    """

    def __str__(self):
        return escape(super().__str__(), lines=True)
