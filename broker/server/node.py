"""One `wrack-broker` process: the asyncio shell around the sans-IO core.

`Node` owns the clock (monotonic milliseconds), the core state machines (the `Broker`
when `process.roles` has broker, the `QuorumController` when it has controller: a Raft
voter of `controller.quorum.voters` that runs the `Controller` while it leads), the
storage (LogManager or the in-memory stand-in), the committed-offset store, the listeners
and the inter-node links. It follows the integration contract of
docs/broker-replication.md: every message goes through `handle`, `tick` runs when
`next_deadline` passes, and the returned `Actions` are routed:

- to a Kafka client of this process (a `str` address): the waiting request's callback,
  found by correlation id;
- from the broker to the controller (`CONTROLLER_BOUND` types): to the active controller
  as far as the broker knows, in process or over the link to that voter's controller
  listener; a `NotController` answer, or a lost link, moves it (docs/broker-raft.md);
- from the broker to a peer broker: requests over our link to the peer's inter-broker
  listener, responses over the link the request came in on;
- from the controller to a broker: in process for our own broker, else over the link
  the broker opened to us;
- between voters (`RAFT_MESSAGES`): over our own `ROLE_RAFT` link to the voter.

The quorum's state (`PersistQuorumState`) and metadata log (`FlushLog`) are made durable
before anything of the same call is sent (broker/server/quorum_store.py). Messages between
the co-located machines go through a queue drained after each event (no recursion).
SIGTERM starts a controlled shutdown; `ShutdownComplete` (or the shutdown timeout) flushes
the logs and writes the clean-shutdown marker through the store; a second signal exits
at once, after a flush.
"""

from __future__ import annotations

import asyncio
import logging
import random
import signal
import socket
import time
import uuid
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Any

from broker.config import BrokerSettings
from broker.core import safeguards as sg
from broker.core.broker import RUNNING, Broker, BrokerConfig
from broker.core.controller import ControllerConfig
from broker.core.messages import (
    CONTROLLER_BOUND,
    Actions,
    AlterConfigsResponse,
    AlterPartitionRequest,
    AlterPartitionResponse,
    AlterReassignmentResponse,
    BrokerHeartbeatResponse,
    BrokerRegistrationResponse,
    CheckpointHighWatermarks,
    CreateAclsResponse,
    CreatePartitionsResponse,
    CreateTopicResponse,
    DeleteAclsResponse,
    DeletePartitionLog,
    DeleteTopicResponse,
    ElectLeadersResponse,
    Endpoint,
    FetchRequest,
    FetchResponse,
    GetReplicaLogInfoRequest,
    LogFailure,
    MetadataFetchResponse,
    MetadataResponse,
    NotController,
    OffsetsForLeaderEpochResponse,
    ReplicaTruncated,
    ShutdownComplete,
    TopicPartition,
)
from broker.core.metadata import (
    BrokerRegistrationChangeRecord,
    PartitionChangeRecord,
    RegisterBrokerRecord,
)
from broker.core.quorum_controller import (
    RAFT_MESSAGES,
    ControllerActivated,
    ControllerDeactivated,
    ControllerTarget,
    QuorumController,
)
from broker.core.raft import RaftConfig, RaftNode, Role
from broker.core.raft_messages import FlushLog, LogTruncated, PersistQuorumState, RaftEntry, RoleChanged
from broker.core.replica import LEADER
from broker.logapi import STORAGE_ERRORS
from broker.server.connection import KafkaConnection
from broker.server.eventlog import election_kind, format_event
from broker.server.groups import GroupCoordinator
from broker.server.handlers import Handlers
from broker.server.logstore import open_store
from broker.server.offsets import OffsetStore
from broker.server.quorum_store import (
    METADATA_FILE,
    QUORUM_STATE_FILE,
    FileRaftLog,
    MetadataLogFile,
    QuorumStateFile,
)
from broker.server.transport import Link, Links
from broker.storage import LogManager
from broker.wire import internal

BROKER = "broker"
CONTROLLER = "controller"
_REPLIES = (FetchResponse, OffsetsForLeaderEpochResponse, MetadataResponse)
# What a broker accepts on the links it opened (answers from the controller and from
# leaders, the controller's log inspection) and on links peers opened (replica fetches).
_FROM_CONTROLLER = (
    BrokerRegistrationResponse, BrokerHeartbeatResponse, MetadataFetchResponse, AlterPartitionResponse,
    GetReplicaLogInfoRequest, FetchResponse, CreateTopicResponse, DeleteTopicResponse, ElectLeadersResponse,
    NotController, CreatePartitionsResponse, AlterConfigsResponse, AlterReassignmentResponse,
    CreateAclsResponse, DeleteAclsResponse,
)
_FROM_PEERS = (FetchRequest,)
_ADMIN_REPLIES = (CreateTopicResponse, DeleteTopicResponse, ElectLeadersResponse, CreatePartitionsResponse,
                  AlterConfigsResponse, AlterReassignmentResponse, CreateAclsResponse, DeleteAclsResponse)
