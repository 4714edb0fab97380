"""A partition replica's state and the records of what a call did, shared by its rules.

`ReplicaState` holds one partition's replica on one broker: its role and epochs, the
assignment, the ISR and Maximal ISR, the HWM and LESO, what the leader knows of its
followers, the requests waiting on it, the producer state and transaction index, and the
storage failures and truncations the `Broker` drains (`drain_failures`). The rules that
change it are split by side, one method a rule as in Kafka's Partition.scala:
replica_isr.py (the leader's ISR, HWM and AlterPartition), replica_leader.py (the leader
serving fetches, produce and DeleteRecords), replica_follower.py (the follower applying
fetched data) and replica.py (`PartitionReplica`: role transitions on new metadata).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum

from broker.core import safeguards as sg
from broker.core.messages import (
    NO_LEADER,
    UNDEFINED_OFFSET,
    Actions,
    AlterPartitionRequest,
    DeleteRecordsResponse,
    LogFailure,
    ProduceResponse,
    ReplicaTruncated,
    TopicPartition,
)
from broker.core.metadata import RECOVERED
from broker.core.producers import ProducerBatch, ProducerStateTable, scan
from broker.core.transactions import AbortedTxn, TxnIndex
from broker.logapi import STORAGE_ERRORS, PartitionLog
from broker.records import BatchError

REBUILD_ERRORS: tuple[type[BaseException], ...] = (*STORAGE_ERRORS, BatchError)  # what stops a rebuilding scan


class ReplicaRole(StrEnum):
    """A replica's role, from the partition's registration in the metadata image: any role
    may follow any other (a new registration decides), so there is no transition table."""

    LEADER = "leader"
    FOLLOWER = "follower"
    OFFLINE = "offline"


LEADER, FOLLOWER, OFFLINE = ReplicaRole.LEADER, ReplicaRole.FOLLOWER, ReplicaRole.OFFLINE


@dataclass(slots=True)
class FollowerState:
    """What the leader knows of one follower (reset on every new leader epoch)."""

    log_end_offset: int = UNDEFINED_OFFSET
    broker_epoch: int = -1
    last_fetch_time: int = -1
    last_caught_up_time: int = 0
    fetched_in_epoch: bool = False
    last_fetch_leader_leo: int = -1
    log_start_offset: int = UNDEFINED_OFFSET  # as its last fetch said


@dataclass(slots=True)
class PendingDelete:
    """A DeleteRecords waiting for the low watermark (Kafka's DelayedDeleteRecords)."""

    client: int | str
    correlation_id: int
    required_offset: int
    deadline: int


@dataclass(slots=True)
class PendingProduce:
    client: int | str
    correlation_id: int
    required_offset: int
    base_offset: int
    deadline: int


@dataclass(slots=True)
class PendingAlter:
    """The ISR change in flight. It stays pending (the Maximal ISR in force) until it is
    answered or newer metadata arrives, as in Kafka: an unanswered request may still be
    applied, so the leader may not act as if it were lost (`alter_timed_out` sends it again)."""

    correlation_id: int
    proposed_isr: tuple[int, ...]
    recovery_state: int
    sent_at: int
    request: AlterPartitionRequest | None = None
    outdated: bool = False  # answered "the controller has newer state": wait for that metadata


@dataclass(slots=True)
class ReplicaEvents:
    """Side effects of one call, for the Broker to turn into messages."""

    produce_responses: list[tuple[int | str, ProduceResponse]] = field(default_factory=list)
    delete_responses: list[tuple[int | str, DeleteRecordsResponse]] = field(default_factory=list)
    alter_partition: AlterPartitionRequest | None = None
    hwm_changed: bool = False
    appended: bool = False


@dataclass(frozen=True, slots=True)
class ReplicaSettings:
    broker_id: int
    replica_lag_time_max_ms: int
    min_isr: int
    guards: sg.SafeguardSet


class ReplicaState:
    """The local replica of one partition: its state and the helpers every rule uses."""

    def __init__(
        self, tp: TopicPartition, log: PartitionLog, settings: ReplicaSettings, next_id: Callable[[], int], hwm: int = 0
    ) -> None:
        self.tp = tp
        self._next_id = next_id
        self.log = log
        self.s = settings
        self.role: ReplicaRole = OFFLINE
        self.leader_id = NO_LEADER
        self.leader_epoch = -1
        self.partition_epoch = -1
        self.replicas: tuple[int, ...] = ()
        self.isr: tuple[int, ...] = ()
        self.maximal_isr: tuple[int, ...] = ()
        self.recovery_state = RECOVERED
        self.high_watermark = min(hwm, log.log_end_offset)
        self.leso = 0
        self.followers: dict[int, FollowerState] = {}
        self.pending_alter: PendingAlter | None = None
        self.pending_produce: list[PendingProduce] = []
        self.pending_deletes: list[PendingDelete] = []
        self.fetch_backoff_until = 0
        self.failures: list[tuple[str, str]] = []  # (operation, error) of storage failures, drained by the Broker
        self.truncations: list[tuple[int, int, str]] = []  # (from LEO, to, reason), drained by the Broker
        self.producers = ProducerStateTable()  # idempotent producers (broker/core/producers.py)
        self.txns = TxnIndex()  # transactions (broker/core/transactions.py)

    def load_producer_state(self) -> None:
        """Rebuild the producer state and the transaction index from the log: the index
        from the log start, the producer state from `log.producer_state_start` (the
        on-disk log's active segment) or the log start, both to the LEO."""
        log = self.log
        self.producers = ProducerStateTable()
        self.txns = TxnIndex()
        pstart = max(getattr(log, "producer_state_start", log.log_start_offset), log.log_start_offset)
        off = log.log_start_offset
        try:
            while off < log.log_end_offset:
                batches, end = scan(log.read(off, 1 << 20))
                for b in batches:
                    self.txns.apply(b)
                    if b.last_offset >= pstart:
                        self.producers.record(b)
                if end <= off:
                    break
                off = end
        except REBUILD_ERRORS as e:  # what was read stays; later producers count as unknown
            self._failed("producer state rebuild", e)

    def _record_batches(self, batches: list[ProducerBatch]) -> None:
        for b in batches:
            self.producers.record(b)
            self.txns.apply(b)

    def last_stable_offset(self) -> int:
        """The LSO: below the oldest ongoing transaction and the HWM (transactions.py)."""
        return self.txns.last_stable_offset(self.high_watermark)

    def aborted_between(self, start: int, end: int) -> list[AbortedTxn]:
        """The aborted transactions with records in [start, end) (a read_committed fetch's
        answer); those wholly below the log start are forgotten first, wherever it moved."""
        self.txns.forget_before(self.log.log_start_offset)
        return self.txns.aborted_between(start, end)

    def _truncate(self, offset: int, reason: str) -> None:
        leo = self.log.log_end_offset
        self.log.truncate_to(offset)
        self.producers.truncate(offset)
        if self.txns.seen:  # a marker may be gone: rebuild the transaction index
            self.load_producer_state()
        if self.log.log_end_offset < leo:
            self.truncations.append((leo, self.log.log_end_offset, reason))

    def _failed(self, operation: str, e: BaseException) -> None:
        self.failures.append((operation, f"{type(e).__name__}: {e}"))


def drain_failures(r: ReplicaState, acts: Actions) -> None:
    """Storage failures and truncations of `r`, for the shell to log."""
    if r.failures:
        acts.other.extend(LogFailure(r.tp, op, err) for op, err in r.failures)
        r.failures.clear()
    if r.truncations:
        acts.other.extend(ReplicaTruncated(r.tp, a, b, why, r.leader_epoch, r.role) for a, b, why in r.truncations)
        r.truncations.clear()


def answer_clients(ev: ReplicaEvents, acts: Actions) -> None:
    """The produce and DeleteRecords answers a replica's call gave."""
    for client, resp in (*ev.produce_responses, *ev.delete_responses):
        acts.send(client, resp)
