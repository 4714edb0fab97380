"""The test options of every system under test, composed: `TestOptions` and its `SPEC`.

contracts/options.py's `GeneralOptions`, then each registered system's option groups in the
registry's order (suites/__init__.py; a group two systems share, such as the Kafka clients',
once), make one flat record, `TestOptions`, which `wrack test`'s flags, campaign keys and
docs/harness.md's options table come from (`python -m harness.options` prints the table).
`for_system(o)` is the system `o` tests; `foreign(o)` the options set that it does not take.
"""

from __future__ import annotations

from dataclasses import Field
from typing import Any

import suites
from contracts.options import GeneralOptions, OptionSpec

SPEC = OptionSpec("TestOptions", [GeneralOptions, *(g for n in suites.names() for g in suites.option_groups(n))])
TestOptions: Any = SPEC.cls
DEFAULTS = SPEC.defaults


def for_system(o: Any) -> Any:
    """The system under test `o.db` names (ValueError naming the known ones)."""
    return suites.get(o.db)


def foreign(o: Any) -> list[Field]:
    """Options of `o` set away from their defaults that its system does not take."""
    return SPEC.set_outside(o, [GeneralOptions, *suites.option_groups(o.db)])


def workload_of(o: Any) -> str:
    """The workload `o` runs: `--workload`, else its system's default."""
    return o.workload or for_system(o).default_workload


if __name__ == "__main__":
    print(SPEC.markdown_table())
