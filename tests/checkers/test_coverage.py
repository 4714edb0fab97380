"""Fault coverage (checkers/coverage.py): a story that never went as planned is reported."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from checkers.coverage import fault_coverage, warnings


def story(name, error=None, steps=None):
    value = {"story": name, "steps": steps or [{"step": "roles", "ok": True}]}
    if error:
        value["error"] = error
    return [{"process": "nemesis", "type": "info", "f": f"start-{name}", "value": {"candidates": [["t", 0]]}},
            {"process": "nemesis", "type": "info", "f": "story-step", "value": {"story": name, "step": "roles"}},
            {"process": "nemesis", "type": "info", "f": f"stop-{name}", "value": value}]


def test_stories_as_planned_and_missed():
    evs = (story("lrs") + story("hw-truncation", error="StoryError: no partition without a controller replica")
           + story("leso", steps=[{"step": "roles", "ok": True}, {"step": "b-elected", "ok": False}])
           + [{"process": "nemesis", "type": "info", "f": "kill", "value": {"nodes": ["n1"]}},
              {"process": "nemesis", "type": "info", "f": "nemesis-error", "value": {"f": "kill", "error": "boom"}}])
    cov = fault_coverage(evs)
    assert cov["actions"] == 4 and cov["error_count"] == 1
    assert cov["stories"]["lrs"] == {"played": 1, "as_planned": 1, "misses": []}
    assert cov["stories"]["hw-truncation"]["as_planned"] == 0
    assert cov["stories"]["leso"]["misses"] == ["step b-elected did not happen in time"]
    ws = warnings(cov)
    assert any(w.startswith("fault story hw-truncation never went as planned (1 tries): StoryError") for w in ws)
    assert any("leso" in w for w in ws) and not any("lrs" in w for w in ws)
    assert any(w == "1 fault action(s) failed, e.g. kill: boom" for w in ws)


def test_client_ops_are_not_faults():
    evs = [{"process": 1, "type": "invoke", "f": "send"}, {"process": "nemesis", "type": "info", "f": "final-heal"}]
    assert fault_coverage(evs) == {"actions": 0, "errors": [], "error_count": 0, "stories": {}}
    assert warnings(fault_coverage(evs)) == []


@given(st.lists(st.tuples(st.sampled_from(["lrs", "leso", "wipe-follower"]), st.booleans()), max_size=12))
def test_a_story_warns_exactly_when_no_try_went_as_planned(tries):
    evs = [e for name, ok in tries for e in story(name, error=None if ok else "StoryError: x")]
    cov = fault_coverage(evs)
    for name in {n for n, _ in tries}:
        s = cov["stories"][name]
        assert s["played"] == sum(1 for n, _ in tries if n == name)
        assert s["as_planned"] == sum(1 for n, ok in tries if n == name and ok)
        assert any(name in w for w in warnings(cov)) == (s["as_planned"] == 0)


def test_the_bugs_own_steps_and_the_closing_heal_are_not_misses():
    """leso's c-in-isr happens only with leso-check off: in a safe run its absence is the
    safeguard holding; a story whose last heal wait ran out still reached its trigger."""
    steps = [{"step": "roles", "ok": True}, {"step": "b-elected", "ok": True},
             {"step": "c-in-isr", "ok": False, "bug_only": True}, {"step": "healed", "ok": False}]
    cov = fault_coverage(story("leso", steps=steps))
    assert cov["stories"]["leso"] == {"played": 1, "as_planned": 1, "misses": []}
    assert warnings(cov) == []


def test_stories_mark_the_steps_only_a_bug_makes():
    # the triggers' waits for an event only a bug makes are marked, so coverage does not
    # count their timeout as a story that missed its trigger
    from broker.triggers import TRIGGERS
    from broker.triggers.steps import Wait, walk

    found = {w.name: w.bug_only for t in TRIGGERS.values() for w in walk(t.steps) if isinstance(w, Wait)}
    assert found["c-in-isr"] is True and found["f-in-isr"] is True
    assert found["isr-is-leader"] is False
