"""One `wrack-broker` process: the asyncio shell around the sans-IO core.

`Node` owns the clock (monotonic milliseconds), the core machines (the `Broker` when
`process.roles` has broker, the `QuorumController` when it has controller: a Raft voter
of `controller.quorum.voters` that runs the `Controller` while it leads; built by
broker/server/node_start.py), the storage (LogManager or the in-memory stand-in), the
committed-offset store, the listeners and the inter-node links (broker/server/transport.py).
It follows the integration contract of docs/broker-replication.md: every message goes
through `handle`, `tick` runs when `next_deadline` passes.

What happens to the machines' `Actions` is decided by the node's `NodeRouter`
(broker/io/router.py), the same the simulation runs: which link carries which message,
the controller target, the waiters, the durability order. The node performs the
primitive effects it hands back, in order: `Transmit` on a link (opening an outbound one
to the voter's address or the peer's inter-broker endpoint), `Deliver` in process through
a queue drained after each event (no recursion), `Wake` a waiter, `PersistState` and
`SyncLog` through the quorum's files (broker/server/quorum_store.py), `Perform` the
machines' own actions (checkpoints, log deletion, shutdown) and log the notices.
SIGTERM starts a controlled shutdown; `ShutdownComplete` (or the shutdown timeout)
flushes the logs and writes the clean-shutdown marker through the store; a second signal
exits at once, after a flush.
"""

from __future__ import annotations

import asyncio
import logging
import signal
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from broker.config import BrokerSettings
from broker.core import safeguards as sg
from broker.core.broker import RUNNING, Broker
from broker.core.messages import (
    CheckpointHighWatermarks,
    DeletePartitionLog,
    LogFailure,
    ReplicaTruncated,
    ShutdownComplete,
    TopicPartition,
)
from broker.core.quorum_controller import ControllerActivated, ControllerDeactivated, QuorumController
from broker.core.raft_messages import LogTruncated, RoleChanged
from broker.io.effects import (
    CloseLink,
    Deliver,
    Effect,
    NoMachine,
    Perform,
    PersistState,
    SyncLog,
    TargetMoved,
    Transmit,
    Wake,
)
from broker.io.links import ROLE_BROKER, LinkKey
from broker.io.router import NodeRouter
from broker.logapi import STORAGE_ERRORS
from broker.server.connection import KafkaConnection
from broker.server.groups import GroupCoordinator
from broker.server.handlers import Handlers
from broker.server.node_start import (
    QuorumFiles,
    StartupError,
    bind_listeners,
    never_serve_again,
    open_broker,
    open_quorum,
)
from broker.server.node_watch import BrokerWatch, Events, log_metadata_append
from broker.server.offsets import OffsetStore
from broker.server.transport import Link, Links
from broker.storage import LogManager

__all__ = ["Node", "StartupError"]
LINK_CHECK_MS = 1000


def _boot_id() -> str:
    """This kernel's boot id (nodes on one kernel share CLOCK_MONOTONIC), or "-"."""
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip() or "-"
    except OSError:
        return "-"


@dataclass
class _Listening:
    """The listeners' sockets and servers, and the open Kafka connections."""

    bound: list[tuple[Any, Any]] = field(default_factory=list)
    servers: list[asyncio.base_events.Server] = field(default_factory=list)
    connections: set[Any] = field(default_factory=set)
    clients_served: bool = False


@dataclass
class _Timer:
    """The one timer armed for the earliest deadline, and the links' next check."""

    handle: asyncio.TimerHandle | None = None
    at: float | None = None
    rearm_pending: bool = False
    next_link_check: int = 0


@dataclass
class _Life:
    shutting_down: bool = False
    shutdown_deadline: int | None = None
    done: asyncio.Future[int] | None = None
    exit_code: int = 0


@dataclass
class _LocalQueue:
    """In-process deliveries between this node's machines, drained after each event."""

    queue: deque[Deliver] = field(default_factory=deque)
    draining: bool = False


