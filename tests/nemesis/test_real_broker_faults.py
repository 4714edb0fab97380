"""The new faults against the real `wrack-broker` on a local node: the broker's own clock
(its log timestamps) shows the ClockHook's offset, and a broker on LazyFS that fsyncs every
message loses nothing acknowledged across a power loss (torn writes included), while the
default flush policy leaves unsynced data to lose and the broker still recovers."""

from __future__ import annotations

import datetime as dt
import random
import re
import sys
from pathlib import Path

import pytest

from contracts.history import HistoryWriter
from nemesis.clock import install_clock
from nemesis.core import FaultOp, Nemesis
from nemesis.lazyfs.hook import install_power_loss
from suites.wrack.db import BrokerDB, BrokerOptions

pytestmark = pytest.mark.root

BROKER = str(Path(sys.executable).parent / "wrack-broker")
STAMP = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3}) ", re.M)


@pytest.fixture
def one_broker(make_cluster, tmp_path):
    c = make_cluster(1)
    dbs = []

    def make(**extra):
        db = BrokerDB(c, BrokerOptions(command=[BROKER], replication_factor=1, min_insync_replicas=1,
                                       extra={k.replace("_", "."): str(v) for k, v in extra.items()}))
        dbs.append(db)
        return db, Nemesis(c, db, history=HistoryWriter(tmp_path / f"h{len(dbs)}.jsonl"), rng=random.Random(1))

    try:
        yield c, make
    finally:
        for db in dbs:
            for n in c.nodes:
                db.teardown(n)


def log_stamps(node, db) -> list[dt.datetime]:
    text = node.read_file(db.logfile(node)).decode(errors="replace")
    return [dt.datetime.strptime(m, "%Y-%m-%d %H:%M:%S.%f") for m in STAMP.findall(text)]


def test_real_broker_sees_its_clock_offset(one_broker):
    c, make = one_broker
    db, nem = make()
    install_clock(nem)
    n1 = c.nodes[0]
    db.setup(n1)
    ev = nem.invoke(FaultOp("start-clock", {"bump": ["n1"], "delta_ms": 2 * 3600 * 1000}))
    assert abs(ev["value"]["clock-offsets"]["n1"] - 7200) < 0.01
    before = dt.datetime.now()
    db.start(n1)
    db.wait_ready(n1, 60)
    after = dt.datetime.now()
    stamps = log_stamps(n1, db)
    assert stamps, "the broker logged nothing"
    skew = [(s - before).total_seconds() for s in stamps]
    assert all(7199 < k < 7200 + (after - before).total_seconds() + 1 for k in skew), skew[:5]
    ev = nem.invoke(FaultOp("check-clock"))
    assert ev["value"]["preloaded"] == {"n1": True}
    nem.invoke(FaultOp("stop-clock"))
    n_before = len(stamps)
    nem.invoke(FaultOp("restart", ["n1"]))
    db.wait_ready(n1, 60)
    later = log_stamps(n1, db)[n_before:]
    assert later and all(abs((s - dt.datetime.now()).total_seconds()) < 120 for s in later)


def _produce(bootstrap: str, n: int) -> list[int]:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": False, "linger.ms": 0})
    acked: list[int] = []

    def cb(err, msg):
        if err is None:
            acked.append(int(msg.value()))

    for i in range(n):
        p.produce("t", str(i).encode(), partition=0, on_delivery=cb)
        p.poll(0)
    assert p.flush(30) == 0
    return acked


def _consume(bootstrap: str) -> list[int]:
    from confluent_kafka import Consumer, TopicPartition

    cons = Consumer({"bootstrap.servers": bootstrap, "group.id": "g", "enable.auto.commit": False,
                     "auto.offset.reset": "earliest"})
    try:
        lo, hi = cons.get_watermark_offsets(TopicPartition("t", 0), timeout=20)
        cons.assign([TopicPartition("t", 0, lo)])
        got: list[int] = []
        while len(got) < hi - lo:
            m = cons.poll(5)
            assert m is not None, f"read {len(got)} of {hi - lo}"
            if m.error() is None:
                got.append(int(m.value()))
        return got
    finally:
        cons.close()


@pytest.mark.parametrize("flush_every_message", [True, False])
def test_real_broker_across_power_loss(one_broker, flush_every_message):
    from workloads.kafka_io import create_topics

    c, make = one_broker
    extra = {"log_flush_interval_messages": 1} if flush_every_message else {}
    db, nem = make(**extra)
    install_power_loss(nem)
    n1 = c.nodes[0]
    db.setup(n1)
    db.start(n1)
    db.wait_ready(n1, 60)
    bs = db.bootstrap_servers()
    create_topics(bs, {"t": 1}, replication_factor=1, timeout=60)
    acked = _produce(bs, 300)
    assert sorted(acked) == list(range(300))
    ev = nem.invoke(FaultOp("power-loss", {"nodes": ["n1"], "torn": True}))
    db.wait_ready(n1, 60)
    lost = ev["value"]["lost"]["n1"]
    got = _consume(bs)
    assert got == sorted(got) and len(set(got)) == len(got)
    if flush_every_message:
        assert got == list(range(300)), f"acknowledged and fsynced, yet lost: {sorted(set(acked) - set(got))[:10]}"
    else:
        assert lost["lost_bytes"] > 0  # the default policy leaves the active segment unsynced
        assert got == list(range(len(got)))  # what survives is a prefix
