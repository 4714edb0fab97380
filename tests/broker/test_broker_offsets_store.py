"""The committed-offset store: persistence, torn tails, bad lines, compaction, and the
group coordinator choice."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from broker.server.offsets import Committed, OffsetStore, OffsetStoreError, coordinator_for


def test_commits_survive_a_reload_and_forgetting_a_topic(tmp_path):
    s = OffsetStore(tmp_path / "o.log")
    s.load()
    s.commit("g", {("t", 0): Committed(5, 1, "m"), ("u", 1): Committed(9, -1, None)})
    s.commit("g", {("t", 0): Committed(7, 2, None)})
    s.forget_topic("u")
    s.close()
    s2 = OffsetStore(tmp_path / "o.log")
    s2.load()
    assert s2.fetch("g") == {("t", 0): Committed(7, 2, None)}
    assert s2.fetch("other") == {}


def test_forgetting_a_group_or_some_of_its_partitions_survives_a_reload(tmp_path):
    s = OffsetStore(tmp_path / "o.log")
    s.load()
    s.commit("g", {("t", 0): Committed(5, 1, "m"), ("t", 1): Committed(6, 1, None)})
    s.commit("h", {("t", 0): Committed(1, -1, None)})
    s.forget("g", [("t", 1), ("never", 0)])  # OffsetDelete: an absent entry is no line
    assert s.fetch("g") == {("t", 0): Committed(5, 1, "m")}
    s.forget("h")  # DeleteGroups
    assert "h" not in s.groups
    s.close()
    s2 = OffsetStore(tmp_path / "o.log")
    s2.load()
    assert s2.fetch("g") == {("t", 0): Committed(5, 1, "m")} and s2.fetch("h") == {}


def test_a_torn_last_line_is_dropped_and_a_bad_middle_line_is_bad_input(tmp_path):
    p = tmp_path / "o.log"
    p.write_bytes(b'{"g":"g","t":"t","p":0,"o":3,"e":-1,"m":null}\n{"g":"g","t":"t","p":0,"o":4')
    s = OffsetStore(p)
    s.load()
    assert s.fetch("g")[("t", 0)].offset == 3
    s.close()
    p.write_bytes(b'{"g":"g","t":"t","p":0,"o":3}\nnot json\n{"g":"g","t":"t","p":0,"o":4}\n')
    with pytest.raises(OffsetStoreError, match=r"o\.log:2: bad committed-offset record"):
        OffsetStore(p).load()


def test_many_superseded_lines_are_compacted_at_startup(tmp_path):
    p = tmp_path / "o.log"
    s = OffsetStore(p)
    s.load()
    for i in range(1500):
        s.commit("g", {("t", 0): Committed(i, -1, None)})
    s.close()
    s2 = OffsetStore(p)
    s2.load()
    assert s2.fetch("g")[("t", 0)].offset == 1499
    assert len(p.read_bytes().splitlines()) == 1


@given(st.text(max_size=30), st.lists(st.integers(0, 50), min_size=1, max_size=6, unique=True))
def test_the_coordinator_is_a_registered_broker_and_ignores_order(group, brokers):
    c = coordinator_for(group, brokers)
    assert c in brokers and c == coordinator_for(group, list(reversed(brokers)))
