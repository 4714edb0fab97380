"""checkers.commits: a resume reads its group's last acknowledged commit, or any one whose
outcome was unknown; anything else is `lost-commit`. And the queue client that writes
those fields: it commits what a poll read and resumes from the group on its first assign."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from checkers import commits
from workloads.base import WorkloadOptions
from workloads.queue import QueueClient, merge_check


def poll(t, group, offsets, ok=True):
    return {"type": "ok", "f": "poll", "process": 1, "time": t, "group": group,
            "commit": {"offsets": offsets, "ok": ok}}


def resume(t, group, resumed, process=2):
    return {"type": "ok", "f": "assign", "process": process, "time": t, "group": group, "resumed": resumed}


def test_a_resume_at_the_last_acknowledged_commit_is_fine():
    evs = [poll(1, "g", {"q-0": 5}), poll(2, "g", {"q-0": 9, "q-1": 3}), resume(3, "g", {"q-0": 9, "q-1": 3, "q-2": None})]
    r = commits.check(evs)
    assert r["valid"] is True and r["commits"] == 2 and r["resumes"] == 1


def test_an_older_or_missing_offset_after_an_acknowledged_commit_is_a_lost_commit():
    evs = [poll(1, "g", {"q-0": 5}), poll(2, "g", {"q-0": 9}), resume(3, "g", {"q-0": 5}), resume(4, "h", {"q-0": 9}),
           resume(5, "g", {"q-0": None})]
    r = commits.check(evs)
    assert r["valid"] is False and r["anomaly_types"] == ["lost-commit"]
    got = [(a["group"], a["resumed"], a["expected"]) for a in r["anomalies"]["lost-commit"]]
    assert got == [("g", 5, [9]), ("h", 9, [None]), ("g", None, [9])]


def test_a_commit_of_unknown_outcome_may_or_may_not_have_happened():
    evs = [poll(1, "g", {"q-0": 5}), poll(2, "g", {"q-0": 9}, ok=False)]
    assert commits.check([*evs, resume(3, "g", {"q-0": 5})])["valid"] is True
    assert commits.check([*evs, resume(3, "g", {"q-0": 9})])["valid"] is True
    assert commits.check([*evs, resume(3, "g", {"q-0": 7})])["valid"] is False
    # and with no acknowledged commit before it, nothing at all is possible too
    assert commits.check([poll(1, "g", {"q-0": 4}, ok=False), resume(2, "g", {"q-0": None})])["valid"] is True


def test_a_commit_of_unknown_outcome_may_land_after_a_later_acknowledged_one():
    # the client may still retry it, the network still deliver it, after the harness gave up
    evs = [poll(1, "g", {"q-0": 5}, ok=False), poll(2, "g", {"q-0": 9}), resume(3, "g", {"q-0": 5})]
    assert commits.check(evs)["valid"] is True
    # an acknowledged one cannot: its answer came after it took effect
    evs = [poll(1, "g", {"q-0": 5}), poll(2, "g", {"q-0": 9}), resume(3, "g", {"q-0": 5})]
    assert commits.check(evs)["anomalies"]["lost-commit"][0]["expected"] == [9]


@given(st.lists(st.tuples(st.integers(0, 50), st.booleans()), min_size=1, max_size=20))
def test_resuming_at_the_last_commit_is_always_fine(seq):
    evs = [poll(i, "g", {"q-0": off}, ok) for i, (off, ok) in enumerate(seq)]
    assert commits.check([*evs, resume(99, "g", {"q-0": seq[-1][0]})])["valid"] is True


@given(st.lists(st.tuples(st.integers(0, 50), st.booleans()), max_size=20), st.one_of(st.none(), st.integers(0, 50)))
def test_a_resume_is_fine_exactly_at_the_last_acknowledged_or_any_unknown_commit(seq, at):
    evs = [poll(i, "g", {"q-0": off}, ok) for i, (off, ok) in enumerate(seq)]
    last_acked = next((off for off, ok in reversed(seq) if ok), None)
    possible = {last_acked} | {off for off, ok in seq if not ok}
    assert commits.check([*evs, resume(99, "g", {"q-0": at})])["valid"] is (at in possible)


class FakeIO:
    def __init__(self, committed=None):
        self.committed = dict(committed or {})
        self.assigned = None
        self.records = [("q", 0, 4, 44), ("q", 0, 5, 55)]

    def assign(self, positions):
        self.assigned = dict(positions)

    def poll(self, timeout, max_records=500):
        out, self.records = self.records, []
        return out

    def commit_offsets(self, positions):
        self.committed.update(positions)

    def committed_offsets(self, tps):
        return {tp: self.committed.get(tp) for tp in tps}


def test_the_client_resumes_from_its_group_and_commits_what_it_read():
    io = FakeIO({("q", 0): 4})
    c = QueueClient(lambda acks: io, WorkloadOptions(), group="wrack-t0")
    a = c.invoke({"f": "assign", "value": ["q-0", "q-1"]})
    assert a["type"] == "ok" and a["resumed"] == {"q-0": 4, "q-1": None} and io.assigned == {("q", 0): 4, ("q", 1): None}
    p = c.invoke({"f": "poll", "value": [["poll"]]})
    assert p["commit"] == {"offsets": {"q-0": 6}, "ok": True} and io.committed[("q", 0)] == 6
    again = c.invoke({"f": "assign", "value": ["q-0"]})  # not the first: no resume
    assert "resumed" not in again and io.assigned == {("q", 0): 6}
    fresh = QueueClient(lambda acks: io, WorkloadOptions(), group="wrack-t0")
    assert fresh.invoke({"f": "assign", "value": ["q-0"]})["resumed"] == {"q-0": 6}


def test_a_lost_commit_makes_the_queue_result_invalid():
    result = {"valid": True, "anomaly_types": [], "anomalies": {}, "first_anomaly_time": None}
    found = commits.check([poll(1, "g", {"q-0": 9}), resume(7, "g", {"q-0": 2})])
    merge_check(result, found, "commits", {"commits": found["commits"], "resumes": found["resumes"]})
    assert result["valid"] is False and result["anomaly_types"] == ["lost-commit"]
    assert result["first_anomaly_time"] == 7 and result["commits"] == {"commits": 1, "resumes": 1}


def test_a_wiped_coordinator_allows_its_groups_lost_commits_only():
    # the wrack broker keeps a group's offsets on its coordinator alone (docs/broker.md): a
    # wipe of that node's disk loses them, which the rules allow for its groups only
    from checkers.verdict import judge
    from suites.wrack.rules import choose, coordinator_node

    opts = {"workload": "queue", "nodes": 5, "concurrency_threads": 5, "acks": "all", "min_isr": 2, "rf": 3}
    wiped = coordinator_node("wrack-t2", 5)
    policy = choose(opts, events=[{"process": "nemesis", "type": "info", "f": "wipe", "value": {"nodes": [wiped]},
                                   "time": 1, "index": 1}])
    pick = next(p for p in policy.picks if p.name == "offsets-one-copy")
    assert "wrack-t2" in pick.keys and all(coordinator_node(g, 5) == wiped for g in pick.keys)
    lost_here = commits.check([poll(1, "wrack-t2", {"q-0": 9}), resume(2, "wrack-t2", {"q-0": None})])
    assert judge({"queue": lost_here}, policy).valid is True
    other = next(g for g in (f"wrack-t{i}" for i in range(5)) if coordinator_node(g, 5) != wiped)
    lost_there = commits.check([poll(1, other, {"q-0": 9}), resume(2, other, {"q-0": None})])
    assert judge({"queue": lost_there}, policy).valid is False
    assert not any(p.name == "offsets-one-copy" for p in choose(opts, events=[]).picks)


def test_the_workload_checks_commits_in_the_queue_checkers_pass(tmp_path):
    # the commit check reads its events from the queue checker's own pass over the file
    import json

    import suites

    events = [{**poll(1, "g", {"q-0": 9}), "type": "invoke", "value": [["poll"]]},
              {**poll(2, "g", {"q-0": 9}), "value": [["poll", {}]]},
              {**resume(3, "g", {"q-0": 2}), "type": "invoke", "value": ["q-0"]},
              {**resume(4, "g", {"q-0": 2}), "value": ["q-0"]}]
    path = tmp_path / "history.jsonl"
    path.write_text("".join(json.dumps({"index": i, **ev}) + "\n" for i, ev in enumerate(events)))
    wl = suites.get("wrack").make_workload("queue", {})
    result = wl.analyze(path).result
    assert result["commits"] == {"commits": 1, "resumes": 1}
    assert "lost-commit" in result["anomaly_types"] and result["valid"] is False
