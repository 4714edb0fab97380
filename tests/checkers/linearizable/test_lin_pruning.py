"""Property tests: each pruning, search and counterexample window against the brute-force oracle.

docs/checkers-linearizable.md states why each is sound; these check it on small histories
(simulated correct objects with crashes, mutated copies of them, arbitrary intervals):

- the exact search in both move orders (directed and plain call order) with rule 4's
  classes of indeterminate ops gives the oracle's verdict;
- rule 5: the relaxed search fails only where the oracle does, and a linearization it
  finds that `Search._witness` accepts means the oracle's True;
- rule 6 (`refute.overwritten`) refutes only histories the oracle refutes;
- a counterexample window has no linearization (the oracle, from each of its first
  states); no window of a linearizable history is refuted by a window check;
- the staged `Plan` with every stage running from the first move gives the oracle's verdict.
"""

from __future__ import annotations

import lin_oracle as O
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from lin_testlib import stale_read_history

from checkers.linearizable import check as C
from checkers.linearizable import plan as P
from checkers.linearizable.models import NIL, UNSEEN, get_model
from checkers.linearizable.refute import overwritten
from checkers.linearizable.search import Search
from checkers.linearizable.window import find_window, refutes
from contracts.pairing import pair_ops

MODELS = ["register", "cas-register", "kv", "log"]
REGISTERS = ["register", "cas-register"]
SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
scripts = st.lists(st.integers(0, 50), min_size=0, max_size=40)
interval_ops = st.lists(st.tuples(st.integers(0, 8), st.integers(0, 4), st.integers(0, 5), st.integers(0, 5),
                                  st.integers(0, 5)), min_size=1, max_size=9)


@st.composite
def histories(draw, models=MODELS, kinds=("simulated", "mutated", "random")):
    """(model, events): simulated, mutated or arbitrary, small enough for the oracle."""
    model = draw(st.sampled_from(models))
    kind = draw(st.sampled_from(kinds))
    if kind == "random":
        events = O.random_history(model, draw(interval_ops))
    else:
        events = O.simulate(model, draw(scripts), draw(st.integers(1, 4)), draw(st.integers(1, 2)))
        if kind == "mutated":
            events = O.mutate(events, draw(st.integers(0, 100)), draw(st.integers(0, 100)))
    assume(len(O.pair(events)) <= 10)
    return model, events


def plans(model, events):
    """(partition, plan) pairs of a history, as `analyse` makes them."""
    m = get_model(model)
    lops = C.prepare_ops(pair_ops(iter([dict(e) for e in events])), m)
    return list(zip(*C.plan_partitions(lops, m, False), strict=True)) if lops else []


def run(s: Search) -> bool:
    r = None
    while r is None:
        r = s.run(10_000)
    return r


def search(plan, **kw) -> Search:
    return Search(plan.calls, plan.starts, plan.ends, plan.ro, plan.spec, plan.groups, **kw)


@SETTINGS
@given(h=histories())
def test_exact_search_in_both_orders_matches_the_oracle(h):
    model, events = h
    expected = O.linearizable(events, model)
    for directed in (True, False):
        assert all(run(search(p, directed=directed)) for _, p in plans(model, events)) is expected


@SETTINGS
@given(h=histories(REGISTERS))
def test_rule5_relaxed_search_fails_only_where_the_oracle_does(h):
    model, events = h
    expected = O.linearizable(events, model)
    verdicts = []
    for _, p in plans(model, events):
        s = search(p, relaxed=True)
        verdicts.append(run(s) if run(s) or not s.rejected else None)
    if all(v is True for v in verdicts):
        assert expected is True  # witnesses the relaxed search accepted are linearizations
    if False in verdicts:
        assert expected is False


@SETTINGS
@given(h=histories(REGISTERS))
def test_rule6_refutes_only_what_the_oracle_refutes(h):
    model, events = h
    m = get_model(model)
    for _, p in plans(model, events):
        if overwritten(p.calls, p.starts, p.ends, p.spec.init, m.needs, m.produces, m.leaves) is not None:
            assert O.linearizable(events, model) is False


