"""Topic configs the storage engine honours (issue 16): compaction against the storage
contract (hypothesis: the latest value of every key stays at its offset, offsets only
increase, expired tombstones go, the active segment is untouched; a cleaned log reopens,
also after a crash mid-swap), retention and the log start offset (DeleteRecords,
followers), per-topic configs through the LogManager, and the leader's batch rules
(recompression, LogAppendTime, keys on compacted topics, max.message.bytes) with valid CRCs."""

from __future__ import annotations

import logging
import os
import shutil
import tempfile

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kio.schema.errors import ErrorCode

from broker.core.messages import TopicPartition
from broker.logapi import OffsetOutOfRange
from broker.records import (
    COMPRESSION_GZIP,
    COMPRESSION_NONE,
    COMPRESSION_ZSTD,
    BatchError,
    decode_records,
    encode_batch,
    iter_batches,
    split_batches,
)
from broker.storage import LogManager, SegmentedLog, StorageConfig, log_cleanup
from broker.storage.validator import AppendPolicy, conform

TP = TopicPartition("topic", 0)
FAST_TMP = "/dev/shm" if os.path.isdir("/dev/shm") else None
COMPACT = StorageConfig(segment_bytes=400, index_interval_bytes=64, cleanup_policy="compact", delete_retention_ms=1000)
NOW = 1_000_000


def open_log(path: str, config: StorageConfig = COMPACT, **kw) -> SegmentedLog:
    log, report = SegmentedLog.open(path, TP, config, **kw)
    assert not report.truncations, report.lines()
    return log


def records_of(log: SegmentedLog, start: int | None = None) -> list:
    """Every record of the log (CRC checked), in order."""
    data = log.read(log.log_start_offset if start is None else start, 1 << 30)
    out = []
    for batch in split_batches(data):
        out.extend(decode_records(batch))
    return out


def segments_below(log: SegmentedLog, bound: int) -> int:
    """How many closed segments a clean below `bound` covers."""
    files = log.segment_files()
    n = 0
    while n < len(files) - 1 and files[n + 1][0] <= bound:
        n += 1
    return n


# ---------------------------------------------------------------- compaction
ops = st.lists(
    st.tuples(st.sampled_from([b"k0", b"k1", b"k2", b"k3", b"k4", None]),
              st.one_of(st.none(), st.binary(min_size=1, max_size=30)),
              st.integers(NOW - 5000, NOW)),
    min_size=1, max_size=60,
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=ops, codec=st.sampled_from([None, "gzip", "zstd"]), per_batch=st.integers(1, 3),
       bumps=st.lists(st.booleans(), min_size=60, max_size=60))
def test_compaction_keeps_the_latest_value_of_every_key_at_its_offset(ops, codec, per_batch, bumps):
    root = tempfile.mkdtemp(prefix="wrack-compact-", dir=FAST_TMP)
    try:
        log = open_log(root)
        written = []  # (offset, key, value, timestamp)
        epoch = 3
        for i in range(0, len(ops), per_batch):
            epoch += bumps[i]
            chunk = [op for op in ops[i: i + per_batch] if op[0] is not None or op[1] is not None]
            if not chunk:
                continue
            first, _ = log.append_as_leader(encode_batch([v for _, v, _ in chunk], [k for k, _, _ in chunk],
                                                         timestamps=[t for _, _, t in chunk], compression=codec), epoch)
            written += [(first + j, k, v, t) for j, (k, v, t) in enumerate(chunk)]
        leo = log.log_end_offset
        active_base = log.segment_files()[-1][0]
        before = {r.offset: r for r in records_of(log)}
        n = segments_below(log, leo)
        bound = log.segment_files()[n][0] if n < len(log.segment_files()) else leo  # cleanable: offsets below
        log.clean(NOW, leo)
        after = records_of(log)
        offsets = [r.offset for r in after]
        assert offsets == sorted(set(offsets)), "offsets only increase"
        assert {r.offset for r in after if r.offset >= active_base} == {o for o in before if o >= active_base}
        latest_below = {k: o for o, k, _, _ in written if k is not None and o < bound}
        expire = {o: NOW - t > COMPACT.delete_retention_ms for o, _, _, t in written}
        got = {r.offset: r for r in after}
        for o, k, v, _t in written:
            if o >= bound or k is None:
                assert o in got and got[o].value == v and got[o].key == k  # untouched
            elif latest_below[k] != o:
                assert o not in got, f"superseded record at {o} kept"
            elif v is None and expire[o] and o not in got:
                pass  # an expired tombstone may go
            else:
                assert o in got and got[o].value == v, f"latest value of {k!r} lost at {o}"
        for o in latest_below.values():  # every key's latest value stays at its original offset
            rec = next(r for r in written if r[0] == o)
            if rec[2] is not None:
                assert got[o].value == rec[2]
        # the last value of every key over the whole log is readable at its offset
        last = {}
        for o, k, v, _ in written:
            if k is not None:
                last[k] = (o, v)
        for k, (o, v) in last.items():
            if v is not None:
                assert got[o].value == v and got[o].key == k
        assert log.log_end_offset == leo
        epochs = log.epoch_entries()
        log.close()
        os.unlink(os.path.join(root, "leader-epoch-checkpoint"))  # rebuilt from the batches' epochs
        reopened = open_log(root, recover=True)  # recovery validates every segment: gaps and all
        assert [(r.offset, r.key, r.value) for r in records_of(reopened)] == [(r.offset, r.key, r.value) for r in after]
        assert reopened.log_end_offset == leo and reopened.epoch_entries() == epochs
        reopened.close()
    finally:
        shutil.rmtree(root, ignore_errors=True)


