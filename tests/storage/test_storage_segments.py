"""SegmentedLog's files: segment roll, sparse offset and time indexes (lookups, rebuilds of
corrupt index files), offset_for_timestamp, retention, directory fsync on roll."""

from __future__ import annotations

import logging
import os
import shutil
import struct
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from broker.core.messages import TopicPartition
from broker.logapi import OffsetOutOfRange
from broker.records import decode_records, encode_batch, iter_batches
from broker.storage import SegmentedLog, StorageConfig
from broker.storage import local_log as log_module  # where the roll and its background flush live

TP = TopicPartition("seg", 3)


def open_log(path, config: StorageConfig, **kw) -> tuple[SegmentedLog, object]:
    return SegmentedLog.open(str(path), TP, config, **kw)


def index_entries(path: str) -> list[tuple[int, int]]:
    with open(path, "rb") as f:
        data = f.read()
    return list(struct.iter_unpack(">ii", data))


def fill(log: SegmentedLog, batches: int, values: int = 2, size: int = 50, epoch: int = 0, ts0: int = 1000) -> None:
    for i in range(batches):
        log.append_as_leader(encode_batch([b"%04d" % i + b"x" * size] * values, timestamp=ts0 + i), epoch)


def test_segments_roll_by_size_and_are_named_by_base_offset(tmp_path):
    log, _ = open_log(tmp_path / "p", StorageConfig(segment_bytes=1000))
    fill(log, 40)
    big = encode_batch([b"B" * 1500])  # larger than a segment: goes alone into a new one
    first, _ = log.append_as_leader(big, 0)
    fill(log, 3)
    files = log.segment_files()
    assert len(files) > 5
    for (base, path, size), nxt in zip(files, files[1:] + [None], strict=True):
        assert os.path.basename(path) == f"{base:020d}.log" and os.path.getsize(path) == size
        if base != first:
            assert size <= 1000
        if nxt is not None:
            with open(path, "rb") as f:
                hs = [h for _, _, h in iter_batches(f.read())]
            assert hs[0].base_offset == base and hs[-1].last_offset + 1 == nxt[0]  # contiguous
    assert any(base == first and size == len(big) for base, _, size in files)
    assert log.read(0, 1 << 30) == b"".join(Path(p).read_bytes() for _, p, _ in files)
    log.close()


def test_index_entries_map_last_offsets_to_positions_every_interval(tmp_path):
    log, _ = open_log(tmp_path / "p", StorageConfig(segment_bytes=100_000, index_interval_bytes=500))
    fill(log, 60)
    log.close()
    (base, path, _), = log.segment_files()
    data = Path(path).read_bytes()
    batches = [(s, h) for s, _, h in iter_batches(data)]
    entries = index_entries(path[:-4] + ".index")
    assert entries, "an index entry every 500 bytes"
    by_pos = {s: h for s, h in batches}
    last_pos = 0
    for rel, pos in entries:
        assert by_pos[pos].last_offset == base + rel  # Kafka's entry: a batch's last offset and position
        assert pos - last_pos > 500 or last_pos == 0
        last_pos = pos
    assert len(entries) >= len(data) // (500 + 2 * batches[0][1].size) - 1


