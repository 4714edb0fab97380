"""Random seeds of the controller-quorum simulation (broker/sim/raft_sim.py): the Raft
invariants hold after every step and the quorum recovers after the final heal; a seed
replays exactly; breaking one Raft rule is caught. 300 seeds by default (a few seconds);
more: WRACK_RAFT_SIM_SEEDS=5000, or ``python -m broker.sim.raft_sim --seeds 5000``."""

from __future__ import annotations

import os
import random
import subprocess
import sys

import pytest

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
