"""Storage failures under a running broker answer KAFKA_STORAGE_ERROR and the broker goes
on serving (regression: the core mapped every append error to CORRUPT_MESSAGE, and an
I/O error escaped into the connection handler): a full disk (a 4 MiB tmpfs as the log
dir) fails a produce, which works again once space is freed; a segment file truncated
under the broker fails a fetch; a batch the storage refuses gets its own error code.
Root only (tmpfs mount); the mount and the process are removed even on failure."""

from __future__ import annotations

import os
import subprocess
import tempfile

import pytest
from broker_procs import BrokerFleet, free_port
from kio.schema.errors import ErrorCode as E

from broker.records import encode_batch
from broker.wire import kafka as k
from broker.wire.client import RawClient

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="mounts a tmpfs (root only)")


@pytest.fixture
def small_disk():
    d = tempfile.mkdtemp(prefix="wrack-test-full-disk-")
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", d], check=True)
    try:
        yield d
    finally:
        subprocess.run(["umount", "-l", d], check=False)
        os.rmdir(d)


def produce(c, partition, records, acks=1):
    r = c.call(k.PRODUCE, 9, {"acks": acks, "timeout": 5000, "topic_data": [
        {"name": "t", "partition_data": [{"index": partition, "records": records}]}]})
    return r.responses[0].partition_responses[0]


def fetch(c, partition, offset):
    r = c.call(k.FETCH, 12, {"max_wait": 0, "min_bytes": 1, "topics": [{"topic": "t", "partitions": [
        {"partition": partition, "fetch_offset": offset, "partition_max_bytes": 1 << 20, "current_leader_epoch": -1}]}],
        "isolation_level": 0, "session_id": 0, "session_epoch": -1, "forgotten_topics_data": [], "rack_id": "",
        "replica_id": -1, "max_bytes": 1 << 22})
    return r.responses[0].partitions[0]


def test_full_disk_and_a_truncated_segment_answer_kafka_storage_error(small_disk):
    with BrokerFleet() as fleet:
        port = free_port()
        b = fleet.add("b0", {"node.id": "0", "listeners": f"PLAINTEXT://127.0.0.1:{port}", "log.dirs": small_disk,
                             "metadata.log.dir": os.path.join(fleet.base, "meta"),
                             "wrack.log.file": os.path.join(fleet.base, "b0.log")}, port=port).start()
        with RawClient(b.host, b.port) as c:
            r = c.call(k.CREATE_TOPICS, 7, {"topics": [{"name": "t", "num_partitions": 2, "replication_factor": 1,
                                                        "assignments": [], "configs": []}], "timeout": 10000})
            assert r.topics[0].error_code is E.none
            first = produce(c, 0, encode_batch([b"before"]))
            assert first.error_code is E.none and first.base_offset == 0
            # fill the disk: a 200 KB batch no longer fits
            filler = os.path.join(small_disk, "filler")
            with open(filler, "wb") as f:
                try:
                    while True:
                        f.write(b"\0" * 65536)
                        f.flush()
                except OSError:
                    pass
            big = encode_batch([os.urandom(200_000)])
            assert produce(c, 0, big).error_code is E.kafka_storage_error
            assert produce(c, 0, big, acks=-1).error_code is E.kafka_storage_error
            # the same connection goes on: metadata, and the records written before
            md = c.call(k.METADATA, 12, {"topics": [{"name": "t"}], "allow_auto_topic_creation": False,
                                         "include_topic_authorized_operations": False})
            assert md.topics[0].error_code is E.none
            got = fetch(c, 0, 0)
            assert got.error_code is E.none and got.high_watermark == 1
            os.unlink(filler)
            again = produce(c, 0, big)
            assert again.error_code is E.none and again.base_offset == 1  # the failed appends left nothing
            # a batch the storage refuses: its own code, not CORRUPT_MESSAGE
            v1 = bytearray(encode_batch([b"x"]))
            v1[16] = 1  # magic 1
            assert produce(c, 1, bytes(v1)).error_code is E.unsupported_for_message_format
            # a segment file cut under the broker: the read fails, the broker answers and goes on
            seg = os.path.join(small_disk, "t-0", "00000000000000000000.log")
            os.truncate(seg, 10)
            assert fetch(c, 0, 1).error_code is E.kafka_storage_error
            assert produce(c, 1, encode_batch([b"still"])).error_code is E.none
        assert b.running
        with open(os.path.join(fleet.base, "b0.log")) as f:
            log = f.read()
        assert "storage failure in append" in log and "storage failure in read for a consumer" in log
        assert "Traceback" not in log and "Traceback" not in b.log_text()
        b.kill()
