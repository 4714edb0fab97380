"""The client path's and the transactions' nemesis ops on a Nemesis without a real cluster:
recorded values, the proxy routes clients and journals its actions as events, the
transaction faults skip their turn when no transaction ran, bad rules are refused, and the
proxy is stopped by the teardown."""

from __future__ import annotations

import random
from dataclasses import dataclass

import pytest

from nemesis.clientpath import ACTION_F, client_path, install_client_path
from nemesis.core import FaultOp, Nemesis
from nemesis.txnfaults import install_txn_faults


@dataclass
class FakeNode:
    name: str
    address: str


class FakeCluster:
    def __init__(self) -> None:
        self.nodes = [FakeNode(f"n{i}", f"10.9.9.{i}") for i in (1, 2, 3)]

    def node(self, name):
        return next(n for n in self.nodes if n.name == name)


class Sink:
    def __init__(self) -> None:
        self.events: list[dict] = []

    def append(self, ev):
        self.events.append(ev)
        return ev


@pytest.fixture
def nem():
    n = Nemesis(FakeCluster(), history=Sink(), rng=random.Random(3))
    install_client_path(n)
    install_txn_faults(n)
    yield n
    cp = client_path(n)
    if cp is not None:
        cp.proxy.close()


def test_clients_are_routed_through_the_proxy_and_rules_are_recorded(nem):
    addr = nem.client_address("10.9.9.1:9092")
    assert addr.startswith("127.0.0.1:") and nem.client_address("10.9.9.1:9092") == addr  # one listener per broker
    ev = nem.invoke(FaultOp("start-client-path", {"rules": [{"api": "EndTxn", "action": "delay", "delay_ms": 50}]}))
    assert ev["f"] == "start-client-path" and ev["value"]["rules"][0]["api"] == "EndTxn"
    client_path(nem).proxy.journal({"api": "EndTxn", "action": "delay"})
    assert nem.history.events[-1]["f"] == ACTION_F
    stop = nem.invoke(FaultOp("stop-client-path"))
    assert stop["value"]["acted"][0]["times"] == 0


def test_an_unknown_request_type_is_refused(nem):
    with pytest.raises(ValueError, match="unknown request type 'Teleport'"):
        nem.invoke(FaultOp("start-client-path", {"rules": [{"api": "Teleport", "action": "drop"}]}))


def test_transaction_faults_skip_their_turn_without_transactions(nem):
    ev = nem.invoke(FaultOp("start-txn-coordinator", {"fault": "kill"}))
    assert "no transactional id" in ev["value"]["skipped"]
    assert nem.invoke(FaultOp("stop-txn-coordinator"))["value"] == {"undone": None}
    assert "skipped" in nem.invoke(FaultOp("fence-producer"))["value"]
    assert "skipped" in nem.invoke(FaultOp("start-delay-markers"))["value"]
    for played in ("txn-coordinator", "delay-markers"):  # played whole: skipped at once
        assert "skipped" in nem.invoke(FaultOp(played, {"hold_s": 30}))["value"]
    assert nem.invoke(FaultOp("stop-delay-markers"))["value"] == {"healed": None}
    with pytest.raises(ValueError):
        nem.invoke(FaultOp("start-txn-coordinator", {"fault": "explode"}))


def test_the_teardown_stops_the_proxy():
    n = Nemesis(FakeCluster(), history=Sink(), rng=random.Random(3))
    cp = install_client_path(n)
    assert install_client_path(n) is cp  # once per nemesis
    for _name, fn in n.teardowns:  # (Nemesis.teardown would also flush iptables on real nodes)
        fn()
    assert not cp.proxy.loop.is_running() and cp.proxy.loop.is_closed()
