"""The cluster-state observer (`nemesis.observer`) as a unit: metadata answers in, history
events out (a real HistoryWriter). Node names by address, an id once seen keeps its name,
events only on change, failed polls counted and skipped, stop idempotent, the wait for a
whole cluster (a leader and a full ISR everywhere) after the run. The real cluster
is observed in tests/harness/test_harness_e2e_policy.py."""

from __future__ import annotations

import threading
import time

from contracts.history import HistoryWriter, fault_windows, read_events
from nemesis.observer import ClusterObserver, is_whole, state_of
from nemesis.targets import Metadata, PartitionInfo

ADDR = {"n1": "10.0.0.1", "n2": "10.0.0.2", "n3": "10.0.0.3"}
ALL = {0: "10.0.0.1", 1: "10.0.0.2", 2: "10.0.0.3"}


def unreachable(host, *args, **kw):
    """The nodes' reads after the final phase, for nodes that are not there (no packet leaves)."""
    raise OSError(f"{host} is not a node of this test")


def observer(source, h, **kw) -> ClusterObserver:
    return ClusterObserver(source, ADDR, h, offsets=kw.pop("offsets", unreachable),
                           replica_log=kw.pop("replica_log", unreachable), **kw)


def md(isr, leader=0, brokers=ALL, controller=0):
    parts = {("queue0", 0): PartitionInfo(leader, [0, 1, 2], list(isr)),
             ("__consumer_offsets", 0): PartitionInfo(0, [0], [0])}
    return Metadata(dict(brokers), controller, parts)


def test_state_names_nodes_and_keys_like_the_workloads():
    s = state_of(md([1, 0], leader=1), {0: "n1", 1: "n2", 2: "n3"})
    assert s == {"controller": "n1", "partitions": {"queue0-0": {"leader": "n2", "isr": ["n2", "n1"],
                                                                 "replicas": ["n1", "n2", "n3"]}}}
    s = state_of(md([], leader=-1, controller=-1), {0: "n1"})
    assert s["controller"] is None and s["partitions"]["queue0-0"]["leader"] is None
    assert s["partitions"]["queue0-0"]["replicas"] == ["n1", "broker:1", "broker:2"]


def test_events_only_on_change_and_failures_are_skipped(tmp_path):
    answers = [md([0, 1, 2]), md([0, 1, 2]), RuntimeError("broker transport failure"),
               md([0, 1], brokers={0: "10.0.0.1", 1: "10.0.0.2"}), md([0, 1, 2])]

    def source():
        a = answers.pop(0)
        if isinstance(a, Exception):
            raise a
        return a

    with HistoryWriter(tmp_path / "h.jsonl") as h:
        obs = observer(source, h)
        got = [obs.poll() for _ in range(5)]
    assert [g is not None for g in got] == [True, False, False, True, True]
    assert obs.stats.to_dict() == {"polls": 5, "failed": 1, "events": 3,
                                   "last_error": "RuntimeError: broker transport failure", "whole_after_s": None}
    evs = list(read_events(tmp_path / "h.jsonl"))
    assert [e["f"] for e in evs] == ["cluster-state"] * 3 and all(e["process"] == "nemesis" for e in evs)
    # n3's broker left the metadata's broker list (fenced): still named n3 as a replica
    assert evs[1]["value"]["partitions"]["queue0-0"] == {"leader": "n1", "isr": ["n1", "n2"],
                                                          "replicas": ["n1", "n2", "n3"]}
    assert fault_windows(evs) == []


def test_the_thread_polls_until_stopped(tmp_path):
    polled = threading.Event()

    def source():
        polled.set()
        return md([0, 1, 2])

    with HistoryWriter(tmp_path / "h.jsonl") as h:
        obs = observer(source, h, interval=0.01).start()
        assert polled.wait(10)
        obs.stop()
        obs.stop()
        assert not obs._thread.is_alive()
    assert obs.stats.polls >= 1 and obs.stats.events == 1
    assert obs.poll() is None  # after stop: nothing appended (the history may be closed)


