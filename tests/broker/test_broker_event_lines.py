"""Real broker processes write the event lines a run's report is explained from
(broker/server/eventlog.py): an acks=1 failover shows the controller's clean election, the
new leader's epoch and where its log ended, and the old leader's truncation on its return."""

from __future__ import annotations

import signal

from broker_procs import create_replicated, metadata, start_cluster, wait_until
from confluent_kafka import Producer

from broker.server.eventlog import parse_event

TOPIC = "ev"
TP = f"{TOPIC}-0"


def events(proc, kind: str) -> list[dict]:
    return [e for e in map(parse_event, proc.log_text().splitlines()) if e and e["event"] == kind]


def produce(bootstrap: str, acks: str, n: int) -> list[int]:
    p = Producer({"bootstrap.servers": bootstrap, "acks": acks, "retries": 0, "linger.ms": 0,
                  "message.timeout.ms": 10000})
    offsets: list[int] = []
    for i in range(n):
        p.produce(TOPIC, f"{acks}-{i}".encode(), partition=0,
                  on_delivery=lambda e, m: offsets.append(m.offset() if e is None else -1))
        p.flush(10)
    return offsets


def test_an_acks1_failover_is_logged_as_election_leadership_and_truncation_events(fleet):
    ctl, brokers, _bs, admin = start_cluster(fleet)
    create_replicated(admin, TOPIC)
    old = metadata(admin, TOPIC)[0].leader
    assert produce(brokers[old].bootstrap, "all", 10) == list(range(10))
    followers = [b for i, b in enumerate(brokers) if i != old]
    for f in followers:  # they fetch nothing more: what the leader acknowledges now is only its own
        f.signal(signal.SIGSTOP)
    try:
        assert produce(brokers[old].bootstrap, "1", 5) == list(range(10, 15))
        brokers[old].signal(signal.SIGKILL)
        brokers[old].proc.wait(10)
    finally:
        for f in followers:
            f.signal(signal.SIGCONT)
    new = wait_until(lambda: (lambda p: p.leader if p.leader not in (-1, old) else None)(metadata(admin, TOPIC)[0]),
                     30, "a new leader")
    brokers[old].start()
    wait_until(lambda: events(brokers[old], "truncated"), 60, "the old leader's truncation")

    (change,) = [e for e in events(ctl, "partition-change") if e["tp"] == TP and e["epoch"] == 1]
    assert change["leader"] == new and change["prev_leader"] == old and change["election"] == "clean"
    assert old not in change["isr"] and new in change["isr"]
    (lead,) = [e for e in events(brokers[new], "became-leader") if e["tp"] == TP and e["epoch"] == 1]
    # 10, or 11 when a parked fetch's answer (the first acks=1 record) sat in a stopped follower's socket
    assert 10 <= lead["from_offset"] < 15 and lead["node"] == new
    (trunc,) = events(brokers[old], "truncated")
    assert (trunc["tp"], trunc["from_leo"], trunc["reason"]) == (TP, 15, "diverging-epoch")
    assert trunc["to"] == lead["from_offset"]
    assert trunc["role"] == "follower" and trunc["epoch"] == 1
    clocks = events(brokers[old], "clock")
    assert len(clocks) == 2 and clocks[0]["boot_id"] == clocks[1]["boot_id"]  # one kernel: one monotonic clock
    opened = [e for e in events(brokers[old], "replica-opened") if e["tp"] == TP]
    assert opened[-1]["leo"] == 15  # SIGKILL loses nothing the page cache holds
    assert trunc["mono_ns"] > opened[-1]["mono_ns"] > lead["mono_ns"] > change["mono_ns"] - 10**9
