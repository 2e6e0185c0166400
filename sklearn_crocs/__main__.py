"""``python -m sklearn_crocs``: the main job, or a subcommand (see :mod:`sklearn_crocs.cli`)."""

import sys

from .cli import main

sys.exit(main())
