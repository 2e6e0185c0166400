"""``python -m sklearn_crocs``: the main job (see :mod:`sklearn_crocs._main`)."""

import sys

from ._main import main

sys.exit(main())