LINK_CHECK_MS = 1000
OFFSETS_FILE = "wrack-consumer-offsets.log"


def _boot_id() -> str:
    """This kernel's boot id (nodes on one kernel share CLOCK_MONOTONIC), or "-"."""
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip() or "-"
    except OSError:
        return "-"


class StartupError(Exception):
    """The process cannot start (e.g. a listener's port is taken): one line, exit 254."""


class Node:
    """The process: see the module docstring."""

    def __init__(self, settings: BrokerSettings, logger: logging.Logger) -> None:
        self.s = settings
        self.log = logger
        self.events = logger.getChild("events")  # wrack.broker.events: broker/server/eventlog.py
        self.node_id = settings.node_id
        self.broker: Broker | None = None
        self.quorum: QuorumController | None = None
        self.store: LogManager | None = None
        self.offsets: OffsetStore | None = None
        self.groups: GroupCoordinator | None = None
        self.metadata_file: MetadataLogFile | None = None
        self.state_file: QuorumStateFile | None = None
        # Where this node's broker sends controller-bound requests: the active controller
        # as far as it knows (NotController answers and lost links move it).
        self.controller_target = ControllerTarget([v.node_id for v in settings.controller_quorum_voters],
                                                  settings.node_id)
        self.links = Links(self, settings.node_id, logger.getChild("links"), settings.socket_request_max_bytes,
                           settings.link_timeout_ms / 1000)
        self.servers: list[asyncio.base_events.Server] = []
        self.connections: set[Any] = set()
        self._local: deque[tuple[str, int | str, object]] = deque()
        self._draining = False
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at: float | None = None
        self._rearm_pending = False
        self._cid = 0
        self.waiters: dict[int, Callable[[Any], None]] = {}
        self.admin_waiters: dict[int, asyncio.Future[Any]] = {}
        self.admin_pending: dict[int, Any] = {}
        self.metadata_waiters: list[tuple[Callable[[], bool], asyncio.Future[None]]] = []
        self._image_offset = -1
        self._roles: dict[TopicPartition, tuple[str, int, int]] = {}
        self._broker_state = "STARTING"
        self.shutting_down = False
        self._shutdown_deadline: int | None = None
        self.done: asyncio.Future[int] | None = None
        self.exit_code = 0
        self._clients_served = False
        self._next_link_check = 0
        self._bound: list[tuple[Any, socket.socket]] = []
        self.handlers = Handlers(self)

    # ------------------------------------------------------------ clock and ids
    @staticmethod
    def now() -> int:
        return int(time.monotonic() * 1000)

    def new_cid(self) -> int:
        self._cid += 1
        return self._cid

    # ------------------------------------------------------------ startup
    async def start(self) -> None:
        s = self.s
        loop = asyncio.get_running_loop()
        self.done = loop.create_future()
        now = self.now()
        self._event("clock", boot_id=_boot_id())
        safeguards = sg.SafeguardSet(frozenset(s.safeguards_off))
        if s.safeguards_off:
            self.log.warning("safeguards OFF: %s", ", ".join(sorted(s.safeguards_off)))
        for k in s.unknown:
            self.log.warning("unknown property %s=%s (ignored)", k, s.raw[k])
        if s.is_controller:
            self.quorum = self._open_quorum(now, safeguards)
        if s.is_broker:
            self.store = open_store(list(s.log_dirs), dict(s.storage), self.log.getChild("storage"), self.now)
            info = self.store.startup()
            self.log.info(
                "storage: %s shutdown, previous broker epoch %d",
                "clean" if info.clean_shutdown else "unclean", info.previous_broker_epoch,
            )
            self.offsets = OffsetStore(Path(s.log_dirs[0]) / OFFSETS_FILE)
            self.offsets.load()
            self.groups = GroupCoordinator(s.group_initial_rebalance_delay_ms, s.group_min_session_timeout_ms,
                                           s.group_max_session_timeout_ms)
            store = self.store
            self.broker = Broker(
                BrokerConfig(
                    node_id=s.node_id,
                    controller_id=self.controller_target.target,
                    broker_heartbeat_interval_ms=s.broker_heartbeat_interval_ms,
                    replica_lag_time_max_ms=s.replica_lag_time_max_ms,
                    replica_fetch_wait_max_ms=s.replica_fetch_wait_max_ms,
                    replica_fetch_backoff_ms=s.replica_fetch_backoff_ms,
                    retry_backoff_ms=s.retry_backoff_ms,
                    retry_backoff_max_ms=max(s.retry_backoff_max_ms, s.retry_backoff_ms),
                    request_timeout_ms=s.replica_socket_timeout_ms,
                    hw_checkpoint_interval_ms=s.replica_high_watermark_checkpoint_interval_ms,
                    min_insync_replicas=s.min_insync_replicas,
                    safeguards=safeguards,
                    listeners=tuple(Endpoint(li.name, li.host, li.port) for li in s.advertised_listeners),
                    unfence_when_caught_up=True,
                ),
                store.get_or_create,
                str(uuid.uuid4()),
                info.previous_broker_epoch,
                dict(info.hw_checkpoint),
            )
            store.attach(self._topic_configs, self._high_watermark)
        await self._listen()
        if self.broker is not None:
            self.handlers.start()
        if self.quorum is not None:
            self._apply(CONTROLLER, self.quorum.tick(now))
        if self.broker is not None and not self._never_serve_again():
            self._apply(BROKER, self.broker.start(now))
        self._drain()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, self.request_shutdown, sig)
        self.log.info(
            "node %d started: roles %s, listeners %s", s.node_id, ",".join(sorted(s.process_roles)),
            ", ".join(f"{li.name}://{li.host}:{li.port}" for li in s.listeners),
        )

    def _open_quorum(self, now: int, safeguards: sg.SafeguardSet) -> QuorumController:
        """This node's controller: its metadata log and quorum state from disk (ValueError
        names a bad file), a `RaftNode` over the voters, the `Controller` config."""
        s = self.s
        self.metadata_file = MetadataLogFile(Path(s.metadata_log_dir) / METADATA_FILE)
        entries = self.metadata_file.load()
        self.state_file = QuorumStateFile(Path(s.metadata_log_dir) / QUORUM_STATE_FILE)
        state = self.state_file.load()
        log = FileRaftLog(self.metadata_file, entries, on_append=self._on_metadata_append)
        raft = RaftNode(
            s.node_id, [v.node_id for v in s.controller_quorum_voters], log,
            RaftConfig(
                election_timeout_ms=s.controller_quorum_election_timeout_ms,
                fetch_timeout_ms=s.controller_quorum_fetch_timeout_ms,
                request_timeout_ms=s.controller_quorum_request_timeout_ms,
                retry_backoff_ms=s.controller_quorum_retry_backoff_ms,
                # KIP-996 (Kafka 4.0, no setting): a voter cut off from the leader alone
                # cannot take over while the others still hear from it
                pre_vote=True,
            ),
            random.Random(), state, now,
        )
        self.log.info("controller: metadata log %s with %d records, quorum state %s", self.metadata_file.path,
                      len(entries), state or "none")
        return QuorumController(
            ControllerConfig(
                node_id=s.node_id,
                broker_session_timeout_ms=s.broker_session_timeout_ms,
                min_insync_replicas=s.min_insync_replicas,
                unclean_leader_election_enable=s.unclean_leader_election_enable,
                unclean_recovery_strategy=s.unclean_recovery_strategy,
                safeguards=safeguards,
            ),
            raft,
        )

    def _never_serve_again(self) -> bool:
        """`wrack.test.never.serve.after.restart` (liveness tests only): the broker's first
        start leaves a marker in its first log dir; a later start finds it and never
        registers, so it never serves again."""
        if not self.s.test_never_serve_after_restart:
            return False
        marker = Path(self.s.log_dirs[0]) / ".wrack-started-once"
        if marker.exists():
            self.log.warning("wrack.test.never.serve.after.restart: started before, never registering")
            return True
        marker.touch()
        return False

    async def _listen(self) -> None:
        """Bind every listener now (a taken port is a startup error); serve the controller
        listeners at once and the client listeners once the broker is unfenced (as Kafka:
        a broker takes requests once it has caught up and been unfenced)."""
        self._bound = []
        for li in self.s.listeners:
            host = li.host or "0.0.0.0"
            try:
                family = socket.AF_INET6 if ":" in host else socket.AF_INET
                sock = socket.socket(family, socket.SOCK_STREAM)
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                sock.bind((host, li.port))
                sock.setblocking(False)
            except OSError as e:
                raise StartupError(f"listener {li.name}://{li.host}:{li.port}: {e.strerror or e}") from None
            self._bound.append((li, sock))
        await self._serve(controller_listeners=True)
        if self.broker is None:
            await self._serve(controller_listeners=False)

    async def _serve(self, controller_listeners: bool) -> None:
        loop = asyncio.get_running_loop()
        for li, sock in self._bound:
            is_ctl = li.name in self.s.controller_listener_names
            if is_ctl != controller_listeners:
                continue
            server = await loop.create_server(lambda li=li, is_ctl=is_ctl: KafkaConnection(self, li.name, is_ctl),
                                              sock=sock, backlog=1024)
            self.servers.append(server)
            self.log.info("listening on %s://%s:%d", li.name, li.host, li.port)

    def _maybe_serve_clients(self) -> None:
        if self._clients_served or self.broker is None or self.broker.state != RUNNING:
            return
        me = self.broker.image.brokers.get(self.node_id)
        if me is None or me.fenced:  # our metadata must list us (Metadata answers name us as the controller)
            return
        self._clients_served = True
        self.log.info("broker %d is unfenced (broker epoch %d)", self.node_id, self.broker.broker_epoch)
        task = asyncio.get_running_loop().create_task(self._serve(controller_listeners=False))
        task.add_done_callback(lambda t: t.cancelled() or t.exception() is None or self._fatal(t.exception()))

    def _fatal(self, exc: BaseException | None) -> None:
        self.log.error("cannot serve clients: %s", exc)
        self.exit_code = 254
        self._stop(254)

    def _on_metadata_append(self, offset: int, entry: RaftEntry) -> None:
        """Log the records this node's active controller writes that tell a fault's
        story (followers' copies of the log are not logged again)."""
        if self.quorum is None or self.quorum.raft.role is not Role.LEADER:
            return
        record = entry.record
        if isinstance(record, RegisterBrokerRecord):
            self.log.info("controller: broker %d registered (broker epoch %d)", record.broker_id, record.broker_epoch)
        elif isinstance(record, BrokerRegistrationChangeRecord):
            what = [k for k, v in (("fenced", record.fenced is True), ("unfenced", record.fenced is False),
                                   ("shutting down", record.in_controlled_shutdown is True)) if v]
            self.log.info("controller: broker %d %s", record.broker_id, ", ".join(what) or "changed")
        elif isinstance(record, PartitionChangeRecord):
            r = record.registration
            self.log.info("controller: %s leader %d epoch %d isr %s elr %s%s", record.tp, r.leader, r.leader_epoch,
                          list(r.isr), list(r.elr), " RECOVERING" if r.leader_recovery_state else "")
            active = self.quorum.controller
            prev = active.image.partitions.get(record.tp) if active is not None else None
            self._event("partition-change", tp=record.tp, leader=r.leader, epoch=r.leader_epoch,
                        prev_leader=-1 if prev is None else prev.leader,
                        prev_epoch=-1 if prev is None else prev.leader_epoch,
                        election=election_kind(prev, r), isr=r.isr, elr=r.elr)

    def _log_roles(self) -> None:
        """Log this broker's partition role changes (after its metadata moved)."""
        assert self.broker is not None
        for tp, r in self.broker.partitions.items():
            now = (r.role, r.leader_id, r.leader_epoch)
            before = self._roles.get(tp)
            if before != now:
                self._roles[tp] = now
                self.log.info("%s: %s (leader %d, epoch %d), LEO %d, HWM %d", tp, r.role, r.leader_id, r.leader_epoch,
                              r.log.log_end_offset, r.high_watermark)
                if before is None:
                    self._event("replica-opened", tp=tp, leo=r.log.log_end_offset, hwm=r.high_watermark)
                if r.role == LEADER:
                    self._event("became-leader", tp=tp, epoch=r.leader_epoch, from_offset=r.leso,
                                hwm=r.high_watermark, isr=r.isr)
                else:
                    self._event("became-follower", tp=tp, epoch=r.leader_epoch, leader=r.leader_id,
                                leo=r.log.log_end_offset, hwm=r.high_watermark)

    def _event(self, kind: str, **fields: Any) -> None:
        """One event line (broker/server/eventlog.py) for the run's report."""
        if self.events.isEnabledFor(logging.INFO):
            self.events.info("%s", format_event(kind, {"node": self.node_id, **fields}))

    # ------------------------------------------------------------ core calls
    def to_broker(self, src: int | str, msg: object, waiter: Callable[[Any], None] | None = None) -> None:
        """Deliver a message from a Kafka client (or a peer) to the broker machine;
        `waiter` gets the response carrying the message's correlation id."""
        assert self.broker is not None
        if waiter is not None:
            self.waiters[msg.correlation_id] = waiter  # type: ignore[attr-defined]
        self._apply(BROKER, self.broker.handle(src, msg, self.now()))
        self._drain()

    def _dispatch(self, target: str, src: int | str, msg: object) -> None:
        if isinstance(msg, _ADMIN_REPLIES):
            fut = self.admin_waiters.pop(msg.correlation_id, None)
            if fut is not None and not fut.done():
                fut.set_result(msg)
            return
        if target == CONTROLLER:
            if self.quorum is None:
                self.log.warning("no controller here for %s from %s", type(msg).__name__, src)
                return
            self._apply(CONTROLLER, self.quorum.handle(src, msg, self.now()))
        elif isinstance(msg, NotController):
            self._on_not_controller(src, msg)  # type: ignore[arg-type]
        else:
            if self.broker is None:
                self.log.warning("no broker here for %s from %s", type(msg).__name__, src)
                return
            self._apply(BROKER, self.broker.handle(src, msg, self.now()))

    def _drain(self) -> None:
        if self._draining:
            return
        self._draining = True
        try:
            while self._local:
                target, src, msg = self._local.popleft()
                self._dispatch(target, src, msg)
        finally:
            self._draining = False
        self._schedule_rearm()

    def _apply(self, role: str, acts: Actions) -> None:
        if role == CONTROLLER:
            self._apply_quorum(acts.other)  # state and log durable before anything is sent
        for send in acts.sends:
            self._route(role, send.to, send.message)
        for o in acts.other:
            if isinstance(o, CheckpointHighWatermarks):
                if self.store is not None:
                    try:
                        self.store.checkpoint_high_watermarks(o.high_watermarks)
                    except STORAGE_ERRORS as e:  # the next checkpoint tries again
                        self.log.error("cannot write the high-watermark checkpoint: %s", e)
            elif isinstance(o, DeletePartitionLog):
                self._delete_log(o.tp, o.topic_deleted)
            elif isinstance(o, LogFailure):
                self.log.error("%s: storage failure in %s: %s (answered KAFKA_STORAGE_ERROR)", o.tp, o.operation, o.error)
            elif isinstance(o, ReplicaTruncated):
                self._event("truncated", tp=o.tp, epoch=o.leader_epoch, role=o.role, from_leo=o.from_leo, to=o.to,
                            reason=o.reason)
            elif isinstance(o, ShutdownComplete):
                self._finish_broker_shutdown(o.broker_epoch, "controlled shutdown complete")
            elif isinstance(o, ControllerActivated):
                self.log.info("controller: active in quorum epoch %d (metadata log end %d)", o.epoch, o.metadata_end)
                self._event("controller-active", epoch=o.epoch)
                if self.broker is not None:
                    self._on_not_controller(self.node_id, NotController(self.node_id, o.epoch))
            elif isinstance(o, ControllerDeactivated):
                self.log.info("controller: no longer active in quorum epoch %d (leader %d)", o.epoch, o.leader_id)
        if role == BROKER and self.broker is not None and self.broker.image.next_offset != self._image_offset:
            self._image_offset = self.broker.image.next_offset
            if self.store is not None:
                self.store.refresh_topic_configs()
            self._check_metadata_waiters()
            self._log_roles()
        if role == BROKER and self.broker is not None and self.broker.state != self._broker_state:
            self.log.info("broker state %s -> %s (broker epoch %d)", self._broker_state, self.broker.state,
                          self.broker.broker_epoch)
            self._broker_state = self.broker.state
        if role == BROKER and not self._clients_served:
            self._maybe_serve_clients()
        self._schedule_rearm()

    def _topic_configs(self, topic: str) -> dict[str, str]:
        """A topic's configs in the broker's metadata image (the storage engine's view): its
        own, over this broker's dynamic topic defaults (`MetadataImage.topic_defaults`)."""
        if self.broker is None:
            return {}
        image = self.broker.image
        return {**image.topic_defaults(self.node_id), **image.topics.get(topic, {})}

    def _high_watermark(self, tp: TopicPartition) -> int | None:
        r = self.broker.partitions.get(tp) if self.broker is not None else None
        return None if r is None else r.high_watermark

    def _apply_quorum(self, other: list[object]) -> None:
        """The quorum's own actions, before any send of the same call: persist the vote
        and epoch, make the log durable up to where it is acknowledged."""
        for o in other:
            if isinstance(o, PersistQuorumState):
                assert self.state_file is not None
                self.state_file.write(o)
            elif isinstance(o, FlushLog):
                assert self.metadata_file is not None
                self.metadata_file.sync()
            elif isinstance(o, LogTruncated):
                self.log.warning("quorum: metadata log truncated from %d to %d (epoch %d)", o.from_end, o.to, o.epoch)
            elif isinstance(o, RoleChanged):
                self.log.info("quorum: %s in epoch %d (leader %d)", o.role, o.epoch, o.leader_id)
                if (o.role == Role.FOLLOWER.value and self.broker is not None
                        and o.leader_id != self.controller_target.target):
                    self._on_not_controller(self.node_id, NotController(o.leader_id, o.epoch))
        if self.metadata_file is not None:
            self.metadata_file.sync()  # the controller's records before the answers that depend on them

    def _route(self, role: str, to: int | str, msg: object) -> None:
        if isinstance(to, str):
            cb = self.waiters.pop(msg.correlation_id, None)  # type: ignore[attr-defined]
            if cb is not None:
                cb(msg)
            return
        if role == BROKER:
            if isinstance(msg, CONTROLLER_BOUND):
                self._send_to_controller(msg)
            elif isinstance(msg, _REPLIES):
                link = self.links.inbound_link(to, internal.ROLE_BROKER) or self.links.outbound_link(to, internal.ROLE_BROKER)
                if link is not None:
                    link.send(msg)
            else:
                self._send_to_broker(to, msg)
        elif isinstance(msg, RAFT_MESSAGES):
            voter = self.s.voter(to)
            if voter is not None:
                self.links.connect(to, internal.ROLE_RAFT, voter.host, voter.port).send(msg)
        else:
            if to == self.node_id and self.broker is not None:
                self._local.append((BROKER, self.node_id, msg))
                return
            roles = internal.CONTROLLER_ROLES  # an AlterPartition answer on the link its request came by
            for role_ in (reversed(roles) if isinstance(msg, AlterPartitionResponse) else roles):
                link = self.links.inbound_link(to, role_)
                if link is not None:
                    link.send(msg)
                    return

    def _send_to_controller(self, msg: object) -> None:
        """To the active controller as far as this broker knows: in process, or over the
        link to that voter's controller listener (AlterPartition over a link of its own)."""
        target = self.controller_target.target
        if target == self.node_id and self.quorum is not None:
            self._local.append((CONTROLLER, self.node_id, msg))
            return
        v = self.s.voter(target)
        assert v is not None
        role = internal.ROLE_ALTER_PARTITION if isinstance(msg, AlterPartitionRequest) else internal.ROLE_CONTROLLER
        self.links.connect(v.node_id, role, v.host, v.port).send(msg)

    def _on_not_controller(self, src: int, msg: NotController) -> None:
        """Voter `src` refused a request (or stopped being active), or this node learnt the
        quorum's leader (`src` is this node): `ControllerTarget` picks where the broker's
        requests go from now on; what is in flight is sent again when it says so."""
        if self.broker is None:
            return
        old = self.controller_target.target
        if not self.controller_target.not_controller(src, msg.leader_id, msg.epoch):
            return
        if self.controller_target.target != old:
            self.log.info("controller requests go to node %d (was %d, quorum epoch %d)",
                          self.controller_target.target, old, msg.epoch)
        self._controller_request_lost()

    def _controller_request_lost(self) -> None:
        """What this broker sent the controller will not be answered: send it again."""
        assert self.broker is not None
        self._apply(BROKER, self.broker.controller_connection_lost(self.now()))
        for msg in list(self.admin_pending.values()):
            self._send_to_controller(msg)

    def _send_to_broker(self, to: int, msg: object) -> None:
        assert self.broker is not None
        info = self.broker.image.brokers.get(to)
        ep = None
        if info is not None:
            ep = next((e for e in info.listeners if e.name == self.s.inter_broker_listener_name), None)
        if ep is None:
            self.log.debug("no %s endpoint for node %d", self.s.inter_broker_listener_name, to)
            asyncio.get_running_loop().call_soon(self._lost_peer, to)
            return
        link = self.links.connect(to, internal.ROLE_BROKER, ep.host, ep.port)
        if not link.send(msg):
            asyncio.get_running_loop().call_soon(self._lost_peer, to)

    def _lost_peer(self, peer: int) -> None:
        if self.broker is not None and not self.shutting_down:  # a link we opened: the peer's may be fine
            self._apply(BROKER, self.broker.connection_lost(peer, self.now(), outbound_only=True))
            self._drain()

    # ------------------------------------------------------------ links (LinkOwner)
    def on_link_hello(self, link: Link) -> bool:
        if link.peer_id == self.node_id:
            self.log.warning("%r: a peer claims this node's id; refusing", link)
            return False
        if link.role in (*internal.CONTROLLER_ROLES, internal.ROLE_RAFT) and self.quorum is None:
            self.log.warning("%r: no controller on this node; refusing", link)
            return False
        if link.role == internal.ROLE_BROKER and self.broker is None:
            self.log.warning("%r: no broker on this node; refusing", link)
            return False
        self.links.register_inbound(link)
        self.log.debug("%r: connected", link)
        return True

    def on_link_message(self, link: Link, msg: object) -> None:
        if link.role == internal.ROLE_RAFT:
            self._on_raft_message(link, msg)
            return
        if link.outbound:
            target = BROKER  # answers (and controller requests) to our broker
        else:
            target = CONTROLLER if link.role in internal.CONTROLLER_ROLES else BROKER
        accepted = CONTROLLER_BOUND if target == CONTROLLER else (_FROM_CONTROLLER if link.outbound else _FROM_PEERS)
        if not isinstance(msg, accepted) or getattr(msg, "broker_id", link.peer_id) != link.peer_id and target == CONTROLLER:
            self.log.warning("%r: unexpected %s; closing", link, type(msg).__name__)
            link.close()
            return
        self._deliver(link, target, msg)

    def _on_raft_message(self, link: Link, msg: object) -> None:
        """A quorum message from another voter (on a link either side opened)."""
        if self.quorum is None or not isinstance(msg, RAFT_MESSAGES) or self.s.voter(link.peer_id) is None:
            self.log.warning("%r: unexpected %s; closing", link, type(msg).__name__)
            link.close()
            return
        self._deliver(link, CONTROLLER, msg)

    def _deliver(self, link: Link, target: str, msg: object) -> None:
        """Hand a peer's accepted message to `target`; an error closes the link."""
        try:
            self._dispatch(target, link.peer_id, msg)
            self._drain()
        except Exception:  # a peer's message must never take the process down
            self.log.exception("%r: error handling %s; closing the link", link, type(msg).__name__)
            link.close()

    def on_link_lost(self, link: Link) -> None:
        current = self.links.forget(link)
        if not current or self.shutting_down:
            return
        self.log.info("%r: lost", link)
        if self.broker is None or link.peer_id < 0 or link.role == internal.ROLE_RAFT:
            return  # the quorum notices a lost voter by its own timeouts
        if link.role == internal.ROLE_BROKER:
            # the peer's parked fetches came on the link it opened: a lost link we opened (to
            # its old incarnation, say, found dead after it restarted) must not drop them
            self._apply(BROKER, self.broker.connection_lost(link.peer_id, self.now(), outbound_only=link.outbound))
        elif link.role == internal.ROLE_ALTER_PARTITION:
            if link.outbound:  # only the requests of that link: the controller link may be fine
                self._apply(BROKER, self.broker.alter_channel_lost(self.now()))
        elif link.outbound:
            self.controller_target.link_lost(link.peer_id)  # that controller may be gone: ask the next
            self._controller_request_lost()
        self._drain()

    # ------------------------------------------------------------ admin forwarding
    def forward_to_controller(self, msg: Any) -> asyncio.Future[Any]:
        """Send an admin request (CreateTopic, DeleteTopic, ElectLeaders, CreatePartitions,
        AlterConfigs, AlterReassignment, Create/DeleteAcls) to the controller; the future gets
        its response."""
        fut = asyncio.get_running_loop().create_future()
        self.admin_waiters[msg.correlation_id] = fut
        self.admin_pending[msg.correlation_id] = msg  # sent again if the controller moves

        def done(_f: asyncio.Future[Any]) -> None:
            self.admin_waiters.pop(msg.correlation_id, None)
            self.admin_pending.pop(msg.correlation_id, None)

        fut.add_done_callback(done)
        self._send_to_controller(msg)
        self._drain()
        return fut

    def wait_for_metadata(self, pred: Callable[[], bool]) -> asyncio.Future[None]:
        """A future done once `pred()` holds for the broker's metadata image."""
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        if pred():
            fut.set_result(None)
        else:
            self.metadata_waiters.append((pred, fut))
        return fut

    def _check_metadata_waiters(self) -> None:
        keep = []
        for pred, fut in self.metadata_waiters:
            if fut.done():
                continue
            if pred():
                fut.set_result(None)
            else:
                keep.append((pred, fut))
        self.metadata_waiters = keep

    def _delete_log(self, tp: TopicPartition, topic_deleted: bool = True) -> None:
        assert self.store is not None
        self.store.delete(tp)
        self.log.info("deleted the log of %s%s", tp, "" if topic_deleted else " (its replica moved away)")
        if self.offsets is not None and tp.partition == 0 and topic_deleted:
            self.offsets.forget_topic(tp.topic)

    # ------------------------------------------------------------ timers
    def schedule_timers(self) -> None:
        """Re-read the deadlines soon (after something outside the core changed them)."""
        self._schedule_rearm()

    def _schedule_rearm(self) -> None:
        if not self._rearm_pending:
            self._rearm_pending = True
            asyncio.get_running_loop().call_soon(self._rearm)

    def _next_deadline(self) -> int | None:
        ds = []
        if self.broker is not None:
            ds.append(self.broker.next_deadline())
        if self.quorum is not None:
            ds.append(self.quorum.next_deadline())
        if self.store is not None:
            ds.append(self.store.next_flush_deadline())
        if self.groups is not None:
            ds.append(self.groups.next_deadline())
        ds.append(self._shutdown_deadline)
        if self.links.outbound or self.links.inbound:
            ds.append(self._next_link_check)
        ds = [d for d in ds if d is not None]
        return min(ds) if ds else None

    def _rearm(self) -> None:
        self._rearm_pending = False
        if self.done is not None and self.done.done():
            return
        d = self._next_deadline()
        if d is None:
            return
        loop = asyncio.get_running_loop()
        when = max(d / 1000.0, loop.time() + 0.0005)
        if self._timer is not None:
            if self._timer_at is not None and self._timer_at <= when:
                return
            self._timer.cancel()
        self._timer_at = when
        self._timer = loop.call_at(when, self._on_timer)

    def _on_timer(self) -> None:
        self._timer = None
        self._timer_at = None
        now = self.now()
        try:
            if self.quorum is not None:
                d = self.quorum.next_deadline()
                if d is not None and d <= now:
                    self._apply(CONTROLLER, self.quorum.tick(now))
            if self.broker is not None:
                d = self.broker.next_deadline()
                if d is not None and d <= now:
                    self._apply(BROKER, self.broker.tick(now))
            if self.store is not None:
                d = self.store.next_flush_deadline()
                if d is not None and d <= now:
                    try:
                        self.store.flush_due(now)
                    except STORAGE_ERRORS as e:
                        self.log.error("scheduled flush failed: %s", e)
            if self.groups is not None:
                d = self.groups.next_deadline()
                if d is not None and d <= now:
                    self.groups.tick(now)
            if now >= self._next_link_check:
                self._next_link_check = now + LINK_CHECK_MS
                self.links.check(self.s.socket_connection_setup_timeout_ms / 1000)
            self._drain()
            if self._shutdown_deadline is not None and now >= self._shutdown_deadline:
                self._shutdown_deadline = None
                epoch = self.broker.broker_epoch if self.broker is not None else -1
                self._finish_broker_shutdown(epoch, "controlled shutdown timed out")
        finally:
            self._schedule_rearm()

    # ------------------------------------------------------------ shutdown
    def request_shutdown(self, sig: int = signal.SIGTERM) -> None:
        name = signal.Signals(sig).name
        if self.shutting_down:
            self.log.warning("%s again: stopping now", name)
            epoch = self.broker.broker_epoch if self.broker is not None else -1
            self._finish_broker_shutdown(epoch, f"second {name}")
            return
        self.shutting_down = True
        self.log.info("%s: shutting down", name)
        if self.broker is not None:
            self._shutdown_deadline = self.now() + self.s.controlled_shutdown_timeout_ms
            self._apply(BROKER, self.broker.begin_controlled_shutdown(self.now()))
            self._drain()
        else:
            self._stop(0)

    def _finish_broker_shutdown(self, epoch: int, why: str) -> None:
        if self.done is None or self.done.done():
            return
        if self.store is not None and self.broker is not None:
            hwms = {tp: r.high_watermark for tp, r in self.broker.partitions.items()}
            try:
                self.store.checkpoint_high_watermarks(hwms)
                self.store.shutdown(epoch)
                self.log.info("%s: logs flushed, clean-shutdown marker written (broker epoch %d)", why, epoch)
            except Exception as e:  # the logs may be incomplete: no marker, next start recovers
                self.log.error("%s: flushing the logs failed (no clean-shutdown marker): %s", why, e)
                self.exit_code = 1
        self._stop(self.exit_code)

    def _stop(self, code: int) -> None:
        if self.done is None or self.done.done():
            return
        self.shutting_down = True
        for server in self.servers:
            server.close()
        for _li, sock in self._bound:
            sock.close()
        for conn in list(self.connections):
            conn.abort()
        self.links.close_all()
        if self.metadata_file is not None:
            self.metadata_file.close()
        if self.offsets is not None:
            self.offsets.close()
        if self._timer is not None:
            self._timer.cancel()
        for fut in self.admin_waiters.values():
            if not fut.done():
                fut.cancel()
        self.done.set_result(code)

    async def run(self) -> int:
        await self.start()
        assert self.done is not None
        code = await self.done
        self.log.info("node %d stopped", self.node_id)
        return code
