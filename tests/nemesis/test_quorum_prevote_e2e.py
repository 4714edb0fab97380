"""The controller quorum keeps its leader when one voter is cut off from it alone (KIP-996
pre-vote, on real brokers in network namespaces): three combined nodes, a voter X that no
longer hears the active controller L but still reaches the third voter Y asks for
pre-votes, Y (hearing from L) refuses, and X never starts an election. Without pre-vote X
raised the quorum's epoch and took the controller from L, which moved the quorum in the
middle of the fault stories that cut a voter off (wipe-follower's leader). Root only."""

from __future__ import annotations

import random
import sys
import time
from pathlib import Path

import pytest

from contracts.history import HistoryWriter
from nemesis.core import FaultOp, Nemesis
from suites.wrack.db import BrokerDB, BrokerOptions

pytestmark = pytest.mark.root

BROKER = str(Path(sys.executable).parent / "wrack-broker")


def test_a_voter_cut_off_from_the_leader_alone_does_not_take_over(make_cluster, tmp_path):
    c = make_cluster(3)
    db = BrokerDB(c, BrokerOptions(command=[BROKER]))
    nem = Nemesis(c, db, history=HistoryWriter(tmp_path / "h.jsonl"), rng=random.Random(1))
    try:
        db.start_all(60)
        deadline = time.monotonic() + 30
        while db.active_controller() is None and time.monotonic() < deadline:
            time.sleep(0.2)
        by_address = {n.address: n.name for n in c.nodes}
        leader = by_address[db.active_controller()]
        x = next(n.name for n in c.nodes if n.name != leader)
        before = max(db.quorum_states().values())
        nem.invoke(FaultOp("start-partition", {"drop": {x: [leader], leader: [x]}}))
        time.sleep(8)  # four fetch timeouts of X's
        during = db.quorum_states()
        nem.invoke(FaultOp("stop-partition"))
        time.sleep(3)
        assert max(during.values()) == before, (before, during)
        assert by_address[db.active_controller()] == leader and max(db.quorum_states().values()) == before
    finally:
        nem.teardown()
        for n in c.nodes:
            db.collect(n, tmp_path / "nodes", data=False)
        db.kill_all()
