"""The queue workload's consuming client re-assigning its consumer, against a real
`wrack-broker` and a real librdkafka consumer: a re-assign never sends it back to the
beginning of a partition it had moved past.

The trap (librdkafka 2.x, rdkafka_partition.c): an assign from a *logical* offset
(OFFSET_BEGINNING) sends a ListOffsets; a second assign before the answer makes that answer
outdated, and librdkafka then arms a 500 ms offset-query timer for the logical offset that
a later assign from an explicit offset does not stop (fetch_stop stops it only in state
offset-query). When it fires, the partition restarts from offset 0 while it was being
consumed from much further on: the history shows a poll going back (int-nonmonotonic-poll)
on a healthy partition. The client therefore assigns explicit offsets only."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor

from workloads.base import WorkloadOptions, split_key
from workloads.kafka_clients import open_sender
from workloads.kafka_io import create_topics
from workloads.queue import QueueClient, QueueWorkload

PARTITIONS, PER_PARTITION, TRIALS = 8, 400, 4


def poll(client) -> dict[str, list[list[int]]]:
    out = client.invoke({"f": "poll", "value": [["poll"]]})
    assert out["type"] == "ok", out
    return out["value"][0][1]


def assign(client, keys: list[str]) -> None:
    assert client.invoke({"f": "assign", "value": keys})["type"] == "ok"


def test_a_reassign_never_sends_the_consumer_back_to_the_beginning(fleet):
    b = fleet.single().start()
    wl = QueueWorkload(WorkloadOptions(topics=1, partitions=PARTITIONS, concurrency_threads=1, in_flight=0))
    create_topics(b.bootstrap, wl.topics(), replication_factor=1)
    sender = open_sender("confluent", b.bootstrap, acks="all", timeout=10.0, client_id="fill")
    try:
        with ThreadPoolExecutor(32) as ex:
            offsets = list(ex.map(lambda v: sender.send("queue0", v % PARTITIONS, v), range(PARTITIONS * PER_PARTITION)))
    finally:
        sender.close()
    assert len(offsets) == PARTITIONS * PER_PARTITION
    warm, keys = wl.keys[-1], wl.keys[:-1]
    went_back: list[tuple[int, str, int, int]] = []
    for trial in range(TRIALS):
        # a consumer group of its own each trial: a client resumes from its group's committed
        # offsets on its first assign, and this trap needs partitions it has never read
        group = f"reassign-{trial}"
        c = QueueClient(wl.io_factory(trial, b.bootstrap, None, group), wl.opts, group)
        try:
            assign(c, [warm])  # the consumer learns the partitions' leaders
            deadline = time.monotonic() + 30
            while not poll(c):
                assert time.monotonic() < deadline, f"trial {trial}: nothing polled from {warm} in 30 s"
            # twice from the beginning (never read: no position yet), the second assign
            # before the first one's offset lookup is answered
            assign(c, keys)
            time.sleep(0.0005)
            assign(c, keys)
            t0 = time.monotonic()
            while time.monotonic() - t0 < 0.1:
                poll(c)
            moved = dict(c.positions)
            assign(c, keys)  # again, from where each partition was left
            nxt = {k: moved.get(split_key(k), 0) for k in keys}
            t0 = time.monotonic()
            while time.monotonic() - t0 < 1.5:  # past librdkafka's 500 ms offset-query retry
                for k, pairs in poll(c).items():
                    for off, _v in pairs:
                        if off != nxt[k]:
                            went_back.append((trial, k, nxt[k], off))
                        nxt[k] = off + 1
        finally:
            c.close()
    assert went_back == [], f"(trial, key, expected offset, polled offset): {went_back[:10]}"
    assert all(n == PER_PARTITION for n in nxt.values())  # every trial read every partition to its end
