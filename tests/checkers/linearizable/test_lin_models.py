"""Models, history encodings and `check_events` on hand-made histories with known verdicts."""

from __future__ import annotations

import pytest

from checkers.linearizable import MODELS, Model, analyse, check_events, get_model
from checkers.linearizable.models import EMPTY_LOG, NIL, LogState
from contracts.errors import InputError


def H(*ops):
    """Events from (process, f, invoke value, completion type, completion value, start, end) tuples;
    end None = never completed (indeterminate)."""
    evs = []
    for i, (p, f, iv, typ, ov, start, end) in enumerate(ops):
        evs.append({"process": p, "type": "invoke", "f": f, "value": iv, "time": start, "index": 2 * i})
        if end is not None:
            evs.append({"process": p, "type": typ, "f": f, "value": ov, "time": end, "index": 2 * i + 1})
    return sorted(evs, key=lambda e: (e["time"], e["index"]))


def valid(events, model, **kw):
    return check_events(events, model, **kw)["valid"]


def test_models_are_registered():
    assert set(MODELS) == {"register", "cas-register", "kv", "log"}
    assert all(isinstance(m, Model) for m in MODELS.values())
    with pytest.raises(ValueError, match="unknown model"):
        get_model("nope")
    with pytest.raises(InputError, match="unknown model"):
        check_events([], "nope")


def test_empty_history_is_valid():
    assert check_events([], "cas-register") == {
        "valid": True, "checker": "linearizable", "model": "cas-register", "ops": 0, "partitions": 0,
        "configs": 0, "anomaly_types": [], "anomalies": {}}


def test_register_basics():
    w1 = (0, "write", 1, "ok", 1, 0, 2)
    assert valid(H(w1, (1, "read", None, "ok", 1, 3, 4)), "register") is True
    assert valid(H(w1, (1, "read", None, "ok", None, 3, 4)), "register") is False  # nil after a write
    assert valid(H((1, "read", None, "ok", None, 0, 1)), "register") is True  # the initial nil
    assert valid(H(w1, (1, "read", None, "ok", None, 1, 4)), "register") is True  # concurrent: before it
    # a read that touches the write's completion instant is concurrent with it (closed intervals)
    assert valid(H(w1, (1, "read", None, "ok", None, 2, 4)), "register") is True


def test_cas_failed_cas_is_an_observation():
    w1 = (0, "write", 1, "ok", 1, 0, 1)
    assert valid(H(w1, (1, "cas", [1, 2], "fail", [1, 2], 2, 3)), "cas-register") is False
    assert valid(H(w1, (1, "cas", [3, 2], "fail", [3, 2], 2, 3)), "cas-register") is True
    # with an error the failed cas only says "did not happen"
    evs = H(w1, (1, "cas", [1, 2], "fail", [1, 2], 2, 3))
    evs[-1]["error"] = "not-leader"
    assert valid(evs, "cas-register") is True
    # failed reads and writes constrain nothing
    assert valid(H(w1, (1, "write", 5, "fail", 5, 2, 3), (2, "read", None, "fail", None, 4, 5),
                   (2, "read", None, "ok", 1, 6, 7)), "cas-register") is True


def test_indeterminate_ops_may_happen_late_or_never():
    w1 = (0, "write", 1, "ok", 1, 0, 1)
    crashed = (1, "write", 2, "info", 2, 2, 3)
    r = lambda v, s, e: (2, "read", None, "ok", v, s, e)  # noqa: E731
    assert valid(H(w1, crashed, r(1, 10, 11)), "register") is True  # never happened
    assert valid(H(w1, crashed, r(2, 10, 11)), "register") is True  # happened
    assert valid(H(w1, crashed, r(1, 10, 11), r(2, 12, 13)), "register") is True  # happened late
    assert valid(H(w1, crashed, r(2, 10, 11), r(1, 12, 13)), "register") is False  # no going back
    # never completed = indeterminate, even in the middle of a history
    pending = (1, "cas", [1, 3], None, None, 2, None)
    assert valid(H(w1, pending, r(3, 10, 11)), "cas-register") is True
    assert valid(H(w1, pending, r(4, 10, 11)), "cas-register") is False
    # but not before it was invoked
    late = (1, "write", 2, "info", 2, 20, 21)
    assert valid(H(w1, late, r(2, 10, 11)), "register") is False


def test_keyed_registers_partition_by_key():
    evs = H((0, "write", ["x", 1], "ok", ["x", 1], 0, 1), (1, "write", ["y", 2], "ok", ["y", 2], 0, 1),
            (2, "read", ["x", None], "ok", ["x", 1], 2, 3), (2, "read", ["y", None], "ok", ["y", 2], 4, 5),
            (3, "cas", ["x", [1, 5]], "ok", ["x", [1, 5]], 6, 7))
    r = check_events(evs, "cas-register")
    assert r["valid"] is True and r["partitions"] == 2
    assert check_events(evs, "cas-register", partition=False)["partitions"] == 1
    bad = evs + H((4, "read", ["y", None], "ok", ["y", 1], 8, 9))
    r = check_events(bad, "cas-register")
    assert r["valid"] is False
    assert [c["key"] for c in r["anomalies"]["nonlinearizable"]] == ["y"]
    r = check_events(bad, "cas-register", partition=False)
    assert r["valid"] is False and r["anomalies"]["nonlinearizable"][0]["state"] == "2"


