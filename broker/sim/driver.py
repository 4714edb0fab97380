"""The simulation's driver of the bug triggers (broker/triggers): a `Trigger`'s steps played
on a `SimCluster`'s event queue, timed by an RNG.

`TriggerPlay(c, tp, trigger, rng, log)` binds the trigger's roles on partition `tp` as the
controller last active has it (the leader, the ISR followers in assignment order, the order
the controller elects in) and `steps()` yields its moves: a number (sleep that many ms) or
`Until(pred, timeout_ms, poll_ms)`, to which `run` sends back whether `pred` held in time.
`run(c, gen, end, done)` drives such a generator; nothing of it runs after `end` (the random
run's final heal and settle period are then the same for every seed). When the steps end, or
a wait with `on_fail=END` is not met, the play undoes its own faults: its drops healed, the
nodes it stopped, killed or paused started or resumed.

How the vocabulary maps onto the simulation (docs/broker-replication.md, "The simulation"):
- a `Drop` holds the messages it names (`MessageFilters`) until it is healed, then delivers
  them, as TCP sends again what a firewall rule dropped once the rule goes (unless an end
  restarted meanwhile, or they were held longer than a link's 3 s timeout): `ALL` between
  brokers, their replication messages (on a combined node the controller's traffic flows);
  `FETCH_ANSWERS`, fetch answers; `ALTER_PARTITION`, the
  AlterPartition requests of the FROM broker (which also re-sends an unanswered one after
  its request timeout). An `ALL` drop with the `CONTROLLER` role cuts the broker from every
  controller (`net.controller_cut`, both ways; what it sends them meanwhile is lost);
  `Isolate` is an `ALL` drop both ways with every other broker and the controllers.
  `RECORDS` strips the records from the fetch answers instead: the follower gets the rest
  and asks again at once (a real one asks again when its stalled link times out, 3 s).
- `Stop` is a controlled shutdown, `Kill` a kill -9, `Start` starts the node once it is down
  (a controlled shutdown takes a while), `PowerLoss` / `Wipe` lose the unsynced data / the
  data disk and start the node `sim_back` s later.
- `Sleep` draws from its `sim` range, `Repeat` its count, `OneOf` its alternative; `Wait`
  polls every 50 ms (5 ms for `Unflushed` and `Ahead`) for `sim_timeout` s.
`on_step(name, ok)`, if given, is called at every wait and sleep (the scenarios record the
partition's registration there).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Generator, Iterable
from dataclasses import dataclass, field, replace
from typing import Any

from broker.core.broker import RUNNING
from broker.core.messages import (
    NO_LEADER,
    AlterPartitionRequest,
    FetchRequest,
    FetchResponse,
    OffsetsForLeaderEpochRequest,
    OffsetsForLeaderEpochResponse,
    TopicPartition,
)
from broker.sim.cluster import SimCluster
from broker.triggers import steps as S
from broker.triggers.steps import CONTROLLER, FOLLOWERS, LEADER, Trigger

POLL_MS = 50
FINE_POLL_MS = 5
LINK_TIMEOUT_MS = 3000  # a silent link is closed after this (wrack.link.timeout.ms)
REPLICATION = (FetchRequest, FetchResponse, OffsetsForLeaderEpochRequest, OffsetsForLeaderEpochResponse)


@dataclass(frozen=True)
class Until:
    pred: Callable[[], bool]
    timeout_ms: int
    poll_ms: int = POLL_MS


Tick = int | Until
Play = Generator[Tick, Any, None]


def run(c: SimCluster, play: Play, end: int, done: Callable[[], None] | None = None) -> None:
    """Drive `play` on `c`'s event queue until it returns or `end` passes; then `done()`
    (not after `end`). A wait's answer (met or not) is sent back into the generator."""

    def advance(answer: bool | None) -> None:
        if c.now >= end:
            return
        try:
            tick = play.send(answer)
        except StopIteration:
            if done is not None:
                done()
            return
        if isinstance(tick, Until):
            wait(tick, c.now + tick.timeout_ms)
        else:
            c.at(c.now + tick, lambda: advance(None))

    def wait(u: Until, deadline: int) -> bool:
        if u.pred():
            advance(True)
            return True
        if c.now >= deadline:
            advance(False)
            return True
        if c.now < end:
            c.probe(min(c.now + u.poll_ms, deadline), lambda: wait(u, deadline))
        return False

    advance(None)


