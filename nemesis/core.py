"""The nemesis: runs fault ops on a cluster and records each one in the history.

`Nemesis.invoke(FaultOp(f, value))` performs the fault and appends one event
``{"process": "nemesis", "type": "info", "f": f, "value": {...what was done...}}`` to the
history (docs/ARCHITECTURE.md). Built-in fs (paired by `contracts.history.fault_windows`):

- `start-partition` value: "halves" | "majority" | "one" | "majorities-ring" | "bridge" |
  {"isolate": TARGET} | {"one-way": {"from": TARGET, "to": TARGET}} | {"components": [[..], ..]} |
  {"cut": [TARGET, TARGET]} (the two sides drop each other's packets; every other link stays,
  e.g. a leader cut off from its followers keeps its controller); recorded with the grudge
  actually applied. One-way partitions drop only connection
  openings (the "to" nodes refuse connections from the "from" nodes, while their own
  connections to them work); every other shape drops all packets, as Jepsen does. `stop-partition` heals.
- `start-partition` {"drop": {NODE: [NODE, ...], ...}}: a raw grudge (each key drops every
  packet from the nodes listed), for fault stories that need a shape of their own, e.g. a
  one-way drop of all packets (the requests get through, the answers do not); with
  "min_bytes": N only packets of at least N bytes are dropped (answers that carry data);
  with "keep": true the rules are added to the partition in force instead of replacing it;
  with "frame": MESSAGE only the TCP segments that start a frame of that message type are
  dropped (the DB's `frame_head`): that request is held in the network, its sender's
  retries too, until the rule goes, while the rest of the link's traffic flows;
- `kill` / `start` (TARGET, default "all" for start), `pause` / `resume` (likewise);
- `stop` (TARGET): a clean stop (SIGTERM: the broker's controlled shutdown), kept down until
  a `start` (the heal starts it);
- `restart` (clean: SIGTERM, wait, start) and `rolling-restart` (one node at a time, each
  back up before the next), recorded as instants.

TARGET is a spec of `nemesis.targets.resolve` (one/minority/majority/all, node names, or
roles from the cluster's metadata: leader, controller, isr-followers).

Power loss, clock skew, file corruption and membership live in nemesis/lazyfs/,
nemesis/clock.py, nemesis/corruption.py and nemesis/membership.py; their `install_*`
functions (called by `nemesis.schedule.prepare`) add DB hooks and register their fs here.
Other fault packages add their fs with `register(f, fn)`, their undo with
`register_heal(name, fn)` and what `teardown` must stop with `register_teardown`; the
client-path proxy (nemesis/clientpath.py) sets `client_route`, through which
`client_address` sends the workload's clients; `heal_all()` runs every undo (network, paused and stopped
processes, then the registered ones, e.g. clocks), records the closing events, never
stops at the first error and returns the errors it met. `final_heal(final_ops)` ends a
test's faults: the packages' final ops, `heal_all`, every node's process ready again, and the
`final-heal` event the liveness check counts from.
"""

from __future__ import annotations

import random
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from clusters.node import Cluster
from contracts.history import FINAL_HEAL_F
from contracts.protocols import DB
from nemesis import grudge as G
from nemesis.net import IptablesNet
from nemesis.targets import MetadataSource, resolve


@dataclass(frozen=True)
class FaultOp:
    """One fault action: `f` and its `value` (what to do; the recorded value says what was done)."""

    f: str
    value: Any = None


class EventSink(Protocol):
    def append(self, event: dict[str, Any]) -> dict[str, Any]: ...


