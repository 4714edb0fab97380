"""Lossy shutdowns in a run's fault history, and how many replicas of each partition they hit at once.

Seed 002 (sections 5.1-5.2) promises: with acks=all, min.insync.replicas >= 2 and the ELR,
no acknowledged write is lost as long as at most `f = min.insync.replicas - 1` replicas of a
partition have a *lossy* unclean shutdown concurrently. `durability(events, ...)` reads the
nemesis events of a history (fault events and the observer's `cluster-state` events,
`nemesis.observer`) and says, per partition, whether that bound held.

Which fault events are lossy (`losses`), per node:
- `power-loss`: each node it names, for the partitions whose files it dropped or rolled back
  (the `lost` record's `files` and `undone` paths; all the node's partitions when the record
  is cut short or missing; none when it dropped nothing);
- `kill` (SIGKILL): the nodes its `lost` record names, like `power-loss` (a LazyFS hook that
  drops unsynced data on every kill records it; an empty record: kills keep the page cache).
  A kill recorded without `lost` (older runs) is lossy when the run's `--nemesis` has
  `power-loss` (whose LazyFS made every kill a power loss) and that node's LazyFS was not yet
  switched to pass-through by a `lazyfs-sync`. Without LazyFS a kill loses nothing;
- `corrupt-file`: the partitions whose segment files it changed (all of the node's when it
  stopped the broker with `kill` under LazyFS);
- `wipe` (a fault story's: kill, empty the data dir, start): all of the node's partitions;
- `remove-node`: all of the node's partitions, for good (its replica never comes back: the
  node returns with a new broker id).
With `--flush-policy every` power loss and kills lose nothing acknowledged (every record was
synced before it could be acknowledged); corruption and wipes still do. Restarts (SIGTERM:
a controlled shutdown syncs), clean stops, pauses, partitions and clock faults are not lossy.

Concurrency. A partition's replica on node n is *lost* from its lossy shutdown until it is
back in the partition's ISR; a lossy shutdown of another replica while k replicas are lost
makes k + 1 concurrent. When is a replica back?
- With observations (the history's `cluster-state` events, and the ISR changes the controller
  wrote to its node's log, `isr_changes`; an observed ISR holds until the next observation of
  that partition): when the ISR in force after the fault lists n, and either n was seen
  outside the ISR since the fault (the ISR in force at the fault counts), or `STALE_NS`
  (12 s) have passed since the fault. A restarted broker may stay in the ISR until the
  controller fences its old session (at most the 9 s session timeout), so an ISR that still
  lists n right after the fault proves nothing; seeing it leave and return does, and so does
  an ISR listing it after the fence (the leader re-adds a replica only once it caught up).
  The observer's 0.5 s polls can miss a spell outside the ISR (70 ms on a real power loss:
  fenced at re-registration, caught up at once); the controller's ISR changes do not.
  A controller change that elects n leader after the fault (`elected`: a new leader epoch)
  brings n back too: the controller elects registered, unfenced brokers only, so that is
  its new incarnation, and the partition's log is now what n kept. (Seen with the ELR off:
  a lone leader lost power, was re-elected 0.5 s later, never left the ISR, and a follower's
  power loss 11.7 s after the first counted as concurrent under the 12 s rule, which allowed
  the loss the first one had caused.)
- Without observations (an old run): as soon as n *could* have rejoined, i.e. the first
  moment after the fault at which n was running (not killed, stopped or removed), not
  paused and not cut off from every other node by a partition's grudge. So only losses of
  nodes that were down, paused or isolated at once (or in one fault event) count as
  concurrent: the count errs low, which never hides a bug. Which partitions a lossy kill
  hit is then only known when every node holds every partition (rf >= nodes); otherwise
  such a kill counts for no partition, for the same reason.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

CLUSTER_STATE = "cluster-state"  # nemesis.observer's event
LAZYFS_PACKAGES = frozenset({"power-loss", "power-loss-many"})  # --nemesis packages that mount LazyFS (lossy kills)
_PARTITION_DIR = re.compile(r"^(?!__)(.+)-(\d+)$")
# how long an ISR may still list a replica after its broker restarted: until the controller
# fences the old session (broker.session.timeout.ms, 9 s in wrack-broker), plus 3 s for the
# metadata to reach the brokers and for the observer's request (2 s timeout)
STALE_NS = 12 * 10**9


@dataclass(frozen=True)
class Loss:
    """One replica's lossy shutdown: `node` lost data in fault event `index` (at `time` ns);
    `keys` are the partitions hit (None: every partition with a replica on the node);
    `permanent`: the replica never comes back (wiped and removed)."""

    node: str
    index: int
    time: int
    f: str
    keys: frozenset[str] | None = None
    permanent: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {"index": self.index, "time_s": round(self.time / 1e9, 3), "f": self.f, "node": self.node,
                "partitions": None if self.keys is None else sorted(self.keys), "permanent": self.permanent}


@dataclass
class Durability:
    """What `durability` found. `exceeded`: partition -> the concurrent losses when it first went
    over `bound`; `peak`: partition -> the most replicas lost at once (partitions hit at all)."""

    bound: int
    observed: bool
    losses: list[Loss] = field(default_factory=list)
    exceeded: dict[str, list[Loss]] = field(default_factory=dict)
    peak: dict[str, int] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"bound": self.bound, "observed": self.observed, "losses": [x.to_dict() for x in self.losses],
                "peak": dict(sorted(self.peak.items())),
                "exceeded": {k: [x.to_dict() for x in v] for k, v in sorted(self.exceeded.items())}}


def partition_of(path: str) -> str | None:
    """The `topic-partition` a data-dir path belongs to (its directory, or itself), if any."""
    parts = [p for p in str(path).split("/") if p]
    for name in reversed(parts[-2:]):
        if _PARTITION_DIR.match(name):
            return name
    return None


def _keys_of(paths: Iterable[str]) -> frozenset[str]:
    return frozenset(k for k in map(partition_of, paths) if k is not None)


def _nodes(value: Any) -> list[str]:
    if isinstance(value, Mapping):
        return [str(n) for n in value.get("nodes") or []]
    return []


def _recorded(ev: Mapping[str, Any], nodes: Sequence[str]) -> list[Loss]:
    """Losses of `nodes` from the event's `lost` record (power-loss, and kill under LazyFS)."""
    out = []
    lost = ev["value"].get("lost") or {}
    for n in nodes:
        rec = lost.get(n)
        keys: frozenset[str] | None = None
        if isinstance(rec, Mapping) and not rec.get("files_not_recorded"):
            files, undone = rec.get("files") or [], rec.get("undone") or []
            if not files and not undone and not rec.get("lost_bytes"):
                continue  # nothing was unsynced: a clean unclean shutdown
            keys = _keys_of([f.get("path", "") for f in files] + [u.get("path", "") for u in undone] +
                            [u.get("to", "") for u in undone])
            if not keys:
                continue  # only files outside the partitions (the broker's log, checkpoints)
        out.append(Loss(n, ev["index"], ev["time"], ev["f"], keys))
    return out


