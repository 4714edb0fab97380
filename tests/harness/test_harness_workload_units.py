"""Workload pieces without a broker: error classification, op generators, offset tracking,
and the queue client's bookkeeping over an in-memory KafkaIO (a unit test of one module;
the real clients are exercised by the end-to-end tests)."""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from contracts import generator as g
from contracts.generator import simulate
from workloads import make
from workloads.base import WorkloadOptions, key_of, split_key
from workloads.errors import LOCAL_CODES, ClientError, classify_read, classify_send
from workloads.queue import QueueClient

DEFINITE = {3: "UNKNOWN_TOPIC_OR_PARTITION", 5: "LEADER_NOT_AVAILABLE", 19: "NOT_ENOUGH_REPLICAS",
            10: "MESSAGE_TOO_LARGE", -190: "_UNKNOWN_PARTITION", -184: "_QUEUE_FULL"}
INDEFINITE = {6: "NOT_LEADER_OR_FOLLOWER", 7: "REQUEST_TIMED_OUT", 20: "NOT_ENOUGH_REPLICAS_AFTER_APPEND",
              13: "NETWORK_EXCEPTION", -1: "UNKNOWN_SERVER_ERROR", -192: "_MSG_TIMED_OUT", -195: "_TRANSPORT",
              -185: "_TIMED_OUT", -187: "_ALL_BROKERS_DOWN"}


@pytest.mark.parametrize("code,name", sorted(DEFINITE.items()))
def test_definite_send_errors_fail(code, name):
    o = classify_send(code)
    assert (o.type, o.name) == ("fail", name)


@pytest.mark.parametrize("code,name", sorted(INDEFINITE.items()))
def test_indefinite_send_errors_are_info(code, name):
    o = classify_send(code)
    assert (o.type, o.name) == ("info", name)


@given(st.integers(-300, 200))
def test_unknown_codes_are_indeterminate_and_reads_always_fail(code):
    o = classify_send(code)
    if code not in DEFINITE and code not in INDEFINITE and o.type == "fail":
        from workloads.errors import KAFKA_CODES

        assert (KAFKA_CODES.get(code) or LOCAL_CODES.get(code))[1] is True
    assert classify_read(code).type == "fail"
    assert classify_send(None).type == "info"


def test_client_error_names():
    e = ClientError(20)
    assert e.name == "NOT_ENOUGH_REPLICAS_AFTER_APPEND" and e.send_outcome().type == "info"
    assert ClientError(None).send_outcome().type == "info"


@given(st.text(alphabet="abcxyz._", min_size=1, max_size=10).filter(lambda t: not t.startswith("-")),
       st.integers(0, 999))
def test_keys_roundtrip(topic, part):
    assert split_key(key_of(topic, part)) == (topic, part)


def test_split_key_rejects_garbage():
    for bad in ("t", "t-x", "-1"):
        with pytest.raises(ValueError):
            split_key(bad)


def test_queue_generator_assigns_first_and_sends_unique_values():
    wl = make("queue", WorkloadOptions(topics=2, partitions=3, crash_p=0.05, assign_p=0.05))
    h = simulate(g.limit(2000, wl.generator()), 5, seed=3,
                 complete=lambda op: {"type": "ok", "value": [["send", op["value"][0][1], [0, op["value"][0][2]]]]}
                 if op["f"] == "send" else "info" if op["f"] == "crash" else "ok")
    firsts = {}
    for e in h:
        if e["type"] == "invoke":
            firsts.setdefault(e["process"], e["f"])
    assert set(firsts.values()) == {"assign"}
    sends = [e["value"][0] for e in h if e["type"] == "invoke" and e["f"] == "send"]
    assert len({v for _, _, v in sends}) == len(sends)
    assert {k for _, k, _ in sends} == set(wl.keys) and len(wl.keys) == 6
    c = Counter(e["f"] for e in h if e["type"] == "invoke")
    assert c["crash"] > 0 and c["poll"] > 0 and c["assign"] > 5


