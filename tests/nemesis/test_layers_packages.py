"""The background layer (nemesis/layers.py) and the client-path, transaction and network
packages of the default mix (suites/wrack/faults.py), without a cluster: what they draw."""

from __future__ import annotations

import itertools
import random

import pytest

from nemesis.clientpath import client_path_package, draw_rule
from nemesis.kproxy import DEFAULT_APIS, ProxyRule
from nemesis.layers import BACKGROUND, layered
from nemesis.schedule import kill_package, partition_package, rotation
from suites.wrack import faults


def ops(it, n):
    return list(itertools.islice(it, n))


def test_without_background_packages_the_layer_is_the_rotation():
    pkgs = [partition_package(), kill_package()]
    assert ops(layered(pkgs, 10, random.Random(3)), 20) == ops(rotation(pkgs, 10, random.Random(3)), 20)


def test_background_packages_play_beside_the_rotation_in_time_order():
    pkgs = [partition_package(), kill_package(), client_path_package()]
    got = ops(layered(pkgs, 10, random.Random(5)), 60)
    assert all(d >= 0 for d, _ in got)
    fs = [op.f for _, op in got]
    assert {"start-client-path", "stop-client-path"} <= set(fs) and {"kill", "start-partition"} <= set(fs)
    # the client path flips on and off on its own: never two starts without a stop between
    cp = [f for f in fs if f.endswith("client-path")]
    assert all(a != b for a, b in itertools.pairwise(cp))
    # and the rotation's own order is that of a rotation over its packages alone
    rot = [op.f for _, op in got if not op.f.endswith("client-path")]
    assert set(rot) <= {"start-partition", "stop-partition", "kill", "start"}
    # a seed replays the schedule
    assert got == ops(layered(pkgs, 10, random.Random(5)), 60)


def test_client_path_rules_are_valid_and_cover_every_action_and_type():
    rng = random.Random(1)
    rules = [ProxyRule.from_dict(draw_rule(rng, DEFAULT_APIS)) for _ in range(400)]
    assert {r.action for r in rules} == {"delay", "drop", "duplicate"}  # never reorder: TCP never does
    assert {r.api for r in rules} == set(DEFAULT_APIS) and {r.direction for r in rules} == {"request", "response"}
    assert any(r.delay_ms > 5000 for r in rules)  # past the clients' request timeout
    assert client_path_package().tier == BACKGROUND
    with pytest.raises(ValueError, match="unknown request type 'Teleport'"):
        client_path_package(("Teleport",))


def test_the_default_mix_reaches_every_trigger_shape():
    table, mix = faults.packages({"queue0": 2}), faults.MIX
    for name in ("partition-leader", "txn-coordinator", "delay-markers", "retry-failover", "flaky-net",
                 "client-path", "fence-producer"):
        assert name in mix and name in table
    assert all(n in table for n in mix)
    assert {f"client-path-{a}" for a in faults.CLIENT_APIS} <= set(table)
    fence = table["fence-producer"]()
    assert fence.tier == BACKGROUND and fence.stop is None
    # played whole, first in a round: free when skipped (no transactions run)
    for name in ("txn-coordinator", "delay-markers", "retry-failover"):
        pkg = table[name]()
        assert pkg.stop is None and pkg.tier == 0 and pkg.start(random.Random(2)).f == name
    assert table["retry-failover"]().start(random.Random(2)).value["candidates"]
