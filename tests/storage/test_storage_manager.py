"""LogManager: checkpoints across restarts, the clean-shutdown marker, flush policies,
DeleteTopics, log dir locks and several log dirs; StorageConfig from Kafka properties."""

from __future__ import annotations

import logging
import os

import pytest

from broker.core.messages import TopicPartition
from broker.records import encode_batch
from broker.storage import LogManager, StorageConfig
from broker.storage.checkpoints import read_clean_shutdown, read_offsets

A, B = TopicPartition("alpha", 0), TopicPartition("beta.x-1", 2)
LOG = logging.getLogger("wrack.test.manager")


class Clock:
    def __init__(self) -> None:
        self.now = 1_000

    def __call__(self) -> int:
        return self.now


def manager(dirs, cfg: StorageConfig | None = None, clock=None) -> LogManager:
    return LogManager([str(d) for d in dirs], cfg or StorageConfig(), LOG, clock=clock)


def append(log, n: int = 1, epoch: int = 0) -> None:
    log.append_as_leader(encode_batch([b"v"] * n), epoch)


def test_checkpoints_and_marker_survive_restart(tmp_path):
    d = tmp_path / "d"
    lm = manager([d], StorageConfig(segment_bytes=400))
    info = lm.startup()
    assert not info.clean_shutdown and info.previous_broker_epoch == -1 and info.new_dirs == [str(d)]
    for tp in (A, B):
        log = lm.get_or_create(tp)
        for e in range(3):
            for _ in range(5):
                append(log, 2, epoch=e * 2)
    lm.checkpoint_high_watermarks({A: 17, B: 9})
    leos = {tp: lm.get(tp).log_end_offset for tp in (A, B)}
    epochs = {tp: lm.get(tp).epoch_entries() for tp in (A, B)}
    lm.shutdown(broker_epoch=1234)
    assert read_clean_shutdown(str(d / ".kafka_cleanshutdown")) == 1234
    assert read_offsets(str(d / "replication-offset-checkpoint")) == {A: 17, B: 9}
    assert read_offsets(str(d / "recovery-point-offset-checkpoint")) == leos
    assert read_offsets(str(d / "log-start-offset-checkpoint")) == {A: 0, B: 0}
    assert (d / "beta.x-1-2" / "leader-epoch-checkpoint").read_text() == "0\n3\n0 0\n2 10\n4 20\n"

    lm = manager([d], StorageConfig(segment_bytes=400))
    info = lm.startup()
    assert info.clean_shutdown and info.previous_broker_epoch == 1234 and info.hw_checkpoint == {A: 17, B: 9}
    assert lm.partitions() == [A, B]
    for tp in (A, B):
        log = lm.get(tp)
        assert (log.log_end_offset, log.epoch_entries(), log.recovery_point) == (leos[tp], epochs[tp], leos[tp])
    lm.checkpoint_high_watermarks({A: 30})  # B keeps its last value
    assert read_offsets(str(d / "replication-offset-checkpoint")) == {A: 30, B: 9}
    lm.close()


def test_a_truncation_below_the_checkpointed_recovery_point_rewrites_it(tmp_path):
    d = tmp_path / "d"
    lm = manager([d])
    lm.startup()
    log = lm.get_or_create(A)
    append(log, 10)
    log.flush()
    lm.flush_due(10**12)  # periodic recovery-point checkpoint
    assert read_offsets(str(d / "recovery-point-offset-checkpoint")) == {A: 10}
    log.truncate_to(4)
    assert read_offsets(str(d / "recovery-point-offset-checkpoint")) == {A: 0}  # the batch 0..9 went whole
    lm.close()


def test_flush_every_write(tmp_path):
    lm = manager([tmp_path], StorageConfig.from_properties({"log.flush.interval.messages": "1"}))
    lm.startup()
    log = lm.get_or_create(A)
    for n in (1, 3, 2):
        append(log, n)
        assert log.recovery_point == log.log_end_offset
    follower = lm.get_or_create(B)
    follower.append_as_follower(log.read(0, 1 << 20))
    assert follower.recovery_point == follower.log_end_offset == 6
    assert lm.describe_flush_policy().startswith("every write")
    lm.close()


def test_flush_every_n_messages(tmp_path):
    lm = manager([tmp_path], StorageConfig.from_properties({"log.flush.interval.messages": "5"}))
    lm.startup()
    log = lm.get_or_create(A)
    points = []
    for _ in range(7):
        append(log, 2)
        points.append(log.recovery_point)
    assert points == [0, 0, 6, 6, 6, 12, 12]  # flushed when 5 or more messages were unflushed
    lm.on_append(A, 100)  # the shell may still call it: a no-op
    assert log.recovery_point == 12
    lm.close()


def test_flush_every_n_ms(tmp_path):
    clock = Clock()
    lm = manager([tmp_path], StorageConfig.from_properties({"log.flush.interval.ms": "250"}), clock)
    lm.startup()
    log = lm.get_or_create(A)
    periodic = lm.next_flush_deadline()
    assert periodic == 1_000 + 60_000  # only the recovery-point checkpoint is pending
    clock.now = 2_000
    append(log, 3)
    assert lm.next_flush_deadline() == 2_250
    clock.now = 2_100
    append(log, 1)
    assert lm.next_flush_deadline() == 2_250  # from the first unflushed append
    lm.flush_due(2_249)
    assert log.recovery_point == 0
    lm.flush_due(2_250)
    assert log.recovery_point == 4 and lm.next_flush_deadline() == periodic
    assert "every 250 ms" in lm.describe_flush_policy()
    lm.close()


