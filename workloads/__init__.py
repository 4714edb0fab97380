"""Kafka-wire workloads: clients and operation generators (see workloads/base.py for the contract).

`WORKLOADS` maps a name to its class; `make(name, opts)` builds one, and `factories(names)` gives
a system under test its workloads as `SystemUnderTest.workloads` wants them (test.json-style
options -> a workload). Workloads of one system live in its folder (e.g. suites/etcd/register.py).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, Sequence
from typing import Any

WORKLOADS: dict[str, str] = {
    "queue": "workloads.queue:QueueWorkload",
    "group": "workloads.group:GroupWorkload",
    "log": "workloads.log:LogWorkload",
    "noop": "workloads.noop:NoopWorkload",
}


def make(name: str, opts: Any = None) -> Any:
    """The workload `name` with options `opts` (a WorkloadOptions); ValueError if unknown."""
    try:
        mod, cls = WORKLOADS[name].split(":")
    except KeyError:
        raise ValueError(f"unknown workload {name!r} (known: {', '.join(WORKLOADS)})") from None
    # lazy: registry (WORKLOADS): only the workload asked for is imported
    return getattr(importlib.import_module(mod), cls)(opts)


def factories(names: Sequence[str], **fixed: Any) -> dict[str, Callable[[Mapping[str, Any]], Any]]:
    """name -> (test.json-style options -> the workload with `WorkloadOptions.from_test` of them);
    `fixed` are WorkloadOptions the system sets whatever the test says (e.g. `idempotent=False`
    for a broker without the idempotent producer)."""
    # lazy: workloads.base imports the Kafka client libraries, which a system listing names need not load
    from workloads.base import WorkloadOptions

    def make_with(n: str, options: Mapping[str, Any]) -> Any:
        wo = WorkloadOptions.from_test(options)
        for k, v in fixed.items():
            setattr(wo, k, v)
        return make(n, wo)

    return {n: (lambda options, n=n: make_with(n, options)) for n in names}
