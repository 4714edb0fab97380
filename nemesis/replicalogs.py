"""Each replica's log of a partition, read over the wire, and where two replicas' logs differ.

`read_replica(address, topic, partition)` reads one replica's whole log with Kafka's debugging
fetch (replica id -2, as Kafka's ReplicaVerificationTool does): any replica, leader or
follower, answers from its own log up to its log end, with its own high watermark. Only the
batch headers are kept (`BatchId`: base and last offset, stored CRC-32C, leader epoch, max
timestamp): a follower copies the leader's batches byte for byte, leader epoch included, so
two replicas hold the same log at the same offsets exactly when their batches have the same
offsets, CRCs and epochs (the CRC does not cover the epoch: a follower that kept a record
the new leader wrote again under a later epoch holds the same bytes in another epoch, and
its epoch cache, which truncation decides by, differs).
OSError when the node does not answer, `nemesis.targets.TargetError` for an error answer.

`first_difference(a, b)` is a pure function of two such logs: the first offset, at or above
both log starts, at which both hold a record and the batches differ (another batch there,
another epoch, or batches cut at other offsets); None when one log is a prefix of the other there. A
difference below both replicas' high watermarks is a committed record the replicas disagree
on (checkers/replicas.py judges it); above, a follower's uncommitted tail may legitimately
differ until it truncates.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from nemesis.targets import TargetError

FETCH_BYTES = 8 << 20  # bytes per debugging fetch (a whole log takes several)


class BatchId(NamedTuple):
    """What identifies a record batch in a replica's log."""

    base: int
    last: int
    crc: int
    epoch: int
    max_ts: int  # ms, the batch's max timestamp (CreateTime: the producer's clock)

    def to_dict(self) -> dict[str, int]:
        return self._asdict()


@dataclass
class ReplicaLog:
    """One replica's log: its high watermark, log start and end, and its batches in order."""

    hwm: int
    log_start: int
    log_end: int
    batches: list[BatchId] = field(default_factory=list)

    def summary(self) -> dict[str, int]:
        return {"hwm": self.hwm, "log_start": self.log_start, "log_end": self.log_end, "batches": len(self.batches)}


def read_replica(address: str, topic: str, partition: int, port: int = 9092, timeout: float = 10.0,
                 fetch_bytes: int = FETCH_BYTES) -> ReplicaLog:
    """The replica's log at `address` (module docstring); its high watermark is the one its
    first answer gave (the logs are compared below it; it only grows)."""
    # lazy: broker.wire imports kio (~0.25 s), as nemesis.targets' calls do
    from broker.records import BatchError, iter_batches
    from broker.wire.client import RawClient

    with RawClient(address, port, timeout=timeout) as c:
        p = _fetch(c, topic, partition, 0, fetch_bytes, start_unknown=True)
        out = ReplicaLog(int(p.high_watermark), int(p.log_start_offset), int(p.log_start_offset))
        offset = out.log_start
        if p.error_code.value != 0:  # the log starts later than 0: ask from its start
            p = _fetch(c, topic, partition, offset, fetch_bytes)
        while True:
            got = 0
            try:
                for _start, _end, h in iter_batches(bytes(p.records or b""), validate=False):
                    if h.base_offset >= offset:
                        out.batches.append(BatchId(h.base_offset, h.last_offset, h.crc, h.partition_leader_epoch,
                                                   h.max_timestamp))
                        got += 1
                    offset = max(offset, h.next_offset)
            except BatchError:  # a batch cut by the byte limit: fetched again from its start
                pass
            if not got:
                break
            p = _fetch(c, topic, partition, offset, fetch_bytes)
        out.log_end = offset
    return out


def _fetch(c: Any, topic: str, partition: int, offset: int, fetch_bytes: int, start_unknown: bool = False) -> Any:
    """One partition's answer to a debugging fetch from `offset`; TargetError for an error
    (`start_unknown`: OFFSET_OUT_OF_RANGE with a log start is returned, to ask again there)."""
    # lazy: broker.wire imports kio (~0.25 s), as read_replica's imports
    from broker.core.messages import DEBUG_REPLICA_ID
    from broker.wire.kafka import FETCH

    r = c.call(FETCH, 12, {"replica_id": DEBUG_REPLICA_ID, "max_wait": 0, "min_bytes": 0, "max_bytes": fetch_bytes,
                         "isolation_level": 0, "topics": [{"topic": topic, "partitions": [
                             {"partition": partition, "fetch_offset": offset, "current_leader_epoch": -1,
                              "partition_max_bytes": fetch_bytes}]}], "forgotten_topics_data": []})
    p = r.responses[0].partitions[0]
    code = p.error_code
    if code.value == 0 or (start_unknown and code.name == "offset_out_of_range" and p.log_start_offset > offset):
        return p
    raise TargetError(f"{topic}-{partition} at {c.sock.getpeername()[0]}: debugging fetch from {offset}: {code.name}")


def first_difference(a: ReplicaLog, b: ReplicaLog) -> tuple[int, BatchId | None, BatchId | None] | None:
    """(offset, a's batch there, b's batch there) at the first offset both logs hold that
    differs (module docstring), or None. A batch is None where that log has a gap."""
    lo = max(a.log_start, b.log_start)
    xs = _from(a.batches, lo)
    ys = _from(b.batches, lo)
    i = j = 0
    while i < len(xs) and j < len(ys):
        x, y = xs[i], ys[j]
        if x.last < y.base:  # a batch only a holds (b has a gap or starts later)
            i += 1
            continue
        if y.last < x.base:
            j += 1
            continue
        if (x.base, x.last, x.crc, x.epoch) != (y.base, y.last, y.crc, y.epoch):
            return max(x.base, y.base), x, y
        i += 1
        j += 1
    return None


def _from(batches: Sequence[BatchId], lo: int) -> Sequence[BatchId]:
    """The batches that hold an offset at or above `lo`."""
    k = 0
    while k < len(batches) and batches[k].last < lo:
        k += 1
    return batches[k:]
