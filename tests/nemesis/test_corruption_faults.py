"""File corruption: the planner picks distinct bits and the right segments; on a real node
(with and without LazyFS under the data dir) `corrupt-file` changes exactly the bytes it
reports, the broker is stopped while it happens and restarted after."""

from __future__ import annotations

import hashlib
import os
import random
import sys
from pathlib import Path

import pytest

from contracts.history import HistoryWriter, read_events
from nemesis.core import FaultOp, Nemesis
from nemesis.corruption import CorruptionSpec, plan_bitflips, plan_truncation, segments, select_segments
from nemesis.lazyfs.hook import find_hook, install_power_loss
from suites.wrack.db import BrokerDB, BrokerOptions

STANDIN = str(Path(__file__).resolve().parent.parent / "clusters" / "standin_broker.py")
LAYOUT = {"t-0": 3, "t-1": 1, "other-0": 2}


def test_corruption_planner(tmp_path):
    for d, n in LAYOUT.items():
        (tmp_path / d).mkdir()
        for i in range(n):
            (tmp_path / d / f"{i * 100:020d}.log").write_bytes(b"x" * 10)
            (tmp_path / d / f"{i * 100:020d}.index").write_bytes(b"i")
    (tmp_path / "not-a-partition").mkdir()
    found = segments(str(tmp_path))
    assert sorted(found) == [("other", 0), ("t", 0), ("t", 1)]
    rng = random.Random(1)
    last = select_segments(found, CorruptionSpec(file="last"), rng)
    assert [os.path.relpath(f, tmp_path) for f in last] == [
        "other-0/00000000000000000100.log", "t-0/00000000000000000200.log", "t-1/00000000000000000000.log"]
    assert len(select_segments(found, CorruptionSpec(file="all", topic="t"), rng)) == 4
    assert len(select_segments(found, CorruptionSpec(file="all", topic="t", partition=1), rng)) == 1
    flips = plan_bitflips({"a": 3, "b": 100}, CorruptionSpec(flips=24), random.Random(2))
    assert len([f for f in flips if f[0] == "a"]) == 24 and len(set(flips)) == len(flips)
    assert plan_truncation(100, CorruptionSpec(mode="truncate", drop_bytes=30), rng) == 70
    assert plan_truncation(100, CorruptionSpec(mode="truncate", drop_fraction=1.0), rng) == 0
    with pytest.raises(ValueError, match="mode"):
        CorruptionSpec(mode="shred").validate()


def _make_segments(node, data_dir) -> dict[str, bytes]:
    rnd = random.Random(9)
    files = {}
    for d, n in LAYOUT.items():
        for i in range(n):
            p = f"{data_dir}/{d}/{i * 100:020d}.log"
            files[p] = bytes(rnd.randrange(256) for _ in range(3000 + 500 * i))
            node.write_file(p, files[p])
    node.sh(f"sync {data_dir}/*/*.log")  # coreutils sync FILE = fsync of each file
    return files


@pytest.mark.root
@pytest.mark.parametrize("lazyfs", [False, True])
def test_corrupt_file_changes_exactly_what_it_reports(make_cluster, tmp_path, lazyfs):
    c = make_cluster(1)
    db = BrokerDB(c, BrokerOptions(command=[sys.executable, STANDIN]))
    hist = HistoryWriter(tmp_path / "history.jsonl")
    nem = Nemesis(c, db, history=hist, rng=random.Random(4))
    if lazyfs:
        install_power_loss(nem)
    from nemesis.corruption import install_corruption

    install_corruption(nem)
    n1 = c.node("n1")
    try:
        db.setup(n1)
        files = _make_segments(n1, db.data_dir(n1))
        if lazyfs:
            n1.sh(f"for d in {db.data_dir(n1)} {db.data_dir(n1)}/*-*; do sync $d; done")  # fsync the dirs
        db.start(n1)
        db.wait_ready(n1)
        pid = n1.daemon_pid(db.pidfile(n1))
        ev = nem.invoke(FaultOp("corrupt-file", {"nodes": ["n1"], "mode": "bitflip", "file": "all", "flips": 7,
                                                 "seed": 123}))
        assert db.running(n1) and n1.daemon_pid(db.pidfile(n1)) != pid
        changes = ev["value"]["changes"]["n1"]
        assert len(changes) == 7 * len(files)
        if lazyfs:  # the corruption was fsynced: a power loss keeps it
            find_hook(db).lose(n1)
        for p, orig in files.items():
            now = n1.read_file(p)
            assert len(now) == len(orig)
            diff = {i for i in range(len(orig)) if now[i] != orig[i]}
            mine = [ch for ch in changes if ch["file"] == p]
            assert diff == {ch["offset"] for ch in mine}
            for ch in mine:
                assert ch["before"] == orig[ch["offset"]] and ch["after"] == now[ch["offset"]]
                assert ch["before"] ^ ch["after"] == 1 << ch["bit"]
        ev = nem.invoke(FaultOp("corrupt-file", {"nodes": ["n1"], "mode": "truncate", "file": "last", "topic": "t",
                                                 "partition": 0, "drop_bytes": 1000, "stop": "kill"}))
        (tr,) = ev["value"]["changes"]["n1"]
        p = f"{db.data_dir(n1)}/t-0/{200:020d}.log"
        before = files[p]
        flipped = bytearray(before)
        for ch in changes:
            if ch["file"] == p:
                flipped[ch["offset"]] = ch["after"]
        assert tr["file"] == p and tr["old_size"] == len(before) and tr["new_size"] == len(before) - 1000
        assert n1.read_file(p) == bytes(flipped[: tr["new_size"]])
        assert tr["removed_sha256"] == hashlib.sha256(bytes(flipped[tr["new_size"]:])).hexdigest()
        assert db.running(n1)
        hist.close()
        assert [e["f"] for e in read_events(hist.path)] == ["corrupt-file", "corrupt-file"]
    finally:
        db.teardown(n1)
