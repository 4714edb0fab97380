"""The queue workload's send-only processes against a real `wrack-broker` on loopback: many
threads send at once through one shared producer (confluent-kafka and kafka-python), each
send answered with its own offset, and every acknowledged value is at its offset when read
back; a SendLane through the workload's SenderPool does the same, names the producer and the
order it was handed each value (the log holds them in that order: checkers/producers.py), and
the pool closes the producer when its last holder lets go."""

from __future__ import annotations

import threading

import pytest
from broker_procs import read_back

from workloads.base import WorkloadOptions
from workloads.kafka_clients import open_sender
from workloads.kafka_io import create_topics
from workloads.queue import QueueWorkload, SendLane

THREADS, PER_THREAD = 24, 25


def concurrent_sends(send_for, topic: str, base: int) -> dict[int, int]:
    """THREADS threads each sending PER_THREAD values at once, thread t with `send_for(t)`:
    value -> acknowledged offset."""
    acked: dict[int, int] = {}
    errors: list[BaseException] = []
    lock = threading.Lock()

    def one(t: int) -> None:
        send = send_for(t)
        for i in range(PER_THREAD):
            v = base + t * PER_THREAD + i
            try:
                off = send(topic, 0, v)
            except BaseException as e:  # noqa: BLE001 - reported by the assertion below
                errors.append(e)
                return
            with lock:
                acked[v] = off

    ts = [threading.Thread(target=one, args=(t,)) for t in range(THREADS)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(60)
    assert errors == []
    return acked


def assert_read_back(bs: str, topic: str, acked: dict[int, int]) -> None:
    assert len(set(acked.values())) == len(acked) == THREADS * PER_THREAD  # one offset per send
    got = read_back(bs, topic, 0, {str(v).encode() for v in acked})
    assert {off: int(got[off]) for off in acked.values()} == {off: v for v, off in acked.items()}


@pytest.mark.parametrize("lib", ["confluent", "kafka-python"])
def test_a_shared_sender_serves_many_threads_at_once(fleet, lib):
    b = fleet.single().start()
    topic = f"lanes-{lib}"
    create_topics(b.bootstrap, {topic: 1}, replication_factor=1)
    sender = open_sender(lib, b.bootstrap, acks="all", timeout=10.0, client_id="lanes")
    try:
        acked = concurrent_sends(lambda _t: sender.send, topic, 1)
    finally:
        sender.close()
    assert_read_back(b.bootstrap, topic, acked)


def test_send_lanes_share_one_producer_until_the_last_one_closes(fleet):
    b = fleet.single().start()
    wl = QueueWorkload(WorkloadOptions(topics=1, partitions=1, concurrency_threads=2, in_flight=THREADS))
    create_topics(b.bootstrap, wl.topics(), replication_factor=1)
    assert wl.send_lanes() == THREADS
    lanes = [wl.client(2 + t, 2 + t, b.bootstrap) for t in range(THREADS)]
    assert all(isinstance(c, SendLane) for c in lanes)
    assert type(wl.client(0, 0, b.bootstrap)).__name__ == "QueueClient"  # threads below `clients` consume

    handed: dict[int, list] = {}

    def lane_send(t: int):
        def send(topic: str, partition: int, v: int) -> int:
            out = lanes[t].invoke({"f": "send", "value": [["send", f"{topic}-{partition}", v]]})
            assert out["type"] == "ok", out
            handed[v] = out["producer"][0]
            return out["value"][0][2][0]

        return send

    acked = concurrent_sends(lane_send, "queue0", 1)
    # one idempotent producer, handed the values in one order: the log's
    assert {tag for tag, _ in handed.values()} == {handed[1][0]}
    assert sorted(acked, key=lambda v: handed[v][1]) == sorted(acked, key=lambda v: acked[v])
    pool = wl.sender_pool
    assert list(pool.senders) == ["all"] and pool.senders["all"][1] == THREADS  # one producer, every lane
    assert lanes[0].invoke({"f": "poll", "value": [["poll"]]})["type"] == "fail"  # send-only
    for lane in lanes:
        lane.close()
    assert pool.senders == {}
    assert_read_back(b.bootstrap, "queue0", acked)