def _corruption(ev: Mapping[str, Any], lossy_kill: bool) -> list[Loss]:
    v = ev["value"]
    out = []
    for n in _nodes(v):
        if v.get("stop") == "kill" and lossy_kill:
            out.append(Loss(n, ev["index"], ev["time"], "corrupt-file"))
            continue
        keys = _keys_of(c.get("file", "") for c in (v.get("changes") or {}).get(n) or [])
        if keys:
            out.append(Loss(n, ev["index"], ev["time"], "corrupt-file", keys))
    return out


def losses(events: Sequence[Mapping[str, Any]], *, nemesis: Sequence[str] = (), flush_every: bool = False
           ) -> list[Loss]:
    """The lossy shutdowns among `events` (nemesis events, history order), per the module
    docstring; `nemesis`: the run's `--nemesis` packages (for kills recorded without `lost`)."""
    lazy_kills = bool(LAZYFS_PACKAGES & set(nemesis)) and not flush_every
    passthrough: set[str] = set()  # nodes whose LazyFS the heal switched to pass-through
    out: list[Loss] = []
    for ev in events:
        f, v = ev["f"], ev.get("value")
        if ev.get("type") == "invoke" or not isinstance(v, Mapping):
            continue
        nodes = _nodes(v)
        if f == "power-loss":
            passthrough -= set(nodes)
            out += [] if flush_every else _recorded(ev, nodes)
        elif f == "lazyfs-sync":
            passthrough |= set(nodes)
        elif f == "kill" and "lost" in v:
            out += [] if flush_every else _recorded(ev, [n for n in nodes if n in v["lost"]])
        elif f == "kill" and lazy_kills:  # recorded before kills said what they lost
            out += [Loss(n, ev["index"], ev["time"], "kill") for n in nodes if n not in passthrough]
        elif f == "corrupt-file":
            out += _corruption(ev, lazy_kills)
        elif f == "wipe":
            out += [Loss(n, ev["index"], ev["time"], "wipe") for n in nodes]
        elif f == "remove-node":
            out += [Loss(n, ev["index"], ev["time"], "remove-node", permanent=True) for n in nodes]
    return out


