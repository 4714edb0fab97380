"""The in-memory PartitionLog against the broker/logapi.py contract, and power loss."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from broker.logapi import OffsetOutOfRange
from broker.sim.batches import decode_values, encode_batch, header, split_batches
from broker.sim.disk import SimDisk
from broker.sim.memlog import InMemoryPartitionLog


def test_batch_codec_round_trip_and_stamping():
    b = encode_batch([b"a", b"bb", b""])
    assert decode_values(b) == [b"a", b"bb", b""]
    base, delta, epoch, crc = header(b)
    assert (base, delta, epoch) == (0, 2, -1)
    with pytest.raises(ValueError, match="truncated batch header at byte 0"):
        split_batches(b[:20])


def test_leader_append_assigns_offsets_and_epochs():
    log = InMemoryPartitionLog()
    assert log.append_as_leader(encode_batch([b"a", b"b"]), 0) == (0, 1)
    assert log.append_as_leader(encode_batch([b"c"]), 2) == (2, 2)
    assert log.log_end_offset == 3 and log.epoch_entries() == [(0, 0), (2, 2)] and log.latest_epoch() == 2
    data = log.read(0, 1)
    assert len(split_batches(data)) == 1  # at least one batch even past max_bytes
    assert log.read(0, 1 << 20, upper_bound=2) == data  # not past the HWM
    assert log.read(3, 100) == b""
    with pytest.raises(OffsetOutOfRange):
        log.read(4, 100)


def test_follower_append_must_start_at_leo():
    leader, follower = InMemoryPartitionLog(), InMemoryPartitionLog()
    leader.append_as_leader(encode_batch([b"a"]), 1)
    leader.append_as_leader(encode_batch([b"b"]), 1)
    follower.append_as_follower(leader.read(0, 1 << 20))
    assert follower.epoch_entries() == [(1, 0)] and follower.log_end_offset == 2
    with pytest.raises(ValueError, match="follower append at offset 0, LEO is 2"):
        follower.append_as_follower(leader.read(0, 1 << 20))


def test_truncate_drops_records_and_epochs():
    log = InMemoryPartitionLog()
    for e in (0, 0, 1, 1, 3):
        log.append_as_leader(encode_batch([b"x"]), e)
    log.truncate_to(3)
    assert log.log_end_offset == 3 and log.epoch_entries() == [(0, 0), (1, 2)]
    log.assign_epoch_start(5, 3)
    log.truncate_to(3)  # no records to drop, but the empty epoch 5 goes
    assert log.latest_epoch() == 1


def test_power_loss_keeps_only_the_flushed_prefix():
    disk = SimDisk()
    log = disk.log(("t", 0))  # type: ignore[arg-type]
    log.append_as_leader(encode_batch([b"a"]), 0)
    log.flush()
    log.append_as_leader(encode_batch([b"b"]), 1)
    disk.power_loss()
    assert log.log_end_offset == 1 and log.epoch_entries() == [(0, 0)] and log.pop_truncation_mark() == 1
    disk.clean_shutdown_epoch = 7
    assert disk.take_clean_shutdown_epoch() == 7 and disk.take_clean_shutdown_epoch() == -1


@given(st.lists(st.tuples(st.integers(0, 6), st.integers(1, 3)), max_size=12), st.integers(-1, 8))
def test_end_offset_for_epoch_matches_a_model(appends, query):
    log = InMemoryPartitionLog()
    epoch = 0
    for step, n in appends:
        epoch += step
        log.append_as_leader(encode_batch([b"v"] * n), epoch)
    entries = log.epoch_entries()
    got = log.end_offset_for_epoch(query)
    if query < 0 or not entries:
        want = (-1, -1)
    elif query == entries[-1][0]:
        want = (query, log.log_end_offset)
    else:
        higher = [s for e, s in entries if e > query]
        lower = [e for e, s in entries if e <= query]
        if not higher:
            want = (-1, -1)
        elif not lower:
            want = (query, higher[0])
        else:
            want = (lower[-1], higher[0])
    assert got == want