def fill_keys(log: SegmentedLog, rounds: int, keys: int = 4, ts: int = NOW) -> None:
    for r in range(rounds):
        for k in range(keys):
            log.append_as_leader(encode_batch([f"v{r}".encode()], [f"k{k}".encode()], timestamp=ts), 0)


def test_tombstones_go_only_after_delete_retention(tmp_path):
    log = open_log(str(tmp_path))
    fill_keys(log, 3)
    log.append_as_leader(encode_batch([None], [b"k0"], timestamp=NOW), 0)  # a tombstone for k0
    fill_keys(log, 3, keys=1 + 0, ts=NOW)  # k0 again: the tombstone is superseded...
    log.append_as_leader(encode_batch([None], [b"k1"], timestamp=NOW), 0)  # ...this one is k1's latest
    fill_keys(log, 8, keys=1, ts=NOW)  # pad so the tombstone's segment closes
    log.clean(NOW, log.log_end_offset)
    assert any(r.key == b"k1" and r.value is None for r in records_of(log)), "a fresh tombstone stays"
    log.clean(NOW + COMPACT.delete_retention_ms + 1, log.log_end_offset)
    assert not any(r.key == b"k1" for r in records_of(log)), "an expired tombstone goes"
    log.close()


def test_clean_never_touches_the_active_segment_nor_offsets_above_the_bound(tmp_path):
    log = open_log(str(tmp_path))
    fill_keys(log, 10)
    files = log.segment_files()
    assert len(files) > 3
    bound = files[2][0]  # a high watermark: segments 0 and 1 are cleanable
    above = [(r.offset, r.value) for r in records_of(log, bound)]
    log.clean(NOW, bound)
    assert [(r.offset, r.value) for r in records_of(log, bound)] == above
    assert log.segment_files()[-1] == files[-1]
    log.close()


def test_a_delete_only_log_is_not_compacted(tmp_path):
    log = open_log(str(tmp_path), StorageConfig(segment_bytes=400, index_interval_bytes=64))
    fill_keys(log, 10)
    before = records_of(log)
    assert log.clean(NOW, log.log_end_offset) == 0 and records_of(log) == before
    log.close()


def test_a_crash_after_the_swap_commit_is_finished_on_open(tmp_path, monkeypatch):
    log = open_log(str(tmp_path))
    fill_keys(log, 10)
    expected_leo = log.log_end_offset

    def crash(directory, base, end):
        raise RuntimeError("killed at the commit point")

    monkeypatch.setattr(log_cleanup, "finish_swap", crash)  # what the clean calls once the swap file is renamed
    with pytest.raises(RuntimeError):
        log.clean(NOW, log.log_end_offset)
    log.close(write_indexes=False)
    monkeypatch.undo()
    assert any(n.endswith(".swap") for n in os.listdir(tmp_path))
    reopened, report = SegmentedLog.open(str(tmp_path), TP, COMPACT, recover=True)
    assert not report.truncations and any("swap" in n for n in report.notes)
    assert not any(n.endswith((".swap", ".cleaned")) for n in os.listdir(tmp_path))
    recs = records_of(reopened)
    assert reopened.log_end_offset == expected_leo
    latest = {}
    for r in recs:
        latest[r.key] = r.value
    assert latest == {f"k{k}".encode(): b"v9" for k in range(4)}
    reopened.close()


