"""Random seeds of the simulation: the safe configuration never violates an invariant
(replication or, on the controller quorum every seed runs with its own faults, Raft) nor
loses an acknowledged acks=all write, and makes progress after the final heal; a seed
replays exactly; with a safeguard off the invariants catch the known bugs (each
safeguard within a few seeds; each fault story reaches its trigger). 1000 seeds by
default, on one worker process per CPU (`run_seeds`); more: WRACK_SIM_SEEDS=5000, or
``python -m broker.sim --seeds 5000`` (2,000 seeds with controller faults held every
invariant: docs/broker-replication.md)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from broker.core import safeguards as sg
from broker.sim.random_run import random_run, run_seeds
from broker.sim.stories import STORIES
from broker.triggers import ALIASES, TRIGGERS

SEEDS = int(os.environ.get("WRACK_SIM_SEEDS", "1000"))
CHUNKS = 12


@pytest.mark.parametrize("chunk", range(CHUNKS))
def test_random_seeds_hold_every_invariant(chunk):
    failed = []
    for r in run_seeds(range(chunk, SEEDS, CHUNKS)):
        if not r.ok:
            failed.append(r.summary())
    assert not failed, "\n".join(failed) + "\nreplay: python -m broker.sim --seed N -v"


@pytest.mark.parametrize("chunk", range(2))
def test_random_seeds_with_balanced_recovery_hold_every_invariant(chunk):
    failed, recoveries = [], 0
    for r in run_seeds(range(chunk, SEEDS // 3, 2), recovery="balanced"):
        recoveries += r.unclean_recoveries
        if not r.ok:
            failed.append(r.summary())
    assert not failed, "\n".join(failed) + "\nreplay: python -m broker.sim --recovery balanced --seed N -v"
    assert recoveries > 0  # the recovery path was exercised


def test_a_seed_replays_exactly():
    a, b = random_run(17), random_run(17)
    assert (a.steps, a.acked_all, a.acked_one, a.faults) == (b.steps, b.acked_all, b.acked_one, b.faults)
    assert a.steps > 1000 and a.acked_all > 0
    c = next(r for r in run_seeds([16, 17], jobs=2) if r.seed == 17)  # in a worker process: the same run
    assert (c.steps, c.acked_all, c.acked_one, c.faults) == (a.steps, a.acked_all, a.acked_one, a.faults)


CATCH_SEEDS = range(20)  # each safeguard switched off is caught on some seed of these (>= 10% of seeds)
INVARIANTS = {"leader-completeness", "leader-candidate-completeness", "log-matching", "hwm-monotonicity",
              "one-leader-per-epoch", "acked-write-lost", "valid-controller-state"}


@pytest.mark.parametrize("off", sorted(n for n, s in sg.REGISTRY.items() if s.simulated))
def test_each_safeguard_switched_off_is_caught_within_a_few_seeds(off):
    caught = next((r for r in run_seeds(CATCH_SEEDS, safeguards_off=frozenset({off})) if not r.ok), None)
    assert caught is not None, f"{off} off: no seed of {CATCH_SEEDS} failed"
    assert {v.name for v in caught.violations} <= INVARIANTS, caught.summary()
    assert random_run(caught.seed).ok  # the same faults with the safeguard on: nothing


# each trigger and the safeguard it aims at (not those without one: tests/sim/test_sim_scenarios.py)
STORY_TARGETS = [(name, t.safeguard) for name, t in TRIGGERS.items() if t.safeguard]


def test_the_stories_are_the_triggers_under_one_name_each():
    assert list(STORIES) == list(TRIGGERS)  # the random runs play every trigger, by its name
    assert all(a in STORIES and STORIES[a].trigger is TRIGGERS[n] for a, n in ALIASES.items())  # old names too


@pytest.mark.parametrize(("story", "off"), STORY_TARGETS)
def test_each_story_reaches_the_trigger_of_its_safeguard(story, off):
    seeds = range(12)
    off_runs = list(run_seeds(seeds, safeguards_off=frozenset({off}), stories=(story,)))
    assert any(not r.ok for r in off_runs), f"{story} never caught {off} off on seeds {seeds}"
    assert all(any("story on" in f for f in r.faults) for r in off_runs)  # forced: played in every seed
    failed = [r.summary() for r in run_seeds(seeds, stories=(story,)) if not r.ok]
    assert not failed, "\n".join(failed)


def test_cli_runs_seeds_and_rejects_bad_arguments():
    ok = subprocess.run([sys.executable, "-m", "broker.sim", "--seeds", "3"], capture_output=True, text=True)
    assert ok.returncode == 0 and "3 seeds, 0 failed" in ok.stdout
    bad = subprocess.run([sys.executable, "-m", "broker.sim", "--safeguard-off", "nope"], capture_output=True, text=True)
    assert bad.returncode == 254 and bad.stderr.count("\n") == 1 and "unknown safeguard 'nope'" in bad.stderr
    bad = subprocess.run([sys.executable, "-m", "broker.sim", "--jobs", "0"], capture_output=True, text=True)
    assert bad.returncode == 254 and bad.stderr.count("\n") == 1 and "--jobs must be at least 1" in bad.stderr
    bad = subprocess.run([sys.executable, "-m", "broker.sim", "--story", "nope"], capture_output=True, text=True)
    assert bad.returncode == 254 and bad.stderr.count("\n") == 1 and "unknown story 'nope'" in bad.stderr
    for lossy in ("wipe-during-expansion", "lrs"):  # a trigger's name, or its old name
        bad = subprocess.run([sys.executable, "-m", "broker.sim", "--recovery", "balanced", "--story", lossy],
                             capture_output=True, text=True)
        assert bad.returncode == 254 and bad.stderr.count("\n") == 1 and "not with --recovery balanced" in bad.stderr
    old = subprocess.run([sys.executable, "-m", "broker.sim", "--seeds", "1", "--story", "leader-flap"], capture_output=True,
                         text=True)
    assert old.returncode == 0 and "1 seeds, 0 failed" in old.stdout
    seed = next(r.seed for r in run_seeds(CATCH_SEEDS, safeguards_off=frozenset({"elr"})) if not r.ok)
    fail = subprocess.run([sys.executable, "-m", "broker.sim", "--seed", str(seed), "--safeguard-off", "elr", "-v"],
                          capture_output=True, text=True)
    assert fail.returncode == 1 and "FAIL" in fail.stdout and f"--seed {seed}" in fail.stdout
    assert "power-loss" in fail.stdout  # the fault log names the faults
