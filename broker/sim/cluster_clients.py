"""What tests and schedules ask of a `SimCluster`: clients and admin requests, and
inspection of the cluster's state. A mixin of `SimCluster` (broker/sim/cluster.py): it
uses the cluster's clock, event queue, network and nodes."""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

from broker.core.controller import Controller
from broker.core.messages import NO_LEADER, CreateTopicRequest, CreateTopicResponse, TopicPartition
from broker.sim.batches import decode_values
from broker.sim.clients import Ack, SimConsumer, SimProducer, SimRecorder
from broker.sim.invariants import Oracle
from broker.sim.memlog import InMemoryPartitionLog
from broker.sim.node import SimNode

ADMIN = "admin"


class ClusterClients:
    """Clients, admin and inspection of `SimCluster` (see the module docstring)."""

    now: int
    rng: random.Random
    brokers: dict[int, SimNode]
    clients: dict[str, SimProducer | SimConsumer | SimRecorder]
    admin_responses: list[object]
    acks: list[Ack]
    oracle: Oracle

    def _push(self, t: int, kind: str, *args: object) -> None: ...

    def send(self, src: int | str, to: int | str, msg: object, data: bool = True, **kw: Any) -> None: ...

    def run_until(self, t: int, stop: Callable[[], bool] | None = None) -> None: ...

    def run_until_true(self, pred: Callable[[], bool], timeout_ms: int = 60000) -> bool: ...

    def run_for(self, ms: int) -> None: ...

    def active_controller_id(self) -> int | None: ...

    def running(self, i: int) -> bool: ...

    @property
    def controller(self) -> Controller | None: ...

    # ------------------------------------------------------------ clients and admin
    def create_topic(
        self, name: str, partitions: int, rf: int, configs: dict[str, str] | None = None
    ) -> CreateTopicResponse:
        """Create a topic through the active controller (asking again, up to 30 s, while
        there is none or it does not answer) and wait until every replica knows it."""

        first = len(self.admin_responses)

        def answer() -> CreateTopicResponse | None:
            new = self.admin_responses[first:]
            return next((r for r in new if isinstance(r, CreateTopicResponse) and r.name == name), None)

        deadline = self.now + 30000
        while answer() is None and self.now < deadline:
            ctl = self.active_controller_id()
            if ctl is None:
                self.run_until_true(
                    lambda: self.active_controller_id() is not None, min(1000, deadline - self.now)
                )
                continue
            req = CreateTopicRequest(
                len(self.admin_responses) + 1, name, partitions, rf, tuple((configs or {}).items())
            )
            self.send(ADMIN, ctl, req)
            self.run_until(min(deadline, self.now + 5000), stop=lambda: answer() is not None)
        resp = answer()
        if resp is None:
            raise TimeoutError(f"topic {name}: no answer from a controller within 30 s")
        self.run_for(1000)
        return resp

    def producer(self, name: str = "p0", max_in_flight: int = 3) -> SimProducer:
        if name not in self.clients:
            self.clients[name] = SimProducer(
                name, sorted(self.brokers), random.Random(self.rng.random()), self._on_ack, max_in_flight
            )
        return self.clients[name]

    def consumer(self, tp: TopicPartition, name: str = "c0") -> SimConsumer:
        """A consumer of `tp` that polls on its own from now on (see SimConsumer)."""
        if name not in self.clients:
            self.clients[name] = SimConsumer(name, tp, sorted(self.brokers), random.Random(self.rng.random()))
            self._poll_consumer(name)
        return self.clients[name]  # type: ignore[return-value]

    def recorder(self, name: str) -> SimRecorder:
        """A hand-driven client (see SimRecorder); send with `send(name, to, message)`."""
        if name not in self.clients:
            self.clients[name] = SimRecorder(name)
        return self.clients[name]  # type: ignore[return-value]

    def _poll_consumer(self, name: str) -> None:
        c = self.clients[name]
        assert isinstance(c, SimConsumer)
        for s in c.poll(self.now):
            self.send(name, s.to, s.message)
        self._push(self.now + 100, "call", lambda: self._poll_consumer(name))

    def _on_ack(self, ack: Ack) -> None:
        self.acks.append(ack)
        self.oracle.on_ack(ack, self.now)

    def produce(
        self, tp: TopicPartition, acks: int = -1, client: str = "p0", value: bytes | None = None
    ) -> None:
        p = self.producer(client)
        for s in p.produce(tp, acks, self.now, value):
            self.send(client, s.to, s.message)

    def produce_async(self, tp: TopicPartition, value: bytes, acks: int = -1) -> bool:
        """Send `value` once to the leader (looking it up first); False if none found."""
        p = self.producer("async", max_in_flight=1000)
        if p.leaders.get(tp, NO_LEADER) == NO_LEADER:
            for s in p.refresh_metadata(self.now, force=True):
                self.send("async", s.to, s.message)
            if not self.run_until_true(lambda: p.leaders.get(tp, NO_LEADER) != NO_LEADER, 2000):
                return False
        for s in p.produce(tp, acks, self.now, value):
            self.send("async", s.to, s.message)
        return True

    def produce_and_wait(
        self, tp: TopicPartition, value: bytes, acks: int = -1, timeout_ms: int = 15000
    ) -> Ack | None:
        """Produce `value` (retrying on metadata refresh) until acked or `timeout_ms`."""
        deadline = self.now + timeout_ms
        p = self.producer("sync", max_in_flight=1)
        while self.now < deadline:
            for s in p.expire(self.now):
                self.send("sync", s.to, s.message)
            if not any(o.value == value for o in p.outstanding.values()):
                for s in p.produce(tp, acks, self.now, value):
                    self.send("sync", s.to, s.message)
            self.run_until(
                min(deadline, self.now + 200), stop=lambda: any(a.value == value for a in self.acks)
            )
            for a in self.acks:
                if a.value == value:
                    return a
        return None

    # ------------------------------------------------------------ inspection
    def leader(self, tp: TopicPartition) -> int:
        """The leader of `tp` in the active controller's image (NO_LEADER with none)."""
        ctl = self.controller
        reg = ctl.image.partitions.get(tp) if ctl is not None else None
        return NO_LEADER if reg is None else reg.leader

    def registration(self, tp: TopicPartition):  # noqa: ANN201 - PartitionRegistration
        assert self.controller is not None
        return self.controller.image.partitions[tp]

    def leader_log(self, tp: TopicPartition) -> InMemoryPartitionLog | None:
        """The log of the controller's current leader of `tp`, if it is running."""
        leader = self.leader(tp)
        if leader == NO_LEADER or not self.running(leader):
            return None
        return self.brokers[leader].disk.logs.get(tp)

    def values(self, i: int, tp: TopicPartition) -> list[bytes]:
        """The record values in broker i's log (whole log, for scenario assertions)."""
        log = self.brokers[i].disk.logs.get(tp)
        return [v for b in (log.batches() if log else []) for v in decode_values(b.data)]

    def hwm(self, i: int, tp: TopicPartition) -> int:
        n = self.brokers[i]
        r = n.broker.partitions.get(tp) if n.broker is not None else None
        return -1 if r is None else r.high_watermark