def test_a_follower_copies_a_compacted_log_and_truncates_at_an_offset_compaction_removed(tmp_path):
    leader = open_log(str(tmp_path / "leader"))
    leader.append_as_leader(batch([b"once"], [b"solo"]), 0)  # kept at offset 0, a gap after it
    fill_keys(leader, 10)
    leader.clean(NOW, leader.log_end_offset)
    leader.clean(NOW, leader.log_end_offset)  # a second pass merges the emptied segments
    data = leader.read(0, 1 << 30)
    follower = open_log(str(tmp_path / "follower"))
    follower.append_as_follower(data)
    assert follower.log_end_offset == leader.log_end_offset
    assert records_of(follower) == records_of(leader)
    offsets = [r.offset for r in records_of(follower)]
    gap = next(o + 1 for o, p in zip(offsets, offsets[1:], strict=False) if p > o + 1)
    follower.truncate_to(gap)  # an offset no batch holds
    assert follower.log_end_offset <= gap and all(r.offset < gap for r in records_of(follower))
    follower.close()
    leader.close()


# ---------------------------------------------------------------- retention and the log start
def test_retention_per_topic_and_log_start_moves(tmp_path):
    cfg = StorageConfig(segment_bytes=400, index_interval_bytes=64).for_topic({"retention.ms": "1000"})
    log = open_log(str(tmp_path), cfg)
    for i in range(20):
        log.append_as_leader(encode_batch([b"x" * 40], timestamp=NOW - 5000 if i < 10 else NOW), 0)
    deleted = log.apply_retention(NOW)
    assert deleted and log.log_start_offset > 0 and log.log_start_offset == log.segment_files()[0][0]
    with pytest.raises(OffsetOutOfRange):
        log.read(log.log_start_offset - 1, 100)
    assert records_of(log)[-1].offset == 19
    log.close()


def test_compact_only_topics_are_not_deleted_by_retention(tmp_path):
    log = open_log(str(tmp_path), COMPACT.for_topic({"retention.ms": "1"}))
    fill_keys(log, 10, ts=0)
    assert log.apply_retention(NOW) == [] and log.log_start_offset == 0
    log.reconfigure(log.config.for_topic({"cleanup.policy": "compact,delete"}))
    assert log.apply_retention(NOW) and log.log_start_offset > 0
    log.close()


def test_log_start_offset_moves_and_segments_below_go_at_the_next_pass(tmp_path):
    log = open_log(str(tmp_path), StorageConfig(segment_bytes=400, index_interval_bytes=64))
    for _ in range(20):
        log.append_as_leader(encode_batch([b"x" * 40], timestamp=NOW), 0)
    log.assign_epoch_start(1, log.log_end_offset)
    assert log.maybe_increment_log_start_offset(12) and not log.maybe_increment_log_start_offset(5)
    assert log.log_start_offset == 12
    with pytest.raises(OffsetOutOfRange):
        log.read(11, 100)
    assert records_of(log)[0].offset == 12  # the batch holding 12 is returned from 12 on by the reader
    log.apply_retention(NOW)
    assert all(base + 0 <= 12 for base, _, _ in log.segment_files()[:1]) and log.segment_files()[0][0] > 0
    assert log.epoch_entries()[0] == (0, 12)
    log.close()
    again = open_log(str(tmp_path), StorageConfig(segment_bytes=400, index_interval_bytes=64), log_start_offset=12)
    assert again.log_start_offset == 12 and again.log_end_offset == 20
    again.close()


