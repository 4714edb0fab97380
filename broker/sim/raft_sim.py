"""Deterministic simulation of the controller quorum (broker/core/raft.py).

N voters (3 or 5) and an optional observer on a virtual clock, a simulated network
(`network.SimNetwork`: delay, drop, reorder, partitions), crashes (kill -9: the page
cache survives, the log is kept whole) and power losses (the log falls back to what the
node last flushed; its quorum state is always durable, as the shell writes it before
sending), restarts, and client appends at whichever node acts as leader. The invariants
(raft_invariants.py) are checked after every step. At the end everything heals and
restarts; liveness requires one leader followed by every voter, and fresh appends
committed on every node, within `liveness_ms`.

    python -m broker.sim.raft_sim --seeds 500           # seeds 0..499
    python -m broker.sim.raft_sim --seed 42 -v          # replay one seed with its faults
    python -m broker.sim.raft_sim --seeds 200 --unsafe commit-old-epoch   # oracle's teeth

Exit codes: 0 every seed passed, 1 some seed failed, 254 bad arguments.
"""

from __future__ import annotations

import argparse
import heapq
import random
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from broker.core.messages import Actions
from broker.core.raft import UNSAFE_SWITCHES, RaftConfig, RaftNode, Role
from broker.core.raft_messages import (
    NO_LEADER,
    FlushLog,
    PersistQuorumState,
    RaftEntry,
    RoleChanged,
    VoteResponse,
)
from broker.sim.network import NetworkSettings, SimNetwork
from broker.sim.raft_invariants import RaftOracle, SimRaftLog, Violation

OBSERVER_BASE = 100


@dataclass
class RaftSimSettings:
    voters: int = 3
    observers: int = 0
    config: RaftConfig = field(default_factory=RaftConfig)
    network: NetworkSettings = field(default_factory=NetworkSettings)


@dataclass
class _Node:
    nid: int
    log: SimRaftLog
    state: PersistQuorumState = PersistQuorumState(0, NO_LEADER, NO_LEADER)
    raft: RaftNode | None = None
    incarnation: int = 0
    scheduled: int | None = None


