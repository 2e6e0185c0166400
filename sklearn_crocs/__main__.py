"""``python -m sklearn_crocs``: the main job, or a subcommand (see :mod:`sklearn_crocs._cli`)."""

import sys

from ._cli import main

sys.exit(main())
