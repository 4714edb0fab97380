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

A broker's controller-bound requests go to the active controller as its shell knows it
(`ControllerTarget`, as broker/server/node.py): a `NotController` answer moves it to the
leader named (the next voter when none), a lost link to the next voter, and what was in
flight is sent again (`Broker.controller_connection_lost`). A link is lost at once when
the controller's process is killed (its host resets the connection), or when it stays
unusable (peer down, paused, partitioned) for `link_timeout_ms`, checked every second.

The replication invariants (`invariants.Oracle`) are checked after every step, the Raft
invariants (`raft_invariants.RaftOracle`) after every call into a voter.
"""

from __future__ import annotations

import heapq
import random
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from broker.core import safeguards as sg
from broker.core.broker import Broker, BrokerConfig
from broker.core.controller import Controller, ControllerConfig
from broker.core.messages import (
    CONTROLLER_BOUND,
    NO_LEADER,
    Actions,
    CheckpointHighWatermarks,
    CreateTopicRequest,
    CreateTopicResponse,
    NotController,
    ShutdownComplete,
    TopicPartition,
)
from broker.core.quorum_controller import (
    RAFT_MESSAGES,
    ControllerActivated,
    ControllerTarget,
    QuorumController,
)
from broker.core.raft import RaftConfig, RaftNode, Role
from broker.core.raft_messages import FlushLog, PersistQuorumState, RoleChanged, VoteResponse
from broker.sim.batches import decode_values
from broker.sim.clients import Ack, SimConsumer, SimProducer, SimRecorder
from broker.sim.disk import SimDisk
from broker.sim.invariants import Oracle, Violation
from broker.sim.memlog import InMemoryPartitionLog
from broker.sim.network import NetworkSettings, SimNetwork
from broker.sim.raft_invariants import RaftOracle, SimRaftLog

CONTROLLER = 100  # the first dedicated controller (the only one with controllers=1)
ADMIN = "admin"
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


@dataclass
class SimNode:
    """One machine: a broker, a controller voter, or both (one process)."""

    id: int
    is_broker: bool = True
    is_voter: bool = False
    disk: SimDisk = field(default_factory=SimDisk)  # the partition logs
    raft_log: SimRaftLog = field(default_factory=SimRaftLog)  # the metadata log (a voter's)
    quorum_state: PersistQuorumState = PersistQuorumState(0, NO_LEADER, NO_LEADER)
    broker: Broker | None = None
    quorum: QuorumController | None = None
    target: ControllerTarget | None = None  # where the broker's controller requests go
    incarnation: int = 0
    paused: bool = False
    backlog: list[tuple[object, ...]] = field(default_factory=list)  # events held while paused
    link: tuple[int, int] | None = None  # the broker's controller link: (voter, its incarnation)
    link_bad_since: int | None = None
    tick_token: int = 0
    tick_at: int | None = None
    qtick_token: int = 0
    qtick_at: int | None = None

    @property
    def up(self) -> bool:
        return self.broker is not None or self.quorum is not None


class SimCluster:
    def __init__(self, seed: int, settings: ClusterSettings | None = None) -> None:
        self.seed = seed
        self.settings = s = settings or ClusterSettings()
        self.rng = random.Random(seed)
        self.now = 0
        self.net = SimNetwork(random.Random(self.rng.random()), s.network)
        self._queue: list[tuple[int, int, str, object, object, object, object]] = []
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
        n = None
        if kind in ("msg", "tick", "qtick"):
            n = self.nodes.get(a) if isinstance(a, int) else None  # type: ignore[arg-type]
            if n is not None and n.paused:
                n.backlog.append((kind, a, b, c, d))  # a paused process handles it when resumed
                return
        if n is not None and (kind == "qtick" or kind == "msg" and isinstance(c, _TO_QUORUM)):  # a controller's step
            before = self._controller_stamp()
            self._dispatch(kind, a, b, c, d)
            if self.settings.check_invariants and self._controller_stamp() != before:
                self.oracle.check(self, t)
        elif self._dispatch(kind, a, b, c, d) and self.settings.check_invariants:
            self.oracle.check(self, t)

    def _controller_stamp(self) -> tuple[int, int]:
        """What of the controllers the replication oracle reads: which controller is
        active, and how far its image is. A controller's step that leaves both alone (most
        Raft traffic) cannot break a replication invariant: it changes no broker (a
        combined node's broker at most learns where the active controller is)."""
        ctl = self.controller
        return (0, 0) if ctl is None else (id(ctl), ctl.image.next_offset)

    def _dispatch(self, kind: str, a: object, b: object, c: object, d: object) -> bool:
        """Perform one event; False if it changed nothing worth checking."""
        if kind == "msg":
            self._deliver(a, b, c, d)  # type: ignore[arg-type]
        elif kind == "tick":
            self._tick(a, b)  # type: ignore[arg-type]
        elif kind == "qtick":
            self._qtick(a, b)  # type: ignore[arg-type]
        elif kind == "call":
            a()  # type: ignore[operator]
        elif kind == "probe":
            return bool(a())  # type: ignore[operator]
        elif kind == "link":
            return self._link_check(a, b)  # type: ignore[arg-type]
        elif kind == "flush":
            n = self.nodes[a]  # type: ignore[index]
            if n.incarnation == b and self.settings.flush_interval_ms:
                n.disk.flush_all()
                self._push(self.now + self.settings.flush_interval_ms, "flush", a, b)
        return True

    # ------------------------------------------------------------ delivery and actions
    def _incarnation(self, node: int | str) -> int:
        n = self.nodes.get(node) if isinstance(node, int) else None
        return 0 if n is None else n.incarnation

    def send(self, src: int | str, to: int | str, msg: object, data: bool = True) -> None:
        """Send `msg` over the simulated network; `data`: on the data plane (replication,
        clients), which `net.data_blocked` cuts too, not the controllers' plane."""
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
            self._push(t, "msg", to, src, msg, self._incarnation(to))

    def _deliver(self, to: int | str, src: int | str, msg: object, incarnation: int) -> None:
        if self._incarnation(to) != incarnation:
            return  # the connection died with the process it was addressed to
        n = self.nodes.get(to) if isinstance(to, int) else None
        if n is not None:
            if isinstance(msg, _TO_QUORUM):
                if n.quorum is not None:
                    self._apply_quorum(n, n.quorum.handle(src, msg, self.now))
            elif isinstance(msg, NotController):
                self._not_controller(n, src, msg.leader_id, msg.epoch)  # type: ignore[arg-type]
            elif n.broker is not None:
                self._apply(n.id, n.broker.handle(src, msg, self.now))
        elif to == ADMIN:
            self.admin_responses.append(msg)
        elif to in self.clients:
            for s in self.clients[to].handle(msg, self.now):  # type: ignore[index]
                self.send(to, s.to, s.message)

    def _apply(self, node: int, acts: Actions) -> None:
        """Perform what node's broker asked for."""
        n = self.nodes[node]
        for s in acts.sends:
            if isinstance(s.message, CONTROLLER_BOUND):  # to the active controller it knows
                if node not in self.net.controller_cut and n.target is not None:
                    self.send(node, n.target.target, s.message, data=False)
            else:
                self.send(node, s.to, s.message)
        for o in acts.other:
            if isinstance(o, CheckpointHighWatermarks):
                n.disk.hwm_checkpoint = dict(o.high_watermarks)
            elif isinstance(o, ShutdownComplete):
                n.disk.flush_all()
                n.disk.clean_shutdown_epoch = o.broker_epoch
                self._stop(n)
        if self.settings.flush_interval_ms == 0 and n.is_broker:
            n.disk.flush_all()
        self._schedule(n)

    def _apply_quorum(self, n: SimNode, acts: Actions) -> None:
        """Perform what node n's controller quorum member asked for: its quorum state and
        log durable first, then its sends; then check the Raft invariants."""
        q = n.quorum
        assert q is not None
        for o in acts.other:
            if isinstance(o, PersistQuorumState):
                n.quorum_state = o
            elif isinstance(o, FlushLog):
                n.raft_log.flush(o.end_offset)
        for s in acts.sends:
            m = s.message
            if isinstance(m, RAFT_MESSAGES):
                if isinstance(m, VoteResponse) and m.vote_granted and not m.pre_vote:
                    self.raft_oracle.vote_sent(self.now, n.id, m.leader_epoch, s.to)  # type: ignore[arg-type]
            elif s.to in self.net.controller_cut:
                continue
            self.send(n.id, s.to, m, data=False)
        for o in acts.other:  # a combined node's broker follows its own quorum member
            if isinstance(o, ControllerActivated):
                assert q.controller is not None
                self.controllers_seen.append(q.controller)
                self.latest_controller = q.controller
                if n.broker is not None and n.target is not None and n.target.activated(n.id, o.epoch):
                    self._apply(n.id, n.broker.controller_connection_lost(self.now))
            elif isinstance(o, RoleChanged) and o.role == Role.FOLLOWER.value:
                self._not_controller(n, n.id, o.leader_id, o.epoch)
        self._active = None
        if q.raft.role is Role.LEADER and q.raft.epoch > self.newest_leader_epoch:
            self.newest_leader_epoch = q.raft.epoch
        if self.settings.check_invariants:
            self.raft_oracle.check(self.now, n.id, q.raft, n.raft_log, n.quorum_state)
        self._qschedule(n)

    def _not_controller(self, n: SimNode, src: int, leader_id: int, epoch: int) -> None:
        """Node n's broker learnt where the active controller is (or is not)."""
        if n.broker is None or n.target is None:
            return
        if n.target.not_controller(src, leader_id, epoch):
            self._apply(n.id, n.broker.controller_connection_lost(self.now))

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
        self._apply_quorum(n, n.quorum.tick(self.now))
        if n.qtick_at is not None and n.qtick_at <= self.now:
            n.qtick_token += 1
            n.qtick_at = self.now + 1
            self._push(n.qtick_at, "qtick", node, n.qtick_token)

    # ------------------------------------------------------------ the brokers' controller links
    def _controller_link_ok(self, b: int, v: int) -> bool:
        if b in self.net.controller_cut:
            return False
        if b == v:
            return True
        vn = self.nodes[v]
        blocked = self.net.blocked
        return vn.quorum is not None and not vn.paused and (b, v) not in blocked and (v, b) not in blocked

    def _link_check(self, node: int, incarnation: int) -> bool:
        """Once a second, as the shell's link check: a controller link that stayed unusable
        for the link timeout, or whose peer restarted (its connection is gone), is lost."""
        n = self.nodes[node]
        if n.incarnation != incarnation:
            return False
        self._push(self.now + LINK_CHECK_MS, "link", node, incarnation)
        if n.broker is None or n.target is None or n.paused:
            return False
        v = n.target.target
        peer = (v, self.nodes[v].incarnation)
        if n.link is not None and n.link[0] == v and n.link != peer:
            n.link, n.link_bad_since = None, None
            self._controller_link_lost(n, v)
            return True
        n.link = peer
        if self._controller_link_ok(node, v):
            n.link_bad_since = None
            return False
        if n.link_bad_since is None:
            n.link_bad_since = self.now
        if self.now - n.link_bad_since < self.settings.link_timeout_ms:
            return False
        n.link, n.link_bad_since = None, None
        self._controller_link_lost(n, v)
        return True

    def _controller_link_lost(self, n: SimNode, peer: int) -> None:
        if n.broker is not None and n.target is not None and n.target.link_lost(peer):
            self._apply(n.id, n.broker.controller_connection_lost(self.now))

    # ------------------------------------------------------------ processes
    def start_broker(self, i: int) -> None:
        """Start node i's process (its broker, its controller, or both) if it is down."""
        n = self.nodes[i]
        if n.up:
            return
        n.incarnation += 1
        n.tick_at = n.qtick_at = None
        n.link, n.link_bad_since = None, None
        if n.is_voter:
            raft = RaftNode(i, self.voter_ids, n.raft_log, self.settings.raft, random.Random(self.rng.random()), n.quorum_state, self.now)
            n.quorum = QuorumController(replace(self.settings.controller, node_id=i), raft)
            self.raft_oracle.restarted(i)
            self._apply_quorum(n, n.quorum.tick(self.now))
        if n.is_broker:
            n.target = ControllerTarget(self.voter_ids, i)
            cfg = replace(self.settings.broker, node_id=i, controller_id=n.target.target)
            n.broker = Broker(cfg, n.disk.log, f"{i}-{n.incarnation}", n.disk.take_clean_shutdown_epoch(), n.disk.hwm_checkpoint)
            self._apply(i, n.broker.start(self.now))
            if self.settings.flush_interval_ms:
                self._push(self.now + self.rng.randint(1, self.settings.flush_interval_ms), "flush", i, n.incarnation)
            self._push(self.now + self.rng.randint(1, LINK_CHECK_MS), "link", i, n.incarnation)

    start_node = start_broker

    def start_controller(self) -> None:
        """Start every controller that is down."""
        for v in self.voter_ids:
            self.start_broker(v)

    def _stop(self, n: SimNode, power_loss: bool = False) -> None:
        n.broker = None
        n.quorum = None
        self._active = None
        n.incarnation += 1
        n.tick_at = n.qtick_at = None
        n.paused, n.backlog = False, []
        if n.is_voter:
            n.raft_log = n.raft_log.after_crash(power_loss, self.rng)

    def crash(self, i: int) -> None:
        """kill -9: the process dies, the page cache (and so every log) survives. The host
        is up, so its kernel resets the peers' connections: they learn it at once
        (`Broker.connection_lost`, `Broker.controller_connection_lost`); after a power
        loss or a pause they only time out."""
        n = self.nodes[i]
        if not n.up:
            return
        self._stop(n)
        for j, m in self.brokers.items():
            if j == i or m.broker is None or (i, j) in self.net.blocked:
                continue  # (a reset does not cross a partition)
            inc = m.incarnation
            if n.is_broker and (i, j) not in self.net.data_blocked:
                self._push(self.now + self.net.settings.min_delay_ms, "call", lambda j=j, inc=inc: self._reset(j, inc, i))
            if n.is_voter and m.target is not None and m.target.target == i:
                self._push(self.now + self.net.settings.min_delay_ms, "call", lambda j=j, inc=inc: self._reset_controller(j, inc, i))

    def crash_controller(self) -> None:
        """kill -9 of the active controller's node (of the first voter if none is active)."""
        self.crash(self.active_controller_id() or self.voter_ids[0])

    def _reset(self, j: int, incarnation: int, peer: int) -> None:
        n = self.brokers[j]
        if n.broker is not None and n.incarnation == incarnation:
            self._apply(j, n.broker.connection_lost(peer, self.now))

    def _reset_controller(self, j: int, incarnation: int, peer: int) -> None:
        n = self.brokers[j]
        if n.incarnation == incarnation:
            n.link, n.link_bad_since = None, None
            self._controller_link_lost(n, peer)

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

    # ------------------------------------------------------------ clients and admin
    def create_topic(self, name: str, partitions: int, rf: int, configs: dict[str, str] | None = None) -> CreateTopicResponse:
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
                self.run_until_true(lambda: self.active_controller_id() is not None, min(1000, deadline - self.now))
                continue
            req = CreateTopicRequest(len(self.admin_responses) + 1, name, partitions, rf, tuple((configs or {}).items()))
            self.send(ADMIN, ctl, req)
            self.run_until(min(deadline, self.now + 5000), stop=lambda: answer() is not None)
        resp = answer()
        if resp is None:
            raise TimeoutError(f"topic {name}: no answer from a controller within 30 s")
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
