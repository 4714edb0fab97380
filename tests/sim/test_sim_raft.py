"""Random seeds of the controller-quorum simulation (broker/sim/raft_sim.py): the Raft
invariants hold after every step and the quorum recovers after the final heal; a seed
replays exactly; breaking one Raft rule is caught. 300 seeds by default (a few seconds);
more: WRACK_RAFT_SIM_SEEDS=5000, or ``python -m broker.sim.raft_sim --seeds 5000``."""

from __future__ import annotations

import os
import random
import subprocess
import sys
from types import SimpleNamespace

import pytest

from broker.core.raft import Role
from broker.core.raft_messages import PersistQuorumState, RaftEntry
from broker.sim.raft_invariants import RaftOracle, SimRaftLog
from broker.sim.raft_sim import RaftSim, _check_liveness, raft_run, random_settings

SEEDS = int(os.environ.get("WRACK_RAFT_SIM_SEEDS", "300"))
CHUNKS = 3


@pytest.mark.parametrize("chunk", range(CHUNKS))
def test_random_seeds_hold_every_raft_invariant_and_recover(chunk):
    failed, elections, committed = [], 0, 0
    for seed in range(chunk, SEEDS, CHUNKS):
        r = raft_run(seed)
        elections += r.elections
        committed += r.committed
        if not r.ok:
            failed.append(r.summary())
    assert not failed, "\n".join(failed) + "\nreplay: python -m broker.sim.raft_sim --seed N -v"
    assert elections > SEEDS // CHUNKS and committed > 0  # faults forced re-elections, appends committed


def test_a_seed_replays_exactly():
    a, b = raft_run(17), raft_run(17)
    assert (a.steps, a.elections, a.committed, a.faults, a.trace) == (b.steps, b.elections, b.committed, b.faults, b.trace)
    assert a.steps > 100 and a.committed > 0


@pytest.mark.parametrize(
    ("switch", "names"),
    [
        ("vote-without-log-check", {"leader-completeness", "committed-truncated", "committed-mismatch"}),
        ("skip-divergence-check", {"log-matching", "committed-mismatch", "core-error"}),
        ("forget-vote", {"vote-once", "one-leader-per-epoch"}),
        ("commit-old-epoch", {"leader-completeness", "committed-truncated", "committed-mismatch"}),  # Figure 8 story
        ("ack-unflushed", {"leader-completeness", "committed-truncated", "committed-mismatch", "hwm-beyond-log"}),
    ],
)
def test_breaking_a_raft_rule_is_caught(switch, names):
    caught = None
    for seed in range(400):
        r = raft_run(seed, frozenset({switch}))
        if not r.ok:
            caught = r
            break
    assert caught is not None, f"{switch}: no seed of 400 caught"
    assert caught.violations[0].name in names, caught.summary()
    assert raft_run(caught.seed).ok  # the same seed with every rule on


def test_liveness_is_checked():
    """Two of three voters gone for good: no leader, and the run says so."""
    settings, _ = random_settings(random.Random(1), frozenset())
    settings.voters, settings.observers = 3, 0
    sim = RaftSim(1, settings)
    sim.run_until(5000)
    assert sim.leaders()
    sim.crash(1)
    sim.crash(2)
    _check_liveness(sim, 5000)
    assert [v.name for v in sim.oracle.violations] == ["no-liveness"]


def test_cli_runs_seeds_and_rejects_bad_arguments():
    ok = subprocess.run([sys.executable, "-m", "broker.sim.raft_sim", "--seeds", "3"], capture_output=True, text=True)
    assert ok.returncode == 0 and "3 seeds, 0 failed" in ok.stdout
    bad = subprocess.run([sys.executable, "-m", "broker.sim.raft_sim", "--unsafe", "nope"], capture_output=True, text=True)
    assert bad.returncode == 254 and bad.stderr.count("\n") == 1 and "unknown unsafe switch 'nope'" in bad.stderr
    caught = subprocess.run(
        [sys.executable, "-m", "broker.sim.raft_sim", "--seed", "0", "--unsafe", "forget-vote"], capture_output=True, text=True
    )
    assert caught.returncode == 1 and "1 seeds, 1 failed" in caught.stdout


# ------------------------------------------------------------ the oracle, on hand-made states
def _node(nid=1, role=Role.FOLLOWER, epoch=1, leader=9, vote=-1, hwm=0, voter=True):
    return SimpleNamespace(role=role, epoch=epoch, leader_id=leader, voted_for=vote, committed_offset=hwm, is_voter=voter)


def _check(oracle, nid, raft, log):
    oracle.check(0, nid, raft, log, PersistQuorumState(raft.epoch, raft.leader_id, raft.voted_for))
    return [v.name for v in oracle.violations]


def _log(*entries):
    """A log whose entries the oracle has not seen yet (appended, not loaded)."""
    log = SimRaftLog()
    for e, r in entries:
        log.append(RaftEntry(e, r))
    return log


def test_oracle_two_leaders_in_one_epoch():
    o = RaftOracle()
    assert _check(o, 1, _node(1, Role.LEADER, 3, 1), _log()) == []
    assert _check(o, 2, _node(2, Role.LEADER, 3, 2), _log()) == ["one-leader-per-epoch"]


def test_oracle_committed_prefix_mismatch_truncation_and_hwm():
    o = RaftOracle()
    a = _log((1, "x"), (1, "y"))
    assert _check(o, 1, _node(1, hwm=2), a) == [] and o.committed == a.entries
    b = _log((1, "x"), (2, "z"))
    assert _check(o, 2, _node(2, hwm=2), b) == ["committed-mismatch"]
    o = RaftOracle()
    _check(o, 1, _node(1, hwm=2), a)
    a.truncate(1)
    assert _check(o, 1, _node(1, hwm=2), a) == ["committed-truncated", "hwm-beyond-log"]
    o = RaftOracle()
    _check(o, 1, _node(1, hwm=2), _log((1, "x"), (1, "y")))
    assert _check(o, 1, _node(1, hwm=1), _log((1, "x"), (1, "y"))) == ["hwm-monotonic"]


def test_oracle_log_matching_and_observers():
    o = RaftOracle()
    _check(o, 1, _node(1), _log((1, "x"), (2, "y")))
    assert _check(o, 2, _node(2), _log((1, "w"), (2, "y"))) == ["log-matching"]  # at offset 0
    o = RaftOracle()
    assert _check(o, 100, _node(100, voter=False), _log((1, "x"))) == ["observer-uncommitted"]


def test_oracle_quorum_state_and_role_consistency():
    o = RaftOracle()
    raft = _node(1, Role.CANDIDATE, 2, -1, 3)
    o.check(0, 1, raft, _log(), PersistQuorumState(2, -1, 3))
    assert [v.name for v in o.violations] == ["quorum-state"]  # a candidate votes for itself
    o = RaftOracle()
    o.check(0, 1, _node(1, Role.VOTED, 2, -1, 3), _log(), PersistQuorumState(1, -1, -1))
    assert [v.name for v in o.violations] == ["quorum-state"]  # ran without persisting
