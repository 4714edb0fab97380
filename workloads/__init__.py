"""Workloads: clients and operation generators (see workloads/base.py for the contract).

`WORKLOADS` maps a name to its class; `make(name, opts)` builds one.
"""

from __future__ import annotations

import importlib
from typing import Any

WORKLOADS: dict[str, str] = {
    "queue": "workloads.queue:QueueWorkload",
    "log": "workloads.log:LogWorkload",
    "noop": "workloads.noop:NoopWorkload",
    "register": "workloads.register:RegisterWorkload",
}


def make(name: str, opts: Any = None) -> Any:
    """The workload `name` with options `opts` (a WorkloadOptions); ValueError if unknown."""
    try:
        mod, cls = WORKLOADS[name].split(":")
    except KeyError:
        raise ValueError(f"unknown workload {name!r} (known: {', '.join(WORKLOADS)})") from None
    # lazy: registry (WORKLOADS): only the workload asked for is imported
    return getattr(importlib.import_module(mod), cls)(opts)
