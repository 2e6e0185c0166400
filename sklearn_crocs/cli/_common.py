"""What the command line's parser (:mod:`sklearn_crocs.cli._parser`) and its commands
(:mod:`sklearn_crocs.cli._commands`) share: file names, the error type, notes.

A module of its own so that the commands need not import the parser, which
imports them once a command has been parsed; it imports nothing heavy.
"""

import re
import sys

MODEL_FILE = "model.safetensors"
SETTINGS_FILE = "settings.json"
SETTINGS_FORMAT = "sklearn-crocs-cli/2"
# RECORDS names that read the data bundled with the package.
BUNDLED = ("bundled:ptbxl-sample", "bundled:ludb")
ARRAY_SUFFIXES = (".npy", ".npz")


class CommandError(Exception):
    """A problem with the data, the files or the model: reported on one line, status 1."""


# Characters that act on a terminal instead of showing: C0 and C1 controls
# (ESC starts colour and cursor sequences), DEL, and the bidirectional marks
# and overrides (U+202E shows the text after it backwards).
_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def escape(text):
    """``text`` with control and bidi characters as ``repr`` escapes (``\\x1b``, ``\\u202e``).

    Every line the command line prints goes through it: labels, header values
    and record names come from the user's files and reach the terminal.
    """
    return _UNSAFE.sub(lambda match: repr(match.group())[1:-1], str(text))


def note(text):
    print(f"sklearn-crocs: {escape(text)}", file=sys.stderr)