def test_kv_semantics():
    a = (0, "append", ["k", "a"], "ok", ["k", "a"], 0, 1)
    b = (1, "append", ["k", "b"], "ok", ["k", "b"], 2, 3)
    g = lambda v, s=4, e=5: (2, "get", ["k", None], "ok", ["k", v], s, e)  # noqa: E731
    assert valid(H(a, b, g("ab")), "kv") is True
    assert valid(H(a, b, g("ba")), "kv") is False
    assert valid(H(g(None, 0, 1)), "kv") is True  # a missing key reads as ""
    assert valid(H(a, (1, "put", ["k", "z"], "ok", ["k", "z"], 2, 3), g("z")), "kv") is True
    assert valid(H(a, (1, "put", ["k", "z"], "info", None, 2, 3), g("a"), g("za", 6, 7)), "kv") is False
    assert valid(H(a, (1, "put", ["k", "z"], "info", None, 2, 3), g("a"), g("z", 6, 7)), "kv") is True


def test_log_semantics():
    s = lambda p, v, o, t0, t1, typ="ok": (p, "send", ["t", v], typ, ["t", [o, v]], t0, t1)  # noqa: E731
    rd = lambda o, v, t0, t1: (9, "read", ["t", o], "ok", ["t", [o, v]], t0, t1)  # noqa: E731
    assert valid(H(s(0, 10, 0, 0, 1), s(1, 11, 1, 2, 3), rd(0, 10, 4, 5), rd(2, None, 6, 7)), "log") is True
    assert valid(H(s(0, 10, 1, 0, 1)), "log") is False  # offset 1 of an empty log
    assert valid(H(s(0, 10, 0, 0, 5), s(1, 11, 1, 0, 5)), "log") is True
    assert valid(H(s(0, 10, 0, 0, 1), rd(0, 11, 2, 3)), "log") is False
    assert valid(H(s(0, 10, 0, 0, 1), rd(0, None, 2, 3)), "log") is False  # written offsets stay written
    # an indeterminate send may land at any offset, or nowhere
    evs = H((0, "send", ["t", 10], "info", None, 0, 1), s(1, 11, 0, 2, 3), rd(1, 10, 4, 5))
    assert valid(evs, "log") is True
    evs = H((0, "send", ["t", 10], "info", None, 0, 1), s(1, 11, 0, 2, 3), rd(1, None, 4, 5))
    assert valid(evs, "log") is True
    # unkeyed forms
    evs = [{"process": 0, "type": "invoke", "f": "send", "value": 5},
           {"process": 0, "type": "ok", "f": "send", "value": [0, 5]},
           {"process": 0, "type": "invoke", "f": "read", "value": 0},
           {"process": 0, "type": "ok", "f": "read", "value": [0, 5]}]
    assert valid(evs, "log") is True


def test_log_state_is_persistent():
    m = MODELS["log"]
    s1 = m.step(EMPTY_LOG, ("send", 0, "a"))
    s2 = m.step(s1, ("send", 1, "b"))
    assert s2.values() == ["a", "b"] and s2.at(0) == "a" and s2.at(1) == "b"
    assert m.step(s1, ("send", 1, "b")) == s2 and hash(m.step(s1, ("send", 1, "b"))) == hash(s2)
    assert m.step(s2, ("send", 1, "c")) is None
    assert m.describe_state(s2) == "['a' 'b']"
    assert isinstance(s2, LogState) and repr(s2) == "LogState(['a', 'b'])"


@pytest.mark.parametrize("model, inv, out, msg", [
    ("cas-register", [1], [1], "not a pair"),
    ("register", {"x": 1}, 1, "not a scalar"),
    ("kv", "k", "k", "not a pair"),
    ("kv", ["k", 5], ["k", 5], "not a string"),
    ("log", ["t", -1], ["t", [-1, 5]], "not an offset"),
])
def test_unparseable_values_are_input_errors(model, inv, out, msg):
    f = {"cas-register": "cas", "register": "write", "kv": "put", "log": "read"}[model]
    evs = [{"process": 0, "type": "invoke", "f": f, "value": inv},
           {"process": 0, "type": "ok", "f": f, "value": out}]
    with pytest.raises(InputError, match=msg) as e:
        check_events(evs, model)
    assert e.value.line == 2


def test_ok_without_invoke_is_an_input_error():
    with pytest.raises(InputError, match="without an invoke"):
        check_events([{"process": 0, "type": "ok", "f": "read", "value": 1}], "register")


def test_nemesis_events_are_ignored():
    evs = H((0, "write", 1, "ok", 1, 0, 3))
    evs.insert(1, {"process": "nemesis", "type": "info", "f": "start-partition", "value": {}, "time": 1})
    assert valid(evs, "register") is True


def test_configuration_cap_gives_unknown(shared):
    from contracts.formats import read_history

    path = shared / "data" / "porcupine" / "kv" / "c10-bad.txt"
    a = analyse(read_history(path), "kv", partition=False, max_configs=1000, with_lines=True)
    assert a.valid == "unknown" and "memory cap" in a.reason
    assert a.result()["undecided"] == [None]


def test_first_failing_partition_stops_the_rest():
    evs = []
    t = 0
    for k in range(50):  # 50 valid keys, then one invalid one
        evs += [{"process": 0, "type": "invoke", "f": "write", "value": [f"k{k}", 1], "time": t},
                {"process": 0, "type": "ok", "f": "write", "value": [f"k{k}", 1], "time": t + 1}]
        t += 2
    evs += [{"process": 1, "type": "invoke", "f": "read", "value": ["bad", None], "time": t},
            {"process": 1, "type": "ok", "f": "read", "value": ["bad", 7], "time": t + 1}]
    a = analyse(evs, "register")
    assert a.valid is False and len(a.partitions) == 51
    assert [p.key for p in a.partitions if p.valid is False] == ["bad"]


def test_nil_is_a_singleton_state():
    import pickle

    assert pickle.loads(pickle.dumps(NIL)) is NIL and repr(NIL) == "nil"
