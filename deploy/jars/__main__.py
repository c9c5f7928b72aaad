"""``python -m deploy.jars [NAME...]``: resolve the jar sets (all of them by default), print where."""

import sys

from . import NAMES, jars


def main(argv: list[str]) -> int:
    for name in argv or NAMES:
        print(f"{name}: {jars(name)}")
    return 0


sys.exit(main(sys.argv[1:]))
