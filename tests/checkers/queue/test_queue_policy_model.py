"""The named policies against a model of Kafka replication: what each loss can show.

`Replicated` is one partition with a leader and followers: the leader appends, followers
copy a prefix of its log, the high watermark (HWM) is the shortest follower log, and
consumers only read below the HWM. Faults:

- failover: a follower (every follower is in the ISR) becomes leader; the others truncate to
  its log. Everything below the old HWM survives;
- power loss of every replica at once: the log keeps a random durable prefix, which may cut
  below the HWM; a consumer positioned beyond the new end is rewound (OFFSET_OUT_OF_RANGE to
  the earliest offset, or KIP-320 truncation detection to the new end), also in the middle
  of a poll (a client's poll returns the records of several fetches).

Random schedules (hypothesis) of sends, replication, polls and faults, then a final read
by a fresh consumer, must give: acks=all without power loss, no anomaly (`strict`); acks=1,
only types of `acks1`; power loss, only types of `power-loss-unflushed`. Hand-written
schedules show that each policy needs what it allows.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from queue_testlib import H, judged

from checkers.queue import POLICIES, check

K = "k"


@dataclass
class Replicated:
    """One partition's replicas and clients, recording a history (see the module docstring)."""

    acks_all: bool
    followers: int = 2
    rng: random.Random = field(default_factory=lambda: random.Random(0))
    h: H = field(default_factory=H)

    def __post_init__(self) -> None:
        self.log: list[int] = []  # the leader's log: offset -> value
        self.fol = [0] * self.followers  # each follower's log end (a prefix of the leader's)
        self.hwm = 0
        self.next_value = 1
        self.pos: dict[int, int] = {}  # consumer process -> position

    def _advance_hwm(self) -> None:
        self.hwm = max(self.hwm, min(self.fol + [len(self.log)]))

    def replicate(self, i: int) -> None:
        self.fol[i % self.followers] = len(self.log)
        self._advance_hwm()

    def send(self, p: int) -> None:
        v = self.next_value
        self.next_value += 1
        self.log.append(v)
        o = len(self.log) - 1
        if self.acks_all:  # acknowledged once every in-sync replica has it
            for i in range(self.followers):
                self.replicate(i)
        self.h.send(p, K, v, o)

    def _fetch(self, c: int) -> list[list[int]]:
        if c not in self.pos:
            self.h.assign(c, [K])
            self.pos[c] = 0
        recs = [[o, self.log[o]] for o in range(self.pos[c], self.hwm)]
        if recs:
            self.pos[c] = recs[-1][0] + 1
        return recs

    def poll(self, c: int) -> None:
        recs = self._fetch(c)
        self.h.poll(c, {K: recs} if recs else {})

    def poll_across_power_loss(self, c: int, keep: float) -> None:
        """One poll whose fetches straddle a power loss (the nemesis event lands inside it)."""
        recs = self._fetch(c)
        self.power_loss(keep)
        recs += self._fetch(c)
        self.h.poll(c, {K: recs} if recs else {})

    def failover(self, i: int) -> None:
        """Follower i becomes leader (unclean elections are off: it is in the ISR)."""
        i %= self.followers
        self.log = self.log[: self.fol[i]]
        self.fol[i] = len(self.log)  # the old leader truncates to it and follows
        self.fol = [min(f, len(self.log)) for f in self.fol]
        self.h.nemesis("kill", {"nodes": ["leader"]})

    def power_loss(self, keep: float) -> None:
        """Every replica loses what it had not synced: a durable prefix survives."""
        end = int(len(self.log) * keep)
        self.log = self.log[:end]
        self.fol = [min(f, end) for f in self.fol]
        self.hwm = min(self.hwm, end)
        for c, p in self.pos.items():
            if p > end:  # out of range (reset to the earliest offset) or truncation detected
                self.pos[c] = self.rng.choice((0, end))
        self.h.nemesis("power-loss", {"nodes": "all"})

    def final_read(self, c: int) -> None:
        for i in range(self.followers):
            self.replicate(i)
        self.poll(c)


STEP = st.one_of(
    st.tuples(st.just("send"), st.integers(0, 2)),
    st.tuples(st.just("replicate"), st.integers(0, 1)),
    st.tuples(st.just("poll"), st.integers(10, 12)),
    st.tuples(st.just("failover"), st.integers(0, 1)),
)


def run(m: Replicated, steps: list[tuple[Any, ...]]) -> dict[str, Any]:
    for step in steps:
        getattr(m, step[0].replace("-", "_"))(*step[1:])
    m.final_read(99)
    return check(m.h.events)


@settings(max_examples=300, deadline=None)
@given(st.lists(STEP, max_size=60))
def test_acks_all_failovers_show_nothing(steps):
    r = run(Replicated(acks_all=True), steps)
    assert r["anomaly_types"] == [], r["anomalies"]


@settings(max_examples=300, deadline=None)
@given(st.lists(STEP, max_size=60))
def test_acks1_failovers_show_only_the_acks1_types(steps):
    r = run(Replicated(acks_all=False), steps)
    assert set(r["anomaly_types"]) <= POLICIES["acks1"], r["anomalies"]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(STEP, st.tuples(st.just("power-loss"), st.floats(0, 1)),
                          st.tuples(st.just("poll-across-power-loss"), st.integers(10, 12), st.floats(0, 1))),
                max_size=60),
       st.booleans(), st.integers(0, 2**16))
def test_power_loss_shows_only_the_unflushed_types(steps, acks_all, seed):
    r = run(Replicated(acks_all=acks_all, rng=random.Random(seed)), steps)
    assert set(r["anomaly_types"]) <= POLICIES["power-loss-unflushed"], r["anomalies"]


def test_acks1_truncation_needs_every_send_side_type():
    m = Replicated(acks_all=False)
    m.send(0)
    m.replicate(0)
    m.replicate(1)  # offset 0 committed
    m.send(0)
    m.send(1)  # offsets 1 and 2 acknowledged by the leader alone
    m.failover(0)  # lost
    m.send(0)
    m.send(1)  # offsets 1 and 2 again, other values
    r = run(m, [])
    assert set(r["anomaly_types"]) == {"lost-write", "inconsistent-offsets", "nonmonotonic-send"}
    assert set(r["anomaly_types"]) <= POLICIES["acks1"]
    assert judged(m.h.events, policies=["acks1"])["valid"] is True
    assert check(m.h.events)["valid"] is False  # strict


def test_power_loss_rewinds_a_consumer_which_acks1_does_not_explain():
    m = Replicated(acks_all=True, rng=random.Random(1))
    for _ in range(4):
        m.send(0)
    m.poll(10)  # read 0..3, all committed
    m.power_loss(0.5)  # every replica keeps 0..1: the consumer (at 4) is rewound
    m.send(1)
    m.poll(10)
    r = run(m, [])
    assert "nonmonotonic-poll" in r["anomaly_types"]
    assert judged(m.h.events, policies=["acks1"])["valid"] is False
    assert judged(m.h.events, policies=["power-loss-unflushed"])["valid"] is True


def test_a_rewind_inside_one_poll_is_int_nonmonotonic():
    m = Replicated(acks_all=True, rng=random.Random(3))
    for _ in range(4):
        m.send(0)
    m.poll(10)
    m.send(0)
    m.poll_across_power_loss(10, 0.5)  # reads offset 4, then is rewound within the same poll
    r = run(m, [])
    assert "int-nonmonotonic-poll" in r["anomaly_types"]
    assert judged(m.h.events, policies=["power-loss-unflushed"])["valid"] is True
    assert judged(m.h.events, policies=["acks1"])["valid"] is False
