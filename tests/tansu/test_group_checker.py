"""checkers/group.py: committed offsets never go back, no record below the group's commit is
skipped, one owner per partition and generation; histories built by hand, plus a property:
a history where one member at a time reads a partition in order and commits what it read is
always valid."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from checkers.group import check


class H:
    """A tiny history builder: each op is an invoke and its completion at the given times."""

    def __init__(self) -> None:
        self.events: list[dict] = []

    def op(self, p: int, f: str, t0: int, t1: int, value=None, type_="ok", **held) -> H:
        self.events.append({"index": len(self.events), "time": t0, "process": p, "type": "invoke", "f": f,
                            "value": None if f == "commit" else value})
        self.events.append({"index": len(self.events), "time": t1, "process": p, "type": type_, "f": f,
                            "value": value, **held})
        return self

    def poll(self, p, t0, t1, recs, gen, member, assignment):
        return self.op(p, "poll", t0, t1, [["poll", recs]], generation=gen, member=member, assignment=assignment)

    def commit(self, p, t0, t1, offsets, gen, member, type_="ok"):
        return self.op(p, "commit", t0, t1, offsets, type_, generation=gen, member=member,
                       assignment=sorted(offsets))


def test_a_clean_handover_is_valid():
    h = (H().poll(1, 0, 1, {"k-0": [[0, 10], [1, 11]]}, 1, "a", ["k-0"])
         .commit(1, 2, 3, {"k-0": 2}, 1, "a")
         .poll(2, 4, 5, {"k-0": [[2, 12]]}, 2, "b", ["k-0"])
         .commit(2, 6, 7, {"k-0": 3}, 2, "b"))
    r = check(h.events)
    assert r["valid"] is True and r["anomaly_types"] == [], r
    assert r["commits"] == 2 and r["generations"] == 2 and r["members"] == 2


def test_a_commit_that_goes_back_after_another_completed_is_caught():
    h = (H().poll(1, 0, 1, {"k-0": [[0, 10], [1, 11], [2, 12]]}, 1, "a", ["k-0"])
         .commit(1, 2, 3, {"k-0": 3}, 1, "a")
         .commit(2, 4, 5, {"k-0": 1}, 0, "zombie"))
    r = check(h.events)
    assert r["anomaly_types"] == ["group-commit-backwards"], r
    ex = r["anomalies"]["group-commit-backwards"][0]
    assert ex["earlier"]["offset"] == 3 and ex["later"]["offset"] == 1 and ex["later"]["member"] == "zombie"


def test_concurrent_commits_in_any_order_are_not_backwards():
    h = (H().poll(1, 0, 1, {"k-0": [[0, 10], [1, 11], [2, 12]]}, 1, "a", ["k-0"])
         .commit(1, 2, 6, {"k-0": 3}, 1, "a").commit(2, 3, 5, {"k-0": 1}, 1, "a"))
    assert check(h.events)["valid"] is True


def test_failed_commits_are_no_evidence():
    h = (H().poll(1, 0, 1, {"k-0": [[0, 10]]}, 1, "a", ["k-0"]).commit(1, 2, 3, {"k-0": 1}, 1, "a")
         .commit(2, 4, 5, {"k-0": 0}, 1, "b", type_="fail"))
    assert check(h.events)["valid"] is True


def test_a_record_below_the_commit_that_no_member_read_is_a_skip():
    h = (H().poll(1, 0, 1, {"k-0": [[0, 10], [2, 12]]}, 1, "a", ["k-0"])
         .commit(1, 2, 3, {"k-0": 3}, 1, "a")
         .op(3, "poll", 4, 5, [["poll", {"k-0": [[0, 10], [1, 11], [2, 12]]}]]))  # the final read-back
    r = check(h.events)
    assert r["anomaly_types"] == ["group-skip"], r
    assert r["anomalies"]["group-skip"][0] == {"key": "k-0", "committed": 3, "missed": [1], "count": 1}


def test_two_members_owning_one_partition_in_one_generation_overlap():
    h = (H().poll(1, 0, 1, {}, 4, "a", ["k-0", "k-1"]).poll(2, 0, 1, {}, 4, "b", ["k-1"])
         .poll(2, 2, 3, {}, 5, "b", ["k-0"]))
    r = check(h.events)
    assert r["anomaly_types"] == ["group-overlap"], r
    ex = r["anomalies"]["group-overlap"]
    assert len(ex) == 1 and ex[0]["generation"] == 4 and ex[0]["key"] == "k-1"
    assert {m["member"] for m in ex[0]["members"]} == {"a", "b"}


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 2), st.integers(1, 4)), min_size=1, max_size=20))
def test_in_order_handovers_are_always_valid(steps):
    """Members take turns (each turn a new generation): read some records in order, commit."""
    h, t, nxt = H(), 0, 0
    for gen, (m, n) in enumerate(steps, start=1):
        recs = [[o, 100 + o] for o in range(nxt, nxt + n)]
        h.poll(m, t, t + 1, {"k-0": recs}, gen, f"m{m}", ["k-0"])
        nxt += n
        h.commit(m, t + 2, t + 3, {"k-0": nxt}, gen, f"m{m}")
        t += 4
    r = check(h.events)
    assert r["valid"] is True, r


def test_a_partition_no_member_ever_held_or_read_is_never_read():
    h = (H().poll(1, 0, 1, {"k-1": [[0, 10]]}, 1, "a", ["k-1"])
         .op(3, "poll", 4, 5, [["poll", {"k-0": [[0, 20]], "k-1": [[0, 10]]}]]))  # the final read-back
    r = check(h.events)
    assert r["anomaly_types"] == ["group-never-read"], r
    assert r["anomalies"]["group-never-read"] == [{"key": "k-0", "records_read_back": 1}]
    assert check(H().op(3, "poll", 0, 1, [["poll", {"k-0": [[0, 20]]}]]).events)["valid"] is True  # no group
