"""Event lines: the broker's format read back (broker/server/eventlog.py), and a run folder's
node logs put on the history's clock with node names (suites/wrack/nodelogs.py)."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from broker.server.eventlog import format_event, parse_event
from contracts.history import clock_anchor
from suites.wrack.nodelogs import read_node_events

PREFIX = "2026-11-24 07:01:05.780 INFO [node 0] wrack.broker.events: "
word = st.text("abcdefghijklmnopqrstuvwxyz0123456789-_.", min_size=1, max_size=12).filter(
    lambda s: not s.lstrip("-").isdigit() and s != "-")


@given(kind=word, ints=st.dictionaries(st.sampled_from(["epoch", "leo", "to", "from_leo", "leader"]),
                                       st.integers(-1, 2**40), max_size=4),
       text=st.dictionaries(st.sampled_from(["tp", "reason", "role", "boot_id"]), word, max_size=3),
       isr=st.lists(st.integers(0, 99), max_size=5), mono=st.integers(0, 2**62),
       wall=st.floats(1e9, 3e9, allow_nan=False))
def test_an_event_line_parses_back_to_its_fields(kind, ints, text, isr, mono, wall):
    line = PREFIX + format_event(kind, {**ints, **text, "isr": isr}, mono_ns=mono, wall=wall)
    e = parse_event(line)
    assert e["event"] == kind and e["isr"] == isr and e["mono_ns"] == mono
    assert abs(e["wall"] - wall) <= 0.0005 and e["logged"] == "2026-11-24 07:01:05.780"
    assert {k: e[k] for k in ints} == ints and {k: e[k] for k in text} == text


def test_other_lines_are_not_events():
    assert parse_event(PREFIX.replace(".events", "") + "queue0-0: leader (leader 0, epoch 1), LEO 5, HWM 5") is None


def _run(tmp_path, anchor, lines_by_node):
    (tmp_path / "test.json").write_text(json.dumps({"start": "2026-11-24T07:01:00.000+00:00",
                                                    "history_start": anchor}))
    for name, (nid, lines) in lines_by_node.items():
        d = tmp_path / "nodes" / name
        d.mkdir(parents=True)
        (d / "server.properties").write_text(f"process.roles=broker\nnode.id={nid}\n")
        (d / "broker.log").write_text("".join(PREFIX + s + "\n" for s in lines) + "a line that is no event\n")
    return json.loads((tmp_path / "test.json").read_text())


def test_node_events_on_the_history_clock_by_the_monotonic_clock_on_the_same_kernel(tmp_path):
    anchor = clock_anchor(1_000_000_000)
    assert anchor["mono_ns"] == 1_000_000_000 and anchor["boot_id"]
    boot = anchor["boot_id"]
    anchor["wall"] = 1795503660.0  # whole ms: the lines carry 3 decimals
    test = _run(tmp_path, anchor, {
        "n1": (0, [format_event("clock", {"node": 0, "boot_id": boot}, 1_500_000_000, 1.0),
                   format_event("became-leader", {"node": 0, "tp": "q-0", "epoch": 3, "from_offset": 7,
                                                  "isr": [0, 1]}, 3_000_000_000, 5.0)]),
        "n2": (1, [format_event("clock", {"node": 1, "boot_id": "another-kernel"}, 9, anchor["wall"] + 0.25),
                   format_event("partition-change", {"node": 1, "tp": "q-0", "leader": 0, "prev_leader": -1,
                                                     "isr": [1, 0], "elr": []}, 9, anchor["wall"] + 2.5)]),
    })
    ne = read_node_events(tmp_path, test)
    assert ne.nodes == {0: "n1", 1: "n2"} and ne.clock == "mixed"
    got = [(e["node"], e["event"], e["time"]) for e in ne.events]
    assert got == [("n2", "clock", 250_000_000), ("n1", "clock", 500_000_000),
                   ("n1", "became-leader", 2_000_000_000), ("n2", "partition-change", 2_500_000_000)]
    leader, change = ne.events[2], ne.events[3]
    assert leader["isr"] == ["n1", "n2"] and leader["tp"] == "q-0" and leader["epoch"] == 3
    assert change["leader"] == "n1" and change["prev_leader"] is None and change["isr"] == ["n2", "n1"]


def test_a_run_without_an_anchor_maps_by_the_wall_clock_from_its_start_and_setup(tmp_path):
    test = _run(tmp_path, None, {"n1": (0, [format_event("clock", {"node": 0, "boot_id": "x"}, 1, 1795503662.5)])})
    test.pop("history_start")
    test["timings"] = {"setup": 2.0}
    ne = read_node_events(tmp_path, test)
    assert ne.clock == "wall (approximate)" and ne.events[0]["time"] == 500_000_000


def test_no_nodes_folder_no_events(tmp_path):
    ne = read_node_events(tmp_path, {})
    assert ne.events == [] and ne.clock == "none"
