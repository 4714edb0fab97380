"""Idempotent producers: the producer state table (Kafka's sequence rules, with a
hypothesis model), the leader's answers to retries and bad sequences, followers and
truncation, rebuilding from the log, and producer id allocation."""

from __future__ import annotations

import itertools

from core_helpers import TP, image, log_with
from hypothesis import given, settings
from hypothesis import strategies as st
from kio.schema.errors import ErrorCode

from broker.core import safeguards as sg
from broker.core.messages import FetchPartitionResponse
from broker.core.metadata import PartitionRegistration
from broker.core.producers import (
    ID_BLOCK,
    MAX_SEQUENCE,
    ProducerBatch,
    ProducerIdAllocator,
    ProducerStateTable,
    last_sequence,
    producer_batches,
)
from broker.core.replica import PartitionReplica, ReplicaEvents, ReplicaSettings
from broker.records import encode_batch

EPOCHS = {1: 10, 2: 20, 3: 30}
REG = PartitionRegistration(replicas=(1, 2, 3), isr=(1, 2, 3), leader=1)


def replica(broker_id=1, log=None, min_isr=1, isr=(1,)):
    reg = PartitionRegistration(replicas=(1, 2, 3), isr=isr, leader=1)
    r = PartitionReplica(TP, log or log_with([]), ReplicaSettings(broker_id, 30000, min_isr, sg.ALL_ON), itertools.count(1).__next__)
    r.apply_registration(reg, image(EPOCHS, reg=reg), 0, ReplicaEvents())
    return r


def batch(pid, epoch, seq, n=1, tag="v"):
    return encode_batch([f"{tag}{seq}-{i}".encode() for i in range(n)], producer_id=pid, producer_epoch=epoch, base_sequence=seq)


def send(r, records, acks=1):
    ev = ReplicaEvents()
    return r.append_produce("c", 7, acks, records, 30000, 0, ev)


def test_retries_are_answered_with_the_first_offsets_and_not_appended():
    r = replica()
    a = send(r, batch(5, 0, 0, 3))
    b = send(r, batch(5, 0, 3, 2))
    assert (a.error, a.base_offset, b.error, b.base_offset) == (ErrorCode.none, 0, ErrorCode.none, 3)
    again = send(r, batch(5, 0, 0, 3))  # a retry of the first batch (still among the last five)
    assert again.error is ErrorCode.none and again.base_offset == 0 and r.log.log_end_offset == 5
    assert send(r, batch(5, 0, 6)).error is ErrorCode.out_of_order_sequence_number  # a gap
    assert send(r, batch(5, 0, 4)).error is ErrorCode.out_of_order_sequence_number  # inside the last batch
    assert send(r, batch(5, 0, 5)).base_offset == 5
    assert send(r, batch(5, 1, 3)).error is ErrorCode.out_of_order_sequence_number  # a new epoch starts at 0
    assert send(r, batch(5, 1, 0)).base_offset == 6
    assert send(r, batch(5, 0, 6)).error is ErrorCode.invalid_producer_epoch  # the old epoch is fenced
    assert send(r, batch(9, 0, 42)).base_offset == 7  # an unknown producer: any sequence (KIP-360)
    assert send(r, encode_batch([b"plain"])).base_offset == 8  # no producer id: no checks
    assert send(r, batch(5, 1, -1)).error is ErrorCode.invalid_record
    assert r.log.log_end_offset == 9


def test_a_retry_older_than_the_five_cached_batches_is_out_of_order():
    r = replica()
    for seq in range(7):
        send(r, batch(1, 0, seq))
    assert send(r, batch(1, 0, 2)).base_offset == 2  # cached
    assert send(r, batch(1, 0, 0)).error is ErrorCode.out_of_order_sequence_number


def test_acks_all_retry_waits_for_the_hwm_like_the_first_copy():
    r = replica(min_isr=2, isr=(1, 2))
    ev = ReplicaEvents()
    assert r.append_produce("c", 1, -1, batch(3, 0, 0), 30000, 0, ev) is None  # waits for follower 2
    ev2 = ReplicaEvents()
    assert r.append_produce("c", 2, -1, batch(3, 0, 0), 30000, 0, ev2) is None  # the retry waits too
    assert r.log.log_end_offset == 1 and len(r.pending_produce) == 2