def test_truncate_fully_and_start_at(tmp_path):
    log = open_log(str(tmp_path), StorageConfig(segment_bytes=400, index_interval_bytes=64))
    for _ in range(5):
        log.append_as_leader(encode_batch([b"x"]), 2)
    log.truncate_fully_and_start_at(100)
    assert (log.log_start_offset, log.log_end_offset, log.epoch_entries()) == (100, 100, [])
    batch = bytearray(encode_batch([b"y"], base_offset=100, leader_epoch=4))
    assert log.append_as_follower(bytes(batch)) == 101
    log.close()
    again = open_log(str(tmp_path), StorageConfig(segment_bytes=400, index_interval_bytes=64), log_start_offset=100,
                     recover=True)
    assert (again.log_start_offset, again.log_end_offset, again.epoch_entries()) == (100, 101, [(4, 100)])
    again.close()


# ---------------------------------------------------------------- per-topic configs through the manager
def test_the_manager_gives_each_log_its_topics_configs_also_when_they_change(tmp_path):
    topics = {"small": {"segment.bytes": "300", "cleanup.policy": "compact"}}
    m = LogManager([str(tmp_path)], StorageConfig(), logging.getLogger("test"), clock=lambda: 0, wall_clock=lambda: NOW)
    m.startup()
    try:
        m.attach(lambda t: topics.get(t, {}), lambda tp: 10**9)
        small, big = m.get_or_create(TopicPartition("small", 0)), m.get_or_create(TopicPartition("big", 0))
        assert small.config.segment_bytes == 300 and small.config.compact and big.config == StorageConfig()
        topics["big"] = {"segment.bytes": "500", "retention.bytes": "1000"}
        m.refresh_topic_configs()
        assert big.config.segment_bytes == 500 and big.config.retention_bytes == 1000
        for log in (small, big):
            fill_keys(log, 20)
        m.apply_retention_and_compaction()
        assert big.size_in_bytes <= 1000 + 500 and big.log_start_offset > 0
        assert {r.key: r.value for r in records_of(small)} == {f"k{k}".encode(): b"v19" for k in range(4)}
        assert len(records_of(small)) < 80
    finally:
        m.close()


# ---------------------------------------------------------------- the leader's batch rules
def batch(values, keys=None, codec=None, ts=NOW):
    return encode_batch(values, keys, timestamp=ts, compression=codec)


@pytest.mark.parametrize(("given", "want"), [(None, "gzip"), ("gzip", "zstd"), ("zstd", "uncompressed"), ("gzip", "producer")])
def test_recompression_keeps_records_and_makes_a_valid_crc(given, want):
    raw = batch([b"a" * 50, b"b" * 50], [b"1", b"2"], given)
    out, at = conform(raw, AppendPolicy(compression=want), NOW)
    h = next(iter_batches(out, validate=True))[2]  # CRC checked
    codec = {"gzip": COMPRESSION_GZIP, "zstd": COMPRESSION_ZSTD, "uncompressed": COMPRESSION_NONE}.get(want)
    assert h.compression == (codec if codec is not None else {None: 0, "gzip": 1, "zstd": 4}[given])
    assert [(r.key, r.value) for r in decode_records(out)] == [(r.key, r.value) for r in decode_records(raw)]
    assert at == -1 and (out == raw) == (want == "producer")


@pytest.mark.parametrize("codec", [None, "gzip"])
@pytest.mark.parametrize("recompress", ["producer", "zstd"])
def test_log_append_time_stamps_the_batch_with_a_valid_crc(codec, recompress):
    raw = batch([b"a", b"b"], [b"1", b"2"], codec, ts=5)
    out, at = conform(raw, AppendPolicy(log_append_time=True, compression=recompress), NOW)
    h = next(iter_batches(out, validate=True))[2]
    assert at == NOW and h.is_log_append_time and h.max_timestamp == NOW
    assert [r.value for r in decode_records(out)] == [b"a", b"b"]