@dataclass
class Filter:
    """Hold the messages `match(src, to, msg)` accepts until the filter is removed, as a
    firewall rule holds a TCP stream's segments (TCP sends them again once it goes): they
    are delivered then, unless either end restarted meanwhile or they were held longer than
    `LINK_TIMEOUT_MS` (the connection died: its ends' request timeouts send again).
    `caught` counts them."""

    match: Callable[[int | str, int | str, object], bool]
    strip: Callable[[object], object] | None = None  # send the message changed by this instead of holding it
    caught: int = 0
    held: list[tuple[tuple[Any, ...], dict[str, Any], int, int, int]] = field(default_factory=list)


class MessageFilters:
    """The message holds of the plays on one cluster. While there are any, they see every
    message `c.send` sends (an instance attribute wraps the cluster's method; removed with
    the last filter): a held message is not sent, and is sent as it was (its link, its
    plane) when its filter goes. This is the capability the plays need of `SimCluster`
    (hold chosen messages, then release them), kept here beside its only user."""

    def __init__(self, c: SimCluster) -> None:
        self.c = c
        self.active: list[Filter] = []

    def add(self, f: Filter) -> Filter:
        if not self.active:
            vars(self.c)["send"] = self._send
        self.active.append(f)
        return f

    def remove(self, fs: Iterable[Filter]) -> None:
        """Remove the filters `fs` and send what they held."""
        gone = {id(f) for f in fs}
        released = [h for f in self.active if id(f) in gone for h in f.held]
        self.active = [f for f in self.active if id(f) not in gone]
        if not self.active:
            vars(self.c).pop("send", None)
        for args, kw, inc_src, inc_to, t in released:
            if (self.c.now - t <= LINK_TIMEOUT_MS and self._incarnation(args[0]) == inc_src
                    and self._incarnation(args[1]) == inc_to):
                self._send(*args, **kw)

    def release_all(self) -> None:
        """Remove every filter (the fault window ended: the final heal heals everything)."""
        self.remove(list(self.active))

    def _incarnation(self, node: int | str) -> int:
        n = self.c.nodes.get(node) if isinstance(node, int) else None
        return -1 if n is None else n.incarnation

    def _send(self, src: int | str, to: int | str, msg: object, *args: Any, **kw: Any) -> None:
        for f in self.active:
            if f.match(src, to, msg):
                f.caught += 1
                if f.strip is not None:
                    msg = f.strip(msg)
                    break
                f.held.append(((src, to, msg, *args), kw, self._incarnation(src), self._incarnation(to), self.c.now))
                return
        type(self.c).send(self.c, src, to, msg, *args, **kw)


def healthy(c: SimCluster, tp: TopicPartition, replicas: tuple[int, ...], log: Callable[[str], None]) -> Play:
    """Start from a healthy partition: heal the network, restart its stopped replicas and
    the stopped (or paused) controllers, and wait (up to 10 s) until every replica serves
    (registered, unfenced, not shutting down) and is in the ISR, and a controller is active.
    Yields False as its last answer if that did not come."""
    if not replicas:
        return False  # no such partition (yet)
    c.net.heal()
    for r in replicas:
        c.start_broker(r)
    for v in c.voter_ids:
        c.resume(v)
        c.start_broker(v)
    log(f"story on {tp}: heal, start {list(replicas)}")

    def serving(i: int) -> bool:
        b = c.brokers[i].broker
        return b is not None and b.state == RUNNING

    def ready() -> bool:
        reg = _registration(c, tp)
        return (reg is not None and reg.leader != NO_LEADER and serving(reg.leader) and len(reg.isr) == len(replicas)
                and c.controller is not None and all(serving(r) for r in replicas))

    ok = yield Until(ready, 10000)
    return ok