def test_tracker_and_final_generator_stop_when_everything_is_read():
    wl = make("queue", WorkloadOptions(topics=1, partitions=2, final_time_limit=5))
    wl.tracker.update({"type": "ok", "f": "send", "value": [["send", "queue0-0", [4, 10]]]})
    wl.tracker.update({"type": "ok", "f": "send", "value": [["send", "queue0-1", [2, 11]]]})
    assert wl.tracker.unread() == {"queue0-0": 5, "queue0-1": 3}
    polls = iter([{"queue0-0": [[0, 1], [1, 2]]}, {"queue0-1": [[2, 11]]}, {"queue0-0": [[4, 10]]}])

    def complete(op):
        if op["f"] == "poll":
            return {"type": "ok", "value": [["poll", next(polls, {})]]}
        return "ok"

    h = simulate(g.on_update(wl.observe, wl.final_generator()), 2, complete=complete)
    assert wl.tracker.all_read()
    assigns = [e for e in h if e["type"] == "invoke" and e["f"] == "assign"]
    assert len(assigns) == 2 and all(sorted(a["value"]) == ["queue0-0", "queue0-1"] for a in assigns)
    assert sum(1 for e in h if e["type"] == "invoke" and e["f"] == "poll") >= 3


def test_sends_completing_after_the_main_phase_still_count():
    # a send in flight when the main phase ends completes during the next phase: the final
    # read-back must still wait for its offset (phases only update the current phase)
    wl = make("queue", WorkloadOptions(topics=1, partitions=1, final_time_limit=5))
    main = g.limit(1, g.repeat({"f": "send", "value": [["send", "queue0-0", 1]]}))
    reads = iter([[], [[0, 1]]])

    def complete(op):
        if op["f"] == "send":
            return {"type": "ok", "value": [["send", "queue0-0", [0, 1]]]}
        if op["f"] == "poll":
            return {"type": "ok", "value": [["poll", {"queue0-0": next(reads, [])}]]}
        return "ok"

    h = simulate(g.on_update(wl.observe, g.phases(main, wl.final_generator())), 1, latency=1.0,
                 complete=complete)
    assert wl.tracker.all_read()
    assert sum(1 for e in h if e["type"] == "invoke" and e["f"] == "poll") == 2


def test_final_generator_gives_up_at_its_time_limit():
    wl = make("queue", WorkloadOptions(topics=1, partitions=1, final_time_limit=2, recovery_time_limit=3))
    wl.tracker.update({"type": "ok", "f": "send", "value": [["send", "queue0-0", [9, 1]]]})
    h = simulate(g.on_update(wl.observe, wl.final_generator()), 1, latency=0.5,
                 complete=lambda op: {"type": "ok", "value": [["poll", {}]]} if op["f"] == "poll" else "fail")
    sends = [e["time"] for e in h if e["type"] == "invoke" and e["f"] == "send"]
    polls = [e["time"] for e in h if e["type"] == "invoke" and e["f"] == "poll"]
    assert len(sends) > 2 and max(sends) < 3e9  # the probe retries failed sends, for 3 s at most
    assert polls and max(polls) - min(sends) < 5e9  # then the read-back, for 2 s at most
    assert not wl.tracker.all_read()


def test_the_recovery_probe_sends_to_every_key_until_each_succeeds():
    wl = make("queue", WorkloadOptions(topics=2, partitions=2, recovery_time_limit=10))
    failures = {"queue0-1": 3, "queue1-0": 1}
    offsets = iter(range(100, 1000))

    def complete(op):
        if op["f"] == "send":
            k, v = op["value"][0][1], op["value"][0][2]
            if failures.get(k, 0) > 0:
                failures[k] -= 1
                return "fail"
            return {"type": "ok", "value": [["send", k, [next(offsets), v]]]}
        return "ok"

    h = simulate(g.limit(60, wl.final_generator()), 3, latency=0.1, complete=complete)
    sends = [e for e in h if e["f"] == "send" and e["type"] != "invoke"]
    ok = Counter(e["value"][0][1] for e in sends if e["type"] == "ok")
    assert ok == {k: 1 for k in wl.keys}  # one success per key, then the probe is done
    assert Counter(e["value"][0][1] for e in sends if e["type"] == "fail") == {"queue0-1": 3, "queue1-0": 1}
    values = [e["value"][0][2] for e in h if e["f"] == "send" and e["type"] == "invoke"]
    assert len(set(values)) == len(values)