class _Availability:
    """Which nodes could rejoin an ISR right now, from the fault events (no observations)."""

    def __init__(self) -> None:
        self.down: set[str] = set()
        self.paused: set[str] = set()
        self.isolated: set[str] = set()

    def apply(self, ev: Mapping[str, Any]) -> None:
        f, nodes = ev["f"], set(_nodes(ev.get("value")))
        if f in ("kill", "stop", "remove-node") or (f == "corrupt-file" and ev["value"].get("restart") is False):
            self.down |= nodes
        elif f in ("start", "add-node", "restart", "rolling-restart", "power-loss", "corrupt-file", "wipe"):
            self.down -= nodes
            if f != "start":
                self.paused -= nodes
        elif f == "pause":
            self.paused |= nodes
        elif f == "resume":
            self.paused -= nodes
        elif f == "start-partition":
            grudge = ev["value"].get("grudge") or {}
            everyone = set(grudge) | {m for ms in grudge.values() for m in ms}
            self.isolated = {n for n, ms in grudge.items() if set(ms) >= everyone - {n}}
        elif f == "stop-partition":
            self.isolated = set()

    def could_rejoin(self, node: str) -> bool:
        return node not in self.down | self.paused | self.isolated


def _observations(events: Sequence[Mapping[str, Any]], isr_changes: Sequence[Mapping[str, Any]]
                  ) -> list[tuple[int, int, Mapping[str, Any]]]:
    """The fault events and ISR observations on one timeline: (time, tie, event), where an ISR
    observation is an event {"f": CLUSTER_STATE, "value": {"partitions": {key: {"isr"}}}}: the
    observer's (every partition) or one ISR change of the controller's (one partition)."""
    out = [(int(e["time"]), 0, e) for e in events if e.get("type") != "invoke"]
    for c in isr_changes:
        part = {"isr": list(c["isr"]), **({"elected": c["elected"]} if c.get("elected") else {})}
        out.append((int(c["time"]), 1, {"f": CLUSTER_STATE, "time": int(c["time"]), "index": None,
                                        "value": {"partitions": {c["key"]: part}}}))
    out.sort(key=lambda x: (x[0], x[1]))
    return out


def _assignment(states: Sequence[Mapping[str, Any]]) -> dict[str, set[str]]:
    """Partition -> its replicas (and every node seen in its ISR) as observed."""
    out: dict[str, set[str]] = {}
    for s in states:
        for k, p in (s.get("partitions") or {}).items():
            out.setdefault(k, set()).update(p.get("replicas") or [], p.get("isr") or [])
    return out


