"""Tansu's faults: its architecture is brokers that hold nothing and one database that holds
everything, so the faults are aimed at the database, at the brokers, and at the links between
the brokers and the database and between the clients and the brokers.

The database node is the role target (`{"role": "controller"}`: the DB's `leader_address`,
through `nemesis.targets.LeaderMetadata`):
- `partition-db`: the database node isolated from every broker, later healed;
- `kill-db` / `pause-db`: SIGKILL / SIGSTOP of every PostgreSQL process at once, later
  restarted / resumed; `restart-db`: a clean restart (fast shutdown, start), an instant;
- `power-loss-db`: SIGKILL, the unsynced writes under PostgreSQL's data directory dropped
  (LazyFS, nemesis/lazyfs), restart; an instant. LazyFS runs in its `ordered` metadata mode,
  ext4's (a file's fsync makes the names created before it durable): the file systems
  PostgreSQL runs on. `power-loss-db-posix` is the same under strict POSIX (a new file's
  name is durable only once its directory is fsynced: stricter than the file systems
  PostgreSQL's reliability documentation has in mind).
Aimed at the brokers only (the database node is never drawn), through handlers this module
registers on the nemesis (`install`), recorded under the generic fault names:
- `partition-broker-db`: one broker, or a minority of them, cut off from the database
  (`start-partition` {"cut": ...}); the other brokers keep serving;
- `partition-clients`: one broker, or a minority, drops every client connection (TCP to
  port 9092 from outside the cluster), recorded as `start-partition` {"clients": [...]};
- `kill-broker` / `pause-broker`: one broker or a minority, later restarted / resumed;
- `clock`: the brokers' clocks (libfaketime, nemesis/clock.py): a bump of one broker or a
  majority of them, or a strobe of one; PostgreSQL's clock is never skewed.
The generic `partition`, `kill`, `pause`, `restart` and `rolling-restart` (any node) are there
too. Left out: the fault stories and the wrack broker's partition roles (Kafka replicas and
ISRs: Tansu has neither), corruption (segment files), membership (node ids).

`MIX` is the default rotation (`--nemesis mix`).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

from contracts.history import FAULT_COLORS
from nemesis.clock import bump_delta_ms, install_clock, strobe_params
from nemesis.core import FaultOp, Nemesis
from nemesis.lazyfs.hook import LazyFSOptions, install_power_loss
from nemesis.net import CHAIN
from nemesis.schedule import (
    PACKAGES,
    FaultPackage,
    isolate_target_package,
    kill_target_package,
    power_loss_package,
)

DATABASE = {"role": "controller"}
GENERIC = ("partition", "kill", "pause", "restart", "rolling-restart")
MIX = ("partition-db", "partition-broker-db", "partition-clients", "kill-db", "pause-db", "kill-broker",
       "pause-broker", "clock", "power-loss-db")
SIZES = ("one", "minority")


def brokers(nem: Nemesis) -> list[str]:
    """The broker nodes' names (every node but the DB's database node)."""
    db = nem.db
    return [n.name for n in db.brokers()] if hasattr(db, "brokers") else list(nem.names)


def draw(nem: Nemesis, size: str) -> list[str]:
    """`size` ("one", "minority" (at least one) or "all") of the brokers, drawn with the nemesis's rng."""
    names = brokers(nem)
    n = {"one": 1, "minority": max(1, (len(names) - 1) // 2), "all": len(names)}[size]
    return sorted(nem.rng.sample(names, min(n, len(names))))


def _cut_broker_db(nem: Nemesis) -> Callable[[Any], Any]:
    def cut(value: Any) -> Any:
        names = draw(nem, (value or {}).get("size", "one"))
        db = [n.name for n in nem.cluster.nodes if n.name not in brokers(nem)]
        return nem.handlers["start-partition"]({"cut": [db, names]})
    return cut


def _cut_clients(nem: Nemesis) -> Callable[[Any], Any]:
    """Drop, on the drawn brokers, every TCP packet to the Kafka port from outside the cluster
    (the clients run on the harness's host); the next heal flushes the rules."""
    def cut(value: Any) -> dict[str, Any]:
        names = draw(nem, (value or {}).get("size", "one"))
        nem.net.drop({}, replace=True)  # the chain exists and is jumped to on every node, and is empty
        rules = [f"iptables -w -A {CHAIN} -s {n.address} -p tcp --dport 9092 -j RETURN" for n in nem.cluster.nodes]
        rules.append(f"iptables -w -A {CHAIN} -p tcp --dport 9092 -j DROP")
        for name in names:
            nem.cluster.node(name).sh(" && ".join(rules), timeout=30)
        nem.partitioned = True
        return {"spec": {"clients": names}, "grudge": {}, "drops": "client connections to port 9092"}
    return cut


def _on_brokers(nem: Nemesis, f: str) -> Callable[[Any], Any]:
    """`f` (kill, pause) on the drawn brokers."""
    def act(value: Any) -> Any:
        return nem.handlers[f](draw(nem, (value or {}).get("size", "one")))
    return act


def _skew_brokers(nem: Nemesis) -> Callable[[Any], Any]:
    """A bump of one broker or a majority of them (Jepsen's distribution), or a strobe of one."""
    def skew(_value: Any) -> Any:
        rng = nem.rng
        if rng.random() < 0.5:
            names = brokers(nem)
            k = 1 if rng.random() < 0.5 or len(names) < 2 else len(names) // 2 + 1
            spec: dict[str, Any] = {"bump": sorted(rng.sample(names, k)), "delta_ms": bump_delta_ms(rng)}
        else:
            spec = {"strobe": draw(nem, "one"), **strobe_params(rng)}
        return nem.handlers["start-clock"](spec)
    return skew


HANDLERS = {  # op f -> (handler maker, the generic fault it is recorded as)
    "cut-broker-db": (_cut_broker_db, "start-partition"),
    "cut-clients": (_cut_clients, "start-partition"),
    "kill-brokers": (lambda nem: _on_brokers(nem, "kill"), "kill"),
    "pause-brokers": (lambda nem: _on_brokers(nem, "pause"), "pause"),
    "skew-brokers": (_skew_brokers, "start-clock"),
}


def install(nem: Nemesis) -> None:
    """Register the broker-aimed handlers on `nem` (idempotent; before the schedule runs)."""
    for f, (make, recorded) in HANDLERS.items():
        if f not in nem.handlers:
            nem.register(f, make(nem), recorded=recorded)


def _broker_package(name: str, f: str, stop: FaultOp, color: str, prepare: Callable[[Nemesis], Any] = install
                    ) -> FaultPackage:
    def start(rng: random.Random) -> FaultOp:
        return FaultOp(f, {"size": SIZES[rng.randrange(len(SIZES))]})
    return FaultPackage(name, start, stop, [stop], color, prepare)


def _power_loss(name: str, metadata: str) -> FaultPackage:
    """A power loss of the database node with LazyFS in `metadata` mode (nemesis/lazyfs/journal.py)."""
    pkg = power_loss_package((DATABASE,), name=name)
    pkg.prepare = lambda nem: install_power_loss(nem, opts=LazyFSOptions(metadata=metadata))
    return pkg


def _clock_prepare(nem: Nemesis) -> None:
    install_clock(nem)
    install(nem)


def packages() -> dict[str, Callable[[], FaultPackage]]:
    """Every package `--nemesis` may name on Tansu (module docstring)."""
    heal = FaultOp("stop-partition")
    return {
        **{n: PACKAGES[n] for n in GENERIC},
        "partition-db": lambda: isolate_target_package("partition-db", DATABASE, "#D9C880"),
        "kill-db": lambda: kill_target_package("kill-db", DATABASE, "#D98880"),
        "pause-db": lambda: FaultPackage("pause-db", lambda rng: FaultOp("pause", DATABASE), FaultOp("resume", "all"),
                                         [FaultOp("resume", "all")], FAULT_COLORS["pause"]),
        "restart-db": lambda: FaultPackage("restart-db", lambda rng: FaultOp("restart", DATABASE), None, [],
                                           FAULT_COLORS["restart"]),
        "power-loss-db": lambda: _power_loss("power-loss-db", "ordered"),
        "power-loss-db-posix": lambda: _power_loss("power-loss-db-posix", "posix"),
        "partition-broker-db": lambda: _broker_package("partition-broker-db", "cut-broker-db", heal, "#E9DCA0"),
        "partition-clients": lambda: _broker_package("partition-clients", "cut-clients", heal, "#E0C890"),
        "kill-broker": lambda: _broker_package("kill-broker", "kill-brokers", FaultOp("start", "all"),
                                               FAULT_COLORS["kill"]),
        "pause-broker": lambda: _broker_package("pause-broker", "pause-brokers", FaultOp("resume", "all"),
                                                FAULT_COLORS["pause"]),
        "clock": lambda: FaultPackage("clock", lambda rng: FaultOp("skew-brokers", None), FaultOp("stop-clock"),
                                      [FaultOp("stop-clock")], FAULT_COLORS["clock"], _clock_prepare),
    }
