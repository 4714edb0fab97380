"""Fault stories for the random runs: the triggers of the known replication bugs, played
against whoever holds a role at the time (the leader of a partition, its followers).

Each story is a generator in the style of `scenarios.py`, timed by the random run's RNG.
It yields a number (sleep that many ms) or `Until(pred, timeout_ms, poll_ms=50)` (the
story is dropped if `pred` does not hold in time). `play` drives one on the cluster's
event queue; nothing of it runs after the fault window's `end`, so the final heal and
the settle period are the same for every seed. Every fault is logged (`Ctx.log`).
`StoryMix` draws them into a random run's fault moves (`STORIES`: weights, when each fits).

Stories (the safeguard each is aimed at):

- ``last-replica-standing`` (elr): the followers are cut from the leader (or shut down);
  once the ISR is the leader alone and it holds unflushed records, it loses power.
- ``leader-flap`` (epoch-truncation): 2-4 leader changes in quick succession.
- ``restart-then-kill`` (epoch-truncation): restart a follower, then take the leader
  down right after (seed 000).
- ``wipe-during-expansion`` (broker-epoch-check): a follower restarts; the AlterPartition
  that adds it back is held; meanwhile it loses its disk and restarts empty with a new
  broker epoch (KAFKA-14617).
- ``held-alter-partition`` (partition-epoch-check): the AlterPartition re-adding a
  restarted follower is held; the follower is cut from the leader; controller-side ISR
  changes (the other follower leaves and rejoins) happen before the held request lands.
- ``stale-hwm-leader`` (leso-check): a follower fenced by the controller keeps
  replicating; the leader's answers stop (the other follower gets one batch more, not
  the HWM covering it); leadership moves to that follower; the fenced one comes back and
  fetches from the new leader without getting records (Vanlightly 6.4.1).
- ``unclean-candidates`` (clean-election-only): a follower leaves the ISR, then every
  ISR member is killed.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from broker.core.broker import RUNNING
from broker.core.messages import NO_LEADER, AlterPartitionRequest, TopicPartition
from broker.core.metadata import PartitionRegistration
from broker.sim.cluster import SimCluster

POLL_MS = 50


@dataclass(frozen=True)
class Until:
    pred: Callable[[], bool]
    timeout_ms: int
    poll_ms: int = POLL_MS


Step = int | Until
Story = Iterator[Step]


def play(c: SimCluster, story: Story, end: int, done: Callable[[], None] | None = None) -> None:
    """Drive `story` on `c`'s event queue until it finishes, times out, or `end` passes;
    then call `done` (not after `end`)."""

    def finish() -> None:
        if done is not None:
            done()

    def advance() -> None:
        if c.now >= end:
            return
        step = next(story, None)
        if step is None:
            finish()
            return
        if isinstance(step, Until):
            wait(step, c.now + step.timeout_ms)
        else:
            c.at(c.now + step, advance)

    def wait(u: Until, deadline: int) -> bool:
        if u.pred():
            advance()
            return True
        if c.now < min(deadline, end):
            c.probe(c.now + u.poll_ms, lambda: wait(u, deadline))
        else:
            finish()
        return False

    advance()


class Holds:
    """Messages held back by stories (`SimCluster.extra_delay`): each rule holds the first
    AlterPartitionRequest it matches for `delay_ms`, if sent before its expiry."""

    def __init__(self, c: SimCluster) -> None:
        self.c = c
        self.rules: list[HeldAlter] = []

    def add(self, rule: HeldAlter) -> HeldAlter:
        self.rules.append(rule)
        self.c.extra_delay = self._delay
        return rule

    def _delay(self, src: int | str, to: int | str, msg: object) -> int:
        if not isinstance(msg, AlterPartitionRequest):
            return 0
        now = self.c.now
        for r in self.rules:
            if r.arrives_at < 0 and now < r.expires_at and r.matches(src, msg):
                r.arrives_at = now + r.delay_ms
                self._prune()
                return r.delay_ms
        self._prune()
        return 0

    def _prune(self) -> None:
        now = self.c.now
        self.rules = [r for r in self.rules if r.arrives_at < 0 and now < r.expires_at]
        if not self.rules:
            self.c.extra_delay = None


@dataclass
class HeldAlter:
    """Hold the first AlterPartition from `leader` for `tp` that adds `member` to the ISR."""

    c: SimCluster
    leader: int
    tp: TopicPartition
    member: int
    delay_ms: int
    expires_at: int
    arrives_at: int = -1

    def matches(self, src: int | str, msg: AlterPartitionRequest) -> bool:
        ctl = self.c.latest_controller
        if src != self.leader or msg.tp != self.tp or ctl is None:
            return False
        reg = ctl.image.partitions.get(self.tp)
        added = {m.broker_id for m in msg.new_isr_with_epochs}
        return reg is not None and self.member in added and self.member not in reg.isr

    @property
    def held(self) -> bool:
        return self.arrives_at >= 0


class Ctx:
    """What a story needs: the cluster, the RNG, the fault log, the holds."""

    def __init__(self, c: SimCluster, rng: random.Random, log: Callable[[str], None], holds: Holds, lag_ms: int) -> None:
        self.c, self.rng, self.log, self.holds, self.lag_ms = c, rng, log, holds, lag_ms

    def _reg(self, tp: TopicPartition) -> PartitionRegistration | None:
        """What the controller last active knows (during a controller election too)."""
        ctl = self.c.latest_controller
        return None if ctl is None else ctl.image.partitions.get(tp)

    def replicas(self, tp: TopicPartition) -> tuple[int, ...]:
        reg = self._reg(tp)
        return () if reg is None else reg.replicas

    def isr(self, tp: TopicPartition) -> tuple[int, ...]:
        reg = self._reg(tp)
        return () if reg is None else reg.isr

    def leader(self, tp: TopicPartition) -> int:
        reg = self._reg(tp)
        return NO_LEADER if reg is None else reg.leader

    def followers(self, tp: TopicPartition, leader: int) -> list[int]:
        fs = [r for r in self.replicas(tp) if r != leader]
        self.rng.shuffle(fs)
        return fs

    def fenced(self, i: int) -> bool:
        ctl = self.c.latest_controller
        return ctl is not None and not ctl.image.is_usable(i)

    def cut(self, a: int, b: int) -> None:
        """Replication between brokers a and b stops both ways (data plane only: on a
        combined node the controller's traffic flows, see `SimNetwork.data_blocked`)."""
        self.c.net.cut_data(a, b)

    def block(self, a: int, b: int) -> None:
        """What broker a sends broker b is lost (one way, data plane only)."""
        self.c.net.data_blocked.add((a, b))

    def unblock(self, *pairs: tuple[int, int]) -> None:
        for p in pairs:
            self.c.net.data_blocked.discard(p)

    def restart_when_down(self, i: int, after_ms: int, end: int) -> None:
        """Start broker i `after_ms` after it has stopped (a controlled shutdown takes a while)."""
        def story() -> Story:
            yield Until(lambda: not self.c.running(i), 10000)
            yield after_ms
            self.c.start_broker(i)
            self.log(f"restart {i}")
        play(self.c, story(), end)

    def take_down(self, i: int, end: int, controlled: bool = False) -> None:
        """Controlled shutdown (leadership moves at once) or kill -9, then a restart."""
        if controlled or self.rng.random() < 0.7:
            self.c.controlled_shutdown(i)
            self.log(f"controlled-shutdown {i}")
        else:
            self.c.crash(i)
            self.log(f"crash {i}")
        self.restart_when_down(i, self.rng.randint(200, 2000), end)


def _serving(x: Ctx, i: int) -> bool:
    """Broker i runs, registered and unfenced, not shutting down."""
    b = x.c.brokers[i].broker
    return b is not None and b.state == RUNNING


def _ready(x: Ctx, tp: TopicPartition) -> int:
    """The leader of `tp` if it is serving (not on its way down), else NO_LEADER."""
    ld = x.leader(tp)
    return ld if ld != NO_LEADER and _serving(x, ld) else NO_LEADER


def _healthy(x: Ctx, tp: TopicPartition) -> Story:
    """Start from a healthy partition: heal the network, restart its stopped replicas and
    the stopped (or paused) controllers, and wait (up to 10 s) until every replica serves
    (registered, unfenced, not shutting down) and is in the ISR, and a controller is
    active."""
    c, replicas = x.c, x.replicas(tp)
    if not replicas:
        yield Until(lambda: False, 0)  # no such partition (yet): the story is dropped
    c.net.heal()
    for r in replicas:
        c.start_broker(r)
    for v in c.voter_ids:
        c.resume(v)
        c.start_broker(v)
    x.log(f"story on {tp}: heal, start {list(replicas)}")
    yield Until(lambda: _ready(x, tp) != NO_LEADER and len(x.isr(tp)) == len(replicas) and c.controller is not None
                and all(_serving(x, r) for r in replicas), 10000)


def last_replica_standing(x: Ctx, tp: TopicPartition, end: int) -> Story:
    yield from _healthy(x, tp)
    ld = _ready(x, tp)
    fs = x.followers(tp, ld)
    if x.lag_ms <= 5000 and x.rng.random() < 0.5:
        for f in fs:
            x.cut(ld, f)
        x.log(f"lrs {tp}: cut leader {ld} from {fs}")
    else:
        for f in fs:
            x.c.controlled_shutdown(f)
        x.log(f"lrs {tp}: controlled-shutdown followers {fs} of {ld}")
    yield Until(lambda: x.isr(tp) == (ld,), x.lag_ms * 2 + 5000)
    yield x.rng.randint(50, 1500)  # writes on the leader alone
    log = x.c.brokers[ld].disk.log(tp)
    yield Until(lambda: log.recovery_point < log.log_end_offset, 3000, poll_ms=5)  # some of them unflushed
    if not x.c.running(ld):
        return
    x.c.power_loss(ld)
    x.log(f"lrs: power-loss {ld} (ISR [{ld}])")
    yield x.rng.randint(300, 3000)
    for f in fs:
        x.c.start_broker(f)
    yield x.rng.randint(0, 6000)
    x.c.start_broker(ld)
    x.log(f"lrs: start {fs}, then {ld}")
    yield x.rng.randint(500, 5000)
    x.unblock(*[p for f in fs for p in ((ld, f), (f, ld))])


def leader_flap(x: Ctx, tp: TopicPartition, end: int) -> Story:
    yield from _healthy(x, tp)
    for _ in range(x.rng.randint(2, 4)):
        yield Until(lambda: _ready(x, tp) != NO_LEADER, 5000)
        ld = _ready(x, tp)
        x.log(f"flap {tp}: leader {ld}")
        x.take_down(ld, end)
        yield x.rng.randint(50, 1500)


def restart_then_kill(x: Ctx, tp: TopicPartition, end: int) -> Story:
    yield from _healthy(x, tp)
    ld = _ready(x, tp)
    f = x.followers(tp, ld)[0]
    x.c.crash(f)
    x.log(f"restart-then-kill {tp}: crash follower {f}")
    yield x.rng.randint(50, 1000)
    x.c.start_broker(f)
    x.log(f"restart-then-kill: restart {f}")
    yield x.rng.randint(0, 2500)
    ld = _ready(x, tp)
    if ld != NO_LEADER:
        x.take_down(ld, end)


def _restart_held(x: Ctx, tp: TopicPartition, end: int, name: str, delay: tuple[int, int]) -> Iterator[Step | HeldAlter]:
    """Restart a follower (controlled shutdown: it leaves the ISR at once) and hold the
    AlterPartition that adds it back; yields the hold last."""
    yield from _healthy(x, tp)
    ld = _ready(x, tp)
    f = x.followers(tp, ld)[0]
    x.c.controlled_shutdown(f)
    d = x.rng.randint(*delay)
    hold = x.holds.add(HeldAlter(x.c, ld, tp, f, d, x.c.now + 10000))
    x.log(f"{name} {tp}: controlled-shutdown follower {f}, hold the AlterPartition of {ld} re-adding it for {d} ms")
    x.restart_when_down(f, x.rng.randint(50, 500), end)
    yield Until(lambda: hold.held, 10000)
    yield hold


def _stop_then(x: Ctx, i: int, then: Callable[[], None]) -> Story:
    """Controlled shutdown of broker i; once it is down, `then()`."""
    x.c.controlled_shutdown(i)
    yield Until(lambda: not x.c.running(i), 10000)
    then()


def wipe_during_expansion(x: Ctx, tp: TopicPartition, end: int) -> Story:
    hold: HeldAlter | None = None
    for step in _restart_held(x, tp, end, "wipe", (4000, 10000)):
        if isinstance(step, HeldAlter):
            hold = step
        else:
            yield step
    if hold is None:
        return
    f, ld = hold.member, hold.leader
    x.cut(ld, f)  # the empty follower does not re-fetch before the held request lands
    x.log(f"wipe: cut {f} from {ld}, controlled-shutdown {f}")
    yield from _stop_then(x, f, lambda: x.c.wipe(f))
    x.log(f"wipe: disk of {f} lost")
    yield x.rng.randint(0, 300)
    x.c.start_broker(f)
    x.log(f"wipe: restart {f} empty")
    yield max(0, hold.arrives_at - x.c.now) + x.rng.randint(100, 2000)
    x.unblock((ld, f), (f, ld))
    x.log(f"wipe: reconnect {f}")


def held_alter_partition(x: Ctx, tp: TopicPartition, end: int) -> Story:
    hold: HeldAlter | None = None
    for step in _restart_held(x, tp, end, "held-alter", (5000, 12000)):
        if isinstance(step, HeldAlter):
            hold = step
        else:
            yield step
    if hold is None:
        return
    f, ld = hold.member, hold.leader
    x.cut(ld, f)
    x.log(f"held-alter: cut {f} from {ld}")
    others = [r for r in x.followers(tp, ld) if r != f and x.c.running(r)]
    yield x.rng.randint(0, 500)
    if others:  # a controller-side ISR change: the other follower leaves the ISR, comes back
        x.take_down(others[0], end, controlled=True)
    yield max(0, hold.arrives_at - x.c.now) + x.rng.randint(100, 2000)
    x.unblock((ld, f), (f, ld))
    x.log(f"held-alter: reconnect {f}")


def stale_hwm_leader(x: Ctx, tp: TopicPartition, end: int) -> Story:
    yield from _healthy(x, tp)
    ld = _ready(x, tp)
    fx, ff = x.followers(tp, ld)[:2]
    x.c.cut_from_controllers(fx)
    x.log(f"stale-hwm {tp}: cut {fx} from the controllers (leader {ld})")
    yield Until(lambda: fx not in x.isr(tp) and x.fenced(fx), 15000)
    yield x.rng.randint(0, 1000)
    ld = _ready(x, tp)
    if ld in (NO_LEADER, ff) or ff not in x.isr(tp):
        return
    x.block(ld, fx)
    x.log(f"stale-hwm: {ld}'s answers to {fx} stop")
    leo = x.c.brokers[fx].disk.log(tp)
    yield Until(lambda: x.c.brokers[ff].disk.log(tp).log_end_offset > leo.log_end_offset, 3000, poll_ms=5)
    x.block(ld, ff)  # ff got one more batch than fx, and not the HWM that covers it
    x.log(f"stale-hwm: {ld}'s answers to {ff} stop")
    yield x.rng.randint(0, 100)
    x.c.controlled_shutdown(ld)
    x.log(f"stale-hwm: controlled-shutdown {ld}")
    x.restart_when_down(ld, x.rng.randint(1000, 4000), end)
    yield Until(lambda: x.leader(tp) not in (NO_LEADER, ld), 5000)
    new = x.leader(tp)
    x.block(new, fx)
    x.c.reconnect_to_controllers(fx)
    x.log(f"stale-hwm: leader {new}; {fx} back with the controllers, {new}'s answers to it stop")
    yield x.rng.randint(6000, 9000)  # fx's metadata fetch times out and is sent again (5 s)
    x.unblock((new, fx), (ld, ff), (ld, fx))
    x.log("stale-hwm: answers flow again")


def unclean_candidates(x: Ctx, tp: TopicPartition, end: int) -> Story:
    yield from _healthy(x, tp)
    ld = _ready(x, tp)
    fx = x.followers(tp, ld)[0]
    x.cut(ld, fx)
    if x.lag_ms > 5000 or x.rng.random() < 0.5:  # out of the ISR at once, back cut off from the leader
        x.log(f"unclean {tp}: cut {fx} from leader {ld}, restart it")
        x.take_down(fx, end, controlled=True)
    else:
        x.log(f"unclean {tp}: cut {fx} from leader {ld}")
    yield Until(lambda: fx not in x.isr(tp), x.lag_ms * 2 + 5000)
    yield x.rng.randint(200, 2000)
    isr = [r for r in x.isr(tp) if r != fx and x.c.running(r)]
    for r in isr:
        x.c.crash(r)
    x.log(f"unclean: crash the ISR {isr}")
    yield x.rng.randint(10000, 14000)
    for r in isr:
        x.c.start_broker(r)
    x.unblock((ld, fx), (fx, ld))
    x.log(f"unclean: restart {isr}, reconnect {fx}")


@dataclass(frozen=True)
class Kind:
    """A story and when the random mix may draw it."""

    play: Callable[[Ctx, TopicPartition, int], Story]
    weight: float  # calibrated: each safeguard switched off is caught in >= 10% of seeds
    needs_ms: int  # about how long it takes to reach its trigger
    lossy: bool = False  # power or disk loss: not with automatic unclean recovery
    min_isr: int = 1  # only bites with min.insync.replicas >= this
    unsynced: bool = False  # only bites if the flush policy ever leaves data unsynced

    def fits(self, cfg: dict[str, object], time_left_ms: int) -> bool:
        return (time_left_ms >= self.needs_ms and (cfg["recovery"] == "manual" or not self.lossy)
                and cfg["min_isr"] >= self.min_isr and (cfg["flush_interval_ms"] != 0 or not self.unsynced))  # type: ignore[operator]


# Weights and the stories' share of the fault moves were calibrated again on the
# controller quorum (its failovers delay stories): over seeds 0-999 each safeguard is
# caught about as often as on the single controller before (docs/broker-replication.md).
STORIES: dict[str, Kind] = {
    "last-replica-standing": Kind(last_replica_standing, 3.3, 10000, lossy=True, unsynced=True),
    "leader-flap": Kind(leader_flap, 1.0, 5000),
    "restart-then-kill": Kind(restart_then_kill, 0.5, 5000),
    "wipe-during-expansion": Kind(wipe_during_expansion, 2.5, 12000, lossy=True),
    "held-alter-partition": Kind(held_alter_partition, 4.8, 14000),
    "stale-hwm-leader": Kind(stale_hwm_leader, 7.5, 18000, min_isr=2),
    "unclean-candidates": Kind(unclean_candidates, 2.0, 14000),
}
LOSSY = frozenset(n for n, k in STORIES.items() if k.lossy)


class StoryMix:
    """The stories' share of a random run's fault moves. `offer()` is called at each fault
    move: while a story plays it returns True (the move is skipped: generic faults would
    undo the story's cuts); otherwise, with probability `share`, it starts a story that
    fits the run's configuration and the time left, and returns whether it did. `forced`
    stories are played from the first move on, whatever the configuration."""

    def __init__(self, c: SimCluster, rng: random.Random, tps: list[TopicPartition], end: int, cfg: dict[str, object],
                 log: Callable[[str], None], forced: tuple[str, ...] | None, share: float = 0.85) -> None:
        self.c, self.rng, self.tps, self.end, self.cfg = c, rng, tps, end, cfg
        self.ctx = Ctx(c, rng, log, Holds(c), cfg["lag_ms"])  # type: ignore[arg-type]
        self.forced, self.share, self.busy, self.played = forced, share, False, 0

    def offer(self) -> bool:
        if self.busy:
            return True
        left = self.end - self.c.now
        if self.forced:
            pool = [n for n in self.forced if self.played == 0 or left >= STORIES[n].needs_ms]
        else:
            pool = [n for n, k in STORIES.items() if k.fits(self.cfg, left)]
        if not pool or not (self.forced and self.played == 0) and self.rng.random() >= self.share:
            return False
        name = self.rng.choices(pool, [STORIES[n].weight for n in pool])[0]
        tp = self.rng.choice(self.tps)
        self.busy, self.played = True, self.played + 1
        play(self.c, STORIES[name].play(self.ctx, tp, self.end), self.end, self._done)
        return True

    def _done(self) -> None:
        self.busy = False
