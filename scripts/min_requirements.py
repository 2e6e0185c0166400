"""Print the declared lower bound of every dependency as an exact pin.

``tox -e min`` installs these to check that the floors in ``pyproject.toml``
really pass the test suite. torch is left out: the only build installable here
is the CPU one of ``constraints-cpu.txt``.

Usage: ``python scripts/min_requirements.py [--output FILE] [EXTRA ...]``
(the runtime dependencies, plus those of each named optional extra).
"""

import argparse
import re
import sys
from pathlib import Path

import tomllib

SKIP = {"torch"}

parser = argparse.ArgumentParser()
parser.add_argument("extras", nargs="*")
parser.add_argument("--output", type=argparse.FileType("w"), default=sys.stdout)
args = parser.parse_args()
project = tomllib.loads((Path(__file__).parents[1] / "pyproject.toml").read_text())["project"]
requirements = list(project["dependencies"])
for extra in args.extras:
    requirements += project["optional-dependencies"][extra]
for requirement in requirements:
    match = re.fullmatch(r"([A-Za-z0-9_.-]+)\s*>=\s*([^,;\s]+)", requirement)
    if match is None:
        sys.exit(f"cannot read a floor from {requirement!r}: declare it as 'name>=version'")
    name, floor = match.groups()
    if name not in SKIP:
        print(f"{name}=={floor}", file=args.output)
