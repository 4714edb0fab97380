"""Generator combinators on the virtual-clock executor (`simulate`), the threaded executor
(`harness.interpreter.run`), and the one op loop both run (contracts/generator/loop.py)."""

from __future__ import annotations

import random
import threading
import time
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from contracts import generator as g
from contracts.generator import NS, OpLoop, VirtualExecutor, simulate
from harness.interpreter import GeneratorStuck, run


def invokes(h):
    return [e for e in h if e["type"] == "invoke"]


def test_limit_and_repeat_counts():
    h = simulate(g.limit(7, g.repeat({"f": "x"})), 3)
    assert len(invokes(h)) == 7
    assert all(e["type"] in ("invoke", "ok") for e in h)


@given(n=st.integers(0, 60), threads=st.integers(1, 6), seed=st.integers(0, 2**16))
@settings(max_examples=60, deadline=None)
def test_limit_is_exact_and_each_process_has_one_op_open(n, threads, seed):
    h = simulate(g.limit(n, g.repeat({"f": "x"})), threads, seed=seed)
    assert len(invokes(h)) == n
    open_: set = set()
    for e in h:
        if e["type"] == "invoke":
            assert e["process"] not in open_
            open_.add(e["process"])
        else:
            open_.remove(e["process"])
    assert not open_


def test_time_limit_stops_ops_at_the_deadline():
    h = simulate(g.time_limit(1.0, g.stagger(0.01, g.repeat({"f": "x"}))), 4)
    ts = [e["time"] for e in invokes(h)]
    assert ts and max(ts) < 1 * NS
    assert 50 < len(ts) < 200  # about 100 ops in 1 s at 1 op / 10 ms


@given(dt=st.floats(0.001, 0.1), seed=st.integers(0, 2**16))
@settings(max_examples=30, deadline=None)
def test_stagger_mean_rate(dt, seed):
    h = simulate(g.limit(400, g.stagger(dt, g.repeat({"f": "x"}))), 8, seed=seed, latency=dt / 10)
    ts = [e["time"] for e in invokes(h)]
    gaps = [b - a for a, b in zip(ts, ts[1:], strict=False)]
    assert all(x >= 0 for x in gaps)
    mean = sum(gaps) / len(gaps) / NS
    assert 0.75 * dt < mean < 1.25 * dt
    assert max(gaps) <= 2 * dt * NS + 1


