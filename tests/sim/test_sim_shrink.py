"""Shrinking a failing simulation seed (broker/sim/shrink.py): fewer faults, same bug, replayable."""

from __future__ import annotations

import pytest

from broker.sim.__main__ import main
from broker.sim.shrink import NotFailing, run_gated, shrink, signature

OFF = frozenset({"clean-election-only"})


def test_a_failing_seed_shrinks_to_a_few_faults_that_replay_the_same_bug(capsys):
    out = shrink(5, safeguards_off=OFF)
    assert 1 <= len(out.slots) <= 5 < out.from_slots + 3 and out.runs > 1
    r, gate = run_gated(5, frozenset(out.slots), safeguards_off=OFF)
    assert not r.ok and signature(r) & out.signature  # the same bug, from the kept slots only
    assert set(gate.lines) <= set(out.slots)
    again, _ = run_gated(5, frozenset(out.slots), safeguards_off=OFF)
    assert again.faults == r.faults  # deterministic
    assert main(["--shrink", "5", "--safeguard-off", "clean-election-only"]) == 1
    printed = capsys.readouterr().out
    assert f"shrunk to {len(out.slots)}" in printed
    assert f"--seed 5 --safeguard-off clean-election-only --faults {','.join(out.slots)} -v" in printed


def test_a_passing_seed_or_a_bad_slot_is_bad_input(capsys):
    with pytest.raises(NotFailing):
        shrink(2, safeguards_off=OFF)
    for argv in (["--shrink", "2", "--safeguard-off", "clean-election-only"], ["--seed", "1", "--faults", "x1"],
                 ["--faults", "g1"]):
        with pytest.raises(SystemExit) as e:
            main(argv)
        assert e.value.code == 254
    err = capsys.readouterr().err.strip().splitlines()
    assert err[0].endswith("seed 2 passes: nothing to shrink") and len(err) == 3