def test_wait_whole_waits_for_a_fresh_answer_with_full_isrs(tmp_path):
    ids = {0: "n1", 1: "n2", 2: "n3"}
    assert is_whole(state_of(md([0, 1, 2]), ids)) and is_whole(state_of(md([2, 0, 1]), ids))
    assert not is_whole(state_of(md([0, 1]), ids)) and not is_whole(state_of(md([0, 1, 2], leader=-1), ids))
    assert not is_whole(None)
    # whole before the wait, then a replica out, then a failing poll, then back in the ISR
    answers = [md([0, 1, 2]), md([0, 1]), RuntimeError("down"), md([0, 1]), md([0, 1, 2])]
    lock = threading.Lock()

    def source():
        with lock:
            a = answers.pop(0) if len(answers) > 1 else answers[0]
        if isinstance(a, Exception):
            raise a
        return a

    with HistoryWriter(tmp_path / "h.jsonl") as h:
        obs = observer(source, h, interval=0.05)
        obs.poll()
        obs.start()
        waited = obs.wait_whole(10)
        obs.stop()
    assert waited is not None and obs.stats.whole_after_s == waited
    assert answers == [md([0, 1, 2])] and obs.stats.failed == 1
    states = [e["value"] for e in read_events(tmp_path / "h.jsonl") if e["f"] == "cluster-state"]
    assert [len(s["partitions"]["queue0-0"]["isr"]) for s in states] == [3, 2, 3]


def test_wait_whole_gives_up_after_its_limit(tmp_path):
    with HistoryWriter(tmp_path / "h.jsonl") as h:
        obs = observer(lambda: md([0, 1]), h, interval=0.05).start()
        assert obs.wait_whole(0.3) is None
        obs.stop()
    assert obs.stats.whole_after_s is None and obs.stats.events == 1


def test_wait_whole_does_not_wait_when_nothing_was_ever_observed(tmp_path):
    def down():
        raise RuntimeError("broker transport failure")

    with HistoryWriter(tmp_path / "h.jsonl") as h:
        obs = observer(down, h, interval=0.05).start()
        t0 = time.monotonic()
        assert obs.wait_whole(30) is None and time.monotonic() - t0 < 5
        obs.stop()
    assert obs.stats.whole_after_s is None and obs.stats.events == 0


def test_after_the_final_phase_every_replicas_log_is_compared(tmp_path):
    from nemesis.replicalogs import BatchId, ReplicaLog

    def logs_from(now_ms: int) -> dict[str, ReplicaLog]:
        common = [BatchId(0, 4, 11, 1, now_ms + 1000), BatchId(5, 9, 12, 1, now_ms + 2000)]
        return {"10.0.0.1": ReplicaLog(12, 0, 12, [*common, BatchId(10, 11, 13, 2, now_ms + 3000)]),
                "10.0.0.2": ReplicaLog(12, 0, 11, [*common, BatchId(10, 10, 99, 1, now_ms + 2500)]),  # kept its own
                "10.0.0.3": ReplicaLog(10, 0, 10, list(common))}  # behind: a prefix

    def read(host, topic, partition):
        assert (topic, partition) == ("queue0", 0)  # one copy (__consumer_offsets): not read
        if host == "10.0.0.3" and read.down:
            raise OSError("connection refused")
        return logs[host]

    read.down = False
    with HistoryWriter(tmp_path / "h.jsonl") as h:
        logs = logs_from(time.time_ns() // 1_000_000)
        obs = observer(lambda: md([0, 1, 2]), h, replica_log=read)
        obs.poll()
        ev = obs.compare_replicas()
        read.down = True
        down = obs.compare_replicas()
    (d,) = ev["value"]["partitions"]["queue0-0"]["differ"]
    assert d["replicas"] == ["n1", "n2"] and d["offset"] == 10 and (d["a"]["crc"], d["b"]["crc"]) == (13, 99)
    assert abs(d["written"] - 3_000_000_000) < 500_000_000  # the later batch's time on the history's clock
    assert ev["value"]["partitions"]["queue0-0"]["replicas"]["n3"] == {"hwm": 10, "log_start": 0, "log_end": 10,
                                                                       "batches": 2}
    assert down["value"]["unread"] == {"queue0-0": {"n3": "OSError: connection refused"}}
    assert list(down["value"]["partitions"]["queue0-0"]["replicas"]) == ["n1", "n2"]