def test_delay_is_regular():
    h = simulate(g.limit(10, g.delay(0.5, g.repeat({"f": "x"}))), 2)
    ts = [e["time"] for e in invokes(h)]
    assert [b - a for a, b in zip(ts, ts[1:], strict=False)] == [NS // 2] * 9


@given(seed=st.integers(0, 2**16), every=st.floats(1.0, 3.0), frac=st.floats(0.2, 0.8), rate=st.floats(2.0, 20.0))
@settings(max_examples=15, deadline=None)
def test_lulls_slow_the_load_to_their_rate_and_leave_the_rest(seed, every, frac, rate):
    seconds = every * frac
    lulled = g.lulls(every, seconds, rate, g.stagger(0.005, g.repeat({"f": "x"})))
    h = simulate(g.time_limit(3 * every, lulled), 4, seed=seed, latency=0.001)
    ts = [e["time"] for e in invokes(h)]
    inside = [t for t in ts if lulled.lull_at(t)]
    span, first = 3 * every * NS, lulled.first
    assert first is not None and 0 <= first <= (every - seconds) * NS
    lull_s = sum(max(0, min(seconds * NS, span - (first + k * every * NS))) for k in range(3)) / NS
    # in the lulls at most their rate (random gaps of mean 1/rate; one op may start each)
    assert len(inside) <= 2 * rate * lull_s + 3
    # outside them the stagger's pace (about 200 ops/s)
    assert len(ts) - len(inside) >= 0.6 * 200 * (3 * every - lull_s) - 20


def test_lulls_reject_impossible_shapes():
    for every, seconds, rate in ((0, 1, 1), (5, 5, 1), (5, 0, 1), (5, 1, 0)):
        with pytest.raises(ValueError):
            g.lulls(every, seconds, rate, g.repeat({"f": "x"}))


def test_rate_rejects_nonpositive():
    with pytest.raises(ValueError):
        g.rate(0, g.repeat({"f": "x"}))


@given(seed=st.integers(0, 2**16), weights=st.lists(st.integers(1, 1), min_size=2, max_size=4))
@settings(max_examples=30, deadline=None)
def test_mix_draws_from_every_child(seed, weights):
    gens = [g.repeat({"f": f"f{i}"}) for i in range(len(weights))]
    h = simulate(g.limit(400, g.mix(*gens)), 4, seed=seed)
    c = Counter(e["f"] for e in invokes(h))
    assert set(c) == {f"f{i}" for i in range(len(weights))}
    assert min(c.values()) > 400 / len(weights) / 2


def test_mix_drops_exhausted_children():
    h = simulate(g.mix(g.limit(3, g.repeat({"f": "a"})), g.limit(5, g.repeat({"f": "b"}))), 2)
    assert Counter(e["f"] for e in invokes(h)) == {"a": 3, "b": 5}


def test_phases_wait_for_every_thread():
    gen = g.phases(g.limit(10, g.repeat({"f": "a"})), g.limit(10, g.repeat({"f": "b"})))
    h = simulate(gen, 4, latency=0.01)
    last_a_done = max(e["time"] for e in h if e["f"] == "a" and e["type"] == "ok")
    first_b = min(e["time"] for e in invokes(h) if e["f"] == "b")
    assert first_b >= last_a_done
    assert Counter(e["f"] for e in invokes(h)) == {"a": 10, "b": 10}


def test_concat_has_no_barrier():
    gen = g.concat(g.limit(4, g.repeat({"f": "a"})), g.limit(4, g.repeat({"f": "b"})))
    h = simulate(gen, 8, latency=1.0)
    # with 8 idle threads the b ops start before any a op completes
    first_ok = min(e["time"] for e in h if e["type"] == "ok")
    assert all(e["time"] < first_ok for e in invokes(h))


def test_each_thread_runs_a_copy_per_thread():
    h = simulate(g.each_thread([{"f": "a"}, {"f": "b"}]), 3)
    per = Counter((e["process"], e["f"]) for e in invokes(h))
    assert per == {(p, f): 1 for p in range(3) for f in "ab"}


def test_each_process_restarts_after_a_crash():
    # the first op of process 0 crashes; thread 0 continues as process 2 with a fresh copy
    def complete(op):
        return "info" if op["process"] == 0 and op["f"] == "a" else "ok"

    h = simulate(g.each_process([{"f": "a"}, {"f": "b"}]), 2, complete=complete)
    per = Counter((e["process"], e["f"]) for e in invokes(h))
    assert per[(0, "a")] == 1 and per[(0, "b")] == 0
    assert per[(2, "a")] == 1 and per[(2, "b")] == 1
    assert per[(1, "a")] == 1 and per[(1, "b")] == 1


def test_until_ok_retries_until_success():
    outcomes = iter(["fail", "info", "fail", "ok", "ok"])
    h = simulate(g.until_ok(g.repeat({"f": "try"})), 1, complete=lambda op: next(outcomes))
    assert [e["type"] for e in h if e["type"] != "invoke"] == ["fail", "info", "fail", "ok"]
    assert [e["process"] for e in invokes(h)] == [0, 0, 1, 1]  # a new process after the info


def test_cycle_repeats_a_finite_generator():
    h = simulate(g.cycle([{"f": "a"}, {"f": "b"}], times=3), 1)
    assert [e["f"] for e in invokes(h)] == ["a", "b"] * 3


def test_cycle_of_an_empty_generator_ends():
    assert simulate(g.cycle(g.limit(0, g.repeat({"f": "a"}))), 2) == []


def test_flip_flop_alternates():
    h = simulate(g.limit(6, g.flip_flop(g.repeat({"f": "start"}), g.repeat({"f": "stop"}))), 1)
    assert [e["f"] for e in invokes(h)] == ["start", "stop"] * 3


def test_sleep_inside_phases():
    h = simulate(g.phases({"f": "a"}, g.sleep(2.0), {"f": "b"}), 1)
    t_a, t_b = (e["time"] for e in invokes(h))
    assert t_b - t_a >= 2 * NS


def test_fn_generator_and_lifting():
    n = iter(range(3))

    def f(ctx):
        i = next(n, None)
        return None if i is None else {"f": "w", "value": i}

    h = simulate(g.lift(f), 2)
    assert sorted(e["value"] for e in invokes(h)) == [0, 1, 2]
    with pytest.raises(TypeError):
        g.lift(42)


def test_any_of_takes_the_soonest_and_routes_nemesis():
    gen = g.any_of(g.clients(g.limit(5, g.repeat({"f": "c"}))),
                   g.nemesis(g.limit(2, g.delay(1.0, g.repeat({"f": "n"})))))
    rng = random.Random(1)
    ctx = g.Context(0, rng, {0: 0, "nemesis": "nemesis"}, frozenset({0, "nemesis"}))
    first = gen.op(ctx)
    second = gen.op(g.Context(0, rng, ctx.workers, frozenset(ctx.free - {ctx.thread_of(first["process"])})))
    assert {first["process"], second["process"]} == {0, "nemesis"}
    assert isinstance(gen.op(g.Context(0, rng, ctx.workers, frozenset())), g.Pending)  # both busy
    h = simulate(gen, 1)
    assert Counter(e["f"] for e in invokes(h)) == {"c": 4}  # 1 c drawn above; the nemesis ops are its own


def test_map_filter_and_on_update():
    seen = []
    gen = g.on_update(seen.append,
                      g.map_ops(lambda o: {**o, "value": 1},
                                g.filter_ops(lambda o: o["f"] != "skip",
                                             g.limit(6, g.mix(g.repeat({"f": "a"}), g.repeat({"f": "skip"}))))))
    h = simulate(gen, 2)
    assert all(e["f"] == "a" and e["value"] == 1 for e in invokes(h))
    assert len(seen) == len(h)


def test_same_seed_same_ops():
    def mk():
        return g.limit(50, g.stagger(0.01, g.mix(g.repeat({"f": "a"}), g.repeat({"f": "b"}))))

    a = simulate(mk(), 5, seed=7)
    b = simulate(mk(), 5, seed=7)
    c = simulate(mk(), 5, seed=8)
    assert a == b
    assert a != c


def test_parse_concurrency():
    assert g.parse_concurrency("2n", 5) == 10
    assert g.parse_concurrency(3, 5) == 3
    for bad in ("x", "0", "-1n"):
        with pytest.raises(ValueError):
            g.parse_concurrency(bad, 5)


# --------------------------------------------------------------------------- threaded interpreter


class ListHistory:
    def __init__(self):
        import time

        self._t0 = time.monotonic_ns()
        self.events = []
        self.lock = threading.Lock()

    def now(self):
        import time

        return time.monotonic_ns() - self._t0

    def append(self, ev):
        with self.lock:
            ev.setdefault("index", len(self.events))
            ev.setdefault("time", self.now())
            self.events.append(ev)
        return ev


class EchoClient:
    opened: list = []

    def __init__(self, thread, process):
        self.process = process
        EchoClient.opened.append(process)
        self.closed = False

    def invoke(self, op):
        if op["f"] == "crash":
            return {"type": "info", "error": "crashed"}
        if op["f"] == "boom":
            raise RuntimeError("boom")
        return {"type": "ok", "value": op["value"]}

    def close(self):
        self.closed = True


def test_interpreter_runs_ops_and_reopens_after_info():
    EchoClient.opened = []
    hist = ListHistory()
    gen = g.limit(40, g.mix(g.repeat({"f": "w", "value": 1}), g.repeat({"f": "crash"}), g.repeat({"f": "boom"})))
    stats = run(gen, threads=3, clients=EchoClient, history=hist, rng=random.Random(3))
    evs = hist.events
    assert stats.invoked == 40 and stats.completed() == 40
    assert sum(1 for e in evs if e["type"] == "invoke") == 40
    # a process never invokes again after an info
    ended = set()
    for e in evs:
        assert e["process"] not in ended
        if e["type"] == "info":
            ended.add(e["process"])
    assert any(e.get("error", "").startswith("indeterminate: RuntimeError") for e in evs)
    assert len(EchoClient.opened) > 3


def test_interpreter_stop_leaves_ops_open():
    class Slow:
        def __init__(self, *_):
            self.ev = threading.Event()

        def invoke(self, op):
            self.ev.wait(5)
            return {"type": "ok"}

        def close(self):
            self.ev.set()

    hist = ListHistory()
    stop = threading.Event()
    timer = threading.Timer(0.3, stop.set)
    timer.start()
    stats = run(g.repeat({"f": "w"}), threads=2, clients=Slow, history=hist, rng=random.Random(0), stop=stop,
                join_timeout=0.1)
    assert stats.stopped and stats.open_at_end == 2
    assert [e["type"] for e in hist.events] == ["invoke", "invoke"]


def test_a_client_op_that_never_returns_is_abandoned_and_the_run_goes_on():
    # a client blocked in a call with no deadline (and a close that blocks too): after
    # `op_timeout` its op is journaled info, its process ends, the thread goes on with a new
    # client, and the run ends with every op completed; the late answer is dropped
    release = threading.Event()
    opened: list[int] = []

    class HangsOnce:
        def __init__(self, thread, process):
            self.process = process
            opened.append(process)

        def invoke(self, op):
            if self.process == 0:
                release.wait(30)
                return {"type": "ok"}
            return {"type": "ok", "value": op.get("value")}

        def close(self):
            if self.process == 0:
                release.wait(30)

    hist = ListHistory()
    t0 = time.monotonic()
    try:
        stats = run(g.clients(g.time_limit(1.5, g.repeat({"f": "w", "value": 1}))), threads=2, clients=HangsOnce,
                    history=hist, rng=random.Random(0), op_timeout=0.5, join_timeout=0.2)
    finally:
        release.set()
    assert time.monotonic() - t0 < 10
    stuck = [e for e in hist.events if e["process"] == 0 and e["type"] != "invoke"]
    assert [e["type"] for e in stuck] == ["info"] and "abandoned" in stuck[0]["error"], stuck
    assert stats.invoked == stats.completed() and stats.open_at_end == 0
    assert 2 in opened  # thread 0 went on under process 0 + threads
    assert sum(1 for e in hist.events if e["type"] == "ok" and e["process"] == 2) > 0
    time.sleep(0.1)  # the abandoned worker's late answer is not journaled
    assert len([e for e in hist.events if e["process"] == 0]) == 2


def test_clients_that_hang_on_close_do_not_hold_the_end_of_the_run():
    release = threading.Event()

    class HangsOnClose(EchoClient):
        def close(self):
            release.wait(30)

    t0 = time.monotonic()
    try:
        stats = run(g.limit(6, g.repeat({"f": "w", "value": 1})), threads=3, clients=HangsOnClose,
                    history=ListHistory(), rng=random.Random(0), join_timeout=0.3)
    finally:
        release.set()
    assert stats.completed() == 6 and time.monotonic() - t0 < 5


def test_interpreter_nemesis_ops_and_stuck_generator():
    hist = ListHistory()
    faults = []
    gen = g.any_of(g.clients(g.limit(5, g.repeat({"f": "w"}))), g.nemesis(g.limit(2, g.repeat({"f": "kill"}))))
    run(gen, threads=1, clients=EchoClient, history=hist, rng=random.Random(0), nemesis=faults.append)
    assert [f["f"] for f in faults] == ["kill", "kill"]
    assert all(e["process"] != "nemesis" for e in hist.events)  # the nemesis records its own events

    class Stuck(g.Generator):
        def op(self, ctx):
            return g.PENDING

    with pytest.raises(GeneratorStuck):
        run(Stuck(), threads=1, clients=EchoClient, history=ListHistory(), rng=random.Random(0))


def test_interpreter_respects_op_times():
    hist = ListHistory()
    run(g.limit(5, g.delay(0.05, g.repeat({"f": "w"}))), threads=2, clients=EchoClient, history=hist,
        rng=random.Random(0))
    ts = [e["time"] for e in hist.events if e["type"] == "invoke"]
    gaps = [b - a for a, b in zip(ts, ts[1:], strict=False)]
    assert all(gap >= 0.045 * NS for gap in gaps)


def test_any_of_does_not_commit_to_a_future_op_while_a_child_is_pending():
    # the client threads are busy (pending); the nemesis op is due in 1 s: wait, do not commit
    gen = g.any_of(g.clients(g.repeat({"f": "c"})), g.nemesis(g.delay(1.0, g.repeat({"f": "n"}))))
    rng = random.Random(0)
    workers = {0: 0, "nemesis": "nemesis"}
    first = gen.op(g.Context(0, rng, workers, frozenset({"nemesis"})))
    assert isinstance(first, g.Pending) or first["time"] == 0
    later = gen.op(g.Context(10, rng, workers, frozenset({"nemesis"})))
    assert isinstance(later, g.Pending) and later.until is not None and later.until > 10
    c = gen.op(g.Context(20, rng, workers, frozenset({0, "nemesis"})))
    assert c["f"] == "c"


class _SeesCompletions(g.Generator):
    """One op per thread, then records which processes' completions reached it."""

    def __init__(self):
        self.asked, self.completed = set(), []

    def op(self, ctx):
        t = next((t for t in sorted(ctx.free_threads(), key=str) if t not in self.asked), None)
        if t is None:
            return None if len(self.completed) == len(self.asked) else g.PENDING
        self.asked.add(t)
        return {"process": ctx.workers[t], "f": "crash" if t == 0 else "w", "value": 1, "time": ctx.time}

    def update(self, ctx, event):
        if event["type"] != "invoke":
            self.completed.append((event["process"], event["type"]))


def test_a_routed_generator_sees_an_info_completion_under_the_crashed_process():
    # regression: the thread's next process was assigned before the update, so `clients`
    # (OnThreads) no longer found the crashed process and dropped its completion, and a
    # generator waiting for it (the recovery probe) waited out its whole time limit
    sim = _SeesCompletions()
    simulate(g.clients(sim), 3, complete=lambda op: "info" if op["f"] == "crash" else "ok")
    assert sorted(sim.completed) == [(0, "info"), (1, "ok"), (2, "ok")]
    real = _SeesCompletions()
    run(g.clients(real), threads=3, clients=EchoClient, history=ListHistory(), rng=random.Random(1))
    assert sorted(real.completed) == [(0, "info"), (1, "ok"), (2, "ok")]


def test_clients_go_on_while_a_fault_under_way_plays_out():
    """`while_nemesis_busy`: past its time, client ops go on while the nemesis thread is busy
    with an op it began before (a story under load), up to the grace; then they stop."""
    def run_with(fault_s: float, grace: float) -> tuple[float, float]:
        hist = ListHistory()
        t0 = time.monotonic()
        done: list[float] = []

        def fault(op):
            time.sleep(fault_s)
            done.append(time.monotonic() - t0)

        clients = g.while_nemesis_busy(0.3, grace, g.clients(g.stagger(0.01, g.repeat({"f": "w"}))))
        faults = g.time_limit(0.3, g.nemesis(g.delay(0.15, g.repeat({"f": "story"}))))
        run(g.any_of(clients, faults), threads=2, clients=EchoClient, history=hist, rng=random.Random(0), nemesis=fault)
        last = max(e["time"] for e in hist.events if e["type"] == "invoke") / NS
        return last, done[0]

    last, fault_done = run_with(0.5, 5.0)  # the story begins at once and ends at about 0.5 s
    assert 0.45 < fault_done - 0.05 < last <= fault_done + 0.05, (last, fault_done)
    last, _ = run_with(2.0, 0.4)  # the grace ends it: 0.3 + 0.4 s
    assert 0.6 < last < 0.75, last


# --------------------------------------------------------------------------- the one loop, two executors


def _echo_answer(op):
    """EchoClient's answers, for the virtual executor."""
    if op["f"] == "crash":
        return {"type": "info", "error": "crashed"}
    if op["f"] == "boom":
        return {"type": "info", "error": "indeterminate: RuntimeError: boom"}
    return {"type": "ok", "value": op["value"]}


def _shape(h):
    return [(e["process"], e["type"], e["f"], e.get("value"), e.get("error")) for e in h]


def test_both_executors_drive_one_loop_the_same_way():
    """One thread, so the real run's order is fixed: the threaded and the virtual executor give
    the same history (invoke before completion, a new process after each info, errors kept)."""
    ops = [{"f": "w", "value": 1}, {"f": "crash"}, {"f": "w", "value": 2}, {"f": "boom"}, {"f": "w", "value": 3}]
    hist = ListHistory()
    stats = run(g.lift(list(ops)), threads=1, clients=EchoClient, history=hist, rng=random.Random(0))
    sim = simulate(g.lift(list(ops)), 1, complete=_echo_answer)
    assert _shape(hist.events) == _shape(sim)
    assert [e["process"] for e in sim if e["type"] == "invoke"] == [0, 0, 1, 1, 2]
    assert stats.counts == {("w", "ok"): 3, ("crash", "info"): 1, ("boom", "info"): 1}


def test_virtual_completions_due_together_come_back_one_per_wait():
    """The virtual clock moves only when the loop waits; ops due at the same instant complete
    in thread order, and an op due then starts after them."""
    h = simulate(g.limit(4, g.repeat({"f": "x"})), 3, latency=1.0)
    assert sorted((e["process"], e["type"], e["time"]) for e in h[:3]) == [(p, "invoke", 0) for p in range(3)]
    # the first wait brought thread 0 back alone: the loop drew its op then, and started it
    # once the others due at the same time had come back
    assert [(e["process"], e["type"], e["time"]) for e in h[3:7]] == [
        (0, "ok", NS), (1, "ok", NS), (2, "ok", NS), (0, "invoke", NS)]


def test_a_fault_under_way_on_the_virtual_clock():
    """run_case's shape with a nemesis thread on the virtual clock: a story begun before the
    time limit keeps the clients going until it ends; nemesis ops are not journaled."""
    clients = g.while_nemesis_busy(3.0, 3.0, g.clients(g.delay(0.1, g.repeat({"f": "w"}))))
    faults = g.time_limit(3.0, g.nemesis(g.delay(2.5, g.repeat({"f": "story"}))))
    ex = VirtualExecutor(latency_ns=lambda op: 2 * NS if op["f"] == "story" else NS // 100)
    stats = OpLoop(g.any_of(clients, faults), ex, threads=2, rng=random.Random(0), nemesis=True).run()
    assert stats.counts[("story", "info")] == 2  # at 0 s and at 2.5 s, ending at 4.5 s
    assert all(e["process"] != g.NEMESIS_THREAD for e in ex.history)
    last = max(e["time"] for e in ex.history if e["type"] == "invoke") / NS
    assert 4.3 < last <= 4.5, last
    assert stats.invoked == len(ex.history) // 2 == stats.completed() - 2


def _mix_run(time_limit: float, story_s: float) -> tuple[Counter, float, set[str]]:
    """run_case's shape on the virtual clock with a rotation of four tier-0 stories of
    `story_s` s each and a tier-1 kill: (nemesis completions by f, the last client invoke in s,
    what the round still owed at the end)."""
    from harness.faults import ScheduleGenerator
    from nemesis.core import FaultOp
    from nemesis.schedule import FaultPackage

    def story(name: str, tier: int = 0) -> FaultPackage:
        return FaultPackage(name, lambda rng, n=name: FaultOp(n), None, tier=tier)

    pkgs = [story(f"story-{i}") for i in range(4)] + [story("kill", tier=1)]
    schedule = ScheduleGenerator(pkgs, 4.0, random.Random(7), rotate=True)
    clients = g.while_nemesis_busy(time_limit, time_limit, g.clients(g.delay(0.1, g.repeat({"f": "w"}))),
                                   owed=schedule.owes)
    faults = g.overtime(time_limit, time_limit, lambda _ctx: schedule.owes(), g.nemesis(schedule))
    ex = VirtualExecutor(latency_ns=lambda op: int(story_s * NS) if op["f"] != "w" else NS // 100)
    stats = OpLoop(g.any_of(clients, faults), ex, threads=2, rng=random.Random(0), nemesis=True).run()
    played = Counter({f: n for (f, typ), n in stats.counts.items() if f != "w"})
    last = max(e["time"] for e in ex.history if e["type"] == "invoke") / NS
    return played, last, schedule.owed


def test_the_mix_plays_each_trigger_shape_once_before_its_time_limit_ends():
    """Stories slower than the time limit allows (a loaded host): the first round's tier-0
    packages all play, past the time limit, and the clients go on until the last one ends;
    the tier-1 package waits for its turn and the round ends the run."""
    played, last, owed = _mix_run(time_limit=20.0, story_s=8.0)
    assert {f"story-{i}" for i in range(4)} <= set(played) and not owed
    assert "kill" not in played
    assert 32.0 < last < 40.0, last  # four 8-s stories with gaps of about 1.3 s: past 20 s, before 40 s
    # fast stories: the round is paid early, the run ends at its time limit (or as the fault
    # under way then ends, within its 1 s)
    played, last, owed = _mix_run(time_limit=20.0, story_s=1.0)
    assert not owed and "kill" in played and 19.0 < last <= 21.0, last


def test_the_mix_round_is_owed_no_longer_than_twice_the_time_limit():
    """Stories too slow for even twice the time limit: the round stays owed (the run's
    test.json says so: mix_unplayed), and the run ends once the story under way at 2x ends."""
    played, last, owed = _mix_run(time_limit=10.0, story_s=8.0)
    assert owed and sum(played.values()) < 4
    assert last <= 2 * 10.0 + 8.0


def test_a_schedule_file_plays_its_actions_past_the_time_limit():
    """A replayed run (its schedule file) owes every action, also those its original played
    after the time limit (a round that ran over): they play at their times, at most another
    time limit, and the clients go on until the last has ended."""
    from harness.faults import ScheduleGenerator
    from harness.schedule_file import Action

    acts = [Action(2.0, "kill", "kill", "one", []), Action(30.0, "lrs", "last-replica-standing", None, []),
            Action(36.0, "kill", "start", "all", [])]
    schedule = ScheduleGenerator.played(acts)
    clients = g.while_nemesis_busy(20.0, 20.0, g.clients(g.delay(0.1, g.repeat({"f": "w"}))), owed=schedule.owes)
    faults = g.overtime(20.0, 20.0, lambda _ctx: schedule.owes(), g.nemesis(schedule))
    ex = VirtualExecutor(latency_ns=lambda op: 3 * NS if op["f"] != "w" else NS // 100)
    stats = OpLoop(g.any_of(clients, faults), ex, threads=2, rng=random.Random(0), nemesis=True).run()
    assert [f for (f, _t) in stats.counts if f != "w"] == ["kill", "last-replica-standing", "start"]
    last = max(e["time"] for e in ex.history if e["type"] == "invoke") / NS
    assert 38.5 < last <= 39.0, last  # the start at 36 s ends at 39 s, within 2 x 20 s


def test_the_virtual_executor_stops_with_ops_open():
    ex = VirtualExecutor(latency_ns=NS, max_events=5)
    stats = OpLoop(g.repeat({"f": "w"}), ex, threads=3, rng=random.Random(0)).run()
    assert stats.stopped and len(ex.history) == 5
    assert stats.open_at_end == stats.invoked - stats.completed() > 0


class _SameProcess(g.Generator):
    """Always process 0, busy or not: a broken generator."""

    def op(self, ctx):
        return {"process": 0, "f": "w", "value": None, "time": ctx.time}


def test_both_executors_refuse_an_op_for_a_busy_process_and_a_stuck_generator():
    with pytest.raises(RuntimeError, match="busy or unknown process 0"):
        simulate(_SameProcess(), 2)
    with pytest.raises(RuntimeError, match="busy or unknown process 0"):
        run(_SameProcess(), threads=2, clients=EchoClient, history=ListHistory(), rng=random.Random(0))

    class Stuck(g.Generator):
        def op(self, ctx):
            return g.PENDING

    with pytest.raises(GeneratorStuck):
        simulate(Stuck(), 1)
