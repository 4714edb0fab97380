"""Simulated clients. `SimProducer` finds leaders with Metadata, sends one-record
batches, and reports every acknowledgement (with the batch CRC that identifies the
record); `SimConsumer` reads one partition from its leader as librdkafka's assign mode
does and records every rewind (an OFFSET_OUT_OF_RANGE reset)."""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field

from kio.schema.errors import ErrorCode

from broker.core.messages import (
    NO_LEADER,
    FetchPartition,
    FetchRequest,
    FetchResponse,
    MetadataRequest,
    MetadataResponse,
    ProduceRequest,
    ProduceResponse,
    Send,
    TopicPartition,
)
from broker.sim.batches import decode_values, encode_batch, header, split_batches


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


@dataclass
class SimConsumer:
    """A simulated consumer of one partition (as librdkafka with assign and
    auto.offset.reset=earliest): finds the leader with Metadata, long-polls from its
    position, and on OFFSET_OUT_OF_RANGE resets to offset 0, which it records as a
    `rewind` (position, when). Leader errors and timeouts refresh the metadata."""

    name: str
    tp: TopicPartition
    brokers: list[int]
    rng: random.Random
    timeout_ms: int = 5000
    max_wait_ms: int = 100
    position: int = 0
    leader: int = NO_LEADER
    records: list[tuple[int, bytes]] = field(default_factory=list)  # (offset, value) in read order
    rewinds: list[tuple[int, int]] = field(default_factory=list)  # (position before, time)
    errors: dict[str, int] = field(default_factory=dict)
    _cid: int = 0
    _inflight: tuple[int, int] | None = None  # (correlation id, sent at)
    _metadata_cid: int = -1

    def _next(self) -> int:
        self._cid += 1
        return self._cid

    def poll(self, now: int) -> list[Send]:
        """What to send now: a fetch to the leader, or a metadata request."""
        if self._inflight is not None:
            if now - self._inflight[1] < self.timeout_ms:
                return []
            self._inflight = None  # timed out: ask who leads now
            self.leader = NO_LEADER
        if self.leader == NO_LEADER:
            self._metadata_cid = self._next()
            self._inflight = (self._metadata_cid, now)
            return [Send(self.rng.choice(self.brokers), MetadataRequest(self._metadata_cid, (self.tp.topic,)))]
        cid = self._next()
        self._inflight = (cid, now)
        part = FetchPartition(self.tp, -1, self.position, -1)
        return [Send(self.leader, FetchRequest(cid, -1, -1, (part,), self.max_wait_ms))]

    def handle(self, msg: object, now: int) -> list[Send]:
        if self._inflight is None or getattr(msg, "correlation_id", None) != self._inflight[0]:
            return []
        self._inflight = None
        if isinstance(msg, MetadataResponse):
            self.leader = next((p.leader for p in msg.partitions if p.tp == self.tp), NO_LEADER)
        elif isinstance(msg, FetchResponse):
            pr = next((p for p in msg.partitions if p.tp == self.tp), None)
            if pr is None:
                return []
            if pr.error is ErrorCode.none:
                for b in split_batches(pr.records):
                    base = header(b)[0]
                    for i, v in enumerate(decode_values(b)):
                        if base + i >= self.position:
                            self.records.append((base + i, v))
                            self.position = base + i + 1
            else:
                self.errors[pr.error.name] = self.errors.get(pr.error.name, 0) + 1
                if pr.error is ErrorCode.offset_out_of_range:
                    self.rewinds.append((self.position, now))
                    self.position = 0
                else:
                    self.leader = NO_LEADER
        return self.poll(now)


@dataclass
class SimRecorder:
    """A client that a scenario drives by hand: it sends what the scenario sends and
    keeps every answer (time, message)."""

    name: str
    received: list[tuple[int, object]] = field(default_factory=list)

    def handle(self, msg: object, now: int) -> list[Send]:
        self.received.append((now, msg))
        return []
