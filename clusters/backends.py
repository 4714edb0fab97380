"""Backend registry: `--backend NAME` -> module.

A backend module provides:
- `create(spec: ClusterSpec) -> Cluster`: bring the nodes up (raise ValueError /
  FileExistsError / PermissionError for bad requests: the CLI turns them into exit 254);
- `attach(name: str) -> Cluster`: the running cluster from its persisted state
  (FileNotFoundError when there is none);
- `names() -> list[str]`: clusters that exist (state or leftovers);
- `force_down(name: str | None) -> list[str]`: remove everything the backend made for
  `name` (every cluster when None) by names/labels, even after a crash; returns what it removed.
- optionally `add_arguments(parser)`: backend options for `wrack cluster up`, read back
  from `ClusterSpec.options` (keys = argparse dests).
"""

from __future__ import annotations

import importlib
from types import ModuleType

BACKENDS: dict[str, str] = {
    "local": "clusters.local",
    "ssh": "clusters.ssh",
    "docker": "clusters.docker",
}

DEFAULT_BACKEND = "local"


def backend(name: str) -> ModuleType:
    """The module of backend `name` (ValueError for unknown names)."""
    if name not in BACKENDS:
        raise ValueError(f"unknown backend {name!r} (one of {', '.join(sorted(BACKENDS))})")
    try:
        # lazy: registry (BACKENDS): only the backend asked for is imported; a missing one is a ValueError
        return importlib.import_module(BACKENDS[name])
    except ModuleNotFoundError as e:
        if e.name != BACKENDS[name]:
            raise
        raise ValueError(f"backend {name!r} is not installed in this checkout ({BACKENDS[name]} is missing)") from None
