"""The in-memory PartitionLog: power loss, and the simulation's batch names. The
broker/logapi.py contract itself runs on this log and on the on-disk SegmentedLog alike:
tests/storage/test_storage_log_contract.py."""

from __future__ import annotations

import pytest

from broker.sim.batches import decode_values, encode_batch, header, split_batches
from broker.sim.disk import SimDisk


def test_batch_codec_round_trip_and_stamping():
    b = encode_batch([b"a", b"bb", b""])
    assert decode_values(b) == [b"a", b"bb", b""]
    base, delta, epoch, crc = header(b)
    assert (base, delta, epoch) == (0, 2, -1)
    with pytest.raises(ValueError, match="truncated batch header at byte 0"):
        split_batches(b[:20])


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
