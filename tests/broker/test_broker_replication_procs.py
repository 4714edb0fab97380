"""Replication with real processes on loopback (127.0.0.x): a controller-only process
and three brokers, RF=3, min.insync.replicas=2, librdkafka producing with acks=all.

- the leader is SIGKILLed and later restarted: no acknowledged write is missing when
  everything is read back, leadership moves, the restarted broker rejoins the ISR, and the
  three replicas' logs, each read with Kafka's debugging fetch, are the same;
- a SIGTERM moves leadership at once (controlled shutdown) and the broker comes back
  cleanly;
- below min.insync.replicas acks=all is refused while acks=1 still works;
- the controller process restarts from its metadata log and the cluster carries on.

Session timeouts are shortened (broker_procs.FAST: broker.session.timeout.ms=4000) to keep
the suite fast; bench/replication.py measures failover with Kafka's defaults."""

from __future__ import annotations

import signal
import threading
import time

import pytest
from broker_procs import create_replicated, metadata, read_back, start_cluster, wait_until

from nemesis.replicalogs import first_difference, read_replica

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka import KafkaError, Producer  # noqa: E402
from confluent_kafka.admin import AdminClient  # noqa: E402


class BackgroundProducer:
    """acks=all sends of increasing values to one partition until stopped."""

    def __init__(self, bs: str, topic: str, partition: int) -> None:
        self.acked: list[tuple[int, bytes]] = []
        self.errors: list[str] = []
        self._stop = threading.Event()
        self.p = Producer({"bootstrap.servers": bs, "acks": "all", "linger.ms": 2, "message.timeout.ms": 60000,
                           "retries": 1000000, "retry.backoff.ms": 100})
        self.topic, self.partition = topic, partition
        self.t = threading.Thread(target=self._run, daemon=True)

    def _cb(self, err, msg) -> None:
        if err is None:
            self.acked.append((msg.offset(), msg.value()))
        else:
            self.errors.append(str(err))

    def _run(self) -> None:
        i = 0
        while not self._stop.is_set():
            try:
                self.p.produce(self.topic, str(i).encode(), partition=self.partition, on_delivery=self._cb)
                i += 1
            except BufferError:
                pass
            self.p.poll(0.002)

    def __enter__(self) -> BackgroundProducer:
        self.t.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self.t.join(10)
        self.p.flush(60)


def test_leader_sigkill_and_restart_loses_no_acknowledged_write(fleet):
    _ctl, brokers, bs, admin = start_cluster(fleet)
    topic = "repl-kill"
    create_replicated(admin, topic)
    victim = metadata(admin, topic)[0].leader
    with BackgroundProducer(bs, topic, 0) as prod:
        wait_until(lambda: len(prod.acked) > 500, 30, "writes before the kill")
        before = len(prod.acked)
        brokers[victim].signal(signal.SIGKILL)
        brokers[victim].proc.wait(10)
        new_leader = wait_until(lambda: (lambda p: p.leader if p.leader not in (-1, victim) else None)(metadata(admin, topic)[0]),
                                30, "a new leader")
        wait_until(lambda: len(prod.acked) > before + 300, 30, "writes after the failover")
        brokers[victim].start()
        wait_until(lambda: sorted(metadata(admin, topic)[0].isrs) == [0, 1, 2], 60, "the restarted broker back in the ISR")
        wait_until(lambda: len(prod.acked) > before + 600, 30, "writes with the full ISR")
    assert new_leader != victim
    acked = dict(prod.acked)
    got = read_back(bs, topic, 0, set(acked.values()))
    missing = set(acked.values()) - set(got.values())
    assert not missing, f"{len(missing)} acknowledged writes lost"
    assert all(got[o] == v for o, v in acked.items()), "an acknowledged offset holds another value"
    assert "unclean shutdown" in brokers[victim].log_text().split("---- start 2")[1]
    # every replica, followers too, answers Kafka's debugging fetch from its own log: the three agree
    wait_until(lambda: len({read_replica(b.host, topic, 0, port=b.port).log_end for b in brokers}) == 1, 30,
               "the followers caught up")
    logs = [read_replica(b.host, topic, 0, port=b.port) for b in brokers]
    assert all(x.hwm == logs[0].hwm == logs[0].log_end >= len(acked) for x in logs), [x.summary() for x in logs]
    assert [first_difference(logs[0], x) for x in logs[1:]] == [None, None]
    assert [b.base for b in logs[0].batches] == sorted({b.base for b in logs[0].batches}) and logs[0].batches[0].base == 0


def test_sigterm_moves_leadership_at_once_and_the_broker_returns_cleanly(fleet):
    _ctl, brokers, bs, admin = start_cluster(fleet)
    topic = "repl-term"
    create_replicated(admin, topic, partitions=3)
    leaders = {p.id: p.leader for p in metadata(admin, topic).values()}
    victim = leaders[0]
    t0 = time.monotonic()
    assert brokers[victim].terminate(timeout=30) == 0
    took = time.monotonic() - t0
    assert took < 3.5, f"controlled shutdown took {took:.1f} s"
    after = metadata(admin, topic)
    assert all(p.leader != victim and victim not in p.isrs for p in after.values())
    assert "controlled shutdown complete" in brokers[victim].log_text()
    brokers[victim].start()
    wait_until(lambda: all(sorted(p.isrs) == [0, 1, 2] for p in metadata(admin, topic).values()), 60, "ISRs full again")
    assert "storage: clean shutdown" in brokers[victim].log_text().split("---- start 2")[1]


def test_acks_all_is_refused_below_min_isr_but_acks_1_works(fleet):
    _ctl, brokers, bs, admin = start_cluster(fleet)
    topic = "repl-minisr"
    create_replicated(admin, topic)
    leader = metadata(admin, topic)[0].leader
    for i, b in enumerate(brokers):
        if i != leader:
            b.signal(signal.SIGKILL)
    admin = AdminClient({"bootstrap.servers": brokers[leader].bootstrap})
    wait_until(lambda: metadata(admin, topic)[0].isrs == [leader], 30, "the ISR shrinks to the leader")
    results: list[tuple[int, object]] = []

    def send(acks: str) -> object:
        p = Producer({"bootstrap.servers": brokers[leader].bootstrap, "acks": acks, "retries": 0,
                      "message.timeout.ms": 5000})
        out: list[object] = []
        p.produce(topic, b"v", partition=0, on_delivery=lambda e, m: out.append(e))
        p.flush(15)
        return out[0] if out else "no delivery report"

    results = [send("all"), send("1")]
    assert isinstance(results[0], KafkaError) and results[0].code() == KafkaError.NOT_ENOUGH_REPLICAS
    assert results[1] is None


def test_the_controller_restarts_from_its_metadata_log(fleet):
    ctl, brokers, bs, admin = start_cluster(fleet)
    create_replicated(admin, "before-restart")
    ctl.signal(signal.SIGKILL)
    ctl.proc.wait(10)
    ctl.start()
    assert "with" in ctl.log_text() and "records" in ctl.log_text().split("---- start 2")[1]
    create_replicated(admin, "after-restart")
    p = Producer({"bootstrap.servers": bs, "acks": "all"})
    out: list[object] = []
    for t in ("before-restart", "after-restart"):
        p.produce(t, b"x", on_delivery=lambda e, m: out.append(e))
    p.flush(30)
    assert out == [None, None]
