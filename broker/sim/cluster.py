"""A simulated cluster: one controller and N brokers from broker/core on a virtual clock.

Everything happens through one event queue ordered by (time, sequence number): message
deliveries, timer ticks of each state machine, background disk flushes, and the calls
that scenarios and the random schedule put in (faults, produce requests). The only
randomness is `self.rng`, seeded; the same seed and the same calls replay exactly.
"""

from __future__ import annotations

import heapq
import random
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from broker.core import safeguards as sg
from broker.core.broker import Broker, BrokerConfig
from broker.core.controller import Controller, ControllerConfig, LocalMetadataQuorum
from broker.core.messages import (
    NO_LEADER,
    Actions,
    CheckpointHighWatermarks,
    CreateTopicRequest,
    CreateTopicResponse,
    ShutdownComplete,
    TopicPartition,
)
from broker.core.metadata import MetadataLog
from broker.sim.clients import Ack, SimConsumer, SimProducer, SimRecorder
from broker.sim.disk import SimDisk
from broker.sim.invariants import Oracle
from broker.sim.memlog import InMemoryPartitionLog
from broker.sim.network import NetworkSettings, SimNetwork

CONTROLLER = 0
ADMIN = "admin"


@dataclass
class ClusterSettings:
    brokers: int = 3
    broker: BrokerConfig = field(default_factory=lambda: BrokerConfig(node_id=-1))
    controller: ControllerConfig = field(default_factory=ControllerConfig)
    network: NetworkSettings = field(default_factory=NetworkSettings)
    flush_interval_ms: int | None = 1000  # background writeback; None: never, 0: every append
    check_invariants: bool = True


@dataclass
class SimNode:
    id: int
    disk: SimDisk = field(default_factory=SimDisk)
    broker: Broker | None = None
    incarnation: int = 0
    tick_token: int = 0
    tick_at: int | None = None


