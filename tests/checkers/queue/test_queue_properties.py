"""Property tests: simulated correct logs are valid; one planted anomaly is always found.

The simulator (queue_testlib.Sim) runs many processes against a correct log with
crashes (new process ids), indeterminate and failed sends, reassignments, empty polls and
a final phase that reads everything back. A plant makes the log or one client misbehave
once, in the way the anomaly type describes.
"""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from queue_testlib import PLANTS, simulate

from checkers.queue import check

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(seed=st.integers(0, 2**32 - 1), n_ops=st.integers(0, 150), n_keys=st.integers(1, 5),
       n_proc=st.integers(1, 8))
def test_simulated_correct_histories_are_valid(seed, n_ops, n_keys, n_proc):
    sim = simulate(seed, n_ops=n_ops, n_keys=n_keys, n_proc=n_proc)
    r = check(sim.h.events)
    assert r["anomaly_types"] == [], (r["anomaly_types"], r["anomalies"])
    assert r["valid"] in (True, "unknown")


@SETTINGS
@given(seed=st.integers(0, 2**32 - 1), n_ops=st.integers(0, 150), n_keys=st.integers(1, 5),
       n_proc=st.integers(1, 8), plant=st.sampled_from(PLANTS))
def test_planted_anomaly_is_found_as_its_type(seed, n_ops, n_keys, n_proc, plant):
    sim = simulate(seed, n_ops=n_ops, n_keys=n_keys, n_proc=n_proc, plant=plant)
    assert sim.planted
    r = check(sim.h.events)
    assert plant in r["anomaly_types"], (plant, r["anomaly_types"])
    assert r["valid"] is False
    assert r["anomalies"][plant][0]["explanation"]
    # the policy allowing exactly what was found makes the same history valid
    assert check(sim.h.events, r["anomaly_types"])["valid"] is True


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n_ops=st.integers(1, 120))
def test_check_is_deterministic_and_streaming(seed, n_ops):
    """Same verdict from a list and from a one-shot generator (the checker reads once)."""
    events = simulate(seed, n_ops=n_ops, plant="lost-write").h.events
    a = check(events)
    b = check(e for e in events)
    assert a["anomaly_types"] == b["anomaly_types"] and a["anomaly_counts"] == b["anomaly_counts"]