def test_followers_replicate_the_state_and_truncation_forgets_it():
    leader = replica()
    for seq in range(3):
        send(leader, batch(4, 0, seq))
    follower = PartitionReplica(TP, log_with([]), ReplicaSettings(2, 30000, 1, sg.ALL_ON), itertools.count(1).__next__)
    reg = PartitionRegistration(replicas=(1, 2, 3), isr=(1, 2, 3), leader=1)
    follower.apply_registration(reg, image(EPOCHS, reg=reg), 0, ReplicaEvents())
    sent = follower.fetch_partition()
    follower.handle_fetch_response(sent, FetchPartitionResponse(TP, ErrorCode.none, 3, 0, None, leader.log.read(0, 1 << 20)), 0, 1000)
    assert follower.log.log_end_offset == 3
    assert follower.producers.check(4, 0, 2, 2) == (ErrorCode.none, follower.producers.entries[4].batches[-1])
    assert follower.producers.check(4, 0, 3, 3) == (ErrorCode.none, None)
    follower._truncate(2, "diverging-epoch")
    assert [b.last_seq for b in follower.producers.entries[4].batches] == [0, 1]
    follower._truncate(0, "diverging-epoch")
    assert 4 not in follower.producers.entries  # unknown again


def test_state_is_rebuilt_from_the_log():
    r = replica()
    for seq in range(0, 8, 2):
        assert send(r, batch(8, 2, seq, 2)).error is ErrorCode.none
    fresh = PartitionReplica(TP, r.log, ReplicaSettings(1, 30000, 1, sg.ALL_ON), itertools.count(1).__next__)
    fresh.load_producer_state()
    assert fresh.producers.entries[8].epoch == 2
    assert [(b.first_seq, b.first_offset) for b in fresh.producers.entries[8].batches] == [(0, 0), (2, 2), (4, 4), (6, 6)]


def test_producer_batches_reads_the_header_fields():
    buf = batch(11, 3, MAX_SEQUENCE, 2) + encode_batch([b"x"]) + batch(12, 0, 5)
    got = producer_batches(buf)
    assert got == [ProducerBatch(11, 3, MAX_SEQUENCE, 0, 0, 1), ProducerBatch(12, 0, 5, 5, 0, 0)]
    assert last_sequence(MAX_SEQUENCE - 1, 3) == 1


def test_producer_ids_are_unique_per_broker_epoch():
    a = ProducerIdAllocator()
    assert a.allocate(-1) is None
    assert [a.allocate(3), a.allocate(3)] == [3 * ID_BLOCK, 3 * ID_BLOCK + 1]
    assert a.allocate(7) == 7 * ID_BLOCK  # a new registration: a new block
    a.next = ID_BLOCK
    assert a.allocate(7) is None


class Model:
    """The rules on a plain list of (epoch, first, last) appends."""

    def __init__(self) -> None:
        self.appended: list[tuple[int, int, int]] = []

    def expect(self, epoch: int, first: int, last: int) -> str:
        if not self.appended:
            return "append"
        cur = self.appended[-1][0]
        same = [a for a in self.appended if a[0] == cur]
        if epoch == cur and (epoch, first, last) in same[-5:]:
            return "duplicate"
        if epoch < cur:
            return "invalid_producer_epoch"
        if epoch > cur:
            return "append" if first == 0 else "out_of_order_sequence_number"
        return "append" if first == same[-1][2] + 1 else "out_of_order_sequence_number"


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 2), st.integers(0, 8), st.integers(1, 3)), max_size=40))
def test_the_table_follows_the_sequence_rules(steps):
    table, model = ProducerStateTable(), Model()
    offset = 0
    for epoch, first, n in steps:
        last = first + n - 1
        err, dup = table.check(1, epoch, first, last)
        want = model.expect(epoch, first, last)
        got = "duplicate" if dup is not None else ("append" if err is ErrorCode.none else err.name)
        assert got == want, (steps, epoch, first, last)
        if got == "append":
            table.record(ProducerBatch(1, epoch, first, last, offset, offset + n - 1))
            model.appended.append((epoch, first, last))
            offset += n
