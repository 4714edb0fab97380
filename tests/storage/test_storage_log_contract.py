"""The `broker.logapi.PartitionLog` contract, run on both implementations: the
simulation's in-memory log and the on-disk SegmentedLog (tiny segments, so every test
crosses segment boundaries). Then a hypothesis state machine drives both with the same
random operations (appends, truncations, epoch assignments, reads, flushes, reopening
the on-disk log cleanly or after a crash) and requires identical answers."""

from __future__ import annotations

import os
import shutil
import tempfile

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from broker.core.messages import TopicPartition
from broker.logapi import OffsetOutOfRange
from broker.records import encode_batch, iter_batches, split_batches
from broker.sim.memlog import InMemoryPartitionLog
from broker.storage import SegmentedLog, StorageConfig

TP = TopicPartition("contract", 0)
TINY = StorageConfig(segment_bytes=300, index_interval_bytes=64)


def open_segmented(directory: str, *, recover: bool = False, recovery_point: int = 0) -> SegmentedLog:
    log, report = SegmentedLog.open(directory, TP, TINY, recover=recover, recovery_point=recovery_point)
    assert not report.truncations, report.lines()
    return log


FAST_TMP = "/dev/shm" if os.path.isdir("/dev/shm") else None  # fsyncs are cheap there; the logic is what is tested


@pytest.fixture(params=["memory", "segmented"])
def new_log(request):
    """A factory of empty logs of one implementation."""
    made: list[SegmentedLog] = []
    root = tempfile.mkdtemp(prefix="wrack-contract-", dir=FAST_TMP)

    def make():
        if request.param == "memory":
            return InMemoryPartitionLog()
        log = open_segmented(os.path.join(root, f"log{len(made)}"))
        made.append(log)
        return log

    try:
        yield make
    finally:
        for log in made:
            log.close()
        shutil.rmtree(root, ignore_errors=True)


def test_leader_append_assigns_offsets_and_epochs(new_log):
    log = new_log()
    assert log.append_as_leader(encode_batch([b"a", b"b"]), 0) == (0, 1)
    assert log.append_as_leader(encode_batch([b"c"]), 2) == (2, 2)
    assert log.log_end_offset == 3 and log.epoch_entries() == [(0, 0), (2, 2)] and log.latest_epoch() == 2
    data = log.read(0, 1)
    assert len(split_batches(data)) == 1  # at least one batch even past max_bytes
    assert log.read(0, 1 << 20, upper_bound=2) == data  # not past the HWM
    assert log.read(3, 100) == b""
    with pytest.raises(OffsetOutOfRange):
        log.read(4, 100)
    stamped = [(h.base_offset, h.partition_leader_epoch) for _, _, h in iter_batches(log.read(0, 1 << 20))]
    assert stamped == [(0, 0), (2, 2)]  # stamped, and the CRCs still hold (iter_batches validates)


def test_reads_return_whole_batches_from_the_one_holding_the_offset(new_log):
    log = new_log()
    for i in range(30):
        log.append_as_leader(encode_batch([b"v%d" % i] * 3), 1)
    everything = log.read(0, 1 << 20)
    bounds = [(s, e, h) for s, e, h in iter_batches(everything)]
    assert [h.base_offset for _, _, h in bounds] == list(range(0, 90, 3))
    for offset in (0, 1, 44, 46, 89):
        got = list(iter_batches(log.read(offset, 200)))
        assert got[0][2].base_offset <= offset <= got[0][2].last_offset
        assert sum(e - s for s, e, _ in got) <= 200 or len(got) == 1
        assert log.read(offset, 1 << 20, upper_bound=offset) == b"" or got[0][2].last_offset < offset
    assert log.read(50, 1 << 20, upper_bound=60) == b"".join(
        everything[s:e] for s, e, h in bounds if h.base_offset >= 48 and h.last_offset < 60
    )


def test_follower_append_must_start_at_leo(new_log):
    leader, follower = new_log(), new_log()
    leader.append_as_leader(encode_batch([b"a"]), 1)
    leader.append_as_leader(encode_batch([b"b"]), 1)
    follower.append_as_follower(leader.read(0, 1 << 20))
    assert follower.epoch_entries() == [(1, 0)] and follower.log_end_offset == 2
    with pytest.raises(ValueError, match="follower append at offset 0, LEO is 2"):
        follower.append_as_follower(leader.read(0, 1 << 20))
    assert follower.read(0, 1 << 20) == leader.read(0, 1 << 20)


def test_truncate_drops_records_and_epochs(new_log):
    log = new_log()
    for e in (0, 0, 1, 1, 3):
        log.append_as_leader(encode_batch([b"x"]), e)
    log.truncate_to(3)
    assert log.log_end_offset == 3 and log.epoch_entries() == [(0, 0), (1, 2)]
    log.assign_epoch_start(5, 3)
    log.truncate_to(3)  # no records to drop, but the empty epoch 5 goes
    assert log.latest_epoch() == 1


def test_truncate_inside_a_batch_drops_the_whole_batch(new_log):
    log = new_log()
    log.append_as_leader(encode_batch([b"x"] * 4), 0)
    log.append_as_leader(encode_batch([b"y"] * 4), 1)
    log.truncate_to(6)
    assert log.log_end_offset == 4 and log.epoch_entries() == [(0, 0)]
    assert log.append_as_leader(encode_batch([b"z"]), 2) == (4, 4)


def test_flush_moves_the_recovery_point_to_the_leo(new_log):
    log = new_log()
    log.append_as_leader(encode_batch([b"x"] * 3), 0)
    log.flush()
    assert log.recovery_point == 3
    log.append_as_leader(encode_batch([b"y"]), 0)
    log.truncate_to(1)
    assert log.recovery_point <= log.log_end_offset == 0


