"""What the process notices of its machines after each event, and says in its log.

`Events` writes the event lines of broker/server/eventlog.py. `BrokerWatch` follows the
broker between calls: its metadata image moving (the storage's topic configs refreshed,
waiters on the metadata woken, partition role changes logged as lines and events) and its
state (logged). `log_metadata_append` logs the records this node's active controller
writes that tell a fault's story.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from broker.core.broker import Broker
from broker.core.messages import TopicPartition
from broker.core.metadata import BrokerRegistrationChangeRecord, PartitionChangeRecord, RegisterBrokerRecord
from broker.core.quorum_controller import QuorumController
from broker.core.raft import Role
from broker.core.raft_messages import RaftEntry
from broker.core.replica import LEADER
from broker.server.eventlog import election_kind, format_event


class Events:
    """The node's event lines (logger `wrack.broker.events`)."""

    def __init__(self, logger: logging.Logger, node_id: int) -> None:
        self.log = logger
        self.node_id = node_id

    def emit(self, kind: str, **fields: Any) -> None:
        if self.log.isEnabledFor(logging.INFO):
            self.log.info("%s", format_event(kind, {"node": self.node_id, **fields}))


class BrokerWatch:
    """The broker as the process last saw it, and who waits for its metadata."""

    def __init__(self, log: logging.Logger, events: Events) -> None:
        self.log = log
        self.events = events
        self.image_offset = -1
        self.roles: dict[TopicPartition, tuple[str, int, int]] = {}
        self.state = "STARTING"
        self.metadata_waiters: list[tuple[Callable[[], bool], asyncio.Future[None]]] = []

    def after_call(self, broker: Broker, refresh_configs: Callable[[], None]) -> None:
        """After a call into the broker: react to its image or state having moved."""
        if broker.image.next_offset != self.image_offset:
            self.image_offset = broker.image.next_offset
            refresh_configs()
            self._wake_metadata_waiters()
            self._log_roles(broker)
        if broker.state != self.state:
            self.log.info(
                "broker state %s -> %s (broker epoch %d)", self.state, broker.state, broker.broker_epoch
            )
            self.state = broker.state

    def wait_for_metadata(self, pred: Callable[[], bool]) -> asyncio.Future[None]:
        """A future done once `pred()` holds for the broker's metadata image."""
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        if pred():
            fut.set_result(None)
        else:
            self.metadata_waiters.append((pred, fut))
        return fut

    def _wake_metadata_waiters(self) -> None:
        keep = []
        for pred, fut in self.metadata_waiters:
            if fut.done():
                continue
            if pred():
                fut.set_result(None)
            else:
                keep.append((pred, fut))
        self.metadata_waiters = keep

    def _log_roles(self, broker: Broker) -> None:
        """Log this broker's partition role changes (after its metadata moved)."""
        for tp, r in broker.partitions.items():
            now = (r.role, r.leader_id, r.leader_epoch)
            before = self.roles.get(tp)
            if before == now:
                continue
            self.roles[tp] = now
            self.log.info(
                "%s: %s (leader %d, epoch %d), LEO %d, HWM %d",
                tp,
                r.role,
                r.leader_id,
                r.leader_epoch,
                r.log.log_end_offset,
                r.high_watermark,
            )
            if before is None:
                self.events.emit("replica-opened", tp=tp, leo=r.log.log_end_offset, hwm=r.high_watermark)
            if r.role == LEADER:
                self.events.emit(
                    "became-leader",
                    tp=tp,
                    epoch=r.leader_epoch,
                    from_offset=r.leso,
                    hwm=r.high_watermark,
                    isr=r.isr,
                )
            else:
                self.events.emit(
                    "became-follower",
                    tp=tp,
                    epoch=r.leader_epoch,
                    leader=r.leader_id,
                    leo=r.log.log_end_offset,
                    hwm=r.high_watermark,
                )


def log_metadata_append(
    quorum: QuorumController | None, log: logging.Logger, events: Events, entry: RaftEntry
) -> None:
    """Log a record this node's active controller wrote, if it tells a fault's story
    (followers' copies of the log are not logged again)."""
    if quorum is None or quorum.raft.role is not Role.LEADER:
        return
    record = entry.record
    if isinstance(record, RegisterBrokerRecord):
        log.info("controller: broker %d registered (broker epoch %d)", record.broker_id, record.broker_epoch)
    elif isinstance(record, BrokerRegistrationChangeRecord):
        what = [
            k
            for k, v in (
                ("fenced", record.fenced is True),
                ("unfenced", record.fenced is False),
                ("shutting down", record.in_controlled_shutdown is True),
            )
            if v
        ]
        log.info("controller: broker %d %s", record.broker_id, ", ".join(what) or "changed")
    elif isinstance(record, PartitionChangeRecord):
        r = record.registration
        log.info(
            "controller: %s leader %d epoch %d isr %s elr %s%s",
            record.tp,
            r.leader,
            r.leader_epoch,
            list(r.isr),
            list(r.elr),
            " RECOVERING" if r.leader_recovery_state else "",
        )
        active = quorum.controller
        prev = active.image.partitions.get(record.tp) if active is not None else None
        events.emit(
            "partition-change",
            tp=record.tp,
            leader=r.leader,
            epoch=r.leader_epoch,
            prev_leader=-1 if prev is None else prev.leader,
            prev_epoch=-1 if prev is None else prev.leader_epoch,
            election=election_kind(prev, r),
            isr=r.isr,
            elr=r.elr,
        )
