"""Property tests: simulated correct logs are valid; one planted anomaly is always found.

The simulator (queue_testlib.Sim) runs many processes against a correct log with
crashes (new process ids), indeterminate and failed sends, reassignments, empty polls and
a final phase that reads everything back. A plant makes the log or one client misbehave
once, in the way the anomaly type describes.
"""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from queue_testlib import PLANTS, judged, simulate

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
    assert judged(sim.h.events, r["anomaly_types"])["valid"] is True


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n_ops=st.integers(1, 120))
def test_check_is_deterministic_and_streaming(seed, n_ops):
    """Same verdict from a list and from a one-shot generator (the checker reads once)."""
    events = simulate(seed, n_ops=n_ops, plant="lost-write").h.events
    a = check(events)
    b = check(e for e in events)
    assert a["anomaly_types"] == b["anomaly_types"] and a["anomaly_counts"] == b["anomaly_counts"]


def serial_txns(seed: int, n: int, n_keys: int) -> list[dict]:
    """Transactions run one at a time against a correct log: each sends to a few keys and
    polls what it has not read yet; sends of one txn are contiguous per key."""
    import random

    from queue_testlib import H

    rng = random.Random(seed)
    keys = [f"t{i}" for i in range(n_keys)]
    log: dict[str, list[int]] = {k: [] for k in keys}
    pos: dict[tuple[int, str], int] = {}
    h = H()
    v = 0
    for i in range(n):
        p = i % 3
        inv: list = []
        done: list = []
        for k in rng.sample(keys, rng.randint(1, min(2, n_keys))):
            v += 1
            log[k].append(v)
            inv.append(["send", k, v])
            done.append(["send", k, [len(log[k]) - 1, v]])
        reads = {}
        for k in keys:
            start = pos.get((p, k), 0)
            # a committed txn never sees its own sends: read only up to before them
            mine = sum(1 for m in done if m[1] == k)
            stop = len(log[k]) - mine
            if stop > start:
                reads[k] = [[o, log[k][o]] for o in range(start, stop)]
                pos[(p, k)] = stop
        inv.append(["poll"])
        done.append(["poll", reads])
        h.txn(p, inv, done)
    final = {k: [[o, x] for o, x in enumerate(log[k])] for k in keys if log[k]}
    h.poll(99, final)
    return h.events


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(1, 40), n_keys=st.integers(1, 4))
def test_serial_transactions_have_no_cycles(seed, n, n_keys):
    events = serial_txns(seed, n, n_keys)
    for ww in (False, True):
        r = check(events, ww_deps=ww)
        assert r["anomaly_types"] == [], (ww, r["anomaly_types"], r["anomalies"])
