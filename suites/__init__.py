"""Systems under test, one folder each, and their registry: `--db NAME` -> suites/NAME's `SUITE`.

Each folder holds one system's DB lifecycle, clients and workloads, fault packages and role
targets, loss rules, options and report sections: its suite.py makes `SUITE` (a
suites/base.py `Suite`, meeting contracts/protocols.py's `SystemUnderTest`), its options.py
lists its option groups as `GROUPS`. The generic floors (harness, checkers, pipeline)
read systems only through `get(name)` and `names()`: adding a system is a folder and one line
of `SYSTEMS`.
"""

from __future__ import annotations

import importlib
from typing import Any

SYSTEMS: dict[str, str] = {
    "wrack": "suites.wrack",  # the project's Kafka-compatible broker (broker/)
    "etcd": "suites.etcd",  # etcd 3.4 from Debian: a Raft key-value store nobody here wrote
    "tansu": "suites.tansu",  # Tansu 0.6.0 (cargo): stateless Kafka-compatible brokers on one PostgreSQL
}
DEFAULT = "wrack"


def names() -> list[str]:
    return list(SYSTEMS)


def _module(name: str, part: str) -> Any:
    if name not in SYSTEMS:
        raise ValueError(f"unknown system {name!r} (known: {', '.join(SYSTEMS)})")
    # lazy: registry (SYSTEMS): only the system asked for is imported
    return importlib.import_module(f"{SYSTEMS[name]}.{part}")


def get(name: str) -> Any:
    """The system under test `name` (its folder's suite.py `SUITE`); ValueError naming the known ones."""
    return _module(name, "suite").SUITE


def option_groups(name: str) -> tuple[type, ...]:
    """The option groups of system `name` (its folder's options.py `GROUPS`), without loading the
    rest of the system (`wrack --help` reads every system's)."""
    return tuple(_module(name, "options").GROUPS)
