"""contracts.pairing: one invoke/completion pairing, the same ops in every reader of a history.

Random interleavings of processes (each invoke followed by zero or one completion, a
process over after `info`, nemesis events between) pair exactly as a reference written
here from docs/ARCHITECTURE.md's rules; the readers built on the pairing (stats' op table, the queue
checker's pass, the timeline, the pipeline's ops rows) see the same ops; a completion of
another `f`, a second invoke, a completion without invoke and an invoke after `info` are
bad input naming the line.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from checkers.queue import analyze
from checkers.stats import op_table
from checkers.timeline import timeline_data
from contracts.errors import InputError
from contracts.history import HistoryWriter, read_ops
from contracts.pairing import Op, Pairing, pair_ops
from pipeline.extract import HistoryStats, read_history

FS = ("read", "write", "cas")


@st.composite
def histories(draw, max_procs: int = 6, max_ops: int = 6) -> list[dict]:
    """A well-formed history: per process a run of ops, each an invoke and zero or one
    completion (only a process's last op may stay open or end `info`), interleaved at random
    with nemesis events; `index` is the position, `time` grows."""
    runs: list[list[dict]] = []
    for p in range(draw(st.integers(0, max_procs))):
        n = draw(st.integers(0, max_ops))
        evs: list[dict] = []
        for i in range(n):
            f = draw(st.sampled_from(FS))
            last = i == n - 1
            outcome = draw(st.sampled_from(["ok", "fail", "info", None] if last else ["ok", "fail"]))
            evs.append({"process": p, "type": "invoke", "f": f, "value": i})
            if outcome is not None:
                evs.append({"process": p, "type": outcome, "f": f, "value": i})
        runs.append(evs)
    runs.append([{"process": "nemesis", "type": "info", "f": draw(st.sampled_from(["start-partition",
                                                                                    "stop-partition"])),
                  "value": None} for _ in range(draw(st.integers(0, 3)))])
    out: list[dict] = []
    heads = [0] * len(runs)
    while True:
        live = [r for r in range(len(runs)) if heads[r] < len(runs[r])]
        if not live:
            break
        r = draw(st.sampled_from(live))
        out.append(dict(runs[r][heads[r]]))
        heads[r] += 1
    for i, ev in enumerate(out):
        ev["index"] = i
        ev["time"] = 1000 * i
    return out


def reference(events: list[dict]) -> list[tuple[int, int | None]]:
    """(invoke position, completion position or None): completed ops in completion order,
    then the never-completed ones in invoke order. Assumes a well-formed history."""
    pending: dict[int, int] = {}
    done: list[tuple[int, int | None]] = []
    for i, ev in enumerate(events):
        if ev["process"] == "nemesis":
            continue
        if ev["type"] == "invoke":
            pending[ev["process"]] = i
        else:
            done.append((pending.pop(ev["process"]), i))
    return done + [(i, None) for i in sorted(pending.values())]


def _pairs(ops: list[Op]) -> list[tuple[int, int | None]]:
    return [(o.index, o.ret_index) for o in ops]


@settings(max_examples=200, deadline=None)
@given(histories())
def test_pairs_equal_the_reference(events):
    nem: list[dict] = []
    ops = list(pair_ops(events, nemesis=nem.append))
    ref = reference(events)
    assert _pairs(ops) == ref
    assert nem == [e for e in events if e["process"] == "nemesis"]
    for o, (i, j) in zip(ops, ref, strict=True):
        assert o.f == events[i]["f"] and o.process == events[i]["process"]
        assert o.type == (events[j]["type"] if j is not None else "info")
        assert o.line == i + 1 and o.ret_line == (j + 1 if j is not None else 0)


@settings(max_examples=100, deadline=None)
@given(histories())
def test_readers_see_the_same_ops(events):
    """Stats' op table, the queue pass's op table and the timeline agree with the reference."""
    ref = reference(events)
    code = {"ok": 0, "info": 1, "fail": 2}
    want = sorted((events[i]["process"], events[i]["f"], code[events[j]["type"]] if j is not None else 1,
                   events[i]["time"], events[j]["time"] if j is not None else None) for i, j in ref)

    def rows(tab) -> list[tuple]:
        c = tab.columns()
        return sorted((int(c["process"][k]), tab.f_names[int(c["f"][k])], int(c["type"][k]), int(c["t0"][k]),
                       int(c["t1"][k]) if c["done"][k] else None) for k in range(len(tab)))

    assert rows(op_table(events)[0]) == want
    assert rows(analyze(events).table) == want
    tl = timeline_data(events)
    rows_i = []
    at = 0
    for d in tl["i"]:
        at += d
        rows_i.append(at)
    got = sorted((row, row + d if d >= 0 else None) for row, d in zip(rows_i, tl["d"], strict=True))
    assert got == sorted(ref)
    assert tl["y"] == [code[events[j]["type"]] if j is not None else 3 for _, j in sorted(ref)]


@settings(max_examples=40, deadline=None)
@given(histories(max_procs=4, max_ops=4))
def test_pipeline_rows_are_the_same_ops(tmp_path_factory, events):
    p = tmp_path_factory.mktemp("h") / "history.jsonl"
    with HistoryWriter(p) as w:
        for ev in events:
            w.append(dict(ev))
    stats = HistoryStats()
    rows = [r for b in read_history(str(p), "r", stats) for r in b.to_pylist()]
    assert stats.damage is None
    assert sorted((r["index"], r["ret_index"]) for r in rows) == sorted(reference(events))


def _mismatched(events: list[dict]) -> tuple[list[dict], int] | None:
    """The history with its first completion's f changed, and that completion's position."""
    for j, ev in enumerate(events):
        if ev["process"] != "nemesis" and ev["type"] != "invoke":
            bad = [dict(e) for e in events]
            bad[j]["f"] = "other"
            return bad, j
    return None


@settings(max_examples=100, deadline=None)
@given(histories())
def test_mismatched_f_is_bad_input_naming_the_line(events):
    m = _mismatched(events)
    if m is None:
        return
    bad, j = m
    msg = "completes an invoke of"
    with pytest.raises(InputError, match=msg) as e:
        list(pair_ops(bad, "h.jsonl"))
    assert e.value.line == j + 1 and str(e.value).startswith(f"h.jsonl:{j + 1}: ")
    for run in (lambda: op_table(bad, "h.jsonl"), lambda: analyze(bad, path="h.jsonl", line_of=lambda i: i + 1),
                lambda: timeline_data(bad, path="h.jsonl")):
        with pytest.raises(InputError, match=msg) as e:
            run()
        assert e.value.line == j + 1


def test_pipeline_reports_a_mismatched_f_as_damage(tmp_path):
    p = tmp_path / "history.jsonl"
    with HistoryWriter(p) as w:
        w.append({"process": 0, "type": "invoke", "f": "send", "value": [["send", "k", 1]]})
        w.append({"process": 0, "type": "ok", "f": "poll", "value": [["poll", {}]]})
    stats = HistoryStats()
    list(read_history(str(p), "r", stats))
    assert stats.damage is not None and "history.jsonl:2: damaged line: ok 'poll' of process 0 completes " \
        "an invoke of 'send' (line 1)" in stats.damage


@pytest.mark.parametrize("lines,line,msg", [
    (['{"process":0,"type":"invoke","f":"read"}', '{"process":0,"type":"invoke","f":"read"}'], 2,
     "process 0 invokes 'read' while its op from line 1 is still open"),
    (['{"process":0,"type":"invoke","f":"read"}', '{"process":1,"type":"ok","f":"read"}'], 2,
     "ok 'read' of process 1 without an invoke"),
    (['{"process":0,"type":"invoke","f":"read"}', '{"process":0,"type":"info","f":"read"}',
      '{"process":0,"type":"invoke","f":"read"}'], 3,
     "process 0 invokes 'read' after its op completed info at line 2"),
    (['{"process":0,"type":"invoke","f":"write"}', '{"process":0,"type":"ok","f":"read"}'], 2,
     "ok 'read' of process 0 completes an invoke of 'write' (line 1)"),
])
def test_bad_pairs_name_file_and_line(tmp_path, lines, line, msg):
    p = tmp_path / "h.jsonl"
    p.write_text("\n".join(lines) + "\n")
    with pytest.raises(InputError) as e:
        list(read_ops(p))
    assert str(e.value) == f"{p}:{line}: {msg}" or str(e.value).startswith(f"{p}:{line}: {msg} ")


def test_state_machine_by_hand():
    pr = Pairing("h", lambda pos: pos * 10)
    a = {"process": 3, "type": "invoke", "f": "read"}
    pr.invoke(a, 0)
    assert pr.feed({"process": 3, "type": "fail", "f": "read"}, 1) == (a, 0)
    pr.feed({"process": 3, "type": "invoke", "f": "write"}, 2)
    b = {"process": 4, "type": "invoke", "f": "read"}
    pr.feed(b, 3)
    assert [pos for _, pos in pr.never_completed()] == [2, 3] and not pr.open
    with pytest.raises(InputError) as e:
        pr.invoke({"process": "x", "type": "invoke", "f": "read"}, 5)
    assert (e.value.path, e.value.line) == ("h", 50) and "bad process" in e.value.message
    with pytest.raises(InputError, match="bad type 'done'"):
        pr.feed({"process": 9, "type": "done", "f": "read"}, 6)