class RaftSim:
    """The cluster, its event queue and its oracle; `run_until(t)` plays events to `t`."""

    def __init__(self, seed: int, settings: RaftSimSettings) -> None:
        self.rng = random.Random(seed)
        self.settings = settings
        self.now = 0
        self.net = SimNetwork(random.Random(seed + 1), settings.network)
        self.voters = tuple(range(1, settings.voters + 1))
        ids = [*self.voters, *range(OBSERVER_BASE, OBSERVER_BASE + settings.observers)]
        self.nodes = {i: _Node(i, SimRaftLog()) for i in ids}
        self.oracle = RaftOracle()
        self.steps = 0
        self.trace: list[str] = []  # role changes, for replays
        self.leader_hooks: list[Callable[[int], None]] = []  # nemeses striking new leaders
        self.step_hooks: list[Callable[[int], None]] = []  # nemeses watching every step
        self._queue: list[tuple[int, int, Callable[[], None]]] = []
        self._seq = 0
        for i in ids:
            self.start(i)

    # ------------------------------------------------------------ events
    def at(self, t: int, fn: Callable[[], None]) -> None:
        self._seq += 1
        heapq.heappush(self._queue, (max(t, self.now), self._seq, fn))

    def run_until(self, t: int) -> None:
        while self._queue and self._queue[0][0] <= t and not self.oracle.violations:
            when, _, fn = heapq.heappop(self._queue)
            self.now = when
            fn()
        self.now = max(self.now, t)

    def running(self, nid: int) -> bool:
        return self.nodes[nid].raft is not None

    # ------------------------------------------------------------ driving nodes
    def _call(self, node: _Node, fn: Callable[[RaftNode], Actions]) -> None:
        raft = node.raft
        assert raft is not None
        try:
            acts = fn(raft)
        except Exception as e:  # a core that raises is a bug the run reports
            self.oracle.violations.append(Violation(self.now, "core-error", f"node {node.nid}: {type(e).__name__}: {e}"))
            return
        self.steps += 1
        for a in acts.other:
            if isinstance(a, PersistQuorumState):
                node.state = a
            elif isinstance(a, FlushLog):
                node.log.flush(a.end_offset)
            elif isinstance(a, RoleChanged):
                self.trace.append(f"t={self.now} node {node.nid} {a.role} epoch {a.epoch} leader {a.leader_id}")
                if a.role == "leader":
                    for hook in list(self.leader_hooks):
                        hook(node.nid)
        for s in acts.sends:
            m = s.message
            if isinstance(m, VoteResponse) and m.vote_granted and not m.pre_vote:
                self.oracle.vote_sent(self.now, node.nid, m.leader_epoch, s.to)
            self._send(node.nid, s.to, m)
        self.oracle.check(self.now, node.nid, raft, node.log, node.state)
        self._schedule_tick(node)
        for hook in list(self.step_hooks):
            hook(node.nid)

    def _send(self, src: int, dst: int, msg: object) -> None:
        t = self.net.delivery_time(src, dst, self.now)
        if t is None or dst not in self.nodes:
            return
        inc = self.nodes[dst].incarnation

        def deliver() -> None:
            node = self.nodes[dst]
            if node.raft is not None and node.incarnation == inc:
                self._call(node, lambda r: r.handle(src, msg, self.now))

        self.at(t, deliver)

    def _schedule_tick(self, node: _Node) -> None:
        raft = node.raft
        d = raft.next_deadline() if raft is not None else None
        if d is None:
            return
        d = max(d, self.now)
        if node.scheduled is not None and node.scheduled <= d:
            return
        node.scheduled = d
        inc = node.incarnation

        def fire() -> None:
            if node.raft is not None and node.incarnation == inc and node.scheduled == d:
                node.scheduled = None
                self._call(node, lambda r: r.tick(self.now))

        self.at(d, fire)

    # ------------------------------------------------------------ faults
    def start(self, nid: int) -> None:
        node = self.nodes[nid]
        if node.raft is not None:
            return
        node.incarnation += 1
        node.scheduled = None
        rng = random.Random(self.rng.random())
        node.raft = RaftNode(nid, self.voters, node.log, self.settings.config, rng, node.state, self.now)
        self.oracle.restarted(nid)
        self._call(node, lambda r: r.tick(self.now))

    def crash(self, nid: int, power_loss: bool = False) -> None:
        """kill -9 (the log stays whole: the page cache survives) or a power loss (the
        log falls back to its last flush, plus, when it only grew since, a random part
        of the unflushed appends: a torn tail). The quorum state file is always durable."""
        node = self.nodes[nid]
        if node.raft is None:
            return
        node.raft = None
        node.log = node.log.after_crash(power_loss, self.rng)

    def leaders(self) -> list[int]:
        return [i for i, n in self.nodes.items() if n.raft is not None and n.raft.role is Role.LEADER]

    def client_append(self, value: object) -> int | None:
        """Append at a node acting as leader (the newest epoch's, or any, at random)."""
        ls = self.leaders()
        if not ls:
            return None
        nid = self.rng.choice(ls)

        def append(r: RaftNode) -> Actions:
            r.append(value)
            return Actions()

        self._call(self.nodes[nid], append)
        return nid


# ---------------------------------------------------------------- random runs
@dataclass
class RaftRunResult:
    seed: int
    steps: int
    elections: int
    committed: int
    appended: int
    violations: list[Violation] = field(default_factory=list)
    config: dict[str, object] = field(default_factory=dict)
    faults: list[str] = field(default_factory=list)
    trace: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.violations

    def summary(self) -> str:
        head = (
            f"seed {self.seed}: {'ok' if self.ok else 'FAIL'} steps={self.steps} elections={self.elections}"
            f" appended={self.appended} committed={self.committed}"
        )
        return "\n".join([head, *(f"  violation {v}" for v in self.violations)])


def random_settings(rng: random.Random, unsafe: frozenset[str]) -> tuple[RaftSimSettings, dict[str, object]]:
    cfg: dict[str, object] = {
        "voters": rng.choice([3, 3, 5]),
        "observers": rng.choice([0, 1]),
        "pre_vote": rng.random() < 0.5,
        "check_quorum": rng.random() < 0.7,
        "max_delay_ms": rng.choice([2, 10, 40]),
        "drop": rng.choice([0.0, 0.0, 0.01, 0.05]),
        "reorder": rng.choice([0.0, 0.05]),
        "hunt": rng.choice([0.0, 0.3, 0.6]),
        "max_fetch": rng.choice([3, 500]),  # entries per fetch response
        "unsafe": sorted(unsafe),
    }
    config = RaftConfig(
        pre_vote=cfg["pre_vote"],  # type: ignore[arg-type]
        check_quorum=cfg["check_quorum"],  # type: ignore[arg-type]
        max_entries_per_fetch=cfg["max_fetch"],  # type: ignore[arg-type]
        unsafe=unsafe,
    )
    net = NetworkSettings(1, cfg["max_delay_ms"], cfg["drop"], cfg["reorder"])  # type: ignore[arg-type]
    return RaftSimSettings(cfg["voters"], cfg["observers"], config, net), cfg  # type: ignore[arg-type]