def test_every_offset_reads_through_the_index(tmp_path):
    log, _ = open_log(tmp_path / "p", StorageConfig(segment_bytes=3000, index_interval_bytes=200))
    for i in range(80):
        log.append_as_leader(encode_batch([b"v%d" % i] * (1 + i % 4)), i // 20)
    whole = {h.base_offset: (h, log.read(h.base_offset, 1)) for _, _, h in iter_batches(log.read(0, 1 << 30))}
    for offset in range(log.log_end_offset):
        got = log.read(offset, 1)
        (_, _, h), = iter_batches(got)
        assert h.base_offset <= offset <= h.last_offset and got == whole[h.base_offset][1]
    log.close()


def _corrupt_index(path: str, how: str) -> None:
    entries = index_entries(path)
    if how == "odd size":
        with open(path, "ab") as f:
            f.write(b"\x00\x01\x02")
    elif how == "not ascending":
        entries[1], entries[2] = entries[2], entries[1]
        Path(path).write_bytes(b"".join(struct.pack(">ii", *e) for e in entries))
    elif how == "past the log":
        entries.append((entries[-1][0] + 5, 10_000_000))
        Path(path).write_bytes(b"".join(struct.pack(">ii", *e) for e in entries))
    elif how == "last entry wrong":
        entries[-1] = (entries[-1][0] + 1, entries[-1][1])
        Path(path).write_bytes(b"".join(struct.pack(">ii", *e) for e in entries))


@pytest.mark.parametrize("how", ["odd size", "not ascending", "past the log", "last entry wrong"])
def test_corrupt_index_files_are_rebuilt_not_trusted(tmp_path, how, caplog):
    cfg = StorageConfig(segment_bytes=4000, index_interval_bytes=100)
    log, _ = open_log(tmp_path / "p", cfg)
    fill(log, 100)
    want = [log.read(o, 1) for o in range(0, log.log_end_offset, 7)]
    log.close()
    first_index = log.segment_files()[0][1][:-4] + ".index"
    good = index_entries(first_index)
    _corrupt_index(first_index, how)
    with caplog.at_level(logging.WARNING):
        log, report = open_log(tmp_path / "p", cfg)
    assert [os.path.basename(p) for p, _ in report.index_rebuilds] == [os.path.basename(first_index)]
    assert "rebuilt from the log" in caplog.text and os.path.basename(first_index) in caplog.text
    assert [log.read(o, 1) for o in range(0, log.log_end_offset, 7)] == want
    log.close()
    assert index_entries(first_index) == good


def test_a_wrong_index_entry_met_by_a_read_rebuilds_the_index(tmp_path, caplog):
    """An entry that passes the load checks (ascending, inside the log, last entry right)
    but points at the wrong batch is caught when a read uses it."""
    cfg = StorageConfig(segment_bytes=100_000, index_interval_bytes=100)
    log, _ = open_log(tmp_path / "p", cfg)
    fill(log, 50)
    want = {o: log.read(o, 1) for o in range(log.log_end_offset)}
    log.close()
    path = log.segment_files()[0][1][:-4] + ".index"
    entries = index_entries(path)
    rel, pos = entries[3]
    entries[3] = (rel + 1, pos)  # still ascending, but no batch ends at rel + 1 there
    Path(path).write_bytes(b"".join(struct.pack(">ii", *e) for e in entries))
    log, report = open_log(tmp_path / "p", cfg)
    assert not report.index_rebuilds
    with caplog.at_level(logging.WARNING):
        got = {o: log.read(o, 1) for o in range(log.log_end_offset)}
    assert got == want and "index 00000000000000000000.index rebuilt" in caplog.text
    log.close()


def test_a_full_index_rolls_the_segment(tmp_path):
    log, _ = open_log(tmp_path / "p", StorageConfig(segment_bytes=1 << 20, index_interval_bytes=0, index_max_bytes=24))
    fill(log, 12)
    assert len(log.segment_files()) >= 3  # 3 entries per index
    log.close()


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.lists(st.integers(0, 500), min_size=1, max_size=4), min_size=1, max_size=40), st.integers(-5, 520))
def test_offset_for_timestamp_finds_the_first_record_at_or_after(tmp_path_factory, batches, target):
    path = tmp_path_factory.mktemp("ts")
    log, _ = open_log(path / "p", StorageConfig(segment_bytes=400, index_interval_bytes=50))
    records = []
    for ts in batches:
        first, _ = log.append_as_leader(encode_batch([b"r"] * len(ts), timestamps=ts), 4)
        records += [(first + i, t) for i, t in enumerate(ts)]
    want = next(((o, t) for o, t in records if t >= target), None)
    got = log.offset_for_timestamp(target)
    assert (got[:2] if got else None) == want
    if got:
        assert got.leader_epoch == 4
    log.close()
    log, _ = open_log(path / "p", StorageConfig(segment_bytes=400, index_interval_bytes=50))  # from the files
    got = log.offset_for_timestamp(target)
    assert (got[:2] if got else None) == want
    log.close()