def test_compacted_topics_refuse_records_without_a_key_and_size_is_checked():
    with pytest.raises(BatchError) as e:
        conform(batch([b"a", b"b"], [b"1", None]), AppendPolicy(compact=True), NOW)
    assert e.value.error_code == ErrorCode.invalid_record
    assert conform(batch([b"a"], [b"1"], "gzip"), AppendPolicy(compact=True), NOW)[1] == -1
    with pytest.raises(BatchError) as e:
        conform(batch([b"a" * 200]), AppendPolicy(max_message_bytes=100), NOW)
    assert e.value.error_code == ErrorCode.message_too_large
    with pytest.raises(BatchError) as e:
        conform(batch([b"a" * 200]), AppendPolicy(segment_bytes=100), NOW)
    assert e.value.error_code == ErrorCode.record_list_too_large
    big = batch([bytes(range(256)) * 4], codec="gzip")  # fits compressed, not once uncompressed
    with pytest.raises(BatchError) as e:
        conform(big, AppendPolicy(max_message_bytes=len(big) + 10, compression="uncompressed"), NOW)
    assert e.value.error_code == ErrorCode.message_too_large


def test_a_second_clean_of_the_same_segments_rewrites_nothing(tmp_path):
    log = open_log(str(tmp_path))
    fill_keys(log, 10)
    assert log.clean(NOW, log.log_end_offset) > 0
    files = [(b, os.stat(p).st_ino) for b, p, _ in log.segment_files()]
    assert log.clean(NOW, log.log_end_offset) == 0
    assert [(b, os.stat(p).st_ino) for b, p, _ in log.segment_files()] == files
    fill_keys(log, 3)  # new closed segments: the next pass cleans (and merges the thinned ones)
    assert log.clean(NOW, log.log_end_offset) > 0 and len(log.segment_files()) < len(files)
    log.close()


def test_retention_never_deletes_past_the_high_watermark(tmp_path):
    log = open_log(str(tmp_path), StorageConfig(segment_bytes=400, index_interval_bytes=64, retention_ms=1))
    for _ in range(20):
        log.append_as_leader(encode_batch([b"x" * 40], timestamp=0), 0)
    second = log.segment_files()[1][0]
    log.apply_retention(NOW, upper_bound=second)  # only the first segment lies wholly below it
    assert log.log_start_offset == second
    log.apply_retention(NOW)
    assert log.log_start_offset == log.segment_files()[-1][0]
    log.close()


def test_flush_messages_and_flush_ms_are_honoured_per_topic(tmp_path):
    """flush.messages / flush.ms set on a topic drive its logs' flushes (the broker's
    policy elsewhere): librdkafka 0081/0092 set them through AlterConfigs."""
    now = [0]
    topics = {"synced": {"flush.messages": "1"}, "timed": {"flush.ms": "50"}}
    m = LogManager([str(tmp_path)], StorageConfig(), logging.getLogger("test"), clock=lambda: now[0], wall_clock=lambda: NOW)
    m.startup()
    try:
        m.attach(lambda t: topics.get(t, {}), lambda tp: 10**9)
        synced, timed, plain = (m.get_or_create(TopicPartition(t, 0)) for t in ("synced", "timed", "plain"))
        for log in (synced, timed, plain):
            fill_keys(log, 1)
        assert synced.recovery_point == synced.log_end_offset  # every message flushed at once
        assert timed.recovery_point == 0 and plain.recovery_point == 0
        assert m.next_flush_deadline() is not None and m.next_flush_deadline() <= 50
        now[0] = 50
        m.flush_due(50)
        assert timed.recovery_point == timed.log_end_offset and plain.recovery_point == 0
    finally:
        m.close()


def test_index_interval_and_index_size_are_honoured_per_topic(tmp_path):
    """index.interval.bytes and segment.index.bytes set on a topic (librdkafka 0092 sets
    back every config it read): an entry per batch at interval 0, and a segment that rolls
    when its index of 16 bytes (two entries) is full."""
    cfg = StorageConfig(segment_bytes=10**6, index_interval_bytes=10**6).for_topic(
        {"index.interval.bytes": "0", "segment.index.bytes": "16"})
    assert (cfg.index_interval_bytes, cfg.index_max_bytes) == (0, 16)
    log = open_log(str(tmp_path), cfg)
    for _ in range(6):
        log.append_as_leader(encode_batch([b"x" * 40], timestamp=NOW), 0)
    segments = log.segment_files()
    assert len(segments) == 3, segments  # two batches, two index entries, then a roll
    assert [s[0] for s in segments] == [0, 2, 4]
    assert [r.offset for r in records_of(log)] == list(range(6))
    log.close()
