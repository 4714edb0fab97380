"""A simulated cluster: a controller quorum and N brokers from broker/core on a virtual clock.

Everything happens through one event queue ordered by (time, sequence number): message
deliveries, timer ticks of each state machine, background disk flushes, the brokers'
link checks, and the calls that scenarios and the random schedule put in (faults,
produce requests). The only randomness is `self.rng`, seeded; the same seed and the same
calls replay exactly.

Nodes (`SimNode`): brokers 1..N, and the voters of the controller quorum: dedicated
nodes 100, 101, ... (`CONTROLLER` is the first, and with `controllers=1` the only one),
or with `combined` brokers 1..k that also run a controller (process.roles=broker,
controller: one process, one machine). A voter runs a `QuorumController` over a
`RaftNode`; Raft messages travel between voters through the simulated network (its
partitions, drops and delays apply). Its metadata log is a `SimRaftLog` (a power loss
keeps what was flushed, plus maybe a torn tail; a kill -9 keeps it all) and its quorum
state is always durable (the shell writes it before sending). A disk loss (`wipe`)
takes the partition logs only: the metadata log lives in its own directory.

Each process's messages are routed by its `NodeRouter` (broker/io/router.py), the layer
the real process (broker/server/node.py) runs: which link carries which message, where
the broker's controller requests go (`ControllerTarget`), the quorum's durability before
its sends, what a lost link means. The links are `SimLink`s (broker/sim/links.py): a kill
resets them, the controller link check loses one, a fault (`lose_link`) breaks one.

The replication invariants (`invariants.Oracle`) are checked after every step, the Raft
invariants (`raft_invariants.RaftOracle`) after every call into a voter.
"""

from __future__ import annotations

import heapq
import random
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from broker.core import safeguards as sg
from broker.core.broker import Broker, BrokerConfig
from broker.core.controller import Controller, ControllerConfig
from broker.core.messages import (
    CONTROLLER_BOUND,
    Actions,
    CheckpointHighWatermarks,
    ShutdownComplete,
)
from broker.core.quorum_controller import (
    RAFT_MESSAGES,
    ControllerActivated,
    QuorumController,
)
from broker.core.raft import RaftConfig, RaftNode, Role
from broker.core.raft_messages import VoteResponse
from broker.io import effects as fx
from broker.io.effects import (
    CloseLink,
    Deliver,
    Effect,
    Perform,
    PersistState,
    SyncLog,
    ToClient,
    Transmit,
)
from broker.io.links import CONTROLLER_ROLES, LinkKey
from broker.io.router import NodeRouter
from broker.sim.clients import Ack, SimConsumer, SimProducer, SimRecorder
from broker.sim.cluster_clients import ADMIN, ClusterClients
from broker.sim.invariants import Oracle, Violation
from broker.sim.links import Envelope, SimLink, SimLinks
from broker.sim.network import NetworkSettings, SimNetwork
from broker.sim.node import SimNode
from broker.sim.raft_invariants import RaftOracle

CONTROLLER = 100  # the first dedicated controller (the only one with controllers=1)
LINK_CHECK_MS = 1000
_TO_QUORUM = (*RAFT_MESSAGES, *CONTROLLER_BOUND)


@dataclass
class ClusterSettings:
    brokers: int = 3
    controllers: int = 1  # voters of the controller quorum
    combined: bool = False  # voters are brokers 1..controllers, not dedicated nodes 100..
    broker: BrokerConfig = field(default_factory=lambda: BrokerConfig(node_id=-1))
    controller: ControllerConfig = field(default_factory=ControllerConfig)
    raft: RaftConfig = field(default_factory=RaftConfig)
    network: NetworkSettings = field(default_factory=NetworkSettings)
    flush_interval_ms: int | None = 1000  # background writeback; None: never, 0: every append
    link_timeout_ms: int = 3000  # a broker gives up on a silent controller link (wrack.link.timeout.ms)
    check_invariants: bool = True

    def voter_ids(self) -> tuple[int, ...]:
        if self.combined:
            if not 1 <= self.controllers <= self.brokers:
                raise ValueError(f"combined mode needs 1..{self.brokers} controllers, got {self.controllers}")
            return tuple(range(1, self.controllers + 1))
        if self.controllers < 1:
            raise ValueError(f"a quorum needs a controller, got {self.controllers}")
        return tuple(range(CONTROLLER, CONTROLLER + self.controllers))


