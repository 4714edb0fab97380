"""The leader side of fetching, sans-IO: serving a fetch request over its partitions
(Kafka's ReplicaManager.fetchMessages) and parking one that has nothing to return yet
(Kafka's DelayedFetch in its purgatory).

A replica fetch (replica id >= 0) goes to each partition's `handle_follower_fetch`; a
debugging fetch (replica id -2, Kafka's ReplicaVerificationTool's) to its `debug_read`, which
any replica answers from its own log up to its log end, answered at once; a
consumer fetch reads below the HWM (or the LSO) within its byte budget (KIP-74: at least
one batch). A fetch worth answering (records, an error, a divergence, a consumer's
`min_bytes` reached, or `max_wait_ms` <= 0) is answered at once; any other is parked until
one of its partitions appends or moves its HWM (`wake`), or its `max_wait_ms` passes. A
follower has at most one fetch parked here: a new one replaces it. The fetches parked by a
broker whose link to this one broke are dropped (`drop_from`): nobody could get their
answers.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Protocol

from kio.schema.errors import ErrorCode

from broker.core.messages import (
    DEBUG_REPLICA_ID,
    Actions,
    FetchPartitionResponse,
    FetchRequest,
    FetchResponse,
    TopicPartition,
)
from broker.core.metadata import MetadataImage
from broker.core.replica import PartitionReplica, ReplicaEvents
from broker.core.replica_state import drain_failures


class ReplicaHost(Protocol):
    """What serving a fetch needs of the broker that owns the replicas (broker.py `Broker`)."""

    @property
    def partitions(self) -> dict[TopicPartition, PartitionReplica]: ...

    @property
    def image(self) -> MetadataImage: ...

    def settle(self, r: PartitionReplica, ev: ReplicaEvents, now: int, acts: Actions) -> None:
        """A call of `r` is done: act on what `ev` holds (broker.py `Broker.settle`)."""


@dataclass(slots=True)
class ParkedFetch:
    src: int
    request: FetchRequest
    deadline: int


class FetchPurgatory:
    """The fetches a broker serves as leader, and those parked until they are worth answering."""

    def __init__(self, host: ReplicaHost) -> None:
        self._host = host
        self.parked: list[ParkedFetch] = []

    def serve(self, req: FetchRequest, now: int, acts: Actions) -> tuple[FetchResponse, bool]:
        """Evaluate a fetch; returns (response, worth sending now)."""
        partitions, image = self._host.partitions, self._host.image
        out = []
        interesting = req.max_wait_ms <= 0
        budget = req.max_bytes  # consumer fetches: total records bytes (KIP-74: at least one batch)
        got = 0
        for p in req.partitions:
            r = partitions.get(p.tp)
            if r is None:
                out.append(FetchPartitionResponse(p.tp, ErrorCode.not_leader_or_follower))
                interesting = True
                continue
            if req.replica_id == DEBUG_REPLICA_ID:  # any replica answers with its own log (debug_read)
                resp = r.debug_read(p.fetch_offset, max(1, min(p.partition_max_bytes, budget)))
                out.append(resp)
                got += len(resp.records)
                budget -= len(resp.records)
                interesting = True
                continue
            if req.replica_id < 0:
                err = r.check_leader_epoch(p.current_leader_epoch)
                if err is not ErrorCode.none:
                    out.append(r._error(err))
                    interesting = True
                    continue
                if got and budget <= 0:  # the response is full: the partition's state only
                    out.append(FetchPartitionResponse(p.tp, ErrorCode.none, r.high_watermark, r.log.log_start_offset,
                                                      last_stable_offset=r.last_stable_offset()))
                    continue
                resp = r.consumer_read(p.fetch_offset, max(1, min(p.partition_max_bytes, budget)), req.isolation_level == 1)
                drain_failures(r, acts)
                out.append(resp)
                got += len(resp.records)
                budget -= len(resp.records)
                if resp.error is not ErrorCode.none:
                    interesting = True
                continue
            ev = ReplicaEvents()
            resp = r.handle_follower_fetch(req.replica_id, req.replica_epoch, p, image, now, ev)
            self._host.settle(r, ev, now, acts)
            out.append(resp)
            if resp.error is not ErrorCode.none or resp.records or resp.diverging_epoch is not None:
                interesting = True
        if req.replica_id < 0 and got >= max(req.min_bytes, 1):
            interesting = True
        return FetchResponse(req.correlation_id, tuple(out)), interesting

    def on_fetch(self, src: int, req: FetchRequest, now: int, acts: Actions) -> None:
        """A fetch from `src`: answered now, or parked (a replica's earlier one is dropped)."""
        self.parked = [p for p in self.parked if p.src != src or req.replica_id < 0]
        resp, send_now = self.serve(req, now, acts)
        if send_now:
            acts.send(src, resp)
        else:
            self.parked.append(ParkedFetch(src, req, now + req.max_wait_ms))

    def wake(self, now: int, acts: Actions, tps: set[TopicPartition] | None, expired_only: bool = False) -> None:
        """Serve again the parked fetches of `tps` (with `expired_only`: those past their
        deadline) and answer those now worth it (a consumer's waits on for `min_bytes`
        until its deadline)."""
        if not self.parked:
            return
        keep: list[ParkedFetch] = []
        wake: list[ParkedFetch] = []
        for p in self.parked:
            hit = now >= p.deadline if expired_only else any(fp.tp in tps for fp in p.request.partitions)  # type: ignore[operator]
            (wake if hit else keep).append(p)
        self.parked = keep
        for p in wake:
            resp, interesting = self.serve(p.request, now, acts)
            if p.request.replica_id < 0 and not interesting and now < p.deadline:
                self.parked.append(p)  # a consumer waits for min_bytes (or its deadline)
                continue
            acts.send(p.src, resp)

    def drop_from(self, src: int) -> None:
        """The link `src` opened to this broker broke: its parked fetches can get no answer."""
        self.parked = [p for p in self.parked if p.src != src]

    def deadlines(self) -> Iterator[int]:
        return (p.deadline for p in self.parked)
