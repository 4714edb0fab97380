"""A fresh cluster serves at once and consistently: brokers started before their
controller register as soon as it is up; every broker's client port opens only once its
own metadata lists it, and Metadata names a controller that is in its broker list
(librdkafka's admin client waits for a controller it can see); CreateTopics works right
after start without a metadata request first; while a topic is created no broker ever
answers Metadata with part of its partitions (the controller's records of one request
reach brokers as one batch). Real processes on 127.0.0.2-5; about 10 s."""

from __future__ import annotations

import threading
import time

import pytest
from broker_procs import BrokerFleet, cluster, loopback_hosts, wait_port

from broker.wire import kafka as k
from broker.wire.client import RawClient

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

PARTITIONS = 24


def metadata(host: str, port: int, topics=None):
    with RawClient(host, port) as c:
        return c.call(k.METADATA, 12, {"topics": topics, "allow_auto_topic_creation": False,
                                       "include_topic_authorized_operations": False})


def test_a_fresh_cluster_serves_consistent_metadata_and_creates_topics_at_once():
    with BrokerFleet(prefix="wrack-test-start-") as fleet:
        ctl, brokers = cluster(fleet, 3, separate_controller=True, hosts=loopback_hosts(4, first=2))
        assert ctl is not None
        for b in brokers:  # brokers first: they retry the registration until the controller is up
            b.start(wait=0)
        time.sleep(0.5)
        ctl.start(wait=0)
        wait_port(ctl.host, ctl.port, 30, ctl.proc)
        for b in brokers:
            wait_port(b.host, b.port, 30, b.proc)
            md = metadata(b.host, b.port)
            ids = [x.node_id for x in md.brokers]
            assert int(b.props["node.id"]) in ids and md.controller_id in ids, (ids, md.controller_id)

        seen: list[tuple[int, int]] = []  # (broker, partitions) of every answer naming the topic
        stop = threading.Event()

        def watch() -> None:
            while not stop.is_set():
                for i, b in enumerate(brokers):
                    for t in metadata(b.host, b.port).topics:
                        if t.name == "many":
                            seen.append((i, len(t.partitions)))

        watcher = threading.Thread(target=watch)
        watcher.start()
        try:
            admin = AdminClient({"bootstrap.servers": ",".join(b.bootstrap for b in brokers)})
            t0 = time.monotonic()
            for f in admin.create_topics([NewTopic("many", PARTITIONS, 3)], operation_timeout=10).values():
                f.result(30)  # no list_topics first
            took = time.monotonic() - t0
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline and not all((i, PARTITIONS) in seen for i in range(3)):
                time.sleep(0.05)
        finally:
            stop.set()
            watcher.join(10)
        assert took < 10, f"CreateTopics waited {took:.1f} s"
        assert all((i, PARTITIONS) in seen for i in range(3))
        assert all(n == PARTITIONS for _, n in seen), sorted(set(seen))
        logs = fleet.logs()
        assert "Traceback" not in logs