@SETTINGS
@given(model=st.sampled_from(REGISTERS), script=scripts, procs=st.integers(1, 4), keys=st.integers(1, 2),
       data=st.data())
def test_no_window_of_a_linearizable_history_is_refuted(model, script, procs, keys, data):
    events = O.simulate(model, script, procs, keys)
    for _, p in plans(model, events):
        times = sorted({t for t in p.starts + p.ends if t is not None})
        q = data.draw(st.sampled_from([None, *times]))
        end = data.draw(st.sampled_from(times))
        assume(q is None or q <= end)
        assert not refutes(p, q, end)


def _window_events(part, plan, w, start_state):
    """The window as a history for the oracle: a write of `start_state` first, each op on a
    process of its own; carried ops invoked at the window's start, never completed; ops that
    return after its end never completed."""
    raw = None if start_state is NIL else "an unread value" if start_state is UNSEEN else start_state
    key = part.ops[w.ops[0] if w.ops else w.carried[0]].key
    value = raw if key is None else [key, raw]
    t0 = min(plan.starts) - 10
    evs = [{"process": 1000, "type": "invoke", "f": "write", "value": value, "time": t0},
           {"process": 1000, "type": "ok", "f": "write", "value": value, "time": t0 + 1}]
    for pid, i in enumerate(w.carried + w.ops):
        op = part.ops[i].op
        inv = dict(op.invoke, process=pid)
        if i in w.carried:
            inv["time"] = w.start
        evs.append(inv)
        if i not in w.carried and plan.ends[i] is not None and plan.ends[i] <= w.end:
            evs.append(dict(op.complete, process=pid))
    evs.sort(key=lambda e: (e["time"], e["type"] != "invoke"))
    for j, e in enumerate(evs):
        e["index"] = j
    return evs


@SETTINGS
@given(h=histories(REGISTERS, ("mutated", "random")))
def test_counterexample_windows_have_no_linearization(h):
    model, events = h
    if O.linearizable(events, model):
        return
    for part, p in plans(model, events):
        for stage_alone in (True, False):
            plan = P.Plan(p.spec, p.calls, p.starts, p.ends, p.ro, p.groups, p.hooks)
            if not stage_alone:
                plan.alone = 0  # every search from the first move
            r = None
            while r is None:
                r = plan.run(10_000)
            if r:
                break  # this partition is linearizable; another one is not
            w = find_window(plan)
            assert w.ops or w.carried
            if len(w.ops) + len(w.carried) > 11:
                continue  # too long for the oracle
            for s0 in w.states:
                assert O.linearizable(_window_events(part, plan, w, s0), model) is False, (w, s0)


@settings(max_examples=300, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(h=histories())
def test_every_stage_from_the_first_move_matches_the_oracle(h, monkeypatch_alone):
    model, events = h
    r = C.check_events([dict(e) for e in events], model)
    assert r["valid"] is O.linearizable(events, model)


@pytest.fixture
def monkeypatch_alone(monkeypatch):
    """Plans whose exact search is joined by the other searches at once."""
    monkeypatch.setattr(P, "EXACT_ALONE", -10**9)


def test_a_stale_read_is_refuted_by_rule6_and_by_each_search():
    m = get_model("cas-register")
    ((part, p),) = [(a, b) for a, b in plans("cas-register", stale_read_history()) if a.key == "a"]
    ref = overwritten(p.calls, p.starts, p.ends, p.spec.init, m.needs, m.produces, m.leaves)
    assert ref is not None and ref.state == 5
    assert m.describe_call(p.calls[ref.op]) == "read 5" and part.ops[ref.by].op.invoke["value"] == ["a", 3]
    for kw in ({}, {"directed": False}, {"relaxed": True}):
        s = search(p, **kw)
        assert run(s) is False and not s.rejected
    # an indeterminate write of 5 invoked before the read returned may have taken effect late
    ((_, p),) = [(a, b) for a, b in plans("cas-register", stale_read_history(5)) if a.key == "a"]
    assert overwritten(p.calls, p.starts, p.ends, p.spec.init, m.needs, m.produces, m.leaves) is None
    assert run(search(p)) is True and run(search(p, relaxed=True)) is True