class SimCluster:
    def __init__(self, seed: int, settings: ClusterSettings | None = None) -> None:
        self.seed = seed
        self.settings = s = settings or ClusterSettings()
        self.rng = random.Random(seed)
        self.now = 0
        self.net = SimNetwork(random.Random(self.rng.random()), s.network)
        self._queue: list[tuple[int, int, str, object, object, object, object]] = []
        self._seq = 0
        self.metadata_log = MetadataLog()
        self.controller: Controller | None = None
        self._controller_incarnation = 0
        self._controller_tick: tuple[int, int | None] = (0, None)
        self.brokers = {i: SimNode(i) for i in range(1, s.brokers + 1)}
        self.oracle = Oracle()
        self.acks: list[Ack] = []
        self.clients: dict[str, SimProducer | SimConsumer | SimRecorder] = {}
        self.admin_responses: list[object] = []
        self.steps = 0
        # scenarios may hold back chosen messages: extra_delay(src, to, msg) -> ms
        self.extra_delay: Callable[[int | str, int | str, object], int] | None = None
        self.start_controller()
        for i in self.brokers:
            self.start_broker(i)

    # ------------------------------------------------------------ queue
    def _push(self, t: int, kind: str, a: object = None, b: object = None, c: object = None, d: object = None) -> None:
        self._seq += 1
        heapq.heappush(self._queue, (t, self._seq, kind, a, b, c, d))

    def at(self, t: int, fn: Callable[[], None]) -> None:
        """Run `fn` at virtual time `t` (ms)."""
        self._push(max(t, self.now), "call", fn)

    def probe(self, t: int, fn: Callable[[], bool]) -> None:
        """Run `fn` at virtual time `t`; the invariants are checked after it only if it
        returns True (it acted). For polls that mostly look and do nothing."""
        self._push(max(t, self.now), "probe", fn)

    def run_until(self, t: int, stop: Callable[[], bool] | None = None) -> None:
        while self._queue and self._queue[0][0] <= t:
            if stop is not None and stop():
                return
            self.step()
        self.now = max(self.now, t)

    def run_until_true(self, pred: Callable[[], bool], timeout_ms: int = 60000) -> bool:
        """Step until `pred()` holds (checked before every step); False on timeout."""
        self.run_until(self.now + timeout_ms, stop=pred)
        return pred()

    def run_for(self, ms: int) -> None:
        self.run_until(self.now + ms)

    def step(self) -> None:
        t, _, kind, a, b, c, d = heapq.heappop(self._queue)
        self.now = t
        self.steps += 1
        if kind == "msg":
            self._deliver(a, b, c, d)  # type: ignore[arg-type]
        elif kind == "tick":
            self._tick(a, b)  # type: ignore[arg-type]
        elif kind == "call":
            a()  # type: ignore[operator]
        elif kind == "probe" and not a():  # type: ignore[operator]
            return
        elif kind == "flush":
            n = self.brokers[a]  # type: ignore[index]
            if n.incarnation == b and self.settings.flush_interval_ms:
                n.disk.flush_all()
                self._push(t + self.settings.flush_interval_ms, "flush", a, b)
        if self.settings.check_invariants:
            self.oracle.check(self, t)

    # ------------------------------------------------------------ delivery and actions
    def _incarnation(self, node: int | str) -> int:
        if node == CONTROLLER:
            return self._controller_incarnation
        if isinstance(node, int) and node in self.brokers:
            return self.brokers[node].incarnation
        return 0

    def send(self, src: int | str, to: int | str, msg: object) -> None:
        # the admin client talks to the controller over a reliable side channel
        t = self.now + 1 if ADMIN in (src, to) else self.net.delivery_time(src, to, self.now)
        if t is not None and self.extra_delay is not None:
            t += self.extra_delay(src, to, msg)
        if t is not None:
            self._push(t, "msg", to, src, msg, self._incarnation(to))

    def _deliver(self, to: int | str, src: int | str, msg: object, incarnation: int) -> None:
        if self._incarnation(to) != incarnation:
            return  # the connection died with the process it was addressed to
        if to == CONTROLLER:
            if self.controller is not None:
                self._apply(CONTROLLER, self.controller.handle(src, msg, self.now))
        elif isinstance(to, int):
            n = self.brokers.get(to)
            if n is not None and n.broker is not None:
                self._apply(to, n.broker.handle(src, msg, self.now))
        elif to == ADMIN:
            self.admin_responses.append(msg)
        elif to in self.clients:
            for s in self.clients[to].handle(msg, self.now):
                self.send(to, s.to, s.message)

    def _apply(self, node: int, acts: Actions) -> None:
        for s in acts.sends:
            self.send(node, s.to, s.message)
        for o in acts.other:
            n = self.brokers.get(node)
            if n is None:
                continue
            if isinstance(o, CheckpointHighWatermarks):
                n.disk.hwm_checkpoint = dict(o.high_watermarks)
            elif isinstance(o, ShutdownComplete):
                n.disk.flush_all()
                n.disk.clean_shutdown_epoch = o.broker_epoch
                self._stop(n)
        if node != CONTROLLER and self.settings.flush_interval_ms == 0 and node in self.brokers:
            self.brokers[node].disk.flush_all()
        self._schedule(node)

    def _schedule(self, node: int) -> None:
        if node == CONTROLLER:
            if self.controller is None:
                return
            d = self.controller.next_deadline()
            token, at = self._controller_tick
            if d is not None and (at is None or d < at):
                self._controller_tick = (token + 1, max(d, self.now))
                self._push(max(d, self.now), "tick", CONTROLLER, token + 1)
            return
        n = self.brokers[node]
        if n.broker is None:
            return
        d = n.broker.next_deadline()
        if d is not None and (n.tick_at is None or d < n.tick_at):
            n.tick_token += 1
            n.tick_at = max(d, self.now)
            self._push(n.tick_at, "tick", node, n.tick_token)

    def _tick(self, node: int, token: int) -> None:
        if node == CONTROLLER:
            if self.controller is None or self._controller_tick[0] != token:
                return
            self._controller_tick = (token, None)
            acts = self.controller.tick(self.now)
        else:
            n = self.brokers[node]
            if n.broker is None or n.tick_token != token:
                return
            n.tick_at = None
            acts = n.broker.tick(self.now)
        self._apply(node, acts)
        self._bump_if_stuck(node)

    def _bump_if_stuck(self, node: int) -> None:
        """A deadline that stays at `now` after a tick would spin: retry 1 ms later."""
        if node == CONTROLLER:
            token, at = self._controller_tick
            if at is not None and at <= self.now:
                self._controller_tick = (token + 1, self.now + 1)
                self._push(self.now + 1, "tick", CONTROLLER, token + 1)
            return
        n = self.brokers[node]
        if n.tick_at is not None and n.tick_at <= self.now:
            n.tick_token += 1
            n.tick_at = self.now + 1
            self._push(n.tick_at, "tick", node, n.tick_token)

    # ------------------------------------------------------------ processes
    def start_controller(self) -> None:
        self._controller_incarnation += 1
        self.controller = Controller(self.settings.controller, LocalMetadataQuorum(self.metadata_log))
        self.controller.start(self.now)
        self._controller_tick = (self._controller_tick[0] + 1, None)
        self._schedule(CONTROLLER)

    def crash_controller(self) -> None:
        self.controller = None
        self._controller_incarnation += 1

    def start_broker(self, i: int) -> None:
        n = self.brokers[i]
        if n.broker is not None:
            return
        n.incarnation += 1
        cfg = replace(self.settings.broker, node_id=i, controller_id=CONTROLLER)
        n.broker = Broker(cfg, n.disk.log, f"{i}-{n.incarnation}", n.disk.take_clean_shutdown_epoch(), n.disk.hwm_checkpoint)
        n.tick_at = None
        self._apply(i, n.broker.start(self.now))
        if self.settings.flush_interval_ms:
            self._push(self.now + self.rng.randint(1, self.settings.flush_interval_ms), "flush", i, n.incarnation)

    def _stop(self, n: SimNode) -> None:
        n.broker = None
        n.incarnation += 1
        n.tick_at = None

    def crash(self, i: int) -> None:
        """kill -9: the process dies, the page cache (and so the whole log) survives. The
        host is up, so its kernel resets the peers' connections: they learn it at once
        (`Broker.connection_lost`); after a power loss they only time out."""
        self._stop(self.brokers[i])
        for j, n in self.brokers.items():
            if j != i and n.broker is not None and (i, j) not in self.net.blocked:
                self._push(self.now + self.net.settings.min_delay_ms, "call", lambda j=j, inc=n.incarnation: self._reset(j, inc, i))

    def _reset(self, j: int, incarnation: int, peer: int) -> None:
        n = self.brokers[j]
        if n.broker is not None and n.incarnation == incarnation:
            self._apply(j, n.broker.connection_lost(peer, self.now))

    def power_loss(self, i: int) -> None:
        """The machine loses power: the process dies and unsynced data is lost."""
        n = self.brokers[i]
        self._stop(n)
        n.disk.power_loss()

    def wipe(self, i: int) -> None:
        """The machine loses power and its disk: it comes back (`start_broker`) empty,
        with a new broker epoch and no clean-shutdown file (a lossy unclean shutdown)."""
        n = self.brokers[i]
        self._stop(n)
        n.disk.wipe()

    def controlled_shutdown(self, i: int) -> None:
        n = self.brokers[i]
        if n.broker is not None:
            self._apply(i, n.broker.begin_controlled_shutdown(self.now))

    def running(self, i: int) -> bool:
        return self.brokers[i].broker is not None

    # ------------------------------------------------------------ clients and admin
    def create_topic(self, name: str, partitions: int, rf: int, configs: dict[str, str] | None = None) -> CreateTopicResponse:
        """Create a topic through the controller and wait until every replica knows it."""
        self.send(ADMIN, CONTROLLER, CreateTopicRequest(len(self.admin_responses) + 1, name, partitions, rf, tuple((configs or {}).items())))
        self.run_until(self.now + 10000, stop=lambda: any(isinstance(r, CreateTopicResponse) and r.name == name for r in self.admin_responses))
        resp = next(r for r in self.admin_responses if isinstance(r, CreateTopicResponse) and r.name == name)
        self.run_for(1000)
        return resp

    def producer(self, name: str = "p0", max_in_flight: int = 3) -> SimProducer:
        if name not in self.clients:
            self.clients[name] = SimProducer(name, sorted(self.brokers), random.Random(self.rng.random()), self._on_ack, max_in_flight)
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

    def produce(self, tp: TopicPartition, acks: int = -1, client: str = "p0", value: bytes | None = None) -> None:
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

    def produce_and_wait(self, tp: TopicPartition, value: bytes, acks: int = -1, timeout_ms: int = 15000) -> Ack | None:
        """Produce `value` (retrying on metadata refresh) until acked or `timeout_ms`."""
        deadline = self.now + timeout_ms
        p = self.producer("sync", max_in_flight=1)
        while self.now < deadline:
            for s in p.expire(self.now):
                self.send("sync", s.to, s.message)
            if not any(o.value == value for o in p.outstanding.values()):
                for s in p.produce(tp, acks, self.now, value):
                    self.send("sync", s.to, s.message)
            self.run_until(min(deadline, self.now + 200), stop=lambda: any(a.value == value for a in self.acks))
            for a in self.acks:
                if a.value == value:
                    return a
        return None

    # ------------------------------------------------------------ inspection
    def leader(self, tp: TopicPartition) -> int:
        assert self.controller is not None
        reg = self.controller.image.partitions.get(tp)
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
        from broker.sim.batches import decode_values

        log = self.brokers[i].disk.logs.get(tp)
        return [v for b in (log.batches() if log else []) for v in decode_values(b.data)]

    def hwm(self, i: int, tp: TopicPartition) -> int:
        n = self.brokers[i]
        r = n.broker.partitions.get(tp) if n.broker is not None else None
        return -1 if r is None else r.high_watermark


def safe_settings(**overrides: object) -> ClusterSettings:
    """Kafka defaults with all safeguards on."""
    return ClusterSettings(**overrides)  # type: ignore[arg-type]


def with_safeguards_off(settings: ClusterSettings, off: frozenset[str]) -> ClusterSettings:
    guards = sg.SafeguardSet(off)
    return replace(
        settings,
        broker=replace(settings.broker, safeguards=guards),
        controller=replace(settings.controller, safeguards=guards),
    )
