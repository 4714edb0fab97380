"""A simulated producer: finds leaders with Metadata, sends one-record batches, and
reports every acknowledgement (with the batch CRC that identifies the record)."""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field

from kio.schema.errors import ErrorCode

from broker.core.messages import (
    NO_LEADER,
    MetadataRequest,
    MetadataResponse,
    ProduceRequest,
    ProduceResponse,
    Send,
    TopicPartition,
)
from broker.sim.batches import encode_batch, header


@dataclass
class Outstanding:
    tp: TopicPartition
    value: bytes
    crc: int
    acks: int
    sent_at: int


@dataclass
class Ack:
    """A positive acknowledgement: `value` (batch CRC `crc`) is at `offset` of `tp`."""

    time: int
    tp: TopicPartition
    offset: int
    value: bytes
    crc: int
    acks: int


@dataclass
class SimProducer:
    name: str
    brokers: list[int]
    rng: random.Random
    on_ack: Callable[[Ack], None]
    max_in_flight: int = 3
    timeout_ms: int = 5000
    leaders: dict[TopicPartition, int] = field(default_factory=dict)
    outstanding: dict[int, Outstanding] = field(default_factory=dict)
    errors: dict[str, int] = field(default_factory=dict)
    _cid: int = 0
    _metadata_at: int = -(10**9)
    _counter: int = 0

    def _next(self) -> int:
        self._cid += 1
        return self._cid

    def refresh_metadata(self, now: int, force: bool = False) -> list[Send]:
        if not force and now - self._metadata_at < 200:
            return []
        self._metadata_at = now
        return [Send(self.rng.choice(self.brokers), MetadataRequest(self._next()))]

    def expire(self, now: int) -> list[Send]:
        """Give up on requests older than the timeout (indeterminate); forget their leader."""
        expired = False
        for cid, o in list(self.outstanding.items()):
            if now - o.sent_at > self.timeout_ms:
                del self.outstanding[cid]
                self.errors["timeout"] = self.errors.get("timeout", 0) + 1
                self.leaders.pop(o.tp, None)
                expired = True
        return self.refresh_metadata(now, force=True) if expired else []

    def produce(self, tp: TopicPartition, acks: int, now: int, value: bytes | None = None) -> list[Send]:
        """Send one record to the leader of `tp` if possible (else ask for metadata)."""
        sends = self.expire(now)
        leader = self.leaders.get(tp, NO_LEADER)
        if leader == NO_LEADER:
            return sends + self.refresh_metadata(now)
        if len(self.outstanding) >= self.max_in_flight:
            return sends
        if value is None:
            self._counter += 1
            value = f"{self.name}-{self._counter}".encode()
        batch = encode_batch([value], timestamp=now)
        cid = self._next()
        self.outstanding[cid] = Outstanding(tp, value, header(batch)[3], acks, now)
        sends = [Send(leader, ProduceRequest(cid, tp, acks, batch, timeout_ms=self.timeout_ms))]
        if acks == 0:
            del self.outstanding[cid]
        return sends

    def handle(self, msg: object, now: int) -> list[Send]:
        if isinstance(msg, MetadataResponse):
            for p in msg.partitions:
                self.leaders[p.tp] = p.leader
            return []
        if isinstance(msg, ProduceResponse):
            o = self.outstanding.pop(msg.correlation_id, None)
            if o is None:
                return []
            if msg.error is ErrorCode.none:
                self.on_ack(Ack(now, o.tp, msg.base_offset, o.value, o.crc, o.acks))
                return []
            name = msg.error.name
            self.errors[name] = self.errors.get(name, 0) + 1
            if msg.error in (ErrorCode.not_leader_or_follower, ErrorCode.fenced_leader_epoch, ErrorCode.unknown_leader_epoch):
                self.leaders.pop(o.tp, None)
                return self.refresh_metadata(now, force=True)
        return []