@settings(max_examples=40, suppress_health_check=[HealthCheck.function_scoped_fixture], deadline=None)
@given(st.lists(st.tuples(st.integers(0, 6), st.integers(1, 3)), max_size=10), st.integers(-1, 8))
def test_end_offset_for_epoch_follows_kafka(new_log, appends, assigned):
    log = new_log()
    epoch = 0
    for step, n in appends:
        epoch += step
        log.append_as_leader(encode_batch([b"v"] * n), epoch)
    if assigned > epoch:
        log.assign_epoch_start(assigned, log.log_end_offset)  # a new leader's epoch with no record yet
    for query in range(-1, 16):
        assert log.end_offset_for_epoch(query) == model_end_offset(log.epoch_entries(), log.log_end_offset, query)


def model_end_offset(entries: list[tuple[int, int]], leo: int, query: int) -> tuple[int, int]:
    """logapi.py's statement of Kafka's LeaderEpochFileCache.endOffsetFor."""
    if query < 0 or not entries:
        return -1, -1
    if query == entries[-1][0]:
        return query, leo
    higher = [s for e, s in entries if e > query]
    lower = [e for e, s in entries if e <= query]
    if not higher:
        return -1, -1
    if not lower:
        return query, higher[0]
    return lower[-1], higher[0]


# ---------------------------------------------------------------- both logs, same operations
class BothLogs(RuleBasedStateMachine):
    """The on-disk log must answer exactly as the in-memory one."""

    def __init__(self) -> None:
        super().__init__()
        self.tmp = tempfile.mkdtemp(prefix="wrack-contract-", dir=FAST_TMP)
        self.model = InMemoryPartitionLog()
        self.disk = open_segmented(self.tmp)
        self.epoch = 0
        self.ts = 1000

    def teardown(self) -> None:
        self.disk.close()
        shutil.rmtree(self.tmp, ignore_errors=True)

    def _batch(self, n: int, size: int) -> bytes:
        self.ts += 1
        return encode_batch([bytes([65 + i % 26]) * size for i in range(n)], timestamp=self.ts)

    @rule(n=st.integers(1, 5), size=st.integers(0, 120), bump=st.integers(0, 2))
    def append_as_leader(self, n, size, bump):
        self.epoch += bump
        b = self._batch(n, size)
        assert self.disk.append_as_leader(b, self.epoch) == self.model.append_as_leader(b, self.epoch)

    @rule(sizes=st.lists(st.integers(1, 4), min_size=1, max_size=4), bump=st.integers(0, 1))
    def append_as_follower(self, sizes, bump):
        self.epoch += bump
        leo, parts = self.model.log_end_offset, []
        for n in sizes:
            parts.append(encode_batch([b"f"] * n, base_offset=leo, leader_epoch=self.epoch, timestamp=self.ts))
            leo += n
        data = b"".join(parts)
        assert self.disk.append_as_follower(data) == self.model.append_as_follower(data)

    @rule(back=st.integers(-2, 25))
    def truncate(self, back):
        offset = max(self.model.log_end_offset - back, 0)
        self.model.truncate_to(offset)
        self.disk.truncate_to(offset)

    @rule(ahead=st.integers(0, 2))
    def assign_epoch_start(self, ahead):
        self.epoch += ahead
        self.model.assign_epoch_start(self.epoch, self.model.log_end_offset)
        self.disk.assign_epoch_start(self.epoch, self.model.log_end_offset)

    @rule(data=st.data(), max_bytes=st.integers(0, 700), bounded=st.booleans())
    def read(self, data, max_bytes, bounded):
        leo = self.model.log_end_offset
        offset = data.draw(st.integers(0, leo + 1))
        bound = data.draw(st.integers(0, leo)) if bounded else None
        try:
            want = self.model.read(offset, max_bytes, bound)
        except OffsetOutOfRange:
            with pytest.raises(OffsetOutOfRange):
                self.disk.read(offset, max_bytes, bound)
            return
        assert self.disk.read(offset, max_bytes, bound) == want

    @rule(query=st.integers(-1, 12))
    def end_offset_for_epoch(self, query):
        assert self.disk.end_offset_for_epoch(query) == self.model.end_offset_for_epoch(query)

    @rule()
    def flush(self):
        self.model.flush()
        self.disk.flush()
        assert self.disk.recovery_point == self.model.recovery_point == self.model.log_end_offset

    @precondition(lambda self: self.model.log_end_offset > 0)
    @rule(crash=st.booleans())
    def reopen(self, crash):
        """Close and reopen the on-disk log: cleanly (indexes written, no scan) or as after
        a kill (nothing written, scanned from the recovery point). Either way the log is
        the same; only epochs assigned at the LEO without records are gone (as in Kafka,
        which cuts the cache at the LEO when it loads a log)."""
        rp = self.disk.recovery_point
        self.disk.close(write_indexes=not crash)
        self.disk = open_segmented(self.tmp, recover=crash, recovery_point=rp)
        self.model.truncate_to(self.model.log_end_offset)

    @invariant()
    def same_state(self):
        assert self.disk.log_end_offset == self.model.log_end_offset
        assert self.disk.log_start_offset == self.model.log_start_offset
        assert self.disk.epoch_entries() == self.model.epoch_entries()
        assert self.disk.latest_epoch() == self.model.latest_epoch()
        assert self.disk.recovery_point <= self.disk.log_end_offset


TestBothLogs = BothLogs.TestCase
TestBothLogs.settings = settings(max_examples=60, stateful_step_count=40, deadline=None,
                                 suppress_health_check=[HealthCheck.too_slow])