class MemoryIO:
    """An in-memory partition log with the KafkaIO interface (for the client's bookkeeping)."""

    def __init__(self):
        self.logs = {}
        self.assigned = {}
        self.fail_next_poll = False

    def send(self, topic, partition, value):
        log = self.logs.setdefault((topic, partition), [])
        log.append(value)
        return len(log) - 1

    def assign(self, positions):
        self.assigned = {tp: (0 if o is None else o) for tp, o in positions.items()}

    def poll(self, timeout, max_records=500):
        out = []
        for tp, pos in self.assigned.items():
            for off in range(pos, len(self.logs.get(tp, []))):
                out.append((tp[0], tp[1], off, self.logs[tp][off]))
            self.assigned[tp] = len(self.logs.get(tp, []))
        if self.fail_next_poll:
            self.fail_next_poll = False
            raise ClientError(-185)
        return out

    def high_watermark(self, topic, partition):
        return len(self.logs.get((topic, partition), []))

    def close(self):
        pass


def test_queue_client_rolls_back_a_failed_poll():
    io = MemoryIO()
    c = QueueClient(lambda acks: io, WorkloadOptions())
    for v in (1, 2, 3):
        assert c.invoke({"f": "send", "value": [["send", "t-0", v]]})["type"] == "ok"
    assert c.invoke({"f": "assign", "value": ["t-0"]})["type"] == "ok"
    first = c.invoke({"f": "poll", "value": [["poll"]]})
    assert first["value"] == [["poll", {"t-0": [[0, 1], [1, 2], [2, 3]]}]]
    c.invoke({"f": "send", "value": [["send", "t-0", 4]]})
    io.fail_next_poll = True
    assert c.invoke({"f": "poll", "value": [["poll"]]})["type"] == "fail"
    again = c.invoke({"f": "poll", "value": [["poll"]]})
    assert again["value"] == [["poll", {"t-0": [[3, 4]]}]]  # not skipped by the failed poll
    # re-assigning keeps this process's position; seek_to_beginning starts over
    c.invoke({"f": "assign", "value": ["t-0"]})
    assert c.invoke({"f": "poll", "value": [["poll"]]})["value"] == [["poll", {}]]
    c.invoke({"f": "assign", "value": ["t-0"], "seek_to_beginning": True})
    assert len(c.invoke({"f": "poll", "value": [["poll"]]})["value"][0][1]["t-0"]) == 4
    assert c.invoke({"f": "crash"})["type"] == "info"


def test_queue_client_classifies_send_errors():
    class Failing(MemoryIO):
        def __init__(self, code):
            super().__init__()
            self.code = code

        def send(self, topic, partition, value):
            raise ClientError(self.code)

    for code, t in ((19, "fail"), (20, "info"), (6, "info"), (None, "info")):
        c = QueueClient(lambda acks, code=code: Failing(code), WorkloadOptions())
        out = c.invoke({"f": "send", "value": [["send", "t-0", 1]]})
        assert out["type"] == t, code


class TxnIO(MemoryIO):
    """A transactional MemoryIO whose sends, abort, commit and fence fail on demand."""

    def __init__(self, send_fails=False, abort_fails=False, commit_fails=False, fence_fails=False):
        super().__init__()
        self.fails = {"send": send_fails, "abort": abort_fails, "commit": commit_fails, "fence": fence_fails}
        self.calls = []

    def _call(self, name):
        self.calls.append(name)
        code = self.fails.get(name, False)
        if code is not False:
            raise ClientError(None if code is True else code, None, name)

    def begin(self):
        self._call("begin")

    def send(self, topic, partition, value):
        self._call("send")
        return super().send(topic, partition, value)

    def commit(self):
        self._call("commit")
        return True

    def abort(self):
        self._call("abort")

    def fence(self):
        self._call("fence")


