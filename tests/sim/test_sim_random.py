"""Random seeds of the simulation: the safe configuration never violates an invariant or
loses an acknowledged acks=all write; a seed replays exactly; with a safeguard off the
invariants catch the known bugs. 2000 seeds by default (about 2.5 min); more: WRACK_SIM_SEEDS=5000, or
``python -m broker.sim --seeds 5000``."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from broker.sim.random_run import random_run

SEEDS = int(os.environ.get("WRACK_SIM_SEEDS", "2000"))
CHUNKS = 12


@pytest.mark.parametrize("chunk", range(CHUNKS))
def test_random_seeds_hold_every_invariant(chunk):
    failed = []
    for seed in range(chunk, SEEDS, CHUNKS):
        r = random_run(seed)
        if not r.ok:
            failed.append(r.summary())
    assert not failed, "\n".join(failed) + "\nreplay: python -m broker.sim --seed N -v"


@pytest.mark.parametrize("chunk", range(2))
def test_random_seeds_with_balanced_recovery_hold_every_invariant(chunk):
    failed, recoveries = [], 0
    for seed in range(chunk, SEEDS // 3, 2):
        r = random_run(seed, recovery="balanced")
        recoveries += r.unclean_recoveries
        if not r.ok:
            failed.append(r.summary())
    assert not failed, "\n".join(failed) + "\nreplay: python -m broker.sim --recovery balanced --seed N -v"
    assert recoveries > 0  # the recovery path was exercised


def test_a_seed_replays_exactly():
    a, b = random_run(17), random_run(17)
    assert (a.steps, a.acked_all, a.acked_one, a.faults) == (b.steps, b.acked_all, b.acked_one, b.faults)
    assert a.steps > 1000 and a.acked_all > 0


@pytest.mark.parametrize(
    ("off", "seed"),
    [("elr", 44), ("epoch-truncation", 0), ("clean-election-only", 4)],
)
def test_switching_a_safeguard_off_is_caught(off, seed):
    r = random_run(seed, frozenset({off}))
    assert "leader-candidate-completeness" in {v.name for v in r.violations}
    assert random_run(seed).ok


def test_cli_runs_seeds_and_rejects_bad_arguments():
    ok = subprocess.run([sys.executable, "-m", "broker.sim", "--seeds", "3"], capture_output=True, text=True)
    assert ok.returncode == 0 and "3 seeds, 0 failed" in ok.stdout
    bad = subprocess.run([sys.executable, "-m", "broker.sim", "--safeguard-off", "nope"], capture_output=True, text=True)
    assert bad.returncode == 254 and bad.stderr.count("\n") == 1 and "unknown safeguard 'nope'" in bad.stderr
    fail = subprocess.run([sys.executable, "-m", "broker.sim", "--seed", "44", "--safeguard-off", "elr"], capture_output=True, text=True)
    assert fail.returncode == 1 and "FAIL" in fail.stdout and "--seed 44" in fail.stdout
