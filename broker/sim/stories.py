"""The fault stories of the random runs: the bug triggers (broker/triggers), drawn into a
run's fault moves and played by the simulation driver (broker/sim/driver.py) on a random
partition, whoever holds its roles at the time.

`STORIES` maps each trigger's name to its place in the mix (`Kind`: weight, the time it
needs); it also answers for the triggers' old names (`ALIASES`: `"lrs" in STORIES`,
`STORIES["lrs"]`), iterating over the current ones only. `LOSSY`: the stories, and their old
names, that lose a replica's data (power loss, wipe). `StoryMix` draws them.

Stories (the safeguard each is aimed at; the steps are in broker/triggers/catalog.py):
`last-replica-standing` (elr), `hw-truncation` (epoch-truncation), `stale-hwm-leader`
(leso-check), `wipe-during-expansion` (broker-epoch-check), `stale-alter-partition`
(partition-epoch-check), `leader-churn` (epoch-truncation), `unclean-candidates`
(clean-election-only); `lagging-follower-in-isr` (none: a shape for bugs nobody planted,
never drawn at random).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass

from broker.core.messages import TopicPartition
from broker.sim.cluster import SimCluster
from broker.sim.driver import MessageFilters, TriggerPlay, run
from broker.triggers import ALIASES, TRIGGERS, Trigger


@dataclass(frozen=True)
class Kind:
    """A trigger's place in the random mix."""

    trigger: Trigger
    weight: float  # calibrated: each safeguard switched off is caught in >= 10% of seeds
    needs_ms: int  # about how long it takes to reach its trigger
    max_lag_ms: int | None = None  # it waits for a lagging follower to leave the ISR: not with a longer lag time

    @property
    def lossy(self) -> bool:  # power or disk loss: not with automatic unclean recovery
        return self.trigger.lossy

    def fits(self, cfg: dict[str, object], time_left_ms: int) -> bool:
        t = self.trigger
        return (time_left_ms >= self.needs_ms and (cfg["recovery"] == "manual" or not t.lossy)
                and cfg["min_isr"] >= t.min_isr and (cfg["flush_interval_ms"] != 0 or not t.unsynced)  # type: ignore[operator]
                and (self.max_lag_ms is None or cfg["lag_ms"] <= self.max_lag_ms))  # type: ignore[operator]


class _Stories(dict[str, Kind]):
    """Story name -> Kind; lookups accept the old names too (`ALIASES`)."""

    def __contains__(self, name: object) -> bool:
        return super().__contains__(ALIASES.get(name, name) if isinstance(name, str) else name)

    def __getitem__(self, name: str) -> Kind:
        return super().__getitem__(ALIASES.get(name, name))


def _kind(name: str, weight: float, needs_ms: int, max_lag_ms: int | None = None) -> tuple[str, Kind]:
    return name, Kind(TRIGGERS[name], weight, needs_ms, max_lag_ms)


# Weights and the stories' share of the fault moves were calibrated on the controller quorum
# (its failovers delay stories): each safeguard is caught about as often as before the
# triggers were shared with the real-node stories (docs/broker-replication.md).
STORIES = _Stories([
    _kind("last-replica-standing", 5.5, 12000),
    _kind("hw-truncation", 1.5, 6000),
    _kind("stale-hwm-leader", 8.5, 16000),
    _kind("wipe-during-expansion", 3.5, 14000),
    _kind("stale-alter-partition", 16.0, 20000, max_lag_ms=5000),
    _kind("leader-churn", 4.5, 8000),
    _kind("unclean-candidates", 3.0, 15000),
    # never drawn (weight 0, last: the draws of the others are as before): no safeguard brings
    # its bug back, and the random runs' own faults already reach premature ISR expansions;
    # `--story lagging-follower-in-isr` and trigger_scenario play it
    _kind("lagging-follower-in-isr", 0.0, 12000),
])
LOSSY = frozenset(n for n, k in STORIES.items() if k.lossy) | {a for a, n in ALIASES.items() if STORIES[n].lossy}


class StoryMix:
    """The stories' share of a random run's fault moves. `offer()` is called at each fault
    move: while a story plays it returns True (the move is skipped: generic faults would
    undo the story's cuts); otherwise, with probability `share`, it starts a story that
    fits the run's configuration and the time left, and returns whether it did. `forced`
    stories (names or old names) are played from the first move on, whatever the
    configuration."""

    def __init__(self, c: SimCluster, rng: random.Random, tps: list[TopicPartition], end: int, cfg: dict[str, object],
                 log: Callable[[str], None], forced: tuple[str, ...] | None, share: float = 0.85) -> None:
        self.c, self.rng, self.tps, self.end, self.cfg, self.log = c, rng, tps, end, cfg, log
        self.filters = MessageFilters(c)
        c.at(end, self.filters.release_all)  # a story cut short by the window's end holds nothing after it
        self.forced = tuple(ALIASES.get(n, n) for n in forced) if forced else None
        self.share, self.busy, self.played = share, False, 0

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
        # a forced story is played whatever its weight (one never drawn at random has 0)
        name = self.rng.choices(pool, [STORIES[n].weight or (1.0 if self.forced else 0.0) for n in pool])[0]
        tp = self.rng.choice(self.tps)
        self.busy, self.played = True, self.played + 1
        play = TriggerPlay(self.c, tp, STORIES[name].trigger, self.rng, self.log, self.filters)
        run(self.c, play.steps(), self.end, self._done)
        return True

    def _done(self) -> None:
        """A story ended: a fault move follows soon (the moves skipped while it played)."""
        self.busy = False
        self.c.at(self.c.now + self.rng.randint(200, 2000), self._next)

    def _next(self) -> None:
        if self.c.now < self.end and not self.busy:
            self.offer()