def _registration(c: SimCluster, tp: TopicPartition) -> Any:
    """What the controller last active knows of `tp` (during a controller election too)."""
    ctl = c.latest_controller
    return None if ctl is None else ctl.image.partitions.get(tp)


@dataclass
class View:
    leader: int | None
    isr: tuple[int, ...]


@dataclass
class TriggerPlay:
    """One playing of `trigger` on `tp` (module docstring)."""

    c: SimCluster
    tp: TopicPartition
    trigger: Trigger
    rng: random.Random
    log: Callable[[str], None]
    filters: MessageFilters
    on_step: Callable[[str, bool], None] | None = None
    roles: dict[str, Any] = field(default_factory=dict)
    ctl_cut: set[int] = field(default_factory=set)
    mine: dict[tuple[Any, ...], Filter] = field(default_factory=dict)
    down: set[int] = field(default_factory=set)
    paused: set[int] = field(default_factory=set)

    # ------------------------------------------------------------------ roles

    def replicas(self) -> tuple[int, ...]:
        reg = _registration(self.c, self.tp)
        return () if reg is None else reg.replicas

    def view(self) -> View:
        reg = _registration(self.c, self.tp)
        if reg is None:
            return View(None, ())
        return View(None if reg.leader == NO_LEADER else reg.leader, reg.isr)

    def bind(self) -> bool:
        """Bind the roles from the partition's registration; False if it lacks them."""
        reg = _registration(self.c, self.tp)
        if reg is None or reg.leader == NO_LEADER:
            return False
        followers = [r for r in reg.replicas if r != reg.leader and r in reg.isr]
        want = self.trigger.roles
        if len(followers) < want.needed():
            return False
        named = dict(zip(want.followers, followers, strict=False))
        voters = set(self.c.voter_ids)
        if want.nonvoter and named.get(want.nonvoter) in voters:
            other = next((r for r, n in named.items() if r != want.nonvoter and n not in voters), None)
            if other is not None:
                named[want.nonvoter], named[other] = named[other], named[want.nonvoter]
        self.roles = {LEADER: reg.leader, FOLLOWERS: tuple(followers), **named}
        self.log(f"{self.trigger.name} {self.tp}: roles {self.roles}")
        return True

    def nodes(self, who: S.Who) -> list[int]:
        """The nodes of roles `who` (a node id stands for itself)."""
        out: list[int] = []
        for r in (who,) if isinstance(who, int) else S.roles_of(who):
            v = r if isinstance(r, int) else self.roles[r]
            out += list(v) if isinstance(v, tuple) else [v]
        return out

    # ------------------------------------------------------------------ playing

    def steps(self) -> Play:
        """The whole play: bind, the trigger's steps, undo."""
        ok = yield from healthy(self.c, self.tp, self.replicas(), self.log)
        if not ok or not self.bind():
            return
        try:
            yield from self.play(self.trigger.steps, 0)
        except _End:
            pass
        self.undo()

    def play(self, steps: Iterable[S.Step], i: int) -> Play:
        for s in steps:
            if isinstance(s, S.Wait):
                if not (yield from self.wait(s, i)) and s.on_fail == S.END:
                    raise _End
            elif isinstance(s, S.If):
                if (yield from self.wait(s.wait, i)):
                    yield from self.play(s.steps, i)
            elif isinstance(s, S.Repeat):
                lo, hi = s.sim or (s.times, s.times)
                for k in range(self.rng.randint(lo, hi)):
                    yield from self.play(s.steps, k)
            elif isinstance(s, S.OneOf):
                alt = self.rng.choices(s.alternatives, s.weights)[0]
                yield from self.play(alt, i)
            elif isinstance(s, S.Sleep):
                lo, hi = s.sim_range()
                ms = self.rng.randint(int(lo * 1000), int(hi * 1000))
                if ms > 0:
                    yield ms
                    self._stepped(s.name, i, True)
            else:
                yield from self.act(s)

    def _stepped(self, name: str, i: int, ok: bool) -> None:
        if self.on_step is not None:
            self.on_step(name.format(n=i + 2), ok)

    def wait(self, w: S.Wait, i: int) -> Generator[Tick, Any, bool]:
        timeout = int(w.sim_timeout_s() * 1000)
        if timeout <= 0:
            return True  # the simulation does not wait for it (its moves need no such guard)
        fine = isinstance(w.cond, (S.Unflushed, S.Ahead))
        t0 = self.c.now
        ok = bool((yield Until(lambda: self.holds(w.cond), timeout, FINE_POLL_MS if fine else POLL_MS)))
        if ok and w.rebind:
            self.roles[w.rebind] = self.view().leader
        self.log(f"{self.trigger.name}: {w.name.format(n=i + 2)} {'met' if ok else 'not met'} after {self.c.now - t0} ms")
        self._stepped(w.name, i, ok)
        return ok

    def holds(self, cond: S.Cond) -> bool:
        c, tp = self.c, self.tp
        if isinstance(cond, S.Committed):
            n = cond.sim_count if cond.sim_count is not None else cond.count
            behind = c.brokers[self.roles[cond.behind]].disk.log(tp).log_end_offset
            return c.hwm(self.roles[cond.leader], tp) >= behind + n
        if isinstance(cond, S.Held):
            return any(f.caught for k, f in self.mine.items() if k[0] == S.ALTER_PARTITION)
        if isinstance(cond, (S.Live, S.Fenced)):
            ctl = c.latest_controller
            usable = ctl is not None and ctl.image.is_usable(self.roles[cond.role])
            return usable == isinstance(cond, S.Live)
        if isinstance(cond, S.Unflushed):
            log = c.brokers[self.roles[cond.role]].disk.log(tp)
            return c.running(self.roles[cond.role]) and log.recovery_point < log.log_end_offset
        if isinstance(cond, S.Ahead):
            return (c.brokers[self.roles[cond.role]].disk.log(tp).log_end_offset
                    > c.brokers[self.roles[cond.other]].disk.log(tp).log_end_offset)
        return cond.holds(self.view(), self.roles)

    # ------------------------------------------------------------------ actions

    def act(self, s: S.Step) -> Play:
        c, name = self.c, self.trigger.name
        if isinstance(s, S.Drop):
            self.drop(s)
        elif isinstance(s, S.Isolate):
            xs = self.nodes(s.who)
            rules: dict[Any, list[Any]] = {x: [o for o in c.brokers if o != x] + [CONTROLLER] for x in xs}
            for o in c.brokers:
                rules.setdefault(o, []).extend(x for x in xs if x != o)
            self.drop(S.Drop({k: tuple(v) for k, v in rules.items()}))
        elif isinstance(s, S.Heal):
            self.heal()
        elif isinstance(s, (S.Stop, S.Kill)):
            for x in self.nodes(s.who):
                (c.controlled_shutdown if isinstance(s, S.Stop) else c.crash)(x)
                self.down.add(x)
            self.log(f"{name}: {'controlled-shutdown' if isinstance(s, S.Stop) else 'crash'} {self.nodes(s.who)}")
        elif isinstance(s, S.Start):
            for x in self.nodes(s.who):
                self.start(x)
        elif isinstance(s, S.CrashRestart):
            for x in self.nodes(s.who):
                c.crash(x)
                c.start_broker(x)
            self.log(f"{name}: crash-restart {self.nodes(s.who)}")
        elif isinstance(s, (S.PowerLoss, S.Wipe)):
            lo, hi = s.sim_back
            for x in self.nodes(s.who):
                (c.power_loss if isinstance(s, S.PowerLoss) else c.wipe)(x)
                self.down.add(x)
                self._start_later(x, self.rng.randint(int(lo * 1000), int(hi * 1000)))
            self.log(f"{name}: {'power-loss' if isinstance(s, S.PowerLoss) else 'wipe'} {self.nodes(s.who)}")
        elif isinstance(s, S.Pause):
            for x in self.nodes(s.who):
                c.pause(x, 10**9)
                self.paused.add(x)
            self.log(f"{name}: pause {self.nodes(s.who)}")
        elif isinstance(s, S.Resume):
            for x in self.nodes(s.who):
                c.resume(x)
                self.paused.discard(x)
            self.log(f"{name}: resume {self.nodes(s.who)}")
        else:
            raise TypeError(f"the simulation driver cannot play {s!r}")
        return
        yield  # a generator, like the other step players

    def start(self, x: int) -> None:
        """Start node x once it is down (at once if it is); it is no longer this play's."""
        self.down.discard(x)
        if not self.c.running(x):
            self.c.start_broker(x)
            self.log(f"{self.trigger.name}: start {x}")
            return

        def once_down() -> Play:
            yield Until(lambda: not self.c.running(x), 10000)
            self.c.start_broker(x)
            self.log(f"{self.trigger.name}: start {x}")

        run(self.c, once_down(), self.c.now + 10**9)

    def _start_later(self, x: int, ms: int) -> None:
        def back() -> None:
            if x in self.down:
                self.start(x)

        if ms <= 0:
            back()
        else:
            self.c.at(self.c.now + ms, back)

    def drop(self, d: S.Drop) -> None:
        """Add `d`'s drops; with `replace`, heal this play's others in the same move (a drop
        the new set has too goes on holding what it holds, as a firewall rule replaced by
        itself does)."""
        holds: dict[tuple[Any, ...], Callable[[int | str, int | str, object], bool]] = {}
        cuts: set[int] = set()
        for at, froms in d.rules.items():
            for frm in froms:
                if d.only == S.ALL and CONTROLLER in (at, frm):
                    cuts |= set(self.nodes(frm if at == CONTROLLER else at))
                elif d.only == S.ALTER_PARTITION:
                    srcs = frozenset(self.nodes(frm))
                    holds[(d.only, srcs)] = lambda src, to, msg, srcs=srcs: (
                        src in srcs and isinstance(msg, AlterPartitionRequest))
                else:
                    pairs = frozenset((f, a) for a in self.nodes(at) for f in self.nodes(frm))
                    types = REPLICATION if d.only == S.ALL else (FetchResponse,)
                    holds[(d.only, pairs)] = lambda src, to, msg, pairs=pairs, types=types: (
                        (src, to) in pairs and isinstance(msg, types))
        if d.replace:
            self.filters.remove([f for k, f in self.mine.items() if k not in holds])
            self.mine = {k: f for k, f in self.mine.items() if k in holds}
            for x in self.ctl_cut - cuts:
                self.c.reconnect_to_controllers(x)
            self.ctl_cut &= cuts
        for k, match in holds.items():
            if k not in self.mine:
                self.mine[k] = self.filters.add(Filter(match, _without_records if k[0] == S.RECORDS else None))
        for x in cuts:
            if x not in self.c.net.controller_cut:
                self.c.cut_from_controllers(x)
                self.ctl_cut.add(x)
        self.log(f"{self.trigger.name}: drop {d.only} {self._named(d.rules)}" + (" (the rest healed)" if d.replace else ""))

    def _named(self, rules: Any) -> dict[str, list[Any]]:
        return {f"{k}={self.roles.get(k, k)}": [f"{r}={self.roles.get(r, r)}" for r in v] for k, v in rules.items()}

    def heal(self) -> None:
        """Heal this play's drops (and nothing else)."""
        for x in self.ctl_cut:
            self.c.reconnect_to_controllers(x)
        self.filters.remove(self.mine.values())
        self.ctl_cut, self.mine = set(), {}
        self.log(f"{self.trigger.name}: heal")

    def undo(self) -> None:
        """Heal this play's drops, resume the nodes it paused, start those it took down."""
        self.heal()
        for x in sorted(self.paused):
            self.c.resume(x)
        self.paused = set()
        for x in sorted(self.down):
            self.start(x)


def _without_records(msg: object) -> object:
    """A fetch answer without its records (a `RECORDS` drop: the follower gets the rest of the
    answer and asks again at once; a real one whose large packets are dropped asks again when
    its link times out)."""
    assert isinstance(msg, FetchResponse)
    return replace(msg, partitions=tuple(replace(p, records=b"") for p in msg.partitions))


class _End(Exception):
    """A wait with on_fail=END was not met."""