class SimCluster(SimLinks, ClusterClients):
    """See the module docstring; clients, admin and inspection: `ClusterClients`."""

    def __init__(self, seed: int, settings: ClusterSettings | None = None) -> None:
        self.seed = seed
        self.settings = s = settings or ClusterSettings()
        self.rng = random.Random(seed)
        self.now = 0
        self.net = SimNetwork(random.Random(self.rng.random()), s.network)
        self._queue: list[tuple[int, int, str, tuple[Any, ...]]] = []
        self._seq = 0
        self.voter_ids = s.voter_ids()
        self.brokers = {i: SimNode(i, is_voter=i in self.voter_ids) for i in range(1, s.brokers + 1)}
        self.nodes: dict[int, SimNode] = dict(self.brokers)
        for v in self.voter_ids:
            self.nodes.setdefault(v, SimNode(v, is_broker=False, is_voter=True))
        self.voters = {v: self.nodes[v] for v in self.voter_ids}
        self.oracle = Oracle()
        self.raft_oracle = RaftOracle()
        self.controllers_seen: list[Controller] = []  # every controller that became active
        self.newest_leader_epoch = -1  # the quorum's newest epoch with a leader
        self.latest_controller: Controller | None = None  # the last to become active (maybe deposed since)
        self._active: tuple[int | None] | None = None  # cache of active_controller_id()
        self.acks: list[Ack] = []
        self.clients: dict[str, SimProducer | SimConsumer | SimRecorder] = {}
        self.admin_responses: list[object] = []
        self.steps = 0
        # scenarios may hold back chosen messages: extra_delay(src, to, msg) -> ms
        self.extra_delay: Callable[[int | str, int | str, object], int] | None = None
        for v in self.voter_ids:
            if v not in self.brokers:
                self.start_broker(v)
        for i in self.brokers:
            self.start_broker(i)

    # ------------------------------------------------------------ queue
    def _push(self, t: int, kind: str, *args: object) -> None:
        self._seq += 1
        heapq.heappush(self._queue, (t, self._seq, kind, args))

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
        t, _, kind, args = heapq.heappop(self._queue)
        self.now = t
        self.steps += 1
        n = None
        if kind in ("msg", "tick", "qtick"):
            n = self.nodes.get(args[0]) if isinstance(args[0], int) else None  # type: ignore[arg-type]
            if n is not None and n.paused:
                n.backlog.append((kind, args))  # a paused process handles it when resumed
                return
        if n is not None and (kind == "qtick" or kind == "msg" and isinstance(args[1].msg, _TO_QUORUM)):  # type: ignore[attr-defined]
            before = self._controller_stamp()  # a controller's step
            self._dispatch(kind, args)
            if self.settings.check_invariants and self._controller_stamp() != before:
                self.oracle.check(self, t)
        elif self._dispatch(kind, args) and self.settings.check_invariants:
            self.oracle.check(self, t)

    def _controller_stamp(self) -> tuple[int, int]:
        """What of the controllers the replication oracle reads: which controller is
        active, and how far its image is. A controller's step that leaves both alone (most
        Raft traffic) cannot break a replication invariant: it changes no broker (a
        combined node's broker at most learns where the active controller is)."""
        ctl = self.controller
        return (0, 0) if ctl is None else (id(ctl), ctl.image.next_offset)

    def _dispatch(self, kind: str, args: tuple[Any, ...]) -> bool:
        """Perform one event; False if it changed nothing worth checking."""
        if kind == "msg":
            self._deliver(*args)
        elif kind == "tick":
            self._tick(*args)
        elif kind == "qtick":
            self._qtick(*args)
        elif kind == "call":
            args[0]()
        elif kind == "probe":
            return bool(args[0]())
        elif kind == "link":
            return self._link_check(*args)
        elif kind == "flush":
            n = self.nodes[args[0]]
            if n.incarnation == args[1] and self.settings.flush_interval_ms:
                n.disk.flush_all()
                self._push(self.now + self.settings.flush_interval_ms, "flush", *args)
        return True

    # ------------------------------------------------------------ the network
    def _incarnation(self, node: int | str) -> int:
        n = self.nodes.get(node) if isinstance(node, int) else None
        return 0 if n is None else n.incarnation

    def send(self, src: int | str, to: int | str, msg: object, data: bool = True, link: SimLink | None = None,
             target: str | None = None) -> None:
        """Send `msg` over the simulated network; `data`: on the data plane (replication,
        clients), which `net.data_blocked` cuts too, not the controllers' plane. The
        routers send on a `link` (or in process, to `target`); by hand, a client's
        message goes to the broker, a controller-bound one to the controller."""
        # the admin client talks to the controller over a reliable side channel; a
        # combined node's broker and controller talk in process
        if ADMIN in (src, to):
            t: int | None = self.now + 1
        elif src == to:
            t = self.now
        elif data and (src, to) in self.net.data_blocked:
            return
        else:
            t = self.net.delivery_time(src, to, self.now)
        if t is not None and self.extra_delay is not None:
            t += self.extra_delay(src, to, msg)
        if t is not None:
            self._push(t, "msg", to, Envelope(src, msg, self._incarnation(to), link, target))

    def _deliver(self, to: int | str, env: Envelope) -> None:
        if self._incarnation(to) != env.incarnation:
            return  # the connection died with the process it was addressed to
        n = self.nodes.get(to) if isinstance(to, int) else None
        if n is None:
            if to == ADMIN:
                self.admin_responses.append(env.msg)
            elif to in self.clients:
                for s in self.clients[to].handle(env.msg, self.now):  # type: ignore[index]
                    self.send(to, s.to, s.message)
            return
        io, msg = n.io, env.msg
        if io is None or not n.up:
            return
        quorum = n.quorum if isinstance(msg, _TO_QUORUM) else None
        if env.link is not None:
            effects = self._receive(n, env.link, msg)
            if effects is None:
                return
        elif env.target is not None:
            effects = io.on_local(env.target, env.src, msg, self.now)  # type: ignore[arg-type]
        elif isinstance(env.src, str):
            serve = io.on_admin_client if isinstance(msg, CONTROLLER_BOUND) else io.on_client
            effects = serve(env.src, msg, self.now)
        else:
            effects = io.on_local(fx.CONTROLLER if quorum is not None else fx.BROKER, env.src, msg, self.now)  # type: ignore[arg-type]
        self._run(n, effects, quorum)

    # ------------------------------------------------------------ what the routers hand over
    def _apply(self, node: int, acts: Actions) -> None:
        """Perform what node's broker asked for (a call the simulation made itself)."""
        n = self.nodes[node]
        assert n.io is not None
        self._run(n, n.io.on_broker_actions(acts, self.now))

    def _run(self, n: SimNode, effects: list[Effect], quorum: QuorumController | None = None) -> None:
        """Perform node n's effects in order, then what follows a call into its machines:
        writeback under `flush_interval_ms=0`, the next ticks, and after a call into the
        quorum (`quorum`) the Raft invariants."""
        for e in effects:
            if isinstance(e, Transmit):
                self._transmit(n, e.key, e.message)
            elif isinstance(e, Deliver):
                if n.id not in self.net.controller_cut:  # the cut takes the in-process way too
                    self.send(n.id, n.id, e.message, data=False, target=e.target)
            elif isinstance(e, ToClient):
                self.send(n.id, e.client, e.message)
            elif isinstance(e, PersistState):
                n.quorum_state = e.state
            elif isinstance(e, SyncLog):
                n.raft_log.flush(len(n.raft_log.entries) if e.end_offset is None else e.end_offset)
            elif isinstance(e, CloseLink):
                link = n.io.links.get(e.key) if n.io is not None else None
                if link is not None:
                    self._close(n, e.key, link)
            elif isinstance(e, Perform):
                self._perform(n, e.action)
        if n.io is not None and n.io.broker_calls != n.broker_calls:  # the broker was called
            n.broker_calls = n.io.broker_calls
            if self.settings.flush_interval_ms == 0 and n.is_broker:
                n.disk.flush_all()
            self._schedule(n)
        if quorum is not None:
            self._active = None
            if quorum.raft.role is Role.LEADER and quorum.raft.epoch > self.newest_leader_epoch:
                self.newest_leader_epoch = quorum.raft.epoch
            if self.settings.check_invariants:
                self.raft_oracle.check(self.now, n.id, quorum.raft, n.raft_log, n.quorum_state)
            self._qschedule(n)

    def _transmit(self, n: SimNode, key: LinkKey, msg: object) -> None:
        link = self._link_for(n, key)
        if link is None:
            return
        if isinstance(msg, VoteResponse) and msg.vote_granted and not msg.pre_vote:
            self.raft_oracle.vote_sent(self.now, n.id, msg.leader_epoch, key.peer)
        if key.role in CONTROLLER_ROLES and link.opener in self.net.controller_cut:
            return  # a broker cut from the controllers: both ways
        self.send(n.id, key.peer, msg, data=key.data_plane, link=link)

    def _perform(self, n: SimNode, o: object) -> None:
        """One of the machines' own actions (the notices of the router need nothing)."""
        if isinstance(o, CheckpointHighWatermarks):
            n.disk.hwm_checkpoint = dict(o.high_watermarks)
        elif isinstance(o, ShutdownComplete):
            n.disk.flush_all()
            n.disk.clean_shutdown_epoch = o.broker_epoch
            self._stop(n)
        elif isinstance(o, ControllerActivated) and n.quorum is not None:
            assert n.quorum.controller is not None
            self.controllers_seen.append(n.quorum.controller)
            self.latest_controller = n.quorum.controller

    # ------------------------------------------------------------ timers
    def _schedule(self, n: SimNode) -> None:
        if n.broker is None:
            return
        d = n.broker.next_deadline()
        if d is not None and (n.tick_at is None or d < n.tick_at):
            n.tick_token += 1
            n.tick_at = max(d, self.now)
            self._push(n.tick_at, "tick", n.id, n.tick_token)

    def _qschedule(self, n: SimNode) -> None:
        if n.quorum is None:
            return
        d = n.quorum.next_deadline()
        if d is not None and (n.qtick_at is None or d < n.qtick_at):
            n.qtick_token += 1
            n.qtick_at = max(d, self.now)
            self._push(n.qtick_at, "qtick", n.id, n.qtick_token)

    def _tick(self, node: int, token: int) -> None:
        n = self.nodes[node]
        if n.broker is None or n.tick_token != token:
            return
        n.tick_at = None
        self._apply(node, n.broker.tick(self.now))
        if n.tick_at is not None and n.tick_at <= self.now:  # a deadline still at now would spin
            n.tick_token += 1
            n.tick_at = self.now + 1
            self._push(n.tick_at, "tick", node, n.tick_token)

    def _qtick(self, node: int, token: int) -> None:
        n = self.nodes[node]
        if n.quorum is None or n.qtick_token != token:
            return
        n.qtick_at = None
        assert n.io is not None
        self._run(n, n.io.tick_quorum(self.now), n.quorum)
        if n.qtick_at is not None and n.qtick_at <= self.now:
            n.qtick_token += 1
            n.qtick_at = self.now + 1
            self._push(n.qtick_at, "qtick", node, n.qtick_token)

    def _link_check(self, node: int, incarnation: int) -> bool:
        """Once a second, as the shell's link check: a broker's link to its controller
        that stayed unusable for the link timeout, or whose peer restarted, is lost."""
        n = self.nodes[node]
        if n.incarnation != incarnation:
            return False
        self._push(self.now + LINK_CHECK_MS, "link", node, incarnation)
        if n.broker is None or n.paused:
            return False
        return self._check_controller_link(n, self.settings.link_timeout_ms)

    # ------------------------------------------------------------ processes
    def start_broker(self, i: int) -> None:
        """Start node i's process (its broker, its controller, or both) if it is down."""
        n = self.nodes[i]
        if n.up:
            return
        n.incarnation += 1
        n.tick_at = n.qtick_at = None
        n.bad_since, n.broker_calls = None, 0
        n.io = io = NodeRouter(i, self.voter_ids)
        if n.is_voter:
            raft = RaftNode(i, self.voter_ids, n.raft_log, self.settings.raft, random.Random(self.rng.random()), n.quorum_state, self.now)
            io.quorum = QuorumController(replace(self.settings.controller, node_id=i), raft)
            self.raft_oracle.restarted(i)
            self._run(n, io.tick_quorum(self.now), io.quorum)
        if n.is_broker:
            cfg = replace(self.settings.broker, node_id=i, controller_id=io.target.target)
            io.broker = Broker(cfg, n.disk.log, f"{i}-{n.incarnation}", n.disk.take_clean_shutdown_epoch(), n.disk.hwm_checkpoint)
            self._apply(i, io.broker.start(self.now))
            if self.settings.flush_interval_ms:
                self._push(self.now + self.rng.randint(1, self.settings.flush_interval_ms), "flush", i, n.incarnation)
            self._push(self.now + self.rng.randint(1, LINK_CHECK_MS), "link", i, n.incarnation)

    start_node = start_broker

    def start_controller(self) -> None:
        """Start every controller that is down."""
        for v in self.voter_ids:
            self.start_broker(v)

    def _stop(self, n: SimNode, power_loss: bool = False) -> None:
        if n.io is not None:
            n.io.broker = n.io.quorum = None
        self._active = None
        n.incarnation += 1
        n.tick_at = n.qtick_at = None
        n.paused, n.backlog = False, []
        if n.is_voter:
            n.raft_log = n.raft_log.after_crash(power_loss, self.rng)

    def crash(self, i: int) -> None:
        """kill -9: the process dies, the page cache (and so every log) survives. The host
        is up, so its kernel resets the peers' connections: they learn it at once
        (`crash_resets`); after a power loss or a pause they only time out."""
        n = self.nodes[i]
        if not n.up:
            return
        self._stop(n)
        self.crash_resets(i)

    def crash_controller(self) -> None:
        """kill -9 of the active controller's node (of the first voter if none is active)."""
        self.crash(self.active_controller_id() or self.voter_ids[0])

    def power_loss(self, i: int) -> None:
        """The machine loses power: the process dies and unsynced data is lost."""
        n = self.nodes[i]
        self._stop(n, power_loss=n.up)
        n.disk.power_loss()

    def wipe(self, i: int) -> None:
        """The machine loses power and its data disk: it comes back (`start_broker`) with
        empty partition logs, a new broker epoch and no clean-shutdown file (a lossy
        unclean shutdown). A voter's metadata log is on another disk and survives."""
        n = self.nodes[i]
        self._stop(n, power_loss=n.up)
        n.disk.wipe()

    def pause(self, i: int, ms: int) -> None:
        """SIGSTOP for `ms`: node i handles nothing (its messages and timers wait), its
        disk keeps writing back; then SIGCONT, and it catches up in order."""
        n = self.nodes[i]
        if not n.up or n.paused:
            return
        n.paused = True
        inc = n.incarnation
        self._push(self.now + ms, "call", lambda: self.resume(i, inc))

    def resume(self, i: int, incarnation: int | None = None) -> None:
        n = self.nodes[i]
        if not n.paused or (incarnation is not None and n.incarnation != incarnation):
            return
        n.paused = False
        backlog, n.backlog = n.backlog, []
        for ev in backlog:
            if self._dispatch(*ev) and self.settings.check_invariants:  # type: ignore[arg-type]
                self.oracle.check(self, self.now)

    def controlled_shutdown(self, i: int) -> None:
        n = self.brokers[i]
        if n.broker is not None:
            self._apply(i, n.broker.begin_controlled_shutdown(self.now))

    def running(self, i: int) -> bool:
        """Node i's broker (or, for a dedicated controller, its controller) runs."""
        n = self.nodes[i]
        return n.broker is not None if n.is_broker else n.quorum is not None

    def cut_from_controllers(self, i: int) -> None:
        """Broker i can no longer reach any controller, nor they it (replication flows)."""
        self.net.controller_cut.add(i)

    def reconnect_to_controllers(self, i: int) -> None:
        self.net.controller_cut.discard(i)

    # ------------------------------------------------------------ the quorum
    def active_controller_id(self) -> int | None:
        """The voter whose controller is active in the newest epoch that had a leader.
        A leader of an older epoch that has not heard of it yet (paused, partitioned,
        without check quorum) may still run its controller, but it commits nothing and
        so sends nothing: it is not the cluster's controller."""
        if self._active is None:
            self._active = (next((v for v, n in self.voters.items() if (q := n.quorum) is not None
                                  and q.controller is not None and q.epoch == self.newest_leader_epoch), None),)
        return self._active[0]

    @property
    def controller(self) -> Controller | None:
        """The active controller (see `active_controller_id`), None during elections."""
        v = self.active_controller_id()
        return None if v is None else self.voters[v].quorum.controller  # type: ignore[union-attr]

    def agreed_quorum_leader(self) -> int | None:
        """The voter that leads with its controller active and every voter following it
        in its epoch, if there is one."""
        v = self.active_controller_id()
        if v is None:
            return None
        lead = self.voters[v].quorum
        assert lead is not None
        for n in self.voters.values():
            q = n.quorum
            if q is None or n.paused:
                return None
            r = q.raft
            if q is not lead and (r.role is not Role.FOLLOWER or r.leader_id != v or r.epoch != lead.epoch):
                return None
        return v

    def violations(self) -> list[Violation]:
        """Both oracles' findings; the quorum's are named raft-<invariant>."""
        return [*self.oracle.violations, *(Violation(v.time, f"raft-{v.name}", v.detail) for v in self.raft_oracle.violations)]


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