@pytest.mark.parametrize("fails, outcome, calls", [
    ({"send_fails": 6}, "fail", ["begin", "send", "abort"]),
    # the abort fails too: a new producer of the id aborts the transaction (never committed)
    ({"send_fails": 6, "abort_fails": True}, "fail", ["begin", "send", "abort", "fence"]),
    ({"send_fails": 6, "abort_fails": True, "fence_fails": True}, "info", ["begin", "send", "abort", "fence"]),
    # no delivery report in time: the producer is given up at once (it keeps retrying: a zombie)
    ({"send_fails": True}, "fail", ["begin", "send", "fence"]),
    ({"send_fails": True, "fence_fails": True}, "info", ["begin", "send", "fence"]),
    # the commit was asked for: its outcome stays unknown, no fencing settles it
    ({"commit_fails": True, "abort_fails": True}, "info", ["begin", "send", "commit", "abort"]),
])
def test_a_txn_whose_abort_fails_is_settled_by_fencing_unless_committing(fails, outcome, calls):
    io = TxnIO(**fails)
    c = QueueClient(lambda acks: io, WorkloadOptions(txn_p=1.0))
    out = c.invoke({"f": "txn", "value": [["send", "t-0", 1]]})
    assert out["type"] == outcome and io.calls == calls, (out, io.calls)


def test_log_workload_ops_and_reads():
    from workloads.log import LogClient

    wl = make("log", WorkloadOptions(topics=1, partitions=2))
    h = simulate(g.limit(200, wl.generator()), 3, seed=1,
                 complete=lambda op: {"type": "ok", "value": [op["value"][0], [0, op["value"][1]]]}
                 if op["f"] == "send" else "fail")
    fs = Counter(e["f"] for e in h if e["type"] == "invoke")
    assert fs["send"] > 50 and fs["read"] > 50
    io = MemoryIO()
    c = LogClient(lambda: io, WorkloadOptions())
    assert c.invoke({"f": "send", "value": ["t-0", 7]}) == {"type": "ok", "value": ["t-0", [0, 7]]}
    assert c.invoke({"f": "read", "value": ["t-0", 0]}) == {"type": "ok", "value": ["t-0", [0, 7]]}
    assert c.invoke({"f": "read", "value": ["t-0", 1]}) == {"type": "ok", "value": ["t-0", [1, None]]}


def test_unknown_workload():
    with pytest.raises(ValueError, match="unknown workload"):
        make("nope")


def test_final_read_back_reassigns_after_a_crash():
    wl = make("queue", WorkloadOptions(topics=1, partitions=1, final_time_limit=5))
    wl.observe({"type": "ok", "f": "send", "value": [["send", "queue0-0", [1, 5]]]})
    polls = iter(["info", {"queue0-0": [[0, 4], [1, 5]]}])

    def complete(op):
        if op["f"] == "poll":
            r = next(polls, {})
            return "info" if r == "info" else {"type": "ok", "value": [["poll", r]]}
        return "ok"

    h = simulate(g.on_update(wl.observe, wl.final_generator()), 1, complete=complete)
    assert [(e["process"], e["f"]) for e in h if e["type"] == "invoke"] == [
        (0, "send"), (0, "assign"), (0, "poll"), (1, "assign"), (1, "poll")]  # the probe's send first
    assert wl.summary()["final_read_complete"]


def _ok_sends(op):
    if op["f"] == "send":
        return {"type": "ok", "value": [["send", op["value"][0][1], [0, op["value"][0][2]]]]}
    return "info" if op["f"] == "crash" else "ok"


@given(clients=st.integers(1, 4), lanes=st.integers(0, 12), seed=st.integers(0, 2**16))
@settings(max_examples=30, deadline=None)
def test_send_lanes_only_send_and_consuming_clients_do_the_rest(clients, lanes, seed):
    wl = make("queue", WorkloadOptions(topics=1, partitions=2, concurrency_threads=clients, in_flight=lanes, crash_p=0.05))
    threads = clients + wl.send_lanes()
    h = simulate(g.limit(600, wl.generator()), threads, seed=seed, complete=_ok_sends)
    invokes = [e for e in h if e["type"] == "invoke"]
    lane_ops = Counter(e["f"] for e in invokes if e["process"] % threads >= clients)
    assert set(lane_ops) <= {"send"}
    assert lanes == 0 or lane_ops["send"] > 0
    firsts = {}
    for e in invokes:
        if e["process"] % threads < clients:
            firsts.setdefault(e["process"], e["f"])
    assert set(firsts.values()) == {"assign"}  # a consuming process starts with an assign


