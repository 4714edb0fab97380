"""The follower side of fetching, sans-IO (Kafka's ReplicaFetcherManager): one fetch in
flight per leader broker, covering every partition this broker follows on it.

A partition is fetched once it follows a leader other than this broker and its fetch
backoff has passed. A leader's answer goes to each partition it still leads and whose
fetch state the request matched (`PartitionReplica.handle_fetch_response`); then the
broker fetches again. A fetch unanswered for the request timeout, or whose link broke,
is given up: its partitions fetch again at once (timeout) or after
`replica_fetch_backoff_ms` (broken link), from whoever leads them by then.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from broker.core.messages import (
    NO_LEADER,
    Actions,
    FetchPartition,
    FetchRequest,
    FetchResponse,
    TopicPartition,
)
from broker.core.replica import FOLLOWER, PartitionReplica
from broker.core.replica_state import drain_failures


class FollowerHost(Protocol):
    """What fetching needs of the broker that owns the replicas (broker.py `Broker`)."""

    @property
    def partitions(self) -> dict[TopicPartition, PartitionReplica]: ...


@dataclass(slots=True)
class Fetcher:
    """The fetch to one leader broker: its correlation id (-1: none in flight), when it
    went, and what it asked of each partition."""

    correlation_id: int = -1
    sent_at: int = 0
    sent: dict[TopicPartition, FetchPartition] = field(default_factory=dict)


class ReplicaFetchers:
    """The fetches of one broker's follower replicas, one per leader broker."""

    def __init__(self, host: FollowerHost, broker_id: int, next_id: Callable[[], int], *, wait_max_ms: int,
                 backoff_ms: int, request_timeout_ms: int) -> None:
        self._host = host
        self.broker_id = broker_id
        self._next_id = next_id
        self.wait_max_ms = wait_max_ms
        self.backoff_ms = backoff_ms
        self.request_timeout_ms = request_timeout_ms
        self.by_leader: dict[int, Fetcher] = {}

    def send(self, broker_epoch: int, now: int, acts: Actions) -> None:
        """A fetch to every leader broker with partitions due and none in flight."""
        by_leader: dict[int, dict[TopicPartition, FetchPartition]] = {}
        for tp, r in self._host.partitions.items():
            if r.role == FOLLOWER and r.leader_id not in (NO_LEADER, self.broker_id) and now >= r.fetch_backoff_until:
                by_leader.setdefault(r.leader_id, {})[tp] = r.fetch_partition()
                r.fetch_backoff_until = 0
        for leader, parts in by_leader.items():
            f = self.by_leader.setdefault(leader, Fetcher())
            if f.correlation_id >= 0:
                continue
            f.correlation_id, f.sent_at, f.sent = self._next_id(), now, parts
            acts.send(
                leader,
                FetchRequest(f.correlation_id, self.broker_id, broker_epoch, tuple(parts.values()), self.wait_max_ms),
            )

    def on_response(self, src: int, msg: FetchResponse, now: int, acts: Actions) -> bool:
        """The answer of leader `src`, to each partition it was for; False if it answers
        no fetch in flight (then nothing changes)."""
        f = self.by_leader.get(src)
        if f is None or f.correlation_id != msg.correlation_id:
            return False
        f.correlation_id = -1
        partitions = self._host.partitions
        for pr in msg.partitions:
            r = partitions.get(pr.tp)
            sent = f.sent.get(pr.tp)
            if r is not None and sent is not None and r.leader_id == src:
                r.handle_fetch_response(sent, pr, now, self.backoff_ms)
                drain_failures(r, acts)
        return True

    def link_lost(self, node: int, now: int) -> None:
        """The link to `node` broke: its fetch in flight will not be answered; its
        partitions back off, then fetch again."""
        f = self.by_leader.get(node)
        if f is not None and f.correlation_id >= 0:
            f.correlation_id = -1
            for tp in f.sent:
                r = self._host.partitions.get(tp)
                if r is not None and r.role == FOLLOWER:
                    r.fetch_backoff_until = now + self.backoff_ms

    def expire(self, now: int) -> None:
        """Give up the fetches unanswered for the request timeout: their partitions (still
        led by the same broker) fetch again at once."""
        for leader, f in self.by_leader.items():
            if f.correlation_id >= 0 and now - f.sent_at >= self.request_timeout_ms:
                f.correlation_id = -1
                for tp in f.sent:
                    r = self._host.partitions.get(tp)
                    if r is not None and r.leader_id == leader:
                        r.fetch_backoff_until = now

    def idle(self, leader: int) -> bool:
        """No fetch to `leader` is in flight."""
        f = self.by_leader.get(leader)
        return f is None or f.correlation_id < 0

    def deadlines(self) -> list[int]:
        """When each fetch in flight times out."""
        return [f.sent_at + self.request_timeout_ms for f in self.by_leader.values() if f.correlation_id >= 0]
