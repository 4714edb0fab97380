"""Fuzzing a running broker: random frames, mutated valid requests of every supported
API version, mutated inter-node frames and half-sent frames, over many connections.
The broker must never crash, never hang (a healthy client is served after every
round), and never hit an unexpected exception (no traceback in its log)."""

from __future__ import annotations

import random
import socket
import struct
import time

import pytest
from broker_procs import BrokerFleet
from test_broker_bad_input import healthy
from test_broker_fuzz_codecs import SAMPLES

from broker.core import messages as m
from broker.records import encode_batch
from broker.wire import internal
from broker.wire import kafka as k
from broker.wire.client import RawClient, encode_request

ROUNDS = 30
GUARDED = "guarded-healthy-topic"  # a name the fuzzed requests (topics named "t") never reach
PER_ROUND = 12


def mutate(rng: random.Random, data: bytes) -> bytes:
    b = bytearray(data)
    for _ in range(rng.randint(1, 5)):
        op = rng.choice(["flip", "set", "cut", "insert", "delete", "int"])
        pos = rng.randrange(max(len(b), 1))
        if op == "flip" and b:
            b[pos] ^= 1 << rng.randrange(8)
        elif op == "set" and b:
            b[pos] = rng.choice([0, 0x7F, 0x80, 0xFF])
        elif op == "cut":
            del b[pos:]
        elif op == "insert":
            b[pos:pos] = rng.randbytes(rng.randint(1, 8))
        elif op == "delete" and b:
            del b[pos : pos + rng.randint(1, 8)]
        elif op == "int" and len(b) >= pos + 4:
            b[pos : pos + 4] = struct.pack(">i", rng.choice([-1, 0, 2**31 - 1, -(2**31), 1 << 20]))
    return bytes(b)


def valid_requests() -> list[bytes]:
    """Requests that reach the handlers (frames without the size prefix)."""
    out = list(SAMPLES)
    batch = encode_batch([b"fuzz"])
    for acks in (0, 1, -1):
        out.append(encode_request(k.PRODUCE, 9, 3, k.build(k.request_class(k.PRODUCE, 9), {
            "acks": acks, "timeout": 1000, "topic_data": [
                {"name": "fz", "partition_data": [{"index": 0, "records": batch}]}]}))[4:])
    out.append(encode_request(k.FETCH, 12, 4, k.build(k.request_class(k.FETCH, 12), {
        "max_wait": 100, "min_bytes": 1, "topics": [{"topic": "fz", "partitions": [
            {"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 16}]}], "forgotten_topics_data": []}))[4:])
    return out


def internal_frames() -> list[bytes]:
    tp = m.TopicPartition("fz", 0)
    msgs = [
        m.FetchRequest(1, 7, 3, (m.FetchPartition(tp, 0, 0, -1),), 100),
        m.BrokerHeartbeatRequest(1, 7, 1, 0),
        m.MetadataFetchRequest(1, 7, 0, 100),
        m.CreateTopicRequest(1, "fz2", 1, 1),
        m.GetReplicaLogInfoRequest(1, tp),
    ]
    out = [internal.encode_hello(7, internal.ROLE_BROKER)[4:], internal.encode_hello(7, internal.ROLE_CONTROLLER)[4:]]
    for msg in msgs:
        try:
            out.append(internal.encode_message(msg)[4:])
        except TypeError:
            pass
    return out


@pytest.fixture(scope="module")
def broker():
    with BrokerFleet() as fleet:
        b = fleet.single(extra={"socket.request.max.bytes": "1000000"}).start()
        with RawClient(b.host, b.port) as c:
            c.call(k.CREATE_TOPICS, 7, {"topics": [{"name": "fz", "num_partitions": 1, "replication_factor": 1,
                                                    "assignments": [], "configs": []}], "timeout": 10000})
            c.call(k.CREATE_TOPICS, 7, {"topics": [{"name": GUARDED, "num_partitions": 2, "replication_factor": 1,
                                                    "assignments": [], "configs": []}], "timeout": 10000})
        yield b
        log = b.log_text()
        assert b.running, log[-5000:]
        assert "Traceback" not in log, log[-8000:]


def send_and_drain(host: str, port: int, frames: list[bytes], wait: float = 0.3) -> None:
    s = socket.create_connection((host, port), timeout=2)
    try:
        for f in frames:
            s.sendall(f)
        s.settimeout(wait)
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            try:
                if not s.recv(1 << 16):
                    break
            except (TimeoutError, ConnectionResetError):
                break
    except (BrokenPipeError, ConnectionResetError):
        pass
    finally:
        s.close()


def test_a_running_broker_survives_random_and_mutated_frames(broker):
    rng = random.Random(20260101)
    kafka_frames = valid_requests()
    ours = internal_frames()
    for _ in range(ROUNDS):
        for _ in range(PER_ROUND):
            kind = rng.random()
            if kind < 0.15:
                payload = rng.randbytes(rng.randint(0, 64))
            elif kind < 0.75:
                payload = mutate(rng, rng.choice(kafka_frames))
            elif kind < 0.95:
                payload = mutate(rng, rng.choice(ours)) if rng.random() < 0.7 else rng.choice(ours)
                if rng.random() < 0.5:  # a hello first, then a (mutated) message
                    payload = ours[0]
                    frames = [len(payload).to_bytes(4, "big") + payload]
                    body = mutate(rng, rng.choice(ours[2:] or ours))
                    frames.append(len(body).to_bytes(4, "big") + body)
                    send_and_drain(broker.host, broker.port, frames)
                    continue
            else:  # a frame announced but never finished
                payload = rng.choice(kafka_frames)
                send_and_drain(broker.host, broker.port, [len(payload).to_bytes(4, "big") + payload[: len(payload) // 2]],
                               wait=0.05)
                continue
            send_and_drain(broker.host, broker.port, [len(payload).to_bytes(4, "big") + payload], wait=0.05)
        healthy(broker, GUARDED)


def test_many_idle_and_half_open_connections_do_not_starve_others(broker):
    socks = []
    try:
        for i in range(100):
            s = socket.create_connection((broker.host, broker.port), timeout=2)
            if i % 2:
                s.sendall(struct.pack(">i", 5000) + b"\x00\x03")  # half a request, then silence
            socks.append(s)
        healthy(broker, GUARDED)
    finally:
        for s in socks:
            s.close()
    healthy(broker, GUARDED)
