"""The simulated network: per-link delay, drop, partition (one-way grudges) and reorder.

`slow` adds a one-way delay to a link. `data_blocked` holds one-way links
that lose data-plane messages only (brokers' replication, clients), for the fault
stories aimed at replication: on a combined node its controller's traffic still flows.
`controller_cut` holds brokers whose
controller-plane traffic (to and from the controllers) is dropped while the rest flows,
as a firewall rule on the controller listener's port would (`SimCluster` applies it).
Delivery is decided per pair of nodes, FIFO by default (as a TCP connection is); with
`reorder_probability` a message may overtake the ones sent before it to the same node.
A dropped message models a broken connection: senders recover through their request
timeouts. Which connection a message travels on is the routers' (broker/io/router.py)
and the simulated links' (broker/sim/links.py) business.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

Node = int | str


@dataclass
class NetworkSettings:
    min_delay_ms: int = 1
    max_delay_ms: int = 5
    drop_probability: float = 0.0
    reorder_probability: float = 0.0


@dataclass
class SimNetwork:
    rng: random.Random
    settings: NetworkSettings = field(default_factory=NetworkSettings)
    blocked: set[tuple[Node, Node]] = field(default_factory=set)
    slow: dict[tuple[Node, Node], int] = field(default_factory=dict)  # extra one-way delay (ms)
    data_blocked: set[tuple[Node, Node]] = field(default_factory=set)  # data plane only
    controller_cut: set[Node] = field(default_factory=set)  # brokers cut from every controller
    _last_delivery: dict[tuple[Node, Node], int] = field(default_factory=dict)

    def delivery_time(self, src: Node, dst: Node, now: int) -> int | None:
        """When a message sent now from src arrives at dst, or None if it is lost."""
        if (src, dst) in self.blocked:
            return None
        s = self.settings
        if s.drop_probability and self.rng.random() < s.drop_probability:
            return None
        t = now + self.rng.randint(s.min_delay_ms, s.max_delay_ms) + self.slow.get((src, dst), 0)
        if not (s.reorder_probability and self.rng.random() < s.reorder_probability):
            t = max(t, self._last_delivery.get((src, dst), 0))
        self._last_delivery[(src, dst)] = max(t, self._last_delivery.get((src, dst), 0))
        return t

    def isolate(self, node: Node, others: list[Node]) -> None:
        """Cut `node` off from `others`, both ways."""
        for o in others:
            if o != node:
                self.blocked.add((node, o))
                self.blocked.add((o, node))

    def cut(self, a: Node, b: Node) -> None:
        self.blocked.add((a, b))
        self.blocked.add((b, a))

    def cut_data(self, a: Node, b: Node) -> None:
        self.data_blocked.add((a, b))
        self.data_blocked.add((b, a))

    def heal(self) -> None:
        self.blocked.clear()
        self.data_blocked.clear()
        self.slow.clear()
        self.controller_cut.clear()
