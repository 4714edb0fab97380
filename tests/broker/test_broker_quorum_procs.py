"""The controller quorum with real processes on loopback (127.0.0.x): three voters,
combined (broker+controller on a node) and dedicated (controller-only processes).

- the active controller is SIGKILLed while librdkafka produces with acks=all: another
  voter becomes active, sends go on being acknowledged, a topic can be created, the
  killed node comes back into the ISR, and no acknowledged write is lost;
- with dedicated controllers the same holds, and brokers move to the new leader;
- a voter cut off from the others (SIGSTOP) is replaced, and on SIGCONT follows the new
  leader instead of leading on.

Session timeouts are shortened (broker_procs.FAST) to keep the suite fast;
bench/replication.py measures failover with Kafka's defaults."""

from __future__ import annotations

import signal
import time

import pytest
from broker_procs import (
    FAST,
    active_controller,
    create_replicated,
    metadata,
    quorum_cluster,
    read_back,
    wait_until,
)
from test_broker_replication_procs import BackgroundProducer

from harness.netutil import wait_port

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka.admin import AdminClient  # noqa: E402


def start(fleet, dedicated: bool):
    ctls, brokers = quorum_cluster(fleet, 3, 3, dedicated=dedicated, extra=FAST)
    procs = {id(p): p for p in [*ctls, *brokers]}.values()
    for p in procs:
        p.start(wait=0)  # a broker serves once a quorum elected a leader: start them all first
    for b in brokers:
        wait_port(b.host, b.port, 30, b.proc)
    bs = ",".join(b.bootstrap for b in brokers)
    admin = AdminClient({"bootstrap.servers": bs})
    return ctls, brokers, bs, admin


def acked_after(prod: BackgroundProducer, n_before: int, timeout: float) -> None:
    wait_until(lambda: len(prod.acked) > n_before + 20, timeout, "acknowledged sends after the fault")


@pytest.mark.parametrize("dedicated", [False, True], ids=["combined", "dedicated"])
def test_killing_the_active_controller_moves_it_and_loses_nothing(fleet, dedicated):
    ctls, brokers, bs, admin = start(fleet, dedicated)
    old = wait_until(lambda: active_controller(ctls), 20, "an active controller")
    create_replicated(admin, "q", partitions=3)
    with BackgroundProducer(bs, "q", 0) as prod:
        wait_until(lambda: len(prod.acked) > 50, 20, "first acknowledged sends")
        old.signal(signal.SIGKILL)
        old.proc.wait(10)
        killed_at = len(prod.acked)
        new = wait_until(lambda: active_controller(ctls), 20, "a new active controller")
        assert new is not old
        # the quorum-state file names the leader before its controller has replayed the log
        wait_until(lambda: "controller: active in quorum epoch" in new.log_text(), 20, "the new controller active")
        acked_after(prod, killed_at, 30)
        create_replicated(admin, "after-failover", partitions=1, rf=2)
        old.start()
        if not dedicated:
            wait_until(lambda: all(len(p.isrs) == 3 for p in metadata(admin, "q").values()), 30,
                       "the restarted node back in every ISR")
        n = len(prod.acked)
        acked_after(prod, n, 20)
    assert not [e for e in prod.errors if "timed out" not in e.lower()], prod.errors[:5]
    want = {v for _, v in prod.acked}
    got = read_back(bs, "q", 0, want)
    assert want <= set(got.values()), f"lost {len(want - set(got.values()))} acknowledged writes"


def test_a_paused_leader_is_replaced_and_follows_when_it_wakes(fleet):
    ctls, brokers, bs, admin = start(fleet, dedicated=False)
    old = wait_until(lambda: active_controller(ctls), 20, "an active controller")
    create_replicated(admin, "p", partitions=1)
    old.signal(signal.SIGSTOP)
    try:
        new = wait_until(lambda: (c := active_controller(ctls)) is not old and c, 20, "another active controller")
    finally:
        old.signal(signal.SIGCONT)
    create_replicated(admin, "after-pause", partitions=1, rf=2)
    wait_until(lambda: "quorum: follower" in old.log_text().split("controller: active")[-1], 20,
               "the old leader following")
    time.sleep(1)
    assert active_controller(ctls) is new