class Node:
    """The process: see the module docstring."""

    def __init__(self, settings: BrokerSettings, logger: logging.Logger) -> None:
        self.s = settings
        self.log = logger
        self.node_id = settings.node_id
        self.events = Events(logger.getChild("events"), settings.node_id)  # broker/server/eventlog.py
        self.io = NodeRouter(
            settings.node_id, [v.node_id for v in settings.controller_quorum_voters], sync_log_each_call=True
        )
        self.links = Links(
            self,
            settings.node_id,
            logger.getChild("links"),
            settings.socket_request_max_bytes,
            settings.link_timeout_ms / 1000,
            book=self.io.links,
        )
        self.store: LogManager | None = None
        self.offsets: OffsetStore | None = None
        self.groups: GroupCoordinator | None = None
        self.files: QuorumFiles | None = None
        self.watch = BrokerWatch(logger, self.events)
        self.net = _Listening()
        self.timer = _Timer()
        self.life = _Life()
        self.local = _LocalQueue()
        self._cid = 0
        self.handlers = Handlers(self)

    @property
    def broker(self) -> Broker | None:
        return self.io.broker

    @property
    def quorum(self) -> QuorumController | None:
        return self.io.quorum

    @property
    def connections(self) -> set[Any]:
        return self.net.connections

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
        self.life.done = loop.create_future()
        now = self.now()
        self.events.emit("clock", boot_id=_boot_id())
        safeguards = sg.SafeguardSet(frozenset(s.safeguards_off))
        if s.safeguards_off:
            self.log.warning("safeguards OFF: %s", ", ".join(sorted(s.safeguards_off)))
        for k in s.unknown:
            self.log.warning("unknown property %s=%s (ignored)", k, s.raw[k])
        if s.is_controller:
            self.io.quorum, self.files = open_quorum(
                s,
                now,
                safeguards,
                self.log,
                lambda _off, e: log_metadata_append(self.quorum, self.log, self.events, e),
            )
        if s.is_broker:
            parts = open_broker(s, self.io.target.target, safeguards, self.log, self.now)
            self.io.broker, self.store, self.offsets, self.groups = (
                parts.broker,
                parts.store,
                parts.offsets,
                parts.groups,
            )
            parts.store.attach(self._topic_configs, self._high_watermark)
        self.net.bound = bind_listeners(s)
        await self._serve(controller_listeners=True)
        if self.broker is None:
            await self._serve(controller_listeners=False)
        else:
            self.handlers.start()
        if self.quorum is not None:
            self._perform(self.io.tick_quorum(now))
        if self.broker is not None and not never_serve_again(s, self.log):
            self._perform(self.io.on_broker_actions(self.broker.start(now), now))
        self._drain()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, self.request_shutdown, sig)
        self.log.info(
            "node %d started: roles %s, listeners %s",
            s.node_id,
            ",".join(sorted(s.process_roles)),
            ", ".join(f"{li.name}://{li.host}:{li.port}" for li in s.listeners),
        )

    async def _serve(self, controller_listeners: bool) -> None:
        """Serve the controller listeners at once, the client listeners once the broker is
        unfenced (as Kafka: a broker takes requests once it caught up and was unfenced)."""
        loop = asyncio.get_running_loop()
        for li, sock in self.net.bound:
            is_ctl = li.name in self.s.controller_listener_names
            if is_ctl != controller_listeners:
                continue
            server = await loop.create_server(
                lambda li=li, is_ctl=is_ctl: KafkaConnection(self, li.name, is_ctl), sock=sock, backlog=1024
            )
            self.net.servers.append(server)
            self.log.info("listening on %s://%s:%d", li.name, li.host, li.port)

    def _maybe_serve_clients(self) -> None:
        if self.net.clients_served or self.broker is None or self.broker.state != RUNNING:
            return
        me = self.broker.image.brokers.get(self.node_id)
        if me is None or me.fenced:  # our metadata must list us (Metadata answers name us as the controller)
            return
        self.net.clients_served = True
        self.log.info("broker %d is unfenced (broker epoch %d)", self.node_id, self.broker.broker_epoch)
        task = asyncio.get_running_loop().create_task(self._serve(controller_listeners=False))
        task.add_done_callback(lambda t: t.cancelled() or t.exception() is None or self._fatal(t.exception()))

    def _fatal(self, exc: BaseException | None) -> None:
        self.log.error("cannot serve clients: %s", exc)
        self.life.exit_code = 254
        self._stop(254)

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

    # ------------------------------------------------------------ calls from the handlers
    def to_broker(self, src: int | str, msg: object, waiter: Callable[[Any], None] | None = None) -> None:
        """Deliver a message from a Kafka client to the broker machine; `waiter` gets the
        response carrying the message's correlation id."""
        assert self.broker is not None
        self._perform(self.io.on_client(src, msg, self.now(), waiter))  # type: ignore[arg-type]
        self._drain()

    def forward_to_controller(self, msg: Any) -> asyncio.Future[Any]:
        """Send an admin request (CreateTopic, DeleteTopic, ElectLeaders, CreatePartitions,
        AlterConfigs, AlterReassignment, Create/DeleteAcls) to the controller; the future gets
        its response."""
        fut = asyncio.get_running_loop().create_future()
        fut.add_done_callback(lambda _f: self.io.forget_admin(msg.correlation_id))
        self._perform(self.io.on_admin(msg, fut))
        self._drain()
        return fut

    def wait_for_metadata(self, pred: Callable[[], bool]) -> asyncio.Future[None]:
        """A future done once `pred()` holds for the broker's metadata image."""
        return self.watch.wait_for_metadata(pred)

    # ------------------------------------------------------------ performing the router's effects
    def _perform(self, effects: list[Effect]) -> None:
        for e in effects:
            if isinstance(e, Transmit):
                self._transmit(e.key, e.message)
            elif isinstance(e, Deliver):
                self.local.queue.append(e)
            elif isinstance(e, Wake):
                w = e.waiter
                if isinstance(w, asyncio.Future):
                    if not w.done():
                        w.set_result(e.message)
                else:
                    w(e.message)  # type: ignore[operator]
            elif isinstance(e, PersistState):
                assert self.files is not None
                self.files.state.write(e.state)
            elif isinstance(e, SyncLog):
                assert self.files is not None
                self.files.metadata.sync()
            elif isinstance(e, CloseLink):
                link = self.links.get(e.key)
                if link is not None:
                    self.log.warning("%r: %s; closing", link, e.why)
                    link.close()
            elif isinstance(e, Perform):
                self._perform_action(e.action)
            # ToClient: an answer no waiter wanted (its client is gone)
        if self.broker is not None:
            self.watch.after_call(self.broker, self._refresh_topic_configs)
            if not self.net.clients_served:
                self._maybe_serve_clients()
        self._schedule_rearm()

    def _refresh_topic_configs(self) -> None:
        if self.store is not None:
            self.store.refresh_topic_configs()

    def _transmit(self, key: LinkKey, msg: object) -> None:
        """Send on link `key`: an outbound one is opened to the peer's address if none is."""
        link = self.links.get(key)
        if link is None and key.outbound:
            link = self._connect(key)
        if (link is None or not link.send(msg)) and key.outbound:
            asyncio.get_running_loop().call_soon(self._send_failed, key)

    def _connect(self, key: LinkKey) -> Link | None:
        """A new link for `key`: to a voter's controller address, or to a broker's
        inter-broker endpoint in the metadata (None if it has none)."""
        if key.role != ROLE_BROKER:
            v = self.s.voter(key.peer)
            return None if v is None else self.links.connect(key.peer, key.role, v.host, v.port)
        info = self.broker.image.brokers.get(key.peer) if self.broker is not None else None
        ep = (
            None
            if info is None
            else next((e for e in info.listeners if e.name == self.s.inter_broker_listener_name), None)
        )
        if ep is None:
            self.log.debug("no %s endpoint for node %d", self.s.inter_broker_listener_name, key.peer)
            return None
        return self.links.connect(key.peer, key.role, ep.host, ep.port)

    def _send_failed(self, key: LinkKey) -> None:
        if not self.life.shutting_down:
            self._perform(self.io.on_send_failed(key, self.now()))
            self._drain()

    def _perform_action(self, o: object) -> None:
        """The machines' own actions, and the router's notices, in the log."""
        if isinstance(o, CheckpointHighWatermarks):
            if self.store is not None:
                try:
                    self.store.checkpoint_high_watermarks(o.high_watermarks)
                except STORAGE_ERRORS as e:  # the next checkpoint tries again
                    self.log.error("cannot write the high-watermark checkpoint: %s", e)
        elif isinstance(o, DeletePartitionLog):
            self._delete_log(o.tp, o.topic_deleted)
        elif isinstance(o, LogFailure):
            self.log.error(
                "%s: storage failure in %s: %s (answered KAFKA_STORAGE_ERROR)", o.tp, o.operation, o.error
            )
        elif isinstance(o, ReplicaTruncated):
            self.events.emit(
                "truncated",
                tp=o.tp,
                epoch=o.leader_epoch,
                role=o.role,
                from_leo=o.from_leo,
                to=o.to,
                reason=o.reason,
            )
        elif isinstance(o, ShutdownComplete):
            self._finish_broker_shutdown(o.broker_epoch, "controlled shutdown complete")
        elif isinstance(o, ControllerActivated):
            self.log.info(
                "controller: active in quorum epoch %d (metadata log end %d)", o.epoch, o.metadata_end
            )
            self.events.emit("controller-active", epoch=o.epoch)
        elif isinstance(o, ControllerDeactivated):
            self.log.info("controller: no longer active in quorum epoch %d (leader %d)", o.epoch, o.leader_id)
        elif isinstance(o, LogTruncated):
            self.log.warning(
                "quorum: metadata log truncated from %d to %d (epoch %d)", o.from_end, o.to, o.epoch
            )
        elif isinstance(o, RoleChanged):
            self.log.info("quorum: %s in epoch %d (leader %d)", o.role, o.epoch, o.leader_id)
        elif isinstance(o, TargetMoved):
            self.log.info(
                "controller requests go to node %d (was %d, quorum epoch %d)", o.target, o.was, o.epoch
            )
        elif isinstance(o, NoMachine):
            self.log.warning("no %s here for %s from %s", o.target, type(o.message).__name__, o.src)

    def _delete_log(self, tp: TopicPartition, topic_deleted: bool = True) -> None:
        assert self.store is not None
        self.store.delete(tp)
        self.log.info("deleted the log of %s%s", tp, "" if topic_deleted else " (its replica moved away)")
        if self.offsets is not None and tp.partition == 0 and topic_deleted:
            self.offsets.forget_topic(tp.topic)

    def _drain(self) -> None:
        lq = self.local
        if lq.draining:
            return
        lq.draining = True
        try:
            while lq.queue:
                d = lq.queue.popleft()
                self._perform(self.io.on_local(d.target, d.src, d.message, self.now()))
        finally:
            lq.draining = False
        self._schedule_rearm()

    # ------------------------------------------------------------ links (LinkOwner)
    def on_link_hello(self, link: Link) -> bool:
        why = self.io.refuse_link(link.key)
        if why is not None:
            self.log.warning("%r: %s; refusing", link, why)
            return False
        self.links.register_inbound(link)
        self.log.debug("%r: connected", link)
        return True

    def on_link_message(self, link: Link, msg: object) -> None:
        """A peer's message: to the machine its link serves; an error closes the link."""
        try:
            self._perform(self.io.on_link_message(link.key, msg, self.now()))
            self._drain()
        except Exception:  # a peer's message must never take the process down
            self.log.exception("%r: error handling %s; closing the link", link, type(msg).__name__)
            link.close()

    def on_link_lost(self, link: Link) -> None:
        current = self.links.forget(link)
        if not current or self.life.shutting_down:
            return
        self.log.info("%r: lost", link)
        if link.peer_id >= 0:
            self._perform(self.io.on_link_lost(link.key, self.now()))
            self._drain()

    # ------------------------------------------------------------ timers
    def schedule_timers(self) -> None:
        """Re-read the deadlines soon (after something outside the core changed them)."""
        self._schedule_rearm()

    def _schedule_rearm(self) -> None:
        if not self.timer.rearm_pending:
            self.timer.rearm_pending = True
            asyncio.get_running_loop().call_soon(self._rearm)

    def _next_deadline(self) -> int | None:
        ds = [self.life.shutdown_deadline]
        for part in (self.broker, self.quorum, self.groups):
            if part is not None:
                ds.append(part.next_deadline())
        if self.store is not None:
            ds.append(self.store.next_flush_deadline())
        if len(self.links):
            ds.append(self.timer.next_link_check)
        ds = [d for d in ds if d is not None]
        return min(ds) if ds else None

    def _rearm(self) -> None:
        t = self.timer
        t.rearm_pending = False
        if self.life.done is not None and self.life.done.done():
            return
        d = self._next_deadline()
        if d is None:
            return
        loop = asyncio.get_running_loop()
        when = max(d / 1000.0, loop.time() + 0.0005)
        if t.handle is not None:
            if t.at is not None and t.at <= when:
                return
            t.handle.cancel()
        t.at = when
        t.handle = loop.call_at(when, self._on_timer)

    def _on_timer(self) -> None:
        self.timer.handle = self.timer.at = None
        now = self.now()
        try:
            if self.quorum is not None and (d := self.quorum.next_deadline()) is not None and d <= now:
                self._perform(self.io.tick_quorum(now))
            if self.broker is not None and (d := self.broker.next_deadline()) is not None and d <= now:
                self._perform(self.io.tick_broker(now))
            if self.store is not None and (d := self.store.next_flush_deadline()) is not None and d <= now:
                try:
                    self.store.flush_due(now)
                except STORAGE_ERRORS as e:
                    self.log.error("scheduled flush failed: %s", e)
            if self.groups is not None and (d := self.groups.next_deadline()) is not None and d <= now:
                self.groups.tick(now)
            if now >= self.timer.next_link_check:
                self.timer.next_link_check = now + LINK_CHECK_MS
                self.links.check(self.s.socket_connection_setup_timeout_ms / 1000)
            self._drain()
            life = self.life
            if life.shutdown_deadline is not None and now >= life.shutdown_deadline:
                life.shutdown_deadline = None
                epoch = self.broker.broker_epoch if self.broker is not None else -1
                self._finish_broker_shutdown(epoch, "controlled shutdown timed out")
        finally:
            self._schedule_rearm()

    # ------------------------------------------------------------ shutdown
    def request_shutdown(self, sig: int = signal.SIGTERM) -> None:
        name = signal.Signals(sig).name
        if self.life.shutting_down:
            self.log.warning("%s again: stopping now", name)
            epoch = self.broker.broker_epoch if self.broker is not None else -1
            self._finish_broker_shutdown(epoch, f"second {name}")
            return
        self.life.shutting_down = True
        self.log.info("%s: shutting down", name)
        if self.broker is not None:
            self.life.shutdown_deadline = self.now() + self.s.controlled_shutdown_timeout_ms
            self._perform(
                self.io.on_broker_actions(self.broker.begin_controlled_shutdown(self.now()), self.now())
            )
            self._drain()
        else:
            self._stop(0)

    def _finish_broker_shutdown(self, epoch: int, why: str) -> None:
        if self.life.done is None or self.life.done.done():
            return
        if self.store is not None and self.broker is not None:
            hwms = {tp: r.high_watermark for tp, r in self.broker.partitions.items()}
            try:
                self.store.checkpoint_high_watermarks(hwms)
                self.store.shutdown(epoch)
                self.log.info("%s: logs flushed, clean-shutdown marker written (broker epoch %d)", why, epoch)
            except Exception as e:  # the logs may be incomplete: no marker, next start recovers
                self.log.error("%s: flushing the logs failed (no clean-shutdown marker): %s", why, e)
                self.life.exit_code = 1
        self._stop(self.life.exit_code)

    def _stop(self, code: int) -> None:
        life = self.life
        if life.done is None or life.done.done():
            return
        life.shutting_down = True
        for server in self.net.servers:
            server.close()
        for _li, sock in self.net.bound:
            sock.close()
        for conn in list(self.net.connections):
            conn.abort()
        self.links.close_all()
        if self.files is not None:
            self.files.metadata.close()
        if self.offsets is not None:
            self.offsets.close()
        if self.timer.handle is not None:
            self.timer.handle.cancel()
        for waiter, _msg in list(self.io.waiters.admin.values()):
            if isinstance(waiter, asyncio.Future) and not waiter.done():
                waiter.cancel()
        life.done.set_result(code)

    async def run(self) -> int:
        await self.start()
        assert self.life.done is not None
        code = await self.life.done
        self.log.info("node %d stopped", self.node_id)
        return code
