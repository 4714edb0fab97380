"""Speed of the storage engine on this machine: append and read MB/s and batches/s of
SegmentedLog (through LogManager, default flush policy), the way the broker uses it.

    .venv/bin/python bench/storage.py [MB] [--dir DIR]      (default 256 MB in a temp dir)

Appends: Produce-sized batches (~1 MB, 100-byte values, as librdkafka sends with
batching on) through `validate_for_append` (one CRC pass) and `append_as_leader`
(one pwritev); follower appends (`append_as_follower`, one CRC pass); small batches (one
record) for the per-call overhead; every-write flushing (fdatasync per append).
Reads: a consumer reading from offset 0 with 1 MiB fetches (page cache warm), and
random-offset reads. The broker targets are 150,000 msgs/s produced and 300,000 msgs/s
consumed end to end; this prints what storage alone costs per message.
"""

from __future__ import annotations

import argparse
import logging
import os
import random
import shutil
import tempfile
import time

from broker.core.messages import TopicPartition
from broker.records import encode_batch, iter_batches, validate_for_append
from broker.storage import LogManager, StorageConfig

VALUE = b"x" * 100
MSGS_PER_BATCH = 9_000  # ~1 MB: librdkafka's batch.size is 1,000,000 bytes
SMALL = encode_batch([VALUE])  # a 1-record batch
N_SMALL = 20_000


def best(fn, repeat: int = 3) -> float:
    out = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return min(out)


class Logs:
    """Fresh logs for the runs, each in a directory of its own under `root`."""

    def __init__(self, root: str) -> None:
        self.root = root
        self.run = 0
        self.logger = logging.getLogger("bench")
        self.logger.addHandler(logging.NullHandler())
        self.logger.propagate = False

    def fresh(self, c: StorageConfig = StorageConfig(segment_bytes=64 << 20)) -> tuple[LogManager, object]:
        self.run += 1
        lm = LogManager([os.path.join(self.root, f"run{self.run}")], c, self.logger)
        lm.startup()
        return lm, lm.get_or_create(TopicPartition("bench", 0))


def appends(logs: Logs, batch: bytes, n_batches: int, mb: float, msgs: int) -> None:
    """Leader, follower, small and every-write-synced appends."""

    def leader_appends() -> None:
        lm, log = logs.fresh()
        for _ in range(n_batches):
            validate_for_append(batch, 1 << 21)
            log.append_as_leader(batch, 1)
        lm.wait_background()
        lm.close()

    t = best(leader_appends)
    print(f"leader append    {mb / t:8.0f} MB/s  {n_batches / t:8.0f} batches/s  {msgs / t:12,.0f} msgs/s"
          "  (validate_for_append + append_as_leader, flush on roll in the background)")

    parts = []
    off = 0
    for _ in range(n_batches):
        parts.append(encode_batch([VALUE] * MSGS_PER_BATCH, base_offset=off, leader_epoch=1))
        off += MSGS_PER_BATCH

    def follower_appends() -> None:
        lm, log = logs.fresh()
        for p in parts:
            log.append_as_follower(p)
        lm.wait_background()
        lm.close()

    t = best(follower_appends)
    print(f"follower append  {mb / t:8.0f} MB/s  {n_batches / t:8.0f} batches/s  {msgs / t:12,.0f} msgs/s"
          "  (append_as_follower: CRC check + one write)")

    def small_appends() -> None:
        lm, log = logs.fresh()
        for _ in range(N_SMALL):
            log.append_as_leader(SMALL, 1)
        lm.close()

    t = best(small_appends)
    print(f"small append     {N_SMALL / t:8.0f} batches/s  ({t / N_SMALL * 1e6:.1f} us per 1-record append)")

    n_sync = 300

    def synced_appends() -> None:
        lm, log = logs.fresh(StorageConfig(flush_interval_messages=1))
        for _ in range(n_sync):
            log.append_as_leader(SMALL, 1)
        lm.close()

    t = best(synced_appends, 1)
    print(f"every-write sync {n_sync / t:8.0f} appends/s  ({t / n_sync * 1e3:.2f} ms per fdatasync'd append)")


def fetch_starts(log, end: int) -> list[int]:
    """Where each 1 MiB fetch of a consumer reading from 0 starts (found once, untimed)."""
    off, out = 0, []
    while off < end:
        out.append(off)
        *_, (_, _, h) = iter_batches(log.read(off, 1 << 20), validate=False)
        off = h.last_offset + 1
    return out


def reads(logs: Logs, batch: bytes, n_batches: int, mb: float, msgs: int) -> None:
    """A consumer reading Produce-sized batches from 0, random-offset reads, and a consumer
    reading 1-record batches."""
    lm, log = logs.fresh()
    for _ in range(n_batches):
        log.append_as_leader(batch, 1)
    lm.wait_background()
    leo = log.log_end_offset
    starts = fetch_starts(log, leo)

    def sequential_reads() -> None:
        for off in starts:
            log.read(off, 1 << 20)

    fetches = len(starts)
    t = best(sequential_reads)
    print(f"consumer read    {mb / t:8.0f} MB/s  {fetches / t:8.0f} fetches/s  {msgs / t:12,.0f} msgs/s"
          "  (1 MiB fetches from offset 0, page cache warm)")

    rng = random.Random(7)
    offsets = [rng.randrange(leo) for _ in range(2000)]

    def random_reads() -> None:
        for o in offsets:
            log.read(o, 1 << 20)

    t = best(random_reads)
    print(f"random read      {len(offsets) / t:8.0f} reads/s  ({t / len(offsets) * 1e6:.0f} us per 1 MiB read at a random offset)")
    lm.close()

    lm, log = logs.fresh()
    for _ in range(N_SMALL * 10):
        log.append_as_leader(SMALL, 1)
    small_leo = log.log_end_offset
    small_starts = fetch_starts(log, small_leo)

    def small_batch_reads() -> None:
        for off in small_starts:
            log.read(off, 1 << 20)

    fetches = len(small_starts)
    t = best(small_batch_reads)
    print(f"consumer read    {small_leo * len(SMALL) / (1 << 20) / t:8.0f} MB/s  {fetches / t:8.0f} fetches/s  "
          f"{small_leo / t:12,.0f} msgs/s"
          f"  (1 MiB fetches of 1-record batches of {len(SMALL)} bytes)")
    lm.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("mb", nargs="?", type=int, default=256, help="megabytes to append per run (default 256)")
    ap.add_argument("--dir", default=None, help="where to put the logs (default: a temp dir, removed)")
    args = ap.parse_args()
    root = tempfile.mkdtemp(prefix="wrack-bench-storage-", dir=args.dir)
    try:
        batch = encode_batch([VALUE] * MSGS_PER_BATCH, timestamp=int(time.time() * 1000))
        n_batches = max(1, args.mb * (1 << 20) // len(batch))
        mb = n_batches * len(batch) / (1 << 20)
        msgs = n_batches * MSGS_PER_BATCH
        print(f"batch            {len(batch):,} bytes, {MSGS_PER_BATCH:,} records of {len(VALUE)} bytes")
        print(f"per run          {n_batches} batches, {mb:.0f} MB, {msgs:,} messages")
        logs = Logs(root)
        appends(logs, batch, n_batches, mb, msgs)
        reads(logs, batch, n_batches, mb, msgs)
        with open("/proc/loadavg") as f:
            print(f"load average     {f.read().split()[:3]}")
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
