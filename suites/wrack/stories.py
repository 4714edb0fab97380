"""Fault stories: the bug triggers (broker/triggers) played on real nodes through the Nemesis.

A story is one nemesis op (f = the trigger's name; its old names are accepted too,
`STORIES`) that plays a trigger's steps (broker/triggers/steps.py: the vocabulary) on the
roles of one partition: the leader, the ISR followers in assignment order (the order the
controller elects in) and the controller, read from the cluster's metadata when it starts
(`Story.choose`). The simulation plays the same definitions (broker/sim/driver.py);
docs/nemesis.md "Fault stories" lists them.

How the steps become faults: a `Drop` is one `start-partition` with a raw grudge (`{"drop":
{NODE: [NODE, ...]}}`, with `"keep": true` when it adds to a partition in force; `replace`
drops replace it); `FETCH_ANSWERS` holds FetchResponse frames (`"frame"`: the AT node gets
none of the FROM node's fetch answers, its fetch requests still reach it, however light the
traffic; dropping only large packets missed answers that carry one small batch), `RECORDS`
drops packets of `LARGE_BYTES` or more (small answers such as epoch errors pass, so the
follower keeps asking: held, its link stalls until its 3 s timeout), `ALTER_PARTITION` holds
AlterPartitionRequest frames (the request and its retries wait in the network until the rule
goes). `Isolate` is `{"isolate": NODES}` (or a raw grudge added to one in force), `Heal` is
`stop-partition`; `Stop`, `Kill`, `Start`, `Pause`, `Resume` are the Nemesis's faults,
`CrashRestart` a `kill` then a `start`, `PowerLoss` a `power-loss` (LazyFS), `Wipe` a `wipe`
(both kept `LOSSY_GAP_S` apart). A fault that starts a node (start, power-loss, wipe) returns
once the node accepts connections (`DB.wait_ready`, at most `READY_S`; the step's entry says
how long, `ready_s`), so the waits and sleeps after it count from a live broker: a start
takes 1-2 s on a quiet host and several on a loaded one, which a wait of a few seconds for
the restarted node to rejoin must not pay for. `Sleep` sleeps its `seconds` (a zero one is the
simulation's only); `Repeat` plays `times`, `OneOf` its first alternative; a `Wait` polls
(every `POLL_S`) the partition's view or the nodes: `Committed` with ListOffsets,
`Held` with the frame rule's packet counter, `Live` with the controller's broker list;
`Unflushed` is not observable here and passes.

Recording: `start-NAME` when the story begins (the candidates), every fault it makes as the
Nemesis records it (start-partition, stop, kill, start, power-loss, wipe, pause, resume,
stop-partition), a `story-step` event for each wait or sleep ({"story", "step", "ok",
"waited_s", "view"}; "roles" first, with the partition and who holds each role), and
`stop-NAME` when it ends, with the steps' outcome ("error" when a step failed). A story
undoes its own faults before it returns (network healed, nodes it stopped or paused started
or resumed) and waits up to 30 s for the partition to have a leader and an ISR of two
again ("healed"); also when a step fails, it undoes, so the time after it is fault-free.

`install_stories(nemesis, pick)` registers every story's op (`pick(rng)` draws the candidate
partitions: a list of (topic, partition)) and the `wipe` fault; `story_package(name, pick)`
is a story as a fault package of the schedule (nemesis/schedule.py), with its colour in the
plots (`STORY_COLORS`) and its tier in the default rotation (`STORY_TIERS`).
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import replace
from typing import Any

from broker.triggers import ALIASES, TRIGGERS, Trigger
from broker.triggers import steps as S
from broker.triggers.steps import CONTROLLER, FOLLOWERS, HEALED, LEADER
from clusters.node import NodeError
from nemesis.core import FaultOp, Nemesis
from nemesis.lazyfs.hook import LazyFSOptions, install_power_loss
from nemesis.schedule import FaultPackage
from nemesis.targets import PartitionView, TargetError, node_metadata, node_offset, partition_view

TP = tuple[str, int]
POLL_S = 0.2
TIME_SCALE = 1.0  # multiplies every wait's bound (tests of the step logic shrink it)
LOSSY_GAP_S = 12.5  # a lossy fault waits this long after the previous one (checkers.lossy's 12 s rule)
HEALED_S = 30.0  # how long a story that ran to its end waits for the partition to heal
READY_S = 30.0  # how long a fault that starts a node waits for it to accept connections

# packets this long carry records; requests, empty answers, errors and pings are shorter
# (an answer with one small batch is about 200 bytes: for a backlog of hundreds of records only)
LARGE_BYTES = 300
_FRAMES = {S.FETCH_ANSWERS: "FetchResponse", S.ALTER_PARTITION: "AlterPartitionRequest"}

# every trigger by its name and by the names it had (lrs, leso, wipe-follower, ...)
STORIES: dict[str, Trigger] = {**TRIGGERS, **{a: TRIGGERS[n] for a, n in ALIASES.items()}}


class StoryError(RuntimeError):
    """A step that could not be played (e.g. no partition has the roles the story needs)."""


class Story:
    """One playing of a story: its steps' faults, waits and undo."""

    def __init__(self, nemesis: Nemesis, name: str):
        self.nem = nemesis
        self.name = name
        self.steps: list[dict[str, Any]] = []
        self.partitioned = False
        self.down: list[str] = []  # nodes this story stopped or killed and has not started
        self.paused: list[str] = []

    # ------------------------------------------------------------------ reading roles

    def view(self, tp: TP) -> PartitionView:
        """The partition's roles as the active controller's node sees them (its broker's cache
        is fed by the controller in the same process; librdkafka may ask a broker a story cut
        off, whose cache is stale: seen as lrs waiting 30 s for an ISR shrink that had
        happened), else as the Nemesis's metadata source says. `controller` is that node (a
        broker's Metadata answer names the answering broker)."""
        addrs = {n.name: n.address for n in self.nem.cluster.nodes}
        if self.nem.metadata is None:
            raise StoryError("stories need the cluster's metadata (Nemesis(metadata=...))")
        md = None
        ctl = self.active_controller(addrs)
        if ctl is not None and ctl not in self.paused:
            try:
                md = node_metadata(addrs[ctl])
            except OSError:
                md = None
        v = partition_view(md or self.nem.metadata(), tp[0], tp[1], addrs)
        return replace(v, controller=ctl) if ctl is not None else v

    def active_controller(self, addrs: dict[str, str]) -> str | None:
        """The node of the controller: the only one the DB runs, or the quorum's leader (the
        DB's `active_controller`, an address), None when unknown."""
        ctl = self.nem.controller_nodes()
        if len(ctl) == 1:
            return ctl[0]
        active = getattr(self.nem.db, "active_controller", None)
        addr = active() if active is not None else None
        return next((n for n, a in addrs.items() if a == addr), None) if addr else None

    def choose(self, candidates: Sequence[TP], followers: int, wait: float = 15.0,
               prefer_leader_not: Collection[str] = ()) -> tuple[TP, PartitionView]:
        """The first candidate with a leader, at least `followers` ISR followers and no replica
        on the controller's node (a story stops, crashes or isolates replicas: the controller
        must stay out of it), waiting up to `wait` s for one (the ISRs refill after an earlier
        fault). Among those, the first that is `quorum_safe` (a story takes down up to all
        replicas but one: with two voters among them, the quorum of three is lost and no
        election follows; seen as hw-truncation's C never elected), then whose leader is not
        in `prefer_leader_not`; StoryError if none comes."""
        deadline = time.monotonic() + wait * TIME_SCALE
        seen: list[str] = []
        while True:
            seen = []
            fit: list[tuple[TP, PartitionView]] = []
            for tp in candidates:
                try:
                    v = self.view(tp)
                except Exception as e:  # noqa: BLE001 - metadata unavailable for this one: try the next
                    seen.append(f"{tp[0]}-{tp[1]}: {type(e).__name__}")
                    continue
                if v.leader is not None and len(v.followers) >= followers and v.controller not in v.replicas:
                    fit.append((tp, v))
                else:
                    seen.append(f"{tp[0]}-{tp[1]}: leader {v.leader}, isr {v.isr}, controller {v.controller}")
            if fit:
                rank = lambda x: (not self.quorum_safe(x[1]), x[1].leader in prefer_leader_not)  # noqa: E731
                return min(fit, key=rank)
            if time.monotonic() >= deadline:
                break
            time.sleep(POLL_S)
        raise StoryError(f"no partition without a controller replica has a leader and {followers} ISR followers "
                         f"now ({'; '.join(seen)})")

    def quorum_safe(self, v: PartitionView) -> bool:
        """Whether the controller quorum keeps a majority with every replica of `v` down:
        the voters among the replicas are at most the quorum's spare (1 of 3, 2 of 5)."""
        voters = self.voters()
        return not voters or len(voters & set(v.replicas)) <= len(voters) - (len(voters) // 2 + 1)

    def voters(self) -> set[str]:
        """The nodes of the controller quorum (none if the DB has none)."""
        return set(self.nem.controller_nodes())

    # ------------------------------------------------------------------ steps

    def step(self, step: str, **value: Any) -> None:
        ev = {"story": self.name, "step": step, **value}
        self.steps.append({"step": step, **{k: v for k, v in value.items() if k != "view"}})
        self.nem.record("story-step", ev)

    def fault(self, f: str, value: Any = None) -> dict[str, Any]:
        ev = self.nem.invoke(FaultOp(f, value))
        entry = {"fault": f, "value": ev["value"]}
        if f in ("start", "power-loss", "wipe"):
            entry["ready_s"] = self.ready(ev["value"]["nodes"])
        self.steps.append(entry)
        if f == "start-partition":
            self.partitioned = True
        elif f == "stop-partition":
            self.partitioned = False
        elif f in ("stop", "kill"):
            self.down += [n for n in ev["value"]["nodes"] if n not in self.down]
        elif f == "start":
            self.down = [n for n in self.down if n not in ev["value"]["nodes"]]
        elif f == "pause":
            self.paused += ev["value"]["nodes"]
        elif f == "resume":
            self.paused = [n for n in self.paused if n not in ev["value"]["nodes"]]
        return ev

    def ready(self, nodes: Iterable[str]) -> float | None:
        """Wait until each of `nodes` accepts connections (at most `READY_S` each); the
        seconds it took, or None when one did not (the story goes on: its waits say more)."""
        t0 = time.monotonic()
        db = self.nem._need_db()
        for n in nodes:
            try:
                db.wait_ready(self.nem.cluster.node(n), READY_S * TIME_SCALE)
            except NodeError:
                return None
        return round(time.monotonic() - t0, 2)

    def space_lossy(self) -> None:
        """Before a story that will lose a replica's data (power loss, wipe): wait until
        `LOSSY_GAP_S` have passed since the previous such fault. The expected-anomaly policy
        counts a replica as lost until it is back in the ISR, and one never seen out of it for
        12 s; two stories' losses closer than that are concurrent for it, and would excuse a
        loss of the safeguards' making."""
        last = self.nem.last_lossy
        if last is not None and time.monotonic() - last < LOSSY_GAP_S * TIME_SCALE:
            self.sleep("lossy-spacing", LOSSY_GAP_S * TIME_SCALE - (time.monotonic() - last))

    def lossy(self, f: str, value: Any) -> dict[str, Any]:
        """A fault that loses a replica's data; its time is kept for `space_lossy`."""
        try:
            return self.fault(f, value)
        finally:
            self.nem.last_lossy = time.monotonic()

    def crash_restart(self, node: str) -> None:
        """SIGKILL and start again at once: the controller fences the old incarnation when the
        new one registers (an election follows without waiting for the session timeout)."""
        self.fault("kill", [node])
        self.fault("start", [node])

    def sleep(self, step: str, seconds: float) -> None:
        time.sleep(seconds)
        self.step(step, ok=True, waited_s=seconds)

    def wait(self, step: str, tp: TP, pred: Callable[[PartitionView], bool], timeout: float,
             bug_only: bool = False) -> PartitionView | None:
        """Poll the partition's roles until `pred` holds (its view) or `timeout` s (None).
        `bug_only`: the step is the bug itself (it happens only with the story's safeguard
        off), so its not happening is the safeguard holding, not a missed trigger (the step
        is recorded with `bug_only`, `checkers.coverage` reads it)."""
        extra = {"bug_only": True} if bug_only else {}
        t0 = time.monotonic()
        timeout *= TIME_SCALE
        last: PartitionView | None = None
        while True:
            try:
                last = self.view(tp)
                if pred(last):
                    self.step(step, ok=True, waited_s=round(time.monotonic() - t0, 2), view=_view_json(last), **extra)
                    return last
            except Exception:  # noqa: BLE001 - no answer now (brokers down is the point): poll again
                pass
            if time.monotonic() - t0 >= timeout:
                self.step(step, ok=False, waited_s=round(time.monotonic() - t0, 2),
                          view=_view_json(last) if last else None, **extra)
                return None
            time.sleep(POLL_S)

    def poll(self, step: str, check: Callable[[], tuple[bool, dict[str, Any]]], timeout: float) -> bool:
        """Call `check` every POLL_S until it says done or `timeout` s pass; records the
        step with the fields of its last answer. `check` returns (done, fields)."""
        t0 = time.monotonic()
        while True:
            done, fields = check()
            if done or time.monotonic() - t0 >= timeout * TIME_SCALE:
                self.step(step, ok=done, waited_s=round(time.monotonic() - t0, 2), **fields)
                return done
            time.sleep(POLL_S)

    def wait_dropped(self, step: str, node: str, timeout: float) -> bool:
        """Poll until the frame rules on `node` have dropped a packet (a held request was
        sent) or `timeout` s; records the step."""
        return self.poll(step, lambda: (self.nem.net.frames_dropped(node) > 0, {}), timeout)

    def wait_live(self, step: str, node: str, timeout: float, live: bool = True) -> bool:
        """Poll until the active controller's node lists `node` among the live (unfenced)
        brokers (`live=False`: until it does not) or `timeout` s; records the step."""
        addrs = {n.name: n.address for n in self.nem.cluster.nodes}

        def seen() -> tuple[bool, dict[str, Any]]:
            ctl = self.active_controller(addrs)
            try:
                listed = ctl is not None and addrs[node] in node_metadata(addrs[ctl]).brokers.values()
            except OSError:
                return False, {}
            return ctl is not None and listed == live, {}

        return self.poll(step, seen, timeout)

    def wait_ahead(self, step: str, tp: TP, node: str, other: str, timeout: float) -> bool:
        """Poll until the log end of `node`'s replica is past that of `other`'s (both read
        from the nodes) or `timeout` s; records the step."""
        addrs = {n.name: n.address for n in self.nem.cluster.nodes}

        def ahead() -> tuple[bool, dict[str, Any]]:
            try:
                a, b = (node_offset(addrs[n], *tp, log_end=True) for n in (node, other))
            except (OSError, TargetError):
                return False, {}
            return a > b, {"log_end": a, "other_log_end": b}

        return self.poll(step, ahead, timeout)

    def wait_commits_without(self, step: str, tp: TP, leader: str, behind: str, count: int, timeout: float) -> bool:
        """Poll until the high watermark at `leader` is `count` records past the log end of
        `behind`'s replica (read from that node, which a story cut off from the others: its
        log end stays): writes committed that `behind` lacks. A fixed sleep is not enough:
        the acknowledgements that follow an ISR change may all be of records every replica
        had (the backlog of a stalled high watermark). Records the step; False at `timeout` s."""
        addrs = {n.name: n.address for n in self.nem.cluster.nodes}
        got: dict[str, Any] = {}

        def committed() -> tuple[bool, dict[str, Any]]:
            try:
                end, hwm = node_offset(addrs[behind], *tp, log_end=True), node_offset(addrs[leader], *tp)
            except (OSError, TargetError):
                return False, got  # the last pair both nodes answered
            got.update(behind_end=end, high_watermark=hwm)
            return got["high_watermark"] >= got["behind_end"] + count, got

        return self.poll(step, committed, timeout)

    def undo(self) -> None:
        """Heal what this story did (network, paused and stopped nodes)."""
        if self.paused:
            self.fault("resume", list(self.paused))
        if self.partitioned:
            self.fault("stop-partition")
        if self.down:
            self.fault("start", list(self.down))


def _view_json(v: PartitionView) -> dict[str, Any]:
    return {"leader": v.leader, "isr": v.isr, "replicas": v.replicas, "controller": v.controller}


# ---------------------------------------------------------------------- playing a trigger


class _End(Exception):
    """A wait with on_fail=END was not met: the story undoes what it did and ends."""


class TriggerRun:
    """One trigger's steps played by a `Story` on partition `tp` with `roles` bound."""

    def __init__(self, s: Story, trigger: Trigger, tp: TP, roles: dict[str, Any]):
        self.s, self.trigger, self.tp, self.roles = s, trigger, tp, roles

    def nodes(self, who: S.Who) -> list[str]:
        out: list[str] = []
        for r in S.roles_of(who):
            v = self.roles[r]
            out += list(v) if isinstance(v, (tuple, list)) else [v]
        return out

    def play(self, steps: Iterable[S.Step], n: int = 2) -> None:
        for st in steps:
            if isinstance(st, S.Wait):
                if not self.wait(st, n) and st.on_fail == S.END:
                    raise _End
            elif isinstance(st, S.If):
                if self.wait(st.wait, n):
                    self.play(st.steps, n)
            elif isinstance(st, S.Repeat):
                for i in range(st.times):
                    self.play(st.steps, i + 2)
            elif isinstance(st, S.OneOf):
                self.play(st.alternatives[0], n)
            elif isinstance(st, S.Sleep):
                if st.seconds > 0:
                    self.s.sleep(st.name.format(n=n), st.seconds)
            else:
                self.act(st)

    def act(self, st: S.Step) -> None:
        s = self.s
        if isinstance(st, S.Drop):
            s.fault("start-partition", self.grudge(st))
        elif isinstance(st, S.Isolate):
            nodes = self.nodes(st.who)
            if s.partitioned:  # added to the partition in force
                others = [n.name for n in s.nem.cluster.nodes]
                drop = {x: [o for o in others if o != x] for x in nodes}
                for o in others:
                    drop.setdefault(o, []).extend(x for x in nodes if x != o)
                s.fault("start-partition", {"drop": drop, "keep": True})
            else:
                s.fault("start-partition", {"isolate": nodes})
        elif isinstance(st, S.Heal):
            s.fault("stop-partition")
        elif isinstance(st, (S.Stop, S.Kill, S.Start, S.Pause, S.Resume)):
            s.fault(type(st).__name__.lower(), self.nodes(st.who))
        elif isinstance(st, S.CrashRestart):
            for node in self.nodes(st.who):
                s.crash_restart(node)
        elif isinstance(st, S.PowerLoss):
            for node in self.nodes(st.who):
                s.lossy("power-loss", {"nodes": [node], "torn": False})
        elif isinstance(st, S.Wipe):
            for node in self.nodes(st.who):
                s.lossy("wipe", [node])
        else:
            raise StoryError(f"a real-node story cannot play {st!r}")

    def grudge(self, d: S.Drop) -> dict[str, Any]:
        """The `start-partition` value of drop `d` (module docstring)."""
        drop: dict[str, list[str]] = {}
        for at, froms in d.rules.items():
            for a in self.nodes(at):
                drop.setdefault(a, []).extend(n for f in froms for n in self.nodes(f))
        spec: dict[str, Any] = {"drop": drop}
        if d.only in _FRAMES:
            spec["frame"] = _FRAMES[d.only]
        elif d.only == S.RECORDS:
            spec["min_bytes"] = LARGE_BYTES
        if self.s.partitioned and not d.replace:
            spec["keep"] = True
        return spec

    def wait(self, w: S.Wait, n: int) -> bool:
        s, c, name = self.s, w.cond, w.name.format(n=n)
        if isinstance(c, S.Unflushed):
            return True  # not observable on real nodes (LazyFS keeps what a broker did not sync)
        if isinstance(c, S.Committed):
            return s.wait_commits_without(name, self.tp, self.roles[c.leader], self.roles[c.behind], c.count,
                                          w.timeout)
        if isinstance(c, S.Held):
            return s.wait_dropped(name, self.roles[CONTROLLER], w.timeout)
        if isinstance(c, (S.Live, S.Fenced)):
            return s.wait_live(name, self.roles[c.role], w.timeout, live=isinstance(c, S.Live))
        if isinstance(c, S.Ahead):
            return s.wait_ahead(name, self.tp, self.roles[c.role], self.roles[c.other], w.timeout)
        v = s.wait(name, self.tp, lambda view: c.holds(view, self.roles), w.timeout, bug_only=w.bug_only)
        if v is not None and w.rebind:
            self.roles[w.rebind] = v.leader
        return v is not None


def bind(v: PartitionView, trigger: Trigger, voters: Collection[str]) -> dict[str, Any]:
    """The trigger's roles on the partition `v` shows: the leader, the ISR followers in
    assignment order under the trigger's names (its `nonvoter` role swapped with another
    follower role outside the controller quorum when it is a voter), all of them as
    `FOLLOWERS`, and the controller."""
    want = trigger.roles
    named = dict(zip(want.followers, v.followers, strict=False))
    if want.nonvoter and named.get(want.nonvoter) in voters:
        other = next((r for r, n in named.items() if r != want.nonvoter and n not in voters), None)
        if other is not None:
            named[want.nonvoter], named[other] = named[other], named[want.nonvoter]
    return {LEADER: v.leader, FOLLOWERS: tuple(v.followers), CONTROLLER: v.controller, **named}


def play_trigger(s: Story, trigger: Trigger, candidates: Sequence[TP]) -> None:
    """Choose a partition with the trigger's roles, play its steps, undo, wait for the heal."""
    if trigger.lossy:
        s.space_lossy()
    prefer = s.voters() if trigger.roles.leader_nonvoter else ()
    tp, v = s.choose(candidates, trigger.roles.needed(), prefer_leader_not=prefer)
    uses_controller = any(isinstance(st, S.Drop) and CONTROLLER in (*st.rules, *(r for fs in st.rules.values() for r in fs))
                          for st in S.walk(trigger.steps))
    if uses_controller and (v.controller is None or v.controller in v.replicas):
        raise StoryError(f"{trigger.name} cuts the controller off: it must be known and hold no replica")
    run = TriggerRun(s, trigger, tp, bind(v, trigger, s.voters()))
    s.step("roles", ok=True, view=_view_json(v), topic=tp[0], partition=tp[1],
           roles={k: list(x) if isinstance(x, tuple) else x for k, x in run.roles.items()})
    try:
        run.play(trigger.steps)
    except _End:
        return
    s.undo()
    s.wait("healed", tp, lambda w: HEALED.holds(w, run.roles), HEALED_S)


def play(nemesis: Nemesis, name: str, candidates: Sequence[TP]) -> dict[str, Any]:
    """Play story `name` (a trigger's name) on one of `candidates`; returns the value of
    its `stop-NAME` event."""
    s = Story(nemesis, name)
    nemesis.record(f"start-{name}", {"candidates": [list(c) for c in candidates]})
    error = None
    try:
        play_trigger(s, STORIES[name], candidates)
    except Exception as e:  # noqa: BLE001 - recorded in the story's stop event; undo below
        error = f"{type(e).__name__}: {e}"
    try:
        s.undo()
    except Exception as e:  # noqa: BLE001 - the final heal retries it
        error = (error + "; " if error else "") + f"undo: {type(e).__name__}: {e}"
    out: dict[str, Any] = {"story": name, "steps": s.steps}
    if error:
        out["error"] = error
    return out


def _wipe(nemesis: Nemesis, spec: Any) -> dict[str, Any]:
    """SIGKILL, remove the data dir's content, start (a follower whose disk was replaced)."""
    db = nemesis._need_db()
    nodes = nemesis.targets(spec or "one")
    for n in nodes:
        node = nemesis.cluster.node(n)
        db.kill(node)
        nemesis.killed.add(n)  # the heal starts it if what follows fails
        nemesis.paused.discard(n)
        db.wipe(node)
        db.start(node)
        nemesis.killed.discard(n)
    return {"nodes": nodes}


def install_stories(nemesis: Nemesis, pick: Callable[[Any], Sequence[TP]], names: Sequence[str] = tuple(TRIGGERS)
                    ) -> None:
    """Register the stories `names` (old names stand for the current ones: the op is the
    trigger's name; its value: None, the candidates are `pick(nemesis.rng)`, or a list of
    [topic, partition]) and `wipe`."""
    for name in dict.fromkeys(STORIES[n].name for n in names):
        def run(value: Any, name: str = name) -> dict[str, Any]:
            cands = [tuple(c) for c in value] if value else list(pick(nemesis.rng))
            return play(nemesis, name, cands)  # type: ignore[arg-type]

        nemesis.register(name, run, recorded=f"stop-{name}")
    nemesis.register("wipe", lambda spec: _wipe(nemesis, spec))


# stories that reach their trigger on wrack-broker go first in a rotation round (tier 0);
# the others (docs/nemesis.md "Fault stories": how far they go) with the generic packages
STORY_TIERS = {"last-replica-standing": 0, "hw-truncation": 0, "stale-hwm-leader": 0, "wipe-during-expansion": 0,
               "stale-alter-partition": 0, "unclean-candidates": 0, "lagging-follower-in-isr": 0, "leader-churn": 1}
# each story's band in the plots, the timeline and the report (trigger name -> colour)
STORY_COLORS = {"last-replica-standing": "#B07AD8", "hw-truncation": "#E98A4F", "stale-hwm-leader": "#6FB7D9",
                "wipe-during-expansion": "#8FBF6A", "stale-alter-partition": "#D9C46F", "leader-churn": "#E96F8A",
                "lagging-follower-in-isr": "#5FBFA8"}
STORY_COLOR = "#C0A0D0"  # a story without a colour of its own in STORY_COLORS


def story_package(name: str, pick: Callable[[random.Random], Sequence[tuple[str, int]]]) -> FaultPackage:
    """The story `name` (a trigger of broker/triggers, or an old name of one: the package
    and its op are the trigger's name; `install_stories` plays it) as an instant package;
    `pick(rng)` draws the candidate partitions. Stories that lose power need LazyFS: its
    hook is installed with `lose_on_kill=False`, so a `kill` stays a process crash (the
    page cache survives) and only `power-loss` drops unsynced writes."""
    if name not in STORIES:
        raise ValueError(f"unknown story {name!r} (known: {', '.join(sorted(STORIES))})")
    trigger = STORIES[name]

    def prepare(nem: Nemesis) -> None:
        if trigger.power_loss:
            install_power_loss(nem, opts=LazyFSOptions(lose_on_kill=False))
        install_stories(nem, pick, [trigger.name])

    color = STORY_COLORS.get(trigger.name, STORY_COLOR)
    return FaultPackage(trigger.name, lambda rng: FaultOp(trigger.name, None), None, [], color, prepare,
                        tier=STORY_TIERS.get(trigger.name, 1))