def test_default_flush_is_on_roll_in_the_background(tmp_path):
    lm = manager([tmp_path], StorageConfig(segment_bytes=300))
    lm.startup()
    log = lm.get_or_create(A)
    append(log, 1)
    append(log, 1)
    assert log.recovery_point == 0 and lm.next_flush_deadline() == lm._next_rp_checkpoint
    for _ in range(10):
        append(log, 1)
    lm.wait_background()
    assert len(log.segment_files()) > 1 and log.recovery_point == log.segment_files()[-1][0] < log.log_end_offset
    assert lm.describe_flush_policy().startswith("on segment roll only")
    lm.close()


def test_delete_removes_the_log_and_its_checkpoint_entries(tmp_path):
    lm = manager([tmp_path])
    lm.startup()
    append(lm.get_or_create(A), 3)
    append(lm.get_or_create(B), 3)
    lm.checkpoint_high_watermarks({A: 3, B: 3})
    assert lm.delete(A) and not lm.delete(A)
    assert not (tmp_path / "alpha-0").exists() and not any(p.name.endswith("-delete") for p in tmp_path.iterdir())
    assert read_offsets(str(tmp_path / "replication-offset-checkpoint")) == {B: 3}
    assert A not in read_offsets(str(tmp_path / "recovery-point-offset-checkpoint"))
    fresh = lm.get_or_create(A)
    assert fresh.log_end_offset == 0
    (tmp_path / "gamma-0.0123abcd-delete").mkdir()  # a deletion a crash interrupted
    lm.shutdown(5)
    lm = manager([tmp_path])
    info = lm.startup()
    assert not (tmp_path / "gamma-0.0123abcd-delete").exists() and any("unfinished" in n for n in info.notes)
    assert lm.partitions() == [A, B]
    lm.close()


def test_one_broker_per_log_dir(tmp_path):
    lm = manager([tmp_path])
    lm.startup()
    with pytest.raises(OSError, match="in use by another broker"):
        manager([tmp_path]).startup()
    lm.close()
    again = manager([tmp_path])
    again.startup()
    again.close()


def test_several_log_dirs(tmp_path):
    d1, d2 = tmp_path / "one", tmp_path / "two"
    lm = manager([d1, d2])
    lm.startup()
    tps = [TopicPartition("t", i) for i in range(4)]
    for tp in tps:
        append(lm.get_or_create(tp), 2)
    assert sorted(lm.log_dir_of(tp) for tp in tps) == [str(d1), str(d1), str(d2), str(d2)]
    lm.shutdown(9)
    os.unlink(d2 / ".kafka_cleanshutdown")  # one dir lost its marker
    lm = manager([d1, d2])
    info = lm.startup()
    assert not info.clean_shutdown and info.previous_broker_epoch == -1 and info.unclean_dirs == [str(d2)]
    scanned = {tp for tp, r in info.partitions.items() if r.scanned}
    assert scanned == {tp for tp in tps if lm.log_dir_of(tp) == str(d2)}
    assert all(lm.get(tp).log_end_offset == 2 for tp in tps)
    lm.close()


def test_corrupt_checkpoints_are_reported_and_treated_as_empty(tmp_path):
    lm = manager([tmp_path])
    lm.startup()
    append(lm.get_or_create(A), 2)
    lm.shutdown(4)
    (tmp_path / "recovery-point-offset-checkpoint").write_text("0\n1\nalpha zero 2\n")
    (tmp_path / ".kafka_cleanshutdown").write_text("garbage")
    lm = manager([tmp_path])
    info = lm.startup()
    assert not info.clean_shutdown and info.previous_broker_epoch == -1
    assert any("recovery-point-offset-checkpoint:3" in n for n in info.notes)
    assert any("not a clean-shutdown marker" in n for n in info.notes)
    assert info.partitions[A].scanned and info.partitions[A].recovery_point == 0 and lm.get(A).log_end_offset == 2
    lm.close()


def test_storage_config_from_kafka_properties():
    c = StorageConfig.from_properties({
        "log.segment.bytes": "1048576", "log.flush.interval.messages": "9223372036854775807",
        "log.flush.interval.ms": "1000", "log.retention.hours": "168", "log.retention.bytes": "-1",
        "node.id": "3", "log.index.interval.bytes": "0",
    })
    assert (c.segment_bytes, c.flush_interval_messages, c.flush_interval_ms, c.retention_ms, c.retention_bytes) == (
        1 << 20, None, 1000, 168 * 3_600_000, None)
    assert c.index_interval_bytes == 0
    assert StorageConfig.from_properties({}) == StorageConfig()
    assert StorageConfig().retention_ms is None and StorageConfig().retention_bytes is None  # retention off by default
    assert StorageConfig.from_properties({"log.retention.ms": "5", "log.retention.hours": "1"}).retention_ms == 5
    for props, msg in (({"log.segment.bytes": "big"}, "log.segment.bytes: expected an integer, got 'big'"),
                       ({"log.segment.bytes": "0"}, "log.segment.bytes: must be at least 14, got 0"),
                       ({"log.flush.interval.messages": "0"}, "log.flush.interval.messages: must be at least 1, got 0"),
                       ({"log.segment.bytes": "4294967296"}, "log.segment.bytes: must be at most 2147483647")):
        with pytest.raises(ValueError, match=msg):
            StorageConfig.from_properties(props)
