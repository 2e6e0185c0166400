"""What the command line's parser (:mod:`sklearn_crocs.cli._parser`) and its commands
(:mod:`sklearn_crocs.cli._commands`) share: file names, the error type, notes.

A module of its own so that the commands need not import the parser, which
imports them once a command has been parsed; it imports nothing heavy.
"""

import sys

from .._display import escape

MODEL_FILE = "model.safetensors"
SETTINGS_FILE = "settings.json"
SETTINGS_FORMAT = "sklearn-crocs-cli/2"
# RECORDS names that read the data bundled with the package.
BUNDLED = ("bundled:ptbxl-sample", "bundled:ludb")
# --model (and fit's --from) names that read a model shipped with the package.
SHIPPED_MODELS = ("bundled:ptbxl",)
ARRAY_SUFFIXES = (".npy", ".npz")


class CommandError(Exception):
    """A problem with the data, the files or the model: reported on one line, status 1."""


def note(text):
    print(f"sklearn-crocs: {escape(text)}", file=sys.stderr)
