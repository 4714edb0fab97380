"""Property tests: the checker's verdict equals a brute-force oracle's on small histories.

Histories come from a simulated correct object (register, cas-register, kv, log; with
crashes and never-completed ops), from mutated copies of those, and from arbitrary random
intervals and values. Simulated histories must be linearizable; for all three the
verdict (with and without partitioning) must equal the oracle's.
"""

from __future__ import annotations

import lin_oracle as O
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from checkers.linearizable import check_events

MODELS = ["register", "cas-register", "kv", "log"]
SETTINGS = settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])

scripts = st.lists(st.integers(0, 50), min_size=0, max_size=40)


def _verdict(events, model, partition=True):
    r = check_events([dict(e) for e in events], model, partition=partition)
    assert r["valid"] in (True, False), r
    return r["valid"]


def _small(events) -> bool:
    return len(O.pair(events)) <= 9


@SETTINGS
@given(model=st.sampled_from(MODELS), script=scripts, procs=st.integers(1, 4), keys=st.integers(1, 2))
def test_simulated_histories_are_linearizable(model, script, procs, keys):
    events = O.simulate(model, script, procs, keys)
    assert _verdict(events, model) is True
    assert _verdict(events, model, partition=False) is True
    if _small(events):
        assert O.linearizable(events, model) is True


@SETTINGS
@given(model=st.sampled_from(MODELS), script=scripts, procs=st.integers(1, 4), keys=st.integers(1, 2),
       choice=st.integers(0, 100), alt=st.integers(0, 100))
def test_mutated_histories_match_the_oracle(model, script, procs, keys, choice, alt):
    events = O.mutate(O.simulate(model, script, procs, keys), choice, alt)
    if not _small(events):
        return
    expected = O.linearizable(events, model)
    assert _verdict(events, model) is expected
    assert _verdict(events, model, partition=False) is expected


ops = st.lists(st.tuples(st.integers(0, 8), st.integers(0, 4), st.integers(0, 5), st.integers(0, 5),
                         st.integers(0, 5)), min_size=1, max_size=8)


@SETTINGS
@given(model=st.sampled_from(MODELS), ops=ops)
def test_random_histories_match_the_oracle(model, ops):
    events = O.random_history(model, ops)
    expected = O.linearizable(events, model)
    assert _verdict(events, model) is expected


@settings(max_examples=60, deadline=None)
@given(model=st.sampled_from(MODELS), script=st.lists(st.integers(0, 50), min_size=100, max_size=300),
       procs=st.integers(3, 6), keys=st.integers(1, 3))
def test_longer_simulated_histories_are_linearizable(model, script, procs, keys):
    """No oracle (too long to brute-force), but a correct object's history must pass."""
    events = O.simulate(model, script, procs, keys)
    assert _verdict(events, model) is True
