"""History module: writer survives SIGKILL, reader streams, tolerates a torn tail, pairs ops."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from contracts.errors import InputError
from contracts.history import HistoryWriter, ReadStats, fault_windows, pair_ops, read_events, read_ops


def test_writer_assigns_index_and_time(tmp_path):
    p = tmp_path / "h.jsonl"
    with HistoryWriter(p) as w:
        a = w.append({"process": 0, "type": "invoke", "f": "read", "value": None})
        b = w.append({"process": 0, "type": "ok", "f": "read", "value": 3})
    assert (a["index"], b["index"]) == (0, 1)
    assert 0 <= a["time"] <= b["time"]
    evs = list(read_events(p))
    assert [e["value"] for e in evs] == [None, 3]
    # appending to an existing history continues the indices
    with HistoryWriter(p) as w:
        c = w.append({"process": 1, "type": "invoke", "f": "read", "value": None})
    assert c["index"] == 2


def test_sigkill_leaves_readable_history(tmp_path):
    p = tmp_path / "h.jsonl"
    code = textwrap.dedent(f"""
        import os, signal, sys
        from contracts.history import HistoryWriter
        w = HistoryWriter({str(p)!r})
        for i in range(1000):
            w.append({{"process": i % 5, "type": "invoke" if i % 2 == 0 else "ok", "f": "write", "value": i}})
        print("written", flush=True)
        os.kill(os.getpid(), signal.SIGKILL)
    """)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == -signal.SIGKILL
    stats = ReadStats()
    assert len(list(read_events(p, stats))) == 1000
    assert stats.dropped == 0


def test_torn_last_line_dropped_and_counted(tmp_path):
    p = tmp_path / "h.jsonl"
    p.write_text('{"process":0,"type":"invoke","f":"read","value":null}\n'
                 '{"process":0,"type":"ok","f":"read","value":1}\n'
                 '{"process":1,"type":"inv')
    stats = ReadStats()
    evs = list(read_events(p, stats))
    assert len(evs) == 2 and stats.dropped == 1 and "line 3" in stats.dropped_reason


def test_malformed_middle_line_names_file_and_line(tmp_path):
    p = tmp_path / "h.jsonl"
    p.write_text('{"process":0,"type":"invoke","f":"read","value":null}\n'
                 'garbage\n'
                 '{"process":0,"type":"ok","f":"read","value":1}\n')
    with pytest.raises(InputError) as e:
        list(read_events(p))
    assert str(e.value).startswith(f"{p}:2: ")


@pytest.mark.parametrize("line,msg", [
    ('{"process":0,"type":"done","f":"read"}', "bad type"),
    ('{"process":"x","type":"ok","f":"read"}', "bad process"),
    ('{"process":0,"type":"ok","f":3}', "bad f"),
    ('[1,2]', "not a JSON object"),
])
def test_bad_fields(tmp_path, line, msg):
    p = tmp_path / "h.jsonl"
    p.write_text(line + "\n" + '{"process":0,"type":"invoke","f":"read"}\n')
    with pytest.raises(InputError, match=msg):
        list(read_events(p))


def test_pairing_and_indeterminate(tmp_path):
    p = tmp_path / "h.jsonl"
    evs = [
        {"process": 0, "type": "invoke", "f": "write", "value": 1},
        {"process": 1, "type": "invoke", "f": "read", "value": None},
        {"process": "nemesis", "type": "info", "f": "start-partition", "value": "halves"},
        {"process": 0, "type": "info", "f": "write", "value": 1},
        {"process": 2, "type": "invoke", "f": "write", "value": 2},
        {"process": 1, "type": "ok", "f": "read", "value": 1},
        {"process": "nemesis", "type": "info", "f": "stop-partition", "value": None},
    ]
    with HistoryWriter(p) as w:
        for e in evs:
            w.append(e)
    nem = []
    ops = list(read_ops(p, nemesis=nem.append))
    assert [(o.process, o.type) for o in ops] == [(0, "info"), (1, "ok"), (2, "info")]
    assert ops[1].value == 1 and ops[2].complete is None and ops[2].indeterminate
    assert ops[1].line == 2 and ops[1].ret_line == 6
    wins = fault_windows(nem)
    assert len(wins) == 1 and wins[0].kind == "partition" and wins[0].stop is not None


def test_ok_without_invoke_is_bad_input(tmp_path):
    p = tmp_path / "h.jsonl"
    p.write_text('{"process":0,"type":"invoke","f":"read"}\n{"process":3,"type":"ok","f":"read","value":1}\n'
                 '{"process":0,"type":"ok","f":"read","value":1}\n')
    with pytest.raises(InputError, match=r":2: ok 'read' of process 3 without an invoke"):
        list(read_ops(p))


def test_double_invoke_is_bad_input():
    evs = [{"process": 0, "type": "invoke", "f": "read", "index": 0, "time": 0},
           {"process": 0, "type": "invoke", "f": "read", "index": 1, "time": 1}]
    with pytest.raises(InputError, match="still open"):
        list(pair_ops(evs))


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 4), st.sampled_from(["ok", "fail", "info", None]),
                          st.integers(-10**6, 10**6)), max_size=40))
def test_roundtrip_property(tmp_path_factory, spec):
    """Whatever a well-formed run writes is read back unchanged and pairs completely."""
    p = tmp_path_factory.mktemp("h") / "h.jsonl"
    written = []
    next_proc = 100
    with HistoryWriter(p) as w:
        for proc, outcome, v in spec:
            written.append(w.append({"process": proc + next_proc, "type": "invoke", "f": "write", "value": v}))
            if outcome is not None:
                written.append(w.append({"process": proc + next_proc, "type": outcome, "f": "write", "value": v}))
            next_proc += 10  # a fresh process per op keeps every history well formed
    assert list(read_events(p)) == written
    ops = list(read_ops(p))
    assert len(ops) == len(spec)
    assert sum(o.complete is None for o in ops) == sum(1 for s in spec if s[1] is None)
