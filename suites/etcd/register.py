"""etcd's register workload: Jepsen's etcd register test, reads, writes and
compare-and-sets on independent keys, checked for linearizability with the `cas-register`
model (checkers/linearizable), each key on its own (P-compositionality).

Keys are ints (etcd key: their decimal text); values are drawn from 0..4. Ops, in roughly
equal shares:

- `read` `[k, null]` -> ok `[k, v]` (v null: the key does not exist yet, the model's nil);
- `write` `[k, v]` -> ok `[k, v]`;
- `cas` `[k, [old, new]]` -> ok when it took effect; `fail` *without* an `error` field when
  the compare failed (the value was not `old`: an observation the model checks); `fail`
  with `error` when it provably did not happen for another reason (no observation).

Errors (suites/etcd/client.py): reads always `fail` (they change nothing); writes and cas
`fail` only when no connection could be made, else `info`. Each key takes at most
`ops_per_key` ops, then a fresh key replaces it, so each key's linearizability search stays
small; `active_keys(threads)` keys are in play at once, so concurrent clients contend on
the same keys. Each client talks to one member only: the first URL of its `bootstrap`.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from checkers.linearizable import check_events
from contracts.generator import PENDING, Context, Generator, Pending
from contracts.history import read_events
from suites.etcd.client import EtcdError, EtcdIO
from suites.etcd.options import EtcdOptions
from workloads.base import BaseWorkload, WorkloadAnalysis, WorkloadOptions

VALUES = 5  # values 0..4
OPS_PER_KEY = 300
THREADS_PER_KEY = 3


def active_keys(threads: int) -> int:
    """Keys in play at once for `threads` client threads: one per `THREADS_PER_KEY`, at least 2."""
    return max(2, -(-threads // THREADS_PER_KEY))


class RegisterGenerator(Generator):
    """Random read/write/cas ops on a few active keys; a key that has had `ops_per_key` ops
    is retired for the next fresh one (keys 0, 1, 2, ... in order). Never exhausted."""

    def __init__(self, ops_per_key: int = OPS_PER_KEY, values: int = VALUES):
        self.ops_per_key = ops_per_key
        self.values = values
        self.fresh = itertools.count()
        self.active: list[list[int]] = []  # [key, ops emitted]

    def op(self, ctx: Context) -> dict[str, Any] | Pending | None:
        p = ctx.random_free_process()
        if p is None:
            return PENDING
        rng = ctx.rng
        while len(self.active) < active_keys(len(ctx.workers)):
            self.active.append([next(self.fresh), 0])
        slot = self.active[rng.randrange(len(self.active))]
        k = slot[0]
        slot[1] += 1
        if slot[1] >= self.ops_per_key:
            self.active.remove(slot)
        f = ("read", "write", "cas")[rng.randrange(3)]
        if f == "read":
            value: list[Any] = [k, None]
        elif f == "write":
            value = [k, rng.randrange(self.values)]
        else:
            value = [k, [rng.randrange(self.values), rng.randrange(self.values)]]
        return {"process": p, "f": f, "value": value, "time": ctx.time}


class RegisterClient:
    """Runs register ops through one `EtcdIO` (see the module docstring for the outcomes)."""

    def __init__(self, make_io: Callable[[], EtcdIO]):
        self.io = make_io()

    def invoke(self, op: Mapping[str, Any]) -> dict[str, Any]:
        f = op["f"]
        k, arg = op["value"]
        key = str(k)
        try:
            if f == "read":
                return {"type": "ok", "value": [k, self.io.read(key)]}
            if f == "write":
                self.io.write(key, arg)
                return {"type": "ok", "value": [k, arg]}
            if f == "cas":
                old, new = arg
                return {"type": "ok" if self.io.cas(key, old, new) else "fail", "value": [k, [old, new]]}
        except EtcdError as e:
            return {"type": e.outcome(mutating=f != "read").type, "error": str(e)}
        return {"type": "fail", "error": f"unknown f {f!r}"}

    def close(self) -> None:
        self.io.close()


@dataclass
class RegisterOptions(WorkloadOptions):
    """The workload options and etcd's read mode (suites/etcd/options.py)."""

    etcd_reads: str = EtcdOptions().etcd_reads


class RegisterWorkload(BaseWorkload):
    name = "register"
    checker = "linearizable"
    checks_recovery = False
    opts: RegisterOptions

    def __init__(self, opts: RegisterOptions | None = None):
        super().__init__(opts or RegisterOptions())

    @classmethod
    def from_test(cls, options: Mapping[str, Any]) -> RegisterWorkload:
        return cls(RegisterOptions.from_test(options))

    def client(self, thread: int, process: int, bootstrap: str) -> RegisterClient:
        """A client of the first member in `bootstrap` (a comma list of client URLs)."""
        endpoint = bootstrap.split(",")[0].strip()
        o = self.opts
        return RegisterClient(lambda: EtcdIO(endpoint, timeout=o.request_timeout, reads=o.etcd_reads))

    def generator(self) -> Generator:
        return RegisterGenerator()

    def analyze(self, history_path: Path, time_limit: float | None = None) -> WorkloadAnalysis:
        """Linearizability with the `cas-register` model, per key."""
        return WorkloadAnalysis(dict(check_events(read_events(history_path), "cas-register", time_limit=time_limit)))