def test_retention_deletes_old_segments_and_moves_the_log_start(tmp_path):
    cfg = StorageConfig(segment_bytes=600, retention_bytes=1500)
    log, _ = open_log(tmp_path / "p", cfg)
    for e in range(4):
        fill(log, 10, epoch=e)
    assert log.size_in_bytes > 1500
    deleted = log.apply_retention(now_ms=0)
    assert deleted and all(not os.path.exists(p) for p in deleted)
    assert log.log_start_offset == log.segment_files()[0][0] > 0
    assert log.size_in_bytes - log.segment_files()[0][2] < 1500
    assert log.epoch_entries()[0][1] == log.log_start_offset
    with pytest.raises(OffsetOutOfRange):
        log.read(log.log_start_offset - 1, 100)
    assert decode_records(log.read(log.log_start_offset, 1))[0].offset == log.log_start_offset
    start = log.log_start_offset
    log.close()
    log, _ = open_log(tmp_path / "p", StorageConfig(segment_bytes=600, retention_ms=10_000), log_start_offset=start)
    assert log.log_start_offset == start  # from the checkpoint the manager would pass
    assert log.apply_retention(now_ms=11_000) == []  # every record is at most 10 s old (timestamps 1000..1009)
    assert log.apply_retention(now_ms=10**12) and len(log.segment_files()) == 1  # never the active segment
    assert log.log_start_offset == log.segment_files()[0][0]
    log.close()


def test_a_new_segment_is_made_durable_by_a_directory_fsync(tmp_path, monkeypatch):
    synced: list[str] = []
    real = log_module.fsync_dir

    def spy(path: str) -> None:
        synced.append(path)
        real(path)

    monkeypatch.setattr(log_module, "fsync_dir", spy)
    log, _ = open_log(tmp_path / "p", StorageConfig(segment_bytes=500))
    synced.clear()
    fill(log, 2)
    assert len(log.segment_files()) == 1 and synced == []
    fill(log, 10)  # rolls; the default policy flushes the rolled segment and the directory
    assert len(log.segment_files()) > 1 and str(tmp_path / "p") in synced
    assert log.recovery_point == log.segment_files()[-1][0]
    log.close()


@settings(max_examples=80, deadline=None)
@given(st.data())
def test_reads_skip_through_the_index_and_still_cut_exactly(data):
    """max_bytes and upper_bound cut where a batch-by-batch walk would (the read jumps over
    whole batches with the index instead of walking every header)."""
    path = Path(tempfile.mkdtemp(prefix="wrack-skip-", dir="/dev/shm" if os.path.isdir("/dev/shm") else None))
    try:
        interval = data.draw(st.sampled_from([0, 50, 300, 4096]), label="index interval")
        log, _ = open_log(path / "p", StorageConfig(segment_bytes=data.draw(st.sampled_from([2000, 1 << 20])),
                                                   index_interval_bytes=interval))
        rng = data.draw(st.randoms(use_true_random=False))
        for _ in range(120):
            log.append_as_leader(encode_batch([b"z" * rng.randrange(0, 60)] * rng.randrange(1, 4)), 0)
        whole = b"".join(Path(p).read_bytes() for _, p, _ in log.segment_files())  # the files, not a read
        batches = [(h, whole[s:e]) for s, e, h in iter_batches(whole)]
        leo = log.log_end_offset
        for _ in range(20):
            offset = rng.randrange(leo)
            max_bytes = rng.choice([0, 1, 100, 500, 2000, 1 << 20])
            bound = rng.choice([None, rng.randrange(leo + 1)])
            want, total = [], 0
            for h, raw in batches:
                if h.last_offset < offset:
                    continue
                if bound is not None and h.last_offset >= bound:
                    break
                if want and total + len(raw) > max_bytes:
                    break
                want.append(raw)
                total += len(raw)
            assert log.read(offset, max_bytes, bound) == b"".join(want), (offset, max_bytes, bound)
        log.close()
    finally:
        shutil.rmtree(path, ignore_errors=True)