def test_the_final_read_back_reads_again_on_consuming_threads_only():
    wl = make("queue", WorkloadOptions(topics=1, partitions=1, concurrency_threads=2, in_flight=3, final_time_limit=5))
    wl.observe({"type": "ok", "f": "send", "value": [["send", "queue0-0", [1, 5]]]})
    wl.observe({"type": "ok", "f": "poll", "value": [["poll", {"queue0-0": [[0, 4], [1, 5]]}]]})
    assert wl.tracker.all_read()  # read during the main phase: not enough for the final phase
    polls = iter([{}, {"queue0-0": [[0, 4], [1, 5]]}])

    def complete(op):
        if op["f"] == "poll":
            return {"type": "ok", "value": [["poll", next(polls, {})]]}
        return "ok"

    h = simulate(g.on_update(wl.observe, wl.final_generator()), 5, complete=complete)
    invokes = [e for e in h if e["type"] == "invoke"]
    assert {e["process"] for e in invokes if e["f"] != "send"} == {0, 1}  # reads: consuming threads only
    assert all(e["f"] in ("send", "assign", "poll") for e in invokes)  # the probe's sends may go anywhere
    assert sum(e["f"] == "poll" for e in invokes) >= 2 and wl.summary()["final_read_complete"]


def test_the_recovery_probe_tries_a_key_again_after_an_indeterminate_send():
    import itertools
    import random

    from contracts import generator as gen
    from workloads.queue import RecoveryProbe

    failed: set[str] = set()

    def complete(op):
        key = op["value"][0][1]
        if key in ("q-0", "q-1") and key not in failed:
            failed.add(key)
            return "info"
        return "ok"

    probe = gen.time_limit(30, RecoveryProbe(["q-0", "q-1", "q-2"], itertools.count()))
    hist = gen.simulate(gen.clients(probe), 3, complete=complete, latency=0.03)
    ok = [e["value"][0][1] for e in hist if e["type"] == "ok"]
    assert sorted(ok) == ["q-0", "q-1", "q-2"]
    assert hist[-1]["time"] < 1e9, "the retry waits retry_s (0.25 s), not the time limit"
    # acks=all whatever the workload's acks: a deposed acks=1 leader may take and lose it
    ctx = gen.Context(0, random.Random(0), {0: 0}, frozenset({0}))
    assert RecoveryProbe(["q-0"], itertools.count()).op(ctx)["acks"] == "all"


def test_a_closed_confluent_client_opens_nothing_more():
    """An op that outlives its test (the interpreter closes its client meanwhile) must not
    open a producer or consumer, which would talk to the next test's cluster."""
    from workloads.kafka_io import ConfluentIO

    io = ConfluentIO("127.0.0.1:1", transactional_id="t", timeout=0.1)
    io.close()
    for use in (lambda: io.producer, lambda: io.consumer, io.fence):
        with pytest.raises(ClientError, match="closed"):
            use()


def test_every_other_process_of_a_thread_takes_its_threads_transactional_id():
    # the thread's id fences what the process before it with that id left open (KIP-98); a
    # process with an id of its own leaves an open transaction to the coordinator's timeout
    from workloads.queue import QueueWorkload

    wl = QueueWorkload(WorkloadOptions(txn_p=0.5, concurrency_threads=3))
    stride = 3 + wl.send_lanes()
    ids = [wl.transactional_id(1, 1 + k * stride) for k in range(5)]
    assert ids == ["wrack-txn-t1", f"wrack-txn-t1-p{1 + stride}", "wrack-txn-t1",
                   f"wrack-txn-t1-p{1 + 3 * stride}", "wrack-txn-t1"]
    assert wl.transactional_id(1, 1 + 4 * stride) == "wrack-txn-t1"  # the same process again: the same id
    assert wl.transactional_id(2, 2) == "wrack-txn-t2"


def test_with_transactions_the_final_read_back_waits_out_an_abandoned_transaction():
    from workloads.queue import QueueWorkload

    assert QueueWorkload(WorkloadOptions(final_time_limit=15)).final_read_limit() == 15
    assert QueueWorkload(WorkloadOptions(final_time_limit=15, txn_p=0.5)).final_read_limit() == 25
    assert QueueWorkload(WorkloadOptions(final_time_limit=15, txn_p=0.5, request_timeout=8)).final_read_limit() == 31