class Nemesis:
    """Faults for `cluster` (and `db`'s processes), recorded into `history` (a HistoryWriter)."""

    def __init__(self, cluster: Cluster, db: DB | None = None, history: EventSink | None = None,
                 rng: random.Random | None = None, metadata: MetadataSource | None = None,
                 wait_ready: Callable[..., None] | None = None):
        self.cluster = cluster
        self.db = db
        self.history = history
        self.rng = rng or random.Random()
        self.metadata = metadata
        self.wait_ready = wait_ready or getattr(db, "wait_ready", None)
        self.net = IptablesNet(cluster.nodes)
        self.partitioned = False
        self.killed: set[str] = set()
        self.paused: set[str] = set()
        self.removed: set[str] = set()  # taken out by membership: no target resolves to them
        self._lock = threading.RLock()
        self.handlers: dict[str, Callable[[Any], Any]] = {
            "start-partition": self._start_partition, "stop-partition": self._stop_partition,
            "kill": self._kill, "start": self._start, "pause": self._pause, "resume": self._resume,
            "stop": self._stop,
            "restart": self._restart, "rolling-restart": self._rolling_restart,
        }
        self.heals: list[tuple[str, Callable[[], Any]]] = []
        self.recorded_as: dict[str, str] = {}  # op f -> the f its event is recorded under
        self.teardowns: list[tuple[str, Callable[[], Any]]] = []  # run once by `teardown`
        # where the workload's clients reach a broker's client address (the client-path
        # proxy's listener, nemesis/clientpath.py); None: directly
        self.client_route: Callable[[str], str] | None = None
        self.last_lossy: float | None = None  # time.monotonic() of the last fault a story made lossy

    # ----------------------------------------------------------------- registry

    def register(self, f: str, fn: Callable[[Any], Any], recorded: str | None = None) -> None:
        """Handle fault `f` with `fn(value) -> recorded value`; the event is recorded under
        `recorded` (default `f`: a story op `lrs` is recorded as `stop-lrs` when it ends)."""
        self.handlers[f] = fn
        if recorded is not None:
            self.recorded_as[f] = recorded

    def register_heal(self, name: str, fn: Callable[[], Any]) -> None:
        """Run `fn()` in every `heal_all` (after the network and processes are healed)."""
        self.heals.append((name, fn))

    def register_teardown(self, name: str, fn: Callable[[], Any]) -> None:
        """Run `fn()` once in `teardown`, after the heal (e.g. stop a proxy the faults run)."""
        self.teardowns.append((name, fn))

    def client_address(self, address: str) -> str:
        """The address the workload's clients use for a broker's client `address`: the
        client-path proxy's listener for it when one is installed (`client_route`), else
        `address` itself."""
        return self.client_route(address) if self.client_route is not None else address

    def record(self, f: str, value: Any) -> dict[str, Any]:
        ev = {"process": "nemesis", "type": "info", "f": f, "value": value}
        if self.history is not None:
            self.history.append(ev)
        return ev

    def invoke(self, op: FaultOp) -> dict[str, Any]:
        """Perform `op` and record it; returns the recorded event."""
        fn = self.handlers.get(op.f)
        if fn is None:
            raise ValueError(f"no nemesis handles {op.f!r} (known: {', '.join(sorted(self.handlers))})")
        with self._lock:
            return self.record(self.recorded_as.get(op.f, op.f), fn(op.value))

    # ----------------------------------------------------------------- targets

    @property
    def names(self) -> list[str]:
        return [n.name for n in self.cluster.nodes]

    def targets(self, spec: Any) -> list[str]:
        """The nodes `spec` selects among the cluster's nodes (less those membership removed)."""
        addrs = {n.name: n.address for n in self.cluster.nodes}
        names = [n for n in self.names if n not in self.removed]
        return resolve(spec, names, self.rng, addresses=addrs, metadata=self.metadata)

    def controller_nodes(self) -> list[str]:
        """The nodes that run a controller (the DB's `controller_nodes`: the quorum's voters), or
        [] when the DB has none. (A broker's Metadata answer names itself as controller:
        `KafkaMetadata(active_controller=db.active_controller)` corrects role targets; the
        fault stories, which read one broker's answer directly, use this.)"""
        nodes = getattr(self.db, "controller_nodes", None)
        return [n.name for n in nodes()] if nodes is not None else []

    # ----------------------------------------------------------------- partitions

    def grudge_for(self, spec: Any) -> G.Grudge:
        names = self.names
        if spec in (None, "halves"):
            shuffled = list(names)
            self.rng.shuffle(shuffled)
            return G.complete_grudge(G.halves(shuffled))
        if spec == "majority":
            return G.complete_grudge(G.majority_minority(names, self.rng))
        if spec == "one":
            return G.complete_grudge(G.split_one(names, self.rng.choice(names)))
        if spec == "majorities-ring":
            return G.majorities_ring(names, self.rng)
        if spec == "bridge":
            shuffled = list(names)
            self.rng.shuffle(shuffled)
            return G.bridge(shuffled)
        if isinstance(spec, dict) and "isolate" in spec:
            alone = self.targets(spec["isolate"])
            return G.complete_grudge([alone, [n for n in names if n not in alone]])
        if isinstance(spec, dict) and "one-way" in spec:
            ow = spec["one-way"]
            return G.one_way(self.targets(ow["from"]), self.targets(ow["to"]))
        if isinstance(spec, dict) and "cut" in spec:
            a, b = (set(self.targets(side)) for side in spec["cut"])
            return {**{n: frozenset(b - {n}) for n in a}, **{n: frozenset(a - {n}) for n in b - a}}
        if isinstance(spec, dict) and "components" in spec:
            comps = [self.targets(list(c)) for c in spec["components"]]
            return G.complete_grudge(comps)
        if isinstance(spec, dict) and "drop" in spec:
            bad = [n for k, v in spec["drop"].items() for n in [k, *v] if n not in names]
            if bad:
                raise ValueError(f"bad partition spec {spec!r}: unknown nodes {sorted(set(bad))}")
            return {k: frozenset(v) for k, v in spec["drop"].items()}
        raise ValueError(f"bad partition spec {spec!r}")

    def _start_partition(self, spec: Any) -> dict[str, Any]:
        g = self.grudge_for(spec)
        new_only = isinstance(spec, dict) and "one-way" in spec
        raw = isinstance(spec, dict) and "drop" in spec
        min_bytes = spec.get("min_bytes") if raw else None
        frame = self._frame_head(spec["frame"]) if raw and spec.get("frame") else None
        keep = raw and spec.get("keep")
        self.net.drop(g, new_only=new_only, min_bytes=min_bytes, frame=frame, replace=not keep)
        self.partitioned = True
        drops = ("new-connections" if new_only else f">= {min_bytes} bytes" if min_bytes
                 else f"{spec['frame']} frames" if frame else "all")
        return {"spec": spec, "grudge": {k: sorted(v) for k, v in sorted(g.items()) if v}, "drops": drops}

    def _frame_head(self, message: str) -> bytes:
        head = getattr(self.db, "frame_head", None)
        if head is None:
            raise ValueError(f"holding {message} frames needs a DB that names its frames")
        return head(message)

    def _stop_partition(self, _value: Any = None) -> dict[str, Any]:
        self.net.heal()
        self.partitioned = False
        return {"healed": "network"}

    # ----------------------------------------------------------------- processes

    def _need_db(self) -> DB:
        if self.db is None:
            raise ValueError("process faults need a DB")
        return self.db

    def _kill(self, spec: Any) -> dict[str, Any]:
        db = self._need_db()
        nodes = self.targets(spec or "one")
        for n in nodes:
            db.kill(self.cluster.node(n))
        self.killed |= set(nodes)
        self.paused -= set(nodes)
        return {"nodes": nodes}

    def _start(self, spec: Any) -> dict[str, Any]:
        db = self._need_db()
        nodes = self.targets(spec or "all")
        for n in nodes:
            db.start(self.cluster.node(n))
        self.killed -= set(nodes)
        return {"nodes": nodes}

    def _stop(self, spec: Any) -> dict[str, Any]:
        db = self._need_db()
        nodes = self.targets(spec or "one")
        for n in nodes:
            db.stop(self.cluster.node(n))
        self.killed |= set(nodes)
        self.paused -= set(nodes)
        return {"nodes": nodes, "clean": True}

    def _pause(self, spec: Any) -> dict[str, Any]:
        db = self._need_db()
        nodes = self.targets(spec or "one")
        for n in nodes:
            db.pause(self.cluster.node(n))
        self.paused |= set(nodes)
        return {"nodes": nodes}

    def _resume(self, spec: Any) -> dict[str, Any]:
        db = self._need_db()
        nodes = self.targets(spec or "all")
        for n in nodes:
            db.resume(self.cluster.node(n))
        self.paused -= set(nodes)
        return {"nodes": nodes}

    def _restart(self, spec: Any) -> dict[str, Any]:
        db = self._need_db()
        nodes = self.targets(spec or "one")
        for n in nodes:
            node = self.cluster.node(n)
            db.stop(node)
            db.start(node)
        self.killed -= set(nodes)
        self.paused -= set(nodes)
        return {"nodes": nodes}

    def _rolling_restart(self, spec: Any) -> dict[str, Any]:
        db = self._need_db()
        nodes = self.targets(spec or "all")
        for n in nodes:
            node = self.cluster.node(n)
            db.stop(node)
            db.start(node)
            if self.wait_ready is not None:
                self.wait_ready(node)
        self.killed -= set(nodes)
        self.paused -= set(nodes)
        return {"nodes": nodes}

    # ----------------------------------------------------------------- heal

    def heal_all(self) -> list[str]:
        """Undo every fault (see module docstring); returns the errors met (empty: all healed)."""
        errors: list[str] = []
        with self._lock:
            try:
                self.net.heal()
                if self.partitioned:
                    self.record("stop-partition", {"healed": "network", "final": True})
                self.partitioned = False
            except Exception as e:  # noqa: BLE001 - heal everything else anyway
                errors.append(f"network: {e}")
            if self.db is not None:
                for f, nodes, fn in (("resume", self.paused, self.db.resume), ("start", self.killed, self.db.start)):
                    done = []
                    for n in sorted(nodes):
                        try:
                            fn(self.cluster.node(n))
                            done.append(n)
                        except Exception as e:  # noqa: BLE001
                            errors.append(f"{f} {n}: {e}")
                    if done:
                        self.record(f, {"nodes": done, "final": True})
                    nodes -= set(done)
            for name, fn in self.heals:
                try:
                    fn()
                except Exception as e:  # noqa: BLE001
                    errors.append(f"{name}: {e}")
        return errors

    def final_heal(self, final_ops: Sequence[FaultOp], ready_timeout: float = 30.0) -> list[str]:
        """End the test's faults: every final op (in order), `heal_all`, then wait until each
        node's process is ready again (`wait_ready`, at most `ready_timeout` s each). Records
        `heal-errors` (when there were any) and `final-heal` {"healed": bool}, the moment the
        liveness check counts from; returns the errors."""
        errors: list[str] = []
        for op in final_ops:
            try:
                self.invoke(op)
            except Exception as e:  # noqa: BLE001 - heal everything else anyway
                errors.append(f"{op.f}: {e}")
        errors += self.heal_all()
        if self.wait_ready is not None:
            for n in self.cluster.nodes:
                try:
                    self.wait_ready(n, ready_timeout)
                except Exception as e:  # noqa: BLE001
                    errors.append(f"{n.name} not ready: {e}")
        if errors:
            self.record("heal-errors", {"errors": errors})
        self.record(FINAL_HEAL_F, {"healed": not errors})
        return errors

    def teardown(self) -> list[str]:
        """heal_all, then remove the harness's firewall chain from every node and run the
        registered teardowns (each once)."""
        errors = self.heal_all()
        try:
            self.net.teardown()
        except Exception as e:  # noqa: BLE001
            errors.append(f"network teardown: {e}")
        done, self.teardowns = self.teardowns, []
        for name, fn in done:
            try:
                fn()
            except Exception as e:  # noqa: BLE001
                errors.append(f"{name}: {e}")
        return errors
