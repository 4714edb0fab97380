"""The partition side of transactions (broker/core/transactions.py: markers, LSO, aborted
lists), the producer-state rules for markers and fencing (producers.py), and the
coordinator's state records (txn_state.py)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kio.schema.errors import ErrorCode

from broker.core.producers import TXN_ABORT, TXN_COMMIT, TXN_DATA, ProducerBatch, ProducerStateTable, scan
from broker.core.transactions import TxnIndex, marker_batch
from broker.core.txn_state import (
    COMPLETE_COMMIT,
    EMPTY,
    ONGOING,
    PREPARE_ABORT,
    PREPARE_COMMIT,
    IllegalTxnTransition,
    TxnMetadata,
    decode,
    encode,
    replay,
)
from broker.records import BatchError, iter_batches, validate_for_append

E = ErrorCode

# A partition's log as (producer id, kind) per offset: kind TXN_DATA, TXN_COMMIT or TXN_ABORT.
logs = st.lists(st.tuples(st.integers(0, 2), st.sampled_from([TXN_DATA, TXN_DATA, TXN_COMMIT, TXN_ABORT])),
                max_size=40)


def index_of(log: list[tuple[int, int]]) -> TxnIndex:
    idx = TxnIndex()
    for off, (pid, kind) in enumerate(log):
        idx.apply(ProducerBatch(pid, 0, 0, 0, off, off, kind))
    return idx


def committed_records(log: list[tuple[int, int]]) -> tuple[set[int], dict[int, int]]:
    """The model: (offsets of data records whose transaction committed, pid -> first
    offset of the transaction still open at the end)."""
    open_: dict[int, list[int]] = {}
    committed: set[int] = set()
    for off, (pid, kind) in enumerate(log):
        if kind == TXN_DATA:
            open_.setdefault(pid, []).append(off)
        else:
            records = open_.pop(pid, [])
            if kind == TXN_COMMIT:
                committed.update(records)
    return committed, {pid: offs[0] for pid, offs in open_.items()}


def consumer_view(log: list[tuple[int, int]], start: int, end: int, aborted: list[tuple[int, int]]) -> set[int]:
    """What a read_committed consumer keeps of offsets [start, end) given the aborted list
    (librdkafka's and Kafka's algorithm: a producer's batches are dropped from an aborted
    transaction's first offset until its ABORT marker)."""
    pending = sorted(aborted, key=lambda a: a[1])
    aborting: set[int] = set()
    kept = set()
    for off in range(start, end):
        while pending and pending[0][1] <= off:
            aborting.add(pending.pop(0)[0])
        pid, kind = log[off]
        if kind == TXN_DATA:
            if pid not in aborting:
                kept.add(off)
        elif kind == TXN_ABORT:
            aborting.discard(pid)
    return kept


@settings(max_examples=300, deadline=None)
@given(logs, st.data())
def test_read_committed_from_any_offset_sees_exactly_the_committed_records(log, data):
    idx = index_of(log)
    committed, still_open = committed_records(log)
    hw = data.draw(st.integers(0, len(log)))
    lso = idx.last_stable_offset(hw)
    assert lso == min([hw, *still_open.values()])
    start = data.draw(st.integers(0, lso))
    aborted = [(a.producer_id, a.first_offset) for a in idx.aborted_between(start, lso)]
    assert consumer_view(log, start, lso, aborted) == {o for o in committed if start <= o < lso}


@settings(max_examples=200, deadline=None)
@given(logs, st.data())
def test_forgetting_below_the_log_start_changes_no_answer_above_it(log, data):
    """Retention moved the log start: the aborted transactions wholly below it are dropped,
    and every read_committed fetch from the new log start gets the same aborted list."""
    idx = index_of(log)
    log_start = data.draw(st.integers(0, len(log)))
    before = {(s, e): idx.aborted_between(s, e) for s in range(log_start, len(log) + 1)
              for e in range(s, len(log) + 1)}
    idx.forget_before(log_start)
    assert all(a.last_offset >= log_start for a in idx.aborted)
    assert {(s, e): idx.aborted_between(s, e) for (s, e) in before} == before


@given(logs, st.integers(0, 40))
def test_a_prefix_rebuilds_to_the_index_of_the_prefix(log, cut):
    """What a truncation does (the replica rebuilds): the index of log[:cut] forgets the
    later markers, so a transaction they ended is open again."""
    idx = index_of(log[:cut])
    _, still_open = committed_records(log[:cut])
    assert idx.ongoing == still_open
    assert all(a.last_offset < cut for a in idx.aborted)


def test_marker_batches_are_valid_control_batches_a_producer_may_not_send():
    for commit, kind in ((True, TXN_COMMIT), (False, TXN_ABORT)):
        b = marker_batch(7, 3, commit, 5, 1000)
        [(_, _, h)] = list(iter_batches(b, validate=True))  # CRC and offsets check
        assert h.is_control and h.is_transactional and h.producer_id == 7 and h.producer_epoch == 3
        assert scan(b)[0][0].txn == kind
        with pytest.raises(BatchError, match="control batch"):
            validate_for_append(b, 1 << 20)


def test_markers_move_the_producer_epoch_and_fence_older_writes():
    t = ProducerStateTable()
    t.record(ProducerBatch(1, 0, 0, 1, 0, 1, TXN_DATA))
    assert t.check_marker(1, 1) is E.none
    t.record(ProducerBatch(1, 1, -1, -1, 2, 2, TXN_COMMIT))  # the coordinator bumped the epoch
    assert t.check(1, 0, 2, 2) == (E.invalid_producer_epoch, None)  # the old instance is fenced
    assert t.check(1, 0, 2, 2, fence_old_epochs=False) == (E.none, None)  # producer-epoch-fence off
    assert t.check_marker(1, 0) is E.invalid_producer_epoch
    assert t.check(1, 1, 0, 0) == (E.none, None)  # the new epoch starts anywhere after a marker
    t.truncate(2)
    assert 1 not in t.entries  # the marker is gone: unknown (the replica then rebuilds from its log)


def test_coordinator_transitions_are_one_table():
    m = TxnMetadata("t", 5, 0, 60000)
    ongoing = m.to(ONGOING, partitions=frozenset({("a", 0)}))
    with pytest.raises(IllegalTxnTransition):
        ongoing.to(COMPLETE_COMMIT)
    prepared = ongoing.to(PREPARE_COMMIT)
    assert prepared.preparing
    with pytest.raises(IllegalTxnTransition):
        prepared.to(PREPARE_ABORT)
    assert prepared.to(COMPLETE_COMMIT).to(EMPTY, epoch=1).epoch == 1


names = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=1, max_size=8)
metas = st.builds(TxnMetadata, names, st.integers(0, 2**62), st.integers(0, 32767), st.integers(1, 900000),
                  st.sampled_from([EMPTY, ONGOING, PREPARE_COMMIT, PREPARE_ABORT, COMPLETE_COMMIT]),
                  st.frozensets(st.tuples(names, st.integers(0, 100)), max_size=3), st.frozensets(names, max_size=2))


@given(st.lists(metas, max_size=6))
def test_state_records_round_trip_and_the_last_record_of_an_id_wins(ms):
    for m in ms:
        assert decode(m.txn_id, encode(m)) == m
    records = [(m.txn_id.encode(), encode(m)) for m in ms]
    want = {m.txn_id: m for m in ms}
    assert replay(records) == want
    if ms:
        assert ms[0].txn_id not in replay([*records, (ms[0].txn_id.encode(), None)])
    assert replay([(b"x", b"not json")]) == {}
