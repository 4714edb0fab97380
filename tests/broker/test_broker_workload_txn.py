"""The queue workload's `txn` op against a real `wrack-broker`: transactions of sends and
polls commit (ok, with offsets and reads), the queue checker finds the history valid and
every committed value is read back by a read_committed poll; a process that takes over the
thread (same transactional id) fences the one before, whose next transaction does not
commit; a txn whose send times out is settled by fencing (its producer left as a zombie),
and no producer outlives the closed client."""

from __future__ import annotations

import itertools
import random
from typing import Any

from checkers import queue as qc
from workloads.base import WorkloadOptions
from workloads.kafka_io import create_topics
from workloads.queue import QueueGenerator, QueueWorkload


class History:
    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []
        self.clock = itertools.count(1)

    def run(self, client: Any, process: int, op: dict[str, Any]) -> dict[str, Any]:
        inv = {"process": process, "type": "invoke", "f": op["f"], "value": op.get("value")}
        self._add(inv)
        out = client.invoke(op)
        self._add({"process": process, "f": op["f"], "value": out.get("value", op.get("value")), **out})
        return out

    def _add(self, ev: dict[str, Any]) -> None:
        ev.update(index=len(self.events), time=next(self.clock))
        self.events.append(ev)


def test_txn_ops_commit_and_a_new_process_on_the_thread_fences_the_old(fleet):
    b = fleet.single(extra={"group.initial.rebalance.delay.ms": "0"}).start()
    opts = WorkloadOptions(topics=1, partitions=2, concurrency_threads=1, in_flight=0, txn_p=1.0, request_timeout=10.0)
    wl = QueueWorkload(opts)
    create_topics(b.bootstrap, wl.topics(), replication_factor=1)
    gen = QueueGenerator(wl.keys, opts)
    rng = random.Random(7)
    ops = [gen._txn(_Ctx(rng), 0) for _ in range(8)]
    assert {m[0] for op in ops for m in op["value"]} == {"send", "poll"}
    h = History()
    c = wl.client(0, 0, b.bootstrap)
    try:
        assert h.run(c, 0, {"f": "assign", "value": list(wl.keys)})["type"] == "ok"
        for op in ops:
            assert h.run(c, 0, op)["type"] == "ok", h.events[-1]
        # every value sent so far is read back by read_committed polls inside transactions
        sent = {(m[1], m[2]) for op in ops for m in op["value"] if m[0] == "send"}
        for _ in range(10):
            read = {(k, v) for ev in h.events if ev["type"] == "ok" and ev["f"] == "txn"
                    for m in ev["value"] if m[0] == "poll" for k, recs in m[1].items() for _o, v in recs}
            if sent <= read:
                break
            h.run(c, 0, {"f": "txn", "value": [["poll"]]})
        assert sent <= read
        # the thread's next process with its transactional id (its third: the second had an
        # id of its own), the old producer is fenced
        assert wl.transactional_id(0, 1) == "wrack-txn-t0-p1"
        c2 = wl.client(0, 2, b.bootstrap)
        try:
            assert h.run(c2, 1, {"f": "assign", "value": list(wl.keys)})["type"] == "ok"
            assert h.run(c2, 1, {"f": "txn", "value": [["send", wl.keys[0], 10_000]]})["type"] == "ok"
            zombie = h.run(c, 0, {"f": "txn", "value": [["send", wl.keys[0], 10_001]]})
            assert zombie["type"] in ("fail", "info") and "fenced" in zombie["error"].lower(), zombie
            for _ in range(10):  # read the last value back (a plain poll, read_committed too)
                out = h.run(c2, 1, {"f": "poll", "value": [["poll"]]})
                if any(v == 10_000 for recs in out["value"][0][1].values() for _o, v in recs):
                    break
            else:
                raise AssertionError("10000 never read")
        finally:
            c2.close()
    finally:
        c.close()
    result = qc.check(h.events)
    assert result["valid"] is True, result


class _Ctx:
    """What `QueueGenerator._txn` reads of a generator context."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.time = 0


def test_a_txn_whose_send_times_out_is_fenced_and_nothing_outlives_the_client(fleet):
    """The broker pauses under a txn's send: no delivery report in time, so the client gives
    its producer up (a new one of the transactional id aborts the txn: `fail`, or `info` if
    that too timed out) and the old one is left retrying; once the client is closed no
    librdkafka producer is left (one would reach the next test's cluster, same addresses)."""
    import gc
    import signal
    import threading
    import time

    import confluent_kafka as ck

    b = fleet.single(extra={"group.initial.rebalance.delay.ms": "0"}).start()
    opts = WorkloadOptions(topics=1, partitions=1, concurrency_threads=1, in_flight=0, txn_p=1.0, request_timeout=1.0)
    wl = QueueWorkload(opts)
    create_topics(b.bootstrap, wl.topics(), replication_factor=1)
    k = wl.keys[0]
    # the transaction coordinator made ready first (its state topic created and loaded), with
    # time to spare: the client's InitProducerId has 1 s, which a fresh broker under load missed
    warm = ck.Producer({"bootstrap.servers": b.bootstrap, "transactional.id": "warm-up", "log_level": 0})
    warm.init_transactions(30)
    del warm
    c = wl.client(0, 0, b.bootstrap)
    try:
        assert c.invoke({"f": "assign", "value": [k]})["type"] == "ok"
        first = c.invoke({"f": "txn", "value": [["send", k, 1]]})
        assert first["type"] == "ok", first
        b.signal(signal.SIGSTOP)
        threading.Timer(2.8, b.signal, (signal.SIGCONT,)).start()
        out = c.invoke({"f": "txn", "value": [["send", k, 2]]})
        assert out["type"] in ("fail", "info") and out["error"].startswith("TIMEOUT"), out
        if out["type"] == "fail":
            assert "aborted by a new producer" in out["error"], out
            # paused longer than the new producer's InitProducerId may take: info
            b.signal(signal.SIGSTOP)
            threading.Timer(5.0, b.signal, (signal.SIGCONT,)).start()
            out = c.invoke({"f": "txn", "value": [["send", k, 4]]})
            assert out["type"] == "info" and "fencing" in out["error"], out
    finally:
        b.signal(signal.SIGCONT)
        c.close()
    time.sleep(0.5)
    assert not [o for o in gc.get_objects() if isinstance(o, ck.Producer)]
