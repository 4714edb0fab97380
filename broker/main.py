"""`wrack-broker`: placeholder entry point until the broker lands (issue: broker part 1)."""

from __future__ import annotations

import sys


def entry() -> None:
    sys.stderr.write("wrack-broker: the broker is not built yet\n")
    sys.exit(254)