def raft_run(
    seed: int,
    unsafe: frozenset[str] = frozenset(),
    duration_ms: int = 20000,
    settle_ms: int = 10000,
    liveness_ms: int = 20000,
) -> RaftRunResult:
    """One seed: faults and appends for `duration_ms`, then heal, restart, settle and
    check liveness. Deterministic in its arguments."""
    rng = random.Random(seed * 7919 + 5)
    settings, cfg = random_settings(rng, unsafe)
    cfg["story"] = settings.voters == 5 and rng.random() < 0.3
    sim = RaftSim(seed, settings)
    faults: list[str] = []
    counter = iter(range(1 << 62))
    appended = [0]

    def append() -> None:
        if sim.client_append(("v", next(counter))) is not None:
            appended[0] += 1

    t = 0
    while t < duration_ms:
        t += rng.randint(10, 150)
        sim.at(t, append)
    if cfg["story"]:  # instead of random faults: Figure 8, twice
        for start in (rng.randint(2000, 4000), duration_ms // 2 + rng.randint(0, 2000)):
            sim.at(start, Figure8(sim, rng, faults).begin)
    else:
        t = rng.randint(500, 3000)
        while t < duration_ms:
            sim.at(t, lambda: _fault(sim, rng, faults))
            t += rng.randint(300, 3000)
    if cfg["hunt"] and not cfg["story"]:
        sim.leader_hooks.append(lambda nid: _hunt(sim, rng, faults, nid, cfg["hunt"], duration_ms))  # type: ignore[arg-type]
    sim.run_until(duration_ms)
    sim.leader_hooks.clear()
    sim.net.heal()
    faults.append(f"t={sim.now} heal all, restart all")
    for nid in sim.nodes:
        sim.start(nid)
    sim.run_until(sim.now + settle_ms)
    if not sim.oracle.violations:
        _check_liveness(sim, liveness_ms)
    o = sim.oracle
    return RaftRunResult(seed, sim.steps, o.elections, len(o.committed), appended[0], o.violations, cfg, faults, sim.trace)


class Figure8:
    """A fault story after Figure 8 of the Raft paper (5 voters): leader A keeps appending
    with only B reachable (entries X on A and B), then dies; C is elected by the others
    and cut off at once (its epoch's entries on C alone), then dies; A comes back and
    is elected again, and dies with B as soon as it commits anything new; C comes back
    and can win with the votes of the nodes that lack A's new epoch. Had A committed X
    by counting replicas (entries of an earlier epoch), C's election would erase them."""

    def __init__(self, sim: RaftSim, rng: random.Random, faults: list[str]) -> None:
        self.sim, self.rng, self.faults = sim, rng, faults
        self.stage = "idle"
        self.a = self.b = self.c = -1

    def _log(self, what: str) -> None:
        self.faults.append(f"t={self.sim.now} figure8 {what}")

    def begin(self) -> None:
        sim = self.sim
        ls = [n for n in sim.leaders() if n in sim.voters]
        if not ls or any(not sim.running(v) for v in sim.voters):
            return
        self.a = ls[0]
        self.b = self.rng.choice([v for v in sim.voters if v != self.a])
        for x in (self.a, self.b):
            for y in sim.nodes:
                if y not in (self.a, self.b):
                    sim.net.cut(x, y)
        self._log(f"cut {self.a},{self.b} from the rest")
        sim.at(sim.now + self.rng.randint(300, 900), self._kill_a)
        sim.leader_hooks.append(self._on_leader)

    def _kill_a(self) -> None:
        self.sim.crash(self.a)
        self.stage = "await-c"
        self._log(f"kill {self.a}")

    def _on_leader(self, nid: int) -> None:
        sim = self.sim
        if self.stage == "await-c" and nid not in (self.a, self.b):
            self.c, self.stage = nid, "await-a"
            sim.net.isolate(nid, list(sim.nodes))
            self._log(f"isolate new leader {nid}")
            sim.at(sim.now + self.rng.randint(0, 30), self._kill_c_restart_a)
        elif self.stage == "await-a" and nid in (self.a, self.b):
            self.stage = "await-commit"
            raft = sim.nodes[nid].raft
            assert raft is not None
            hwm, epoch = len(sim.oracle.committed), raft.epoch

            def on_step(n: int) -> None:  # the re-elected leader dies at its first new commit
                r = sim.nodes[nid].raft
                if r is None or r.role is not Role.LEADER or r.epoch != epoch:
                    sim.step_hooks.remove(on_step)
                elif n == nid and r.committed_offset > hwm:
                    sim.step_hooks.remove(on_step)
                    sim.at(sim.now, lambda: self._kill_leader_restart_c(nid))

            sim.step_hooks.append(on_step)

    def _kill_c_restart_a(self) -> None:
        self.sim.crash(self.c)
        self.sim.net.heal()
        self.sim.start(self.a)
        self._log(f"kill {self.c}, heal, restart {self.a}")

    def _kill_leader_restart_c(self, nid: int) -> None:
        """Two of five die (the re-elected leader and the other holder of X); C returns."""
        self.stage = "done"
        other = self.b if nid == self.a else self.a
        for v in (nid, other):
            self.sim.crash(v)
            self.sim.at(self.sim.now + self.rng.randint(5000, 8000), lambda v=v: self.sim.start(v))
        self._log(f"kill re-elected leader {nid} and {other}")
        self.sim.at(self.sim.now + self.rng.randint(50, 400), lambda: self.sim.start(self.c))


def _hunt(sim: RaftSim, rng: random.Random, faults: list[str], nid: int, p: float, until: int) -> None:
    """Now and then strike a new leader a few ms after its election (crash, power loss
    or isolation): it leaves entries of its epoch on a minority, the stuff of Raft's
    Figure 8, where committing an earlier epoch's entries goes wrong."""
    if sim.now >= until or rng.random() >= p:
        return
    kind = rng.choice(["crash", "power-loss", "isolate"])
    ids = sorted(sim.nodes)

    def strike() -> None:
        if kind == "isolate":
            sim.net.isolate(nid, ids)
        else:
            sim.crash(nid, power_loss=kind == "power-loss")
        sim.at(sim.now + rng.randint(50, 3000), (lambda: sim.start(nid)) if kind != "isolate" else sim.net.heal)
        faults.append(f"t={sim.now} hunt-leader {kind} {nid}")

    sim.at(sim.now + rng.randint(0, 40), strike)


def _fault(sim: RaftSim, rng: random.Random, faults: list[str]) -> None:
    ids = sorted(sim.nodes)
    live = [i for i in ids if sim.running(i)]
    down = [i for i in ids if not sim.running(i)]
    leaders = sim.leaders()
    kinds = ["crash", "power-loss", "crash-leader", "isolate", "isolate-leader", "cut", "heal"]
    weights = [2, 1, 2, 1, 2, 2, 2]
    if down:
        kinds.append("restart")
        weights.append(5)
    kind = rng.choices(kinds, weights)[0]
    if kind in ("crash-leader", "isolate-leader"):
        if not leaders:
            return
        v = rng.choice(leaders)
    elif kind == "restart":
        v = rng.choice(down)
    elif kind in ("crash", "power-loss", "isolate"):
        if not live:
            return
        v = rng.choice(live)
    if kind in ("crash", "crash-leader", "power-loss"):
        sim.crash(v, power_loss=kind == "power-loss" or (kind == "crash-leader" and rng.random() < 0.3))
        if rng.random() < 0.7:
            sim.at(sim.now + rng.randint(100, 4000), lambda v=v: sim.start(v))
    elif kind == "restart":
        sim.start(v)
    elif kind in ("isolate", "isolate-leader"):
        sim.net.isolate(v, ids)
    elif kind == "cut":
        a, b = rng.sample(ids, 2)
        sim.net.cut(a, b)
        v = (a, b)  # type: ignore[assignment]
    else:
        sim.net.heal()
        v = None  # type: ignore[assignment]
    faults.append(f"t={sim.now} {kind} {v}")


def _check_liveness(sim: RaftSim, liveness_ms: int) -> None:
    """After the heal: within `liveness_ms`, one leader that every voter follows, and
    appends at it committed on every node (appended again if leadership moves first)."""
    deadline = sim.now + liveness_ms
    pending: tuple[int, int, int, RaftEntry] | None = None  # leader, epoch, offset, entry
    round_ = 0
    while sim.now < deadline:
        if pending is not None and not _leads(sim, pending[0], pending[1]):
            pending = None  # leadership moved: the entries may be gone, append again
        leader = _agreed_leader(sim)
        raft = sim.nodes[leader].raft if leader is not None else None
        if pending is None and raft is not None:
            round_ += 1
            off = max(raft.append(("final", round_, i)) for i in range(3))
            pending = (leader, raft.epoch, off, raft.log.entries[off])  # type: ignore[assignment]
            sim._schedule_tick(sim.nodes[leader])  # type: ignore[index]
        if pending is not None and all(_has_committed(n, pending[2], pending[3]) for n in sim.nodes.values()):
            return
        sim.run_until(sim.now + 50)
    states = {i: (n.raft.role.value, n.raft.epoch, n.raft.leader_id, n.raft.committed_offset) for i, n in sim.nodes.items() if n.raft}
    what = "no agreed leader" if pending is None else f"entry {pending[2]} of epoch {pending[1]} not committed everywhere"
    sim.oracle.violations.append(Violation(sim.now, "no-liveness", f"{what} {liveness_ms} ms after the heal: {states}"))


def _leads(sim: RaftSim, nid: int, epoch: int) -> bool:
    r = sim.nodes[nid].raft
    return r is not None and r.role is Role.LEADER and r.epoch == epoch


def _has_committed(node: _Node, offset: int, entry: RaftEntry) -> bool:
    r = node.raft
    return r is not None and r.committed_offset > offset and node.log.entries[offset] == entry


def _agreed_leader(sim: RaftSim) -> int | None:
    ls = sim.leaders()
    if len(ls) != 1:
        return None
    lr = sim.nodes[ls[0]].raft
    assert lr is not None
    for n in sim.nodes.values():
        r = n.raft
        if r is None or r is lr:
            continue
        if r.role is not Role.FOLLOWER or r.leader_id != ls[0] or r.epoch != lr.epoch:
            return None
    return ls[0]


# ---------------------------------------------------------------- CLI
class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, exit 254 (the project's convention)
        sys.stderr.write(f"python -m broker.sim.raft_sim: error: {message}\n")
        sys.exit(254)


def main(argv: list[str] | None = None) -> int:
    p = _Parser(prog="python -m broker.sim.raft_sim", description="Random seeds of the controller quorum (Raft) simulation.")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--seeds", type=int, default=200, help="run seeds START..START+N-1 (default 200)")
    g.add_argument("--seed", type=int, help="run (replay) this one seed")
    p.add_argument("--start", type=int, default=0, help="first seed (default 0)")
    p.add_argument("--duration-ms", type=int, default=20000, help="virtual time with faults (default 20000)")
    p.add_argument("--settle-ms", type=int, default=10000, help="virtual time after the final heal (default 10000)")
    p.add_argument("--unsafe", action="append", default=[], metavar="NAME",
                   help=f"break one Raft rule (repeatable; tests the oracle): {', '.join(UNSAFE_SWITCHES)}")
    p.add_argument("-v", "--verbose", action="store_true", help="print every seed's summary and fault log")
    a = p.parse_args(argv)
    bad = [u for u in a.unsafe if u not in UNSAFE_SWITCHES]
    if bad:
        p.error(f"unknown unsafe switch {bad[0]!r} (known: {', '.join(UNSAFE_SWITCHES)})")
    if a.seed is None and a.seeds <= 0:
        p.error(f"--seeds must be positive, got {a.seeds}")
    if a.duration_ms < 0 or a.settle_ms < 0:
        p.error("--duration-ms and --settle-ms must not be negative")
    seeds = [a.seed] if a.seed is not None else range(a.start, a.start + a.seeds)
    t0 = time.perf_counter()
    failed = []
    for s in seeds:
        r = raft_run(s, frozenset(a.unsafe), a.duration_ms, a.settle_ms)
        if a.verbose or not r.ok:
            print(r.summary())
            if a.verbose:
                print(f"  config {r.config}")
                print("\n".join(f"  {f}" for f in r.faults))
                print("  role changes (last 40):")
                print("\n".join(f"  {t}" for t in r.trace[-40:]))
        if not r.ok:
            failed.append(s)
    dt = time.perf_counter() - t0
    n = len(seeds)
    print(f"{n} seeds, {len(failed)} failed, {dt:.1f} s ({n / dt:.1f} seeds/s)"
          + (f"; replay with --seed {failed[0]}" if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