class _Lost:
    """Per partition, the replicas lost and not back; the peak and the first excess."""

    def __init__(self, bound: int):
        self.bound = bound
        self.by_key: dict[str, dict[str, Loss]] = {}
        self.seen_out: dict[tuple[str, str], bool] = {}
        self.result = Durability(bound, False)

    def hit(self, key: str, loss: Loss, out_now: bool) -> None:
        lost = self.by_key.setdefault(key, {})
        if loss.node not in lost or not lost[loss.node].permanent:
            lost[loss.node] = loss
        self.seen_out[(key, loss.node)] = out_now
        n = len(lost)
        self.result.peak[key] = max(self.result.peak.get(key, 0), n)
        if n > self.bound and key not in self.result.exceeded:
            self.result.exceeded[key] = sorted(lost.values(), key=lambda x: x.index)

    def back(self, key: str, node: str) -> None:
        lost = self.by_key.get(key, {})
        if node in lost and not lost[node].permanent:
            del lost[node]


def durability(events: Sequence[Mapping[str, Any]], *, min_isr: int, nemesis: Sequence[str] = (),
               flush_every: bool = False, keys: Sequence[str] = (), all_hold_all: bool = False,
               isr_changes: Sequence[Mapping[str, Any]] = ()) -> Durability:
    """Whether at most `min_isr - 1` replicas of each partition were lost at once (module
    docstring). `events`: the history's nemesis events in order; `keys`: the workload's
    partitions; `all_hold_all`: every node holds every partition (rf >= nodes); `isr_changes`:
    ISR changes as the controller made them, `{"time": ns on the history's clock, "key", "isr",
    "elected": the node a new leader epoch elected, if any}` (its event lines in the nodes'
    logs), observations as the observer's are."""
    found = losses(events, nemesis=nemesis, flush_every=flush_every)
    timeline = _observations(events, isr_changes)
    states = [e["value"] for _, _, e in timeline if e["f"] == CLUSTER_STATE and isinstance(e.get("value"), Mapping)]
    observed = bool(states)
    assignment = _assignment(states)
    every = set(keys) | set(assignment)
    by_index: dict[int, list[Loss]] = {}
    for x in found:
        by_index.setdefault(x.index, []).append(x)
    lost = _Lost(max(0, min_isr - 1))
    avail = _Availability()
    isr: dict[str, list[str]] = {}  # partition -> the ISR observed last (in force until the next)
    for now, _, ev in timeline:
        if ev["f"] == CLUSTER_STATE and isinstance(ev.get("value"), Mapping):
            parts = ev["value"].get("partitions") or {}
            seen = {k: list(p.get("isr") or []) for k, p in parts.items()}
            isr.update(seen)
            _observe(lost, seen, now)
            for k, p in parts.items():
                x = lost.by_key.get(k, {}).get(p.get("elected"))
                if x is not None and x.time < now:
                    lost.back(k, p["elected"])
            continue
        avail.apply(ev)
        if ev["index"] in by_index:
            _observe(lost, isr, now, fresh=False)  # the ISRs still in force now
        for x in by_index.get(ev["index"], []):
            hit = x.keys if x.keys is not None else (
                {k for k in every if x.node in assignment.get(k, ())} if observed else
                set(keys) if all_hold_all else set())
            for k in sorted(hit):
                lost.hit(k, x, out_now=k in isr and x.node not in isr[k])
        if not observed:
            for k, nodes in lost.by_key.items():
                for n in [n for n in nodes if avail.could_rejoin(n)]:
                    lost.back(k, n)
    res = lost.result
    res.observed, res.losses = observed, found
    return res


def _observe(lost: _Lost, isr: Mapping[str, list[str]], now: int, fresh: bool = True) -> None:
    """Apply observed ISRs (partition -> ISR), in force at time `now` (`fresh`: observed at
    `now`, else earlier and unchanged since): replicas seen out of the ISR, and back."""
    for k, nodes in lost.by_key.items():
        if k not in isr:
            continue
        for n, x in list(nodes.items()):
            if n not in isr[k]:
                lost.seen_out[(k, n)] = fresh or lost.seen_out.get((k, n), False)
            elif lost.seen_out.get((k, n)) or now - x.time >= STALE_NS:
                lost.back(k, n)
