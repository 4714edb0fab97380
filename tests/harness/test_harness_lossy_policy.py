"""The policy computed from a run's fault history (suites/wrack/lossy.py, suites/wrack/rules.py `choose`):
synthetic nemesis events as the nemesis and the cluster-state observer write them.

A replica that lost data counts until it is seen back in the ISR (after being seen out);
more than min.insync.replicas-1 replicas of one partition lost at once earn the loss
allowance, fewer keep the run strict. Properties: with every ISR change observed, the count
is exactly the true number of replicas lost at once; without observations it never exceeds it.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from checkers.verdict import judge
from contracts.history import fault_windows
from suites.wrack.lossy import durability, losses, partition_of
from suites.wrack.rules import choose

NODES = ["n1", "n2", "n3"]
SAFE = {"workload": "queue", "acks": "all", "min_isr": 2, "rf": 3, "nodes": 3, "nemesis": ["power-loss"]}
COMMITTED_LOSS = ["inconsistent-offsets", "int-nonmonotonic-poll", "int-nonmonotonic-send", "lost-write",
                  "nonmonotonic-poll", "nonmonotonic-send", "producer-gap", "producer-reorder", "replica-divergence",
                  "unseen"]


class Run:
    """Nemesis events in history order (index = position, time = seconds given * 1e9)."""

    def __init__(self, keys=("t-0",), replicas=NODES):
        self.events: list[dict] = []
        self.keys = list(keys)
        self.replicas = list(replicas)

    def add(self, t: float, f: str, value) -> Run:
        self.events.append({"index": len(self.events), "time": int(t * 1e9), "process": "nemesis",
                            "type": "info", "f": f, "value": value})
        return self

    def state(self, t: float, isr, keys=None) -> Run:
        parts = {k: {"leader": isr[0] if isr else None, "isr": list(isr), "replicas": self.replicas}
                 for k in (keys or self.keys)}
        return self.add(t, "cluster-state", {"controller": "n1", "partitions": parts})

    def power_loss(self, t: float, *nodes: str, files=None) -> Run:
        lost = {n: {"lost_bytes": 10, "files": [{"path": p} for p in (files or ["/t-0/00000000000000000000.log"])],
                    "undone": []} for n in nodes}
        return self.add(t, "power-loss", {"nodes": list(nodes), "torn": False, "seed": None, "lost": lost})


def policy(run: Run, **opts):
    return choose({**SAFE, **opts}, events=run.events, keys=run.keys)


def test_one_replica_at_a_time_seen_back_is_strict():
    r = Run().state(0, NODES).power_loss(5, "n1").state(6, NODES).state(14, ["n2", "n3"]).state(16, NODES)
    r.power_loss(20, "n2").state(29, ["n1", "n3"]).state(31, NODES)
    p = policy(r)
    assert p.name == "strict" and p.allowed == [] and p.durability.peak == {"t-0": 1}
    assert p.rule == "strict: lossy shutdowns within min ISR - 1 per partition" and choose(SAFE).rule == "strict"
    assert p.durability.observed and len(p.durability.losses) == 2
    assert "at most 1 replica(s)" in p.notes[0] and "n2 by power-loss (event 5" in p.notes[0]


def test_second_loss_before_the_first_is_back_allows_committed_loss():
    r = Run().state(0, NODES).power_loss(5, "n1").state(14, ["n2", "n3"]).power_loss(15, "n2")
    p = policy(r)
    assert p.name == "power-loss-unflushed" and p.allowed == COMMITTED_LOSS
    pick = p.picks[0]
    assert [(e["node"], e["index"], e["f"], e["partitions"]) for e in pick.events] == [
        ("n1", 1, "power-loss", ["t-0"]), ("n2", 3, "power-loss", ["t-0"])]
    assert "t-0: 2 replicas lost data at once" in pick.reason and "in t-0" in p.rule
    d = p.to_dict()
    assert d["durability"]["exceeded"]["t-0"][1]["node"] == "n2" and d["policies"][0]["events"] == pick.events


def test_an_isr_that_still_lists_the_node_right_after_the_fault_proves_nothing():
    # the controller fences a restarted broker's old session only after its timeout: the ISR
    # keeps listing it; it is back only once seen out and then in again
    r = Run().state(0, NODES).power_loss(5, "n1").state(6, ["n1", "n2", "n3"], keys=["t-0"])
    r.add(7, "start-partition", {"grudge": {}}).power_loss(9, "n3")
    assert policy(r).name == "power-loss-unflushed"


def test_an_isr_listing_the_node_after_the_fence_deadline_is_back():
    # the observer can miss a short out-of-ISR spell; 12 s after the fault the old session is
    # fenced for sure, so an ISR that lists the node then lists its caught-up new incarnation
    r = Run().state(0, NODES).power_loss(5, "n1")
    assert policy(Run().state(0, NODES).power_loss(5, "n1").power_loss(16, "n2")).name == "power-loss-unflushed"
    assert policy(r.power_loss(17, "n2")).name == "strict"
    late = Run().state(0, NODES).power_loss(5, "n1").state(18, NODES, keys=["t-0"]).power_loss(19, "n2")
    assert policy(late).name == "strict"
    down = Run().state(0, NODES).power_loss(5, "n1").state(10, ["n2", "n3"]).power_loss(30, "n2")
    assert policy(down).name == "power-loss-unflushed"  # still out: not back, however long


def test_the_controllers_isr_changes_show_what_the_observer_missed():
    # a restarted replica left the ISR and was back 70 ms later (seen on a real power loss):
    # the controller's event lines in the node logs have it, the 0.5 s polls did not
    r = Run().state(0, NODES).power_loss(5, "n1").power_loss(9, "n2")
    changes = [{"time": int(5.30e9), "key": "t-0", "isr": ["n2", "n3"]},
               {"time": int(5.37e9), "key": "t-0", "isr": ["n2", "n3", "n1"]}]
    assert policy(r).name == "power-loss-unflushed"
    p = choose(SAFE, events=r.events, keys=r.keys, isr_changes=changes)
    assert p.name == "strict" and p.durability.peak == {"t-0": 1}
    early = [{**c, "time": c["time"] - int(1e9)} for c in changes]  # before the fault: proves nothing
    assert choose(SAFE, events=r.events, keys=r.keys, isr_changes=early).name == "power-loss-unflushed"
    # without the observer, ISR changes alone are observations too (and tell the assignment)
    bare = Run().power_loss(5, "n1").power_loss(9, "n2")
    assert choose(SAFE, events=bare.events, keys=bare.keys, isr_changes=changes).durability.observed


def test_a_replica_the_controller_elects_after_its_loss_is_back():
    # the ELR off: a lone leader lost power and was re-elected 0.5 s later, never out of the
    # ISR; a follower's loss 11.7 s later is not concurrent with it (the first caused the loss)
    r = Run().state(0, NODES).power_loss(30, "n1").power_loss(41.7, "n2")
    lone = [{"time": int(29e9), "key": "t-0", "isr": ["n1"], "elected": None},
            {"time": int(30.48e9), "key": "t-0", "isr": ["n1"], "elected": None},  # leaderless: the old session fenced
            {"time": int(30.5e9), "key": "t-0", "isr": ["n1"], "elected": "n1"}]
    assert choose(SAFE, events=r.events, keys=r.keys, isr_changes=lone[:2]).name == "power-loss-unflushed"
    p = choose(SAFE, events=r.events, keys=r.keys, isr_changes=lone)
    assert p.name == "strict" and p.durability.peak == {"t-0": 1}
    # an election before the loss says nothing about the restarted incarnation
    early = [{**c, "time": int(29.9e9)} if c["elected"] else c for c in lone]
    assert choose(SAFE, events=r.events, keys=r.keys, isr_changes=early).name == "power-loss-unflushed"


def test_a_replica_already_out_at_the_fault_is_back_when_seen_in():
    r = Run().state(0, ["n2", "n3"]).power_loss(5, "n1").state(12, NODES).power_loss(20, "n2")
    assert policy(r).name == "strict"


def test_the_same_replica_twice_is_one_replica():
    r = Run().state(0, NODES).power_loss(5, "n1").power_loss(8, "n1").state(9, ["n2", "n3"])
    assert policy(r).durability.peak == {"t-0": 1} and policy(r).name == "strict"


def test_replicas_losing_power_together_exceed_and_min_isr_3_tolerates_two():
    r = Run().state(0, NODES).power_loss(5, "n1", "n2")
    assert policy(r).name == "power-loss-unflushed"
    assert policy(r, min_isr=3).name == "strict"
    assert policy(r.power_loss(6, "n3"), min_isr=3).name == "power-loss-unflushed"


def test_only_the_partitions_whose_files_were_lost_count():
    r = Run(keys=["t-0", "t-1"]).state(0, NODES)
    r.power_loss(5, "n1", files=["/t-0/00000000000000000000.log", "/wrack-broker.log"])
    r.power_loss(6, "n2", files=["/t-1/00000000000000000000.index"])
    p = policy(r)
    assert p.name == "strict" and p.durability.peak == {"t-0": 1, "t-1": 1}
    nothing = Run().state(0, NODES).power_loss(5, "n1").add(6, "power-loss", {
        "nodes": ["n2"], "lost": {"n2": {"lost_bytes": 0, "files": [], "undone": []}}})
    assert [x.node for x in losses(nothing.events)] == ["n1"]  # nothing unsynced: not lossy


def test_partition_of_data_dir_paths():
    assert partition_of("/queue0-1/00000000000000000000.log") == "queue0-1"
    assert partition_of("/var/lib/wrack/broker/data/queue1-0/00000000000000000042.log") == "queue1-0"
    assert partition_of("/queue0-1") == "queue0-1"
    assert partition_of("/__cluster_metadata-0/00000000000000000000.log") is None
    assert partition_of("/wrack-broker.log") is None and partition_of("/replication-offset-checkpoint") is None


def test_kills_are_lossy_only_under_lazyfs_in_lazy_mode():
    r = Run().state(0, NODES).add(5, "kill", {"nodes": ["n1"]}).add(6, "kill", {"nodes": ["n2"]})
    assert losses(r.events) == [] and policy(r, nemesis=["kill"]).name == "strict"
    assert [x.node for x in losses(r.events, nemesis=["power-loss", "kill"])] == ["n1", "n2"]
    assert policy(r, nemesis=["power-loss", "kill"]).name == "power-loss-unflushed"
    healed = Run().add(1, "lazyfs-sync", {"nodes": NODES, "final": True}).add(2, "kill", {"nodes": ["n1"]})
    assert losses(healed.events, nemesis=["power-loss"]) == []
    # kills that record what LazyFS dropped: only those that dropped something
    kept = {"nodes": ["n1"], "lost": {}}  # a LazyFS whose kills keep the page cache (a story's)
    dropped = {"nodes": ["n2", "n3"], "lost": {"n2": {"lost_bytes": 5, "files": [{"path": "/t-0/0.log"}]},
                                              "n3": {"lost_bytes": 0, "files": [], "undone": []}}}
    rec = Run().add(1, "kill", kept).add(2, "kill", dropped)
    assert [(x.node, x.keys) for x in losses(rec.events, nemesis=["power-loss"])] == [("n2", frozenset({"t-0"}))]
    assert losses(rec.events, nemesis=["power-loss"], flush_every=True) == []


def test_wipes_are_lossy_and_clean_stops_are_not():
    r = Run().state(0, NODES).add(1, "stop", {"nodes": ["n1"], "clean": True}).add(2, "start", {"nodes": ["n1"]})
    r.add(3, "wipe", {"nodes": ["n2"]})
    assert [(x.node, x.f) for x in losses(r.events)] == [("n2", "wipe")]
    # (a wiped coordinator's groups get offsets-one-copy beside it: their offsets had one copy)
    name = policy(r.add(4, "wipe", {"nodes": ["n3"]}), nemesis=["wipe-follower"]).name
    assert name.split("+")[0] == "power-loss-unflushed"


def test_flush_per_message_keeps_power_loss_strict_but_not_corruption():
    r = Run().state(0, NODES).power_loss(5, "n1").power_loss(6, "n2")
    assert policy(r, flush_policy="every").name == "strict"
    assert policy(r, flush_policy="100").name == "power-loss-unflushed"
    corrupt = {"nodes": ["n3"], "mode": "truncate", "stop": "term", "restart": True,
               "changes": {"n3": [{"op": "truncate", "file": "/d/broker/data/t-0/00000000000000000000.log"}]}}
    r.add(7, "corrupt-file", corrupt)
    assert [x.node for x in losses(r.events, flush_every=True)] == ["n3"]
    c2 = Run().state(0, NODES).add(5, "corrupt-file", corrupt).add(6, "corrupt-file", {**corrupt, "nodes": ["n1"],
                                                                                      "changes": {"n1": corrupt["changes"]["n3"]}})
    assert policy(c2, nemesis=["corruption"], flush_policy="every").name == "power-loss-unflushed"


def test_a_removed_replica_never_comes_back():
    r = Run().state(0, NODES).add(5, "remove-node", {"nodes": ["n3"], "node_ids": {"n3": 2}})
    r.add(8, "add-node", {"nodes": ["n3"], "node_ids": {"n3": 3}}).state(9, ["n1", "n2"]).state(12, NODES)
    assert policy(r, nemesis=["membership"]).name == "strict"
    assert policy(r.power_loss(20, "n1"), nemesis=["membership", "power-loss"]).name == "power-loss-unflushed"


def test_without_observations_only_losses_that_could_not_have_rejoined_are_concurrent():
    apart = Run().power_loss(5, "n1").power_loss(6, "n2")
    p = policy(apart)
    assert p.name == "strict" and not p.durability.observed and "could have rejoined" in p.notes[0]
    assert policy(Run().power_loss(5, "n1", "n2")).name == "power-loss-unflushed"  # one event
    down = Run().add(5, "kill", {"nodes": ["n1"]}).power_loss(6, "n2")
    assert policy(down).name == "power-loss-unflushed"  # n1 still down (lossy kill under LazyFS)
    assert policy(down, rf=3, nodes=5).name == "strict"  # kill of n1: which partitions is unknown
    restarted = Run().add(5, "kill", {"nodes": ["n1"]}).add(6, "start", {"nodes": ["n1"]}).power_loss(7, "n2")
    assert policy(restarted).name == "strict"
    paused = Run().power_loss(5, "n1").add(5.5, "pause", {"nodes": ["n1"]})
    assert policy(paused.power_loss(6, "n2")).name == "strict"  # n1 ran between restart and pause
    isolated = Run().add(4, "start-partition", {"grudge": {"n1": ["n2", "n3"], "n2": ["n1"], "n3": ["n1"]}})
    assert policy(isolated.power_loss(5, "n1").power_loss(6, "n2")).name == "power-loss-unflushed"


def test_configuration_rules_and_safeguards():
    r = Run().state(0, NODES).power_loss(5, "n1").power_loss(6, "n2")
    assert policy(r, acks="1").name == "acks1+power-loss-unflushed"
    assert policy(r, min_isr=1).name == "min-isr1"  # no ELR promise to hold it to
    assert policy(r, unclean_election=True).name == "unclean-election+power-loss-unflushed"
    off = policy(Run().state(0, NODES).power_loss(5, "n1"), safeguards_off=["elr"])
    assert off.name == "strict" and any("safeguards switched off (elr)" in n for n in off.notes)
    assert choose(SAFE).name == "strict" and choose(SAFE).durability is None  # no events: nothing allowed
    assert policy(r, workload="log").allowed == ["nonlinearizable", "replica-divergence"]
    assert policy(r, workload="noop").name == "strict"


def test_cluster_state_events_are_not_fault_windows():
    r = Run().state(0, NODES).add(1, "start-partition", {"grudge": {}}).state(2, ["n1"]).add(3, "stop-partition", {})
    assert [(w.kind, w.start, w.stop) for w in fault_windows(r.events)] == [("partition", 1e9, 3e9)]


# --------------------------------------------------------------------------- properties

# (node, gap, fence delay, rejoin delay): fences within the 12 s the policy allows for them
loss_steps = st.lists(st.tuples(st.sampled_from(NODES), st.integers(1, 16), st.integers(1, 11), st.integers(1, 8)),
                      min_size=1, max_size=8)


def _truth(steps):
    """A timeline from (node, gap, fence delay, rejoin delay) steps: node loses data at t, stays
    in the ISR until t + fence, is out until t + fence + rejoin. A node is only lost again after
    it is back. Returns (losses [(t, node)], ISR changes [(time, node, in?)], true peak)."""
    t, back = 0, {}
    out, changes = [], []
    for node, gap, fence, rejoin in steps:
        t = max(t + gap, back.get(node, 0) + 1)
        out.append((t, node))
        changes += [(t + fence, node, False), (t + fence + rejoin, node, True)]
        back[node] = t + fence + rejoin
    peak = max(sum(1 for (t2, m) in out if t2 <= t1 <= _back(out, changes, t2, m)) for t1, _ in out)
    return out, changes, peak


def _back(out, changes, t, node):
    return min(c for c, m, isin in changes if m == node and isin and c > t)


def _observed(out, changes, extra):
    """History events: losses at integer times, one cluster-state event after every ISR change
    (and at `extra` times)."""
    isr = set(NODES)
    r = Run()
    r.state(0, sorted(isr))
    items = [(t, 1, "loss", n) for t, n in out] + [(c + 0.5, 0, "change", (n, i)) for c, n, i in changes]
    items += [(x + 0.25, 0, "sample", None) for x in extra]
    for tm, _, kind, what in sorted(items, key=lambda x: (x[0], x[1])):
        if kind == "loss":
            r.power_loss(tm, what)
            continue
        if kind == "change":
            n, isin = what
            isr = isr | {n} if isin else isr - {n}
        r.state(tm, sorted(isr))
    return r


@settings(max_examples=300, deadline=None)
@given(loss_steps, st.lists(st.integers(0, 40), max_size=6))
def test_with_every_isr_change_observed_the_count_is_exact(steps, extra):
    out, changes, peak = _truth(steps)
    d = durability(_observed(out, changes, extra).events, min_isr=2, nemesis=["power-loss"], keys=["t-0"])
    assert d.peak["t-0"] == peak
    assert bool(d.exceeded) == (peak > 1)
    if d.exceeded:
        assert len({x.node for x in d.exceeded["t-0"]}) == 2


@settings(max_examples=200, deadline=None)
@given(loss_steps)
def test_with_every_isr_change_from_the_controller_the_count_is_exact(steps):
    out, changes, peak = _truth(steps)
    r = Run().state(0, NODES)
    for t, n in out:
        r.power_loss(t, n)
    isr, seen = set(NODES), []
    for c, n, isin in sorted(changes):
        isr = isr | {n} if isin else isr - {n}
        seen.append({"time": int((c + 0.5) * 1e9), "key": "t-0", "isr": sorted(isr)})
    d = durability(r.events, min_isr=2, nemesis=["power-loss"], keys=["t-0"], isr_changes=seen)
    assert d.peak["t-0"] == peak


@settings(max_examples=200, deadline=None)
@given(loss_steps, st.lists(st.booleans(), min_size=8, max_size=8))
def test_without_observations_the_count_never_exceeds_the_truth(steps, as_kill):
    # some losses are lossy kills (the node stays down until a start at its rejoin time)
    out, changes, peak = _truth(steps)
    r = Run()
    items = []
    for (t, n), kill in zip(out, as_kill, strict=False):
        items.append((t, 1, "kill" if kill else "power-loss", n))
        if kill:
            items.append((_back(out, changes, t, n) - 0.5, 0, "start", n))
    for tm, _, f, n in sorted(items, key=lambda x: (x[0], x[1])):
        if f == "power-loss":
            r.power_loss(tm, n)
        else:
            r.add(tm, f, {"nodes": [n]})
    d = durability(r.events, min_isr=2, nemesis=["power-loss", "kill"], keys=["t-0"], all_hold_all=True)
    assert not d.observed and d.peak.get("t-0", 0) <= peak


def test_checkers_ignore_cluster_state_events():
    from checkers.linearizable.check import check_events
    from checkers.queue import check

    ops = [(0, "invoke", "send", [["send", "t-0", 1]]), (0, "ok", "send", [["send", "t-0", [0, 1]]]),
           (1, "invoke", "send", [["send", "t-0", 2]]), (1, "ok", "send", [["send", "t-0", [1, 2]]]),
           (0, "invoke", "poll", [["poll"]]), (0, "ok", "poll", [["poll", {"t-0": [[0, 1], [1, 2]]}]])]
    lost = ops[:4] + [(0, "invoke", "poll", [["poll"]]), (0, "ok", "poll", [["poll", {"t-0": [[1, 2]]}]])]
    state = Run().state(0, NODES).state(1, ["n1"]).events

    def hist(rows, with_states):
        out = []
        for i, (p, t, f, v) in enumerate(rows):
            if with_states and i < len(state):
                out.append(dict(state[i]))
            out.append({"process": p, "type": t, "f": f, "value": v})
        return [{**e, "index": i, "time": i} for i, e in enumerate(out)]

    for rows, valid in ((ops, True), (lost, False)):
        plain, observed = check(hist(rows, False)), check(hist(rows, True))
        assert plain["valid"] is valid and observed["valid"] is valid
        assert plain["anomaly_types"] == observed["anomaly_types"]
    reg = [(0, "invoke", "send", ["t-0", 1]), (0, "ok", "send", ["t-0", [0, 1]]),
           (1, "invoke", "read", ["t-0", 0]), (1, "ok", "read", ["t-0", [0, 1]])]
    assert check_events(hist(reg, True), "log")["valid"] is True


def test_the_pipeline_reads_cluster_state_events_as_neither_ops_nor_faults(tmp_path):
    from contracts.history import write_history
    from pipeline.extract import HistoryStats, read_history

    r = Run().state(0, NODES).add(1, "start-partition", {"grudge": {}}).state(2, ["n1"]).add(3, "stop-partition", {})
    ops = [{"process": 0, "type": "invoke", "f": "send", "value": [["send", "t-0", 1]]},
           {"process": 0, "type": "ok", "f": "send", "value": [["send", "t-0", [0, 1]]]}]
    rows = {}
    for name, evs in (("plain", r.events[1:2] + ops + r.events[3:4]), ("observed", r.events[:2] + ops + r.events[2:])):
        path = tmp_path / f"{name}.jsonl"
        write_history(path, [{k: v for k, v in e.items() if k != "index"} for e in evs])
        stats = HistoryStats()
        batches = list(read_history(str(path), name, stats))
        rows[name] = (sum(b.num_rows for b in batches), stats.ops, [f["kind"] for f in stats.faults])
    assert rows["plain"] == rows["observed"] == (1, 1, ["partition"])


def test_the_lossy_allowance_covers_only_the_partitions_over_the_bound():
    """Two replicas of t-0 lose power together (over the bound: its loss is allowed), t-1 lost
    one (within it): an anomaly in t-1 is not allowed, and the run is invalid."""
    r = Run(keys=("t-0", "t-1")).state(0, NODES)
    r.power_loss(5, "n1", "n2", files=["/t-0/00000000000000000000.log"])
    p = policy(r, nodes=3)
    assert p.name == "power-loss-unflushed" and p.picks[0].keys == ["t-0"]
    assert p.outside({"inconsistent-offsets": {"t-0": 4}}) == {}
    assert p.outside({"inconsistent-offsets": {"t-0": 4, "t-1": 1}, "lost-write": {"t-1": 2}}) == {
        "inconsistent-offsets": ["t-1"], "lost-write": ["t-1"]}
    assert p.outside({"duplicate": {"t-1": 1}}) == {}  # never allowed: the checker's verdict already says so
    assert policy(r, nodes=3, acks="1").outside({"lost-write": {"t-1": 2}}) == {}  # acks=1 covers every partition


def test_the_verdict_refuses_an_allowance_outside_its_partitions():
    r = Run(keys=("t-0", "t-1")).state(0, NODES).power_loss(5, "n1", "n2", files=["/t-0/00000000000000000000.log"])
    p = policy(r, nodes=3)
    raw = {"valid": False, "anomaly_types": ["inconsistent-offsets"],
           "anomaly_keys": {"inconsistent-offsets": {"t-1": 3}}}
    results = judge({"queue": raw}, p).write_into(dict(raw), p)
    assert results["valid"] is False and "inconsistent-offsets" not in results["allowed"]
    assert results["policy"]["outside_allowed_partitions"] == {"inconsistent-offsets": ["t-1"]}
    assert results["bad_anomaly_types"] == ["inconsistent-offsets"]
    inside = {**raw, "anomaly_keys": {"inconsistent-offsets": {"t-0": 3}}}
    assert judge({"queue": inside}, p).valid is True  # in the partition over the ELR's bound: allowed
