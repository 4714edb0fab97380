"""checkers.liveness on hand-built histories: recovery after the final heal (a write and a
read per key within the bound, else `no-recovery`), availability in and outside fault
windows, and the time to the first acknowledged send after each fault and heal."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from checkers import liveness

S = 1_000_000_000
KEYS = ["q-0", "q-1"]


class H:
    """A history under construction: ops complete at the time given, one process each."""

    def __init__(self) -> None:
        self.events: list[dict] = []
        self.p = 0

    def op(self, t: float, f: str, value, typ: str = "ok", **extra) -> None:
        self.p += 1
        self.events.append({"process": self.p, "type": "invoke", "f": f, "value": value, "time": int(t * S) - 1})
        self.events.append({"process": self.p, "type": typ, "f": f, "value": value, "time": int(t * S), **extra})

    def send(self, t: float, key: str, offset: int | None, typ: str = "ok") -> None:
        v = [["send", key, [offset, 100 + offset]]] if typ == "ok" else [["send", key, 7]]
        self.op(t, "send", v, typ, **({} if typ == "ok" else {"error": "NOT_ENOUGH_REPLICAS"}))

    def poll(self, t: float, got: dict) -> None:
        self.op(t, "poll", [["poll", {k: [[o, 100 + o] for o in offs] for k, offs in got.items()}]])

    def nemesis(self, t: float, f: str, value=None) -> None:
        self.events.append({"process": "nemesis", "type": "info", "f": f, "value": value, "time": int(t * S)})


def test_every_key_written_and_read_after_the_heal_is_valid():
    h = H()
    h.send(1, "q-0", 0)
    h.nemesis(2, "final-heal", {"healed": True})
    h.send(3, "q-0", 1)
    h.send(3.5, "q-1", 0)
    h.poll(4, {"q-0": [0, 1], "q-1": [0]})
    r = liveness.check(h.events, keys=KEYS, bound_s=30)
    assert r["valid"] is True and r["checked"] and r["recovered_keys"] == KEYS and r["anomaly_types"] == []


def test_a_key_without_a_write_or_a_read_after_the_heal_did_not_recover():
    h = H()
    h.nemesis(2, "final-heal")
    h.send(3, "q-0", 5)
    h.send(3, "q-1", None, "fail")
    h.send(4, "q-1", None, "fail")
    h.poll(5, {"q-0": [4]})  # not the record the probe wrote at 5
    r = liveness.check(h.events, keys=KEYS, bound_s=30)
    assert r["valid"] is False and r["anomaly_types"] == ["no-recovery"]
    by_key = {a["key"]: a for a in r["anomalies"]["no-recovery"]}
    assert set(by_key) == {"q-0", "q-1"}
    assert by_key["q-1"]["sends_tried"] == 2 and by_key["q-1"]["errors"] == {"NOT_ENOUGH_REPLICAS": 2}
    assert "no send to q-1 succeeded" in by_key["q-1"]["explanation"]
    assert "offset 5" in by_key["q-0"]["explanation"] and by_key["q-0"]["write_offset"] == 5


def test_recovery_later_than_the_bound_is_no_recovery():
    h = H()
    h.nemesis(2, "final-heal")
    h.send(40, "q-0", 0)
    h.poll(41, {"q-0": [0]})
    r = liveness.check(h.events, keys=["q-0"], bound_s=30)
    assert r["valid"] is False and "took 38.0 s" in r["anomalies"]["no-recovery"][0]["explanation"]
    assert liveness.check(h.events, keys=["q-0"], bound_s=40)["valid"] is True


def test_without_a_final_heal_liveness_is_not_judged():
    h = H()
    h.send(1, "q-0", 0)
    r = liveness.check(h.events, keys=KEYS)
    assert r["valid"] == "unknown" and r["checked"] is False and r["anomaly_types"] == []


def test_availability_in_and_outside_windows_and_recovery_times():
    h = H()
    h.send(1, "q-0", 0)
    h.nemesis(2, "kill", {"nodes": ["n1"]})
    h.send(3, "q-0", None, "fail")
    h.send(4, "q-0", None, "fail")
    h.send(5, "q-0", 1)
    h.nemesis(6, "start", {"nodes": ["n1"]})
    h.send(6.5, "q-0", 2)
    h.nemesis(7, "power-loss", {"nodes": ["n2"]})
    h.send(9, "q-0", 3)
    h.nemesis(10, "final-heal")
    h.send(11, "q-0", 4)
    h.poll(11.5, {"q-0": [4]})
    r = liveness.check(h.events, keys=["q-0"])
    av = r["availability"]
    assert av["in_faults"]["sends"] == {"ok": 1, "completed": 3, "share": 0.3333}
    # the main phase only (up to the final heal): the final phase is what recovery judges
    assert av["outside_faults"]["sends"] == {"ok": 3, "completed": 3, "share": 1.0}
    assert av["after_heals"]["sends"]["completed"] == 2  # 6.5 and 9, after the kill's heal
    assert [(x["fault"], x["seconds"]) for x in r["first_ok_send_after_fault"]] == [("kill", 3.0), ("power-loss", 2.0)]
    assert [x["seconds"] for x in r["first_ok_send_after_heal"]] == [0.5, 1.0]
    assert av["windows"] == [{"kind": "kill", "start": 2.0, "stop": 6.0, "sends": {"ok": 1, "completed": 3, "share": 0.3333}}]


@given(st.lists(st.tuples(st.sampled_from(KEYS), st.floats(0.1, 50), st.booleans()), min_size=0, max_size=12),
       st.floats(1, 40))
@settings(max_examples=200, deadline=None)
def test_a_key_recovers_iff_it_has_an_ok_write_read_back_within_the_bound(writes, bound):
    h = H()
    h.nemesis(0, "final-heal")
    for i, (k, t, read) in enumerate(writes):
        h.send(t, k, i)
        if read:
            h.poll(t + 0.5, {k: [i]})
    h.events.sort(key=lambda e: e["time"])
    firsts: dict[str, tuple[float, bool]] = {}  # the first ok send of each key, and whether it is read
    # in history order: by time in whole nanoseconds, ties in the order appended (a stable sort)
    for k, t, read in sorted(writes, key=lambda x: int(x[1] * S)):
        firsts.setdefault(k, (t, read))
    r = liveness.check(h.events, keys=KEYS, bound_s=bound)
    want = {k for k, (t, read) in firsts.items() if read and int((t + 0.5) * S) <= bound * S}
    assert set(r["recovered_keys"]) == want
    assert r["valid"] is (want == set(KEYS))
