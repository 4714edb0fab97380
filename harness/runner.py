"""One test, start to finish (docs/ARCHITECTURE.md "Data flow of one test").

`run_test(TestOptions(...))` is Jepsen's `run!`: nested scopes, each a short stage that
reads and extends one `Test` record, each undone on the way out whatever happens. The system
under test (`--db`, suites/) is read only through contracts/protocols.py's `SystemUnderTest`:

    with cluster_up(test):              # cluster, DB, nemesis; heal + collect + remove, always
        start_db(test)                  # the DB on every node, what the workload needs (topics)
        with history_open(test):        # history.jsonl: its time 0 is the workload's start
            with observing(test):       # the cluster-state observer
                run_case(test)          # workload + fault schedule, heal, final read-back
            collect_nodes(test)         # logs, configs, data into nodes/<node>/
    end_record(test)                    # test.json: end, timings, error
    analyze(test)                       # results.json, plots, timeline, report.html

1. `new_test`: a run folder (`contracts.store`), test.json (every option, the seed,
   versions, git revision; `end` null until the test ends);
2. the main phase: the workload's ops at `--rate` at most (a trickle in `--lulls`), on `--concurrency` client threads
   (and the queue workload's `--in-flight` send-only threads beside them), and the
   nemesis schedule (`--nemesis`, a fault every `--nemesis-interval` s), for `--time-limit` s;
3. heal: the nemesis's `final_heal` (every package's final ops, `heal_all`, every node's
   process ready again, waiting at most `--recovery-time-limit` s for each);
4. the final phase: the workload's read-back (queue: assign all keys from the beginning,
   poll until every acknowledged offset was read, or `--final-time-limit`);
5. teardown, always (also on exceptions, Ctrl-C and SIGTERM: `nemesis.guard.always_heal`);
6. check (`harness.analysis`): results.json with the one verdict (checkers/verdict.py) under
   the system's loss rules, plots, timeline, report.html.

Every random choice comes from the seed: the generator's rng is `Random(seed)`, the fault
schedule's `Random("seed/schedule")`, the nemesis's target choices `Random("seed/targets")`.
`timings` in test.json records how long each stage took (bench/harness.py reads them).
"""

from __future__ import annotations

import datetime as dt
import os
import random
import secrets
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import suites
from clusters.backends import BACKENDS, backend
from clusters.node import ClusterSpec
from contracts import generator as gen
from contracts import store
from contracts.errors import InputError, exit_code_for
from contracts.history import HistoryWriter, clock_anchor
from contracts.options import GeneralOptions, lull_spec
from harness import interpreter, schedule_file
from harness.analysis import check_run, render_outputs
from harness.faults import OWED_GRACE, ScheduleGenerator, fault_packages, heal_op, nemesis_client, rotates
from harness.options import DEFAULTS, SPEC, TestOptions, for_system, foreign, workload_of
from harness.progress import Progress
from nemesis.core import Nemesis
from nemesis.guard import always_heal
from nemesis.schedule import prepare as prepare_faults

# a client op still running after this many request timeouts is abandoned as indeterminate
# (harness/interpreter.py): the longest a client bounds itself is a transaction of four sends,
# its abort and its fencing, about ten; a client library blocked in a call with no deadline of
# its own must not hold the run
OP_TIMEOUT_REQUESTS = 20


@dataclass
class RunOutcome:
    run_dir: Path
    results: dict[str, Any] | None
    exit_code: int
    error: str | None = None

    @property
    def valid(self) -> Any:
        return None if self.results is None else self.results.get("valid")


def test_name(o: TestOptions) -> str:
    """The default test name: the system under test's (workload, faults and its own settings)."""
    return for_system(o).test_name(o)


def validate(o: TestOptions) -> None:
    """Raise InputError naming the first bad option: the general ones here, the system's own
    by the system (`SystemUnderTest.validate`), and any option the system does not take."""
    def bad(opt: str, msg: str) -> None:
        raise InputError(f"--{opt}: {msg}")

    try:
        system = for_system(o)
    except ValueError as e:
        raise InputError(f"--db: {e}") from None
    SPEC.normalize(o)
    SPEC.check_choices(o)
    if stray := foreign(o):
        f = stray[0]
        bad(f.name.replace("_", "-") if not f.metadata["flag"] else f.metadata["flag"].lstrip("-"),
            f"not an option of --db {o.db}")
    o.workload = workload_of(o)
    if o.workload not in system.workloads:
        bad("workload", f"{o.workload} does not run on --db {o.db} (its workloads: {', '.join(system.workloads)})")
    if o.nodes < 1:
        bad("nodes", "at least 1")
    for opt, v in (("time-limit", o.time_limit), ("rate", o.rate), ("nemesis-interval", o.nemesis_interval),
                   ("recovery-time-limit", o.recovery_time_limit)):
        if not v > 0:
            bad(opt, f"{v} must be positive")
    if o.test_count < 1:
        bad("test-count", "at least 1")
    if o.schedule is not None:
        apply_schedule(o, schedule_file.load(o.schedule, system))
    try:
        gen.parse_concurrency(o.concurrency, o.nodes)
    except ValueError as e:
        bad("concurrency", str(e))
    system.validate(o)
    try:
        if o.schedule is None:
            fault_packages(o.nemesis, system, {"t": 1})
    except ValueError as e:
        bad("nemesis", str(e))
    if o.backend not in BACKENDS:
        bad("backend", f"unknown backend {o.backend!r} (known: {', '.join(sorted(BACKENDS))})")


def apply_schedule(o: TestOptions, sched: schedule_file.Schedule) -> None:
    """A schedule file's options (and seed) for every one of them `o` leaves at its default
    (harness/schedule_file.py)."""
    for k, v in sched.options.items():
        if getattr(o, k) == getattr(DEFAULTS, k):
            setattr(o, k, v)
    if o.seed is None and sched.seed is not None:
        o.seed = sched.seed


def takes(o: TestOptions) -> list[str]:
    """The options `o`'s system takes (the general ones and its own groups')."""
    groups = {GeneralOptions, *suites.option_groups(o.db)}
    return [f.name for f in SPEC if SPEC.group_of(f.name) in groups]


class Timings:
    """Seconds per stage, as test.json's `timings` (bench/harness.py reads them)."""

    def __init__(self) -> None:
        self.marks: dict[str, float] = {}
        self._t = time.monotonic()

    def lap(self, name: str) -> None:
        now = time.monotonic()
        self.marks[name] = round(self.marks.get(name, 0.0) + now - self._t, 3)
        self._t = now


@dataclass
class Test:
    """One test as it runs: the record every stage reads and extends (Jepsen's test map).

    `record` is test.json. The cluster, its DB, the nemesis and the history are set by the
    stages that make them. The test is the nemesis's event sink: its events go to
    history.jsonl once that is open (none are recorded before)."""

    options: TestOptions
    seed: int
    run_dir: Path
    record: dict[str, Any]
    progress: Progress
    system: Any  # the system under test (suites/: `--db`)
    workload: Any
    packages: list[Any]
    threads: int
    timings: Timings = field(default_factory=Timings)
    cluster: Any = None
    db: Any = None
    nemesis: Nemesis | None = None
    schedule: schedule_file.Schedule | None = None  # the file `--schedule` plays, if any
    recorder: schedule_file.Recorder | None = None  # the actions played (schedule.json)
    collecting: _Collecting | None = None
    history: HistoryWriter | None = None
    error: str | None = None

    def append(self, event: dict[str, Any]) -> dict[str, Any]:
        return self.history.append(event) if self.history is not None else event

    def save(self) -> None:
        store.write_json(self.run_dir / "test.json", self.record)


def run_test(o: TestOptions, progress: Progress | None = None,
             campaign: dict[str, Any] | None = None,
             on_run_dir: Callable[[Path], None] | None = None) -> RunOutcome:
    """Run one test (see the module docstring). Bad options raise InputError before anything
    is created; everything after that ends in a RunOutcome (a crash has exit code 255)."""
    validate(o)
    test = new_test(o, progress or Progress(enabled=False), campaign)
    if on_run_dir is not None:
        on_run_dir(test.run_dir)
    try:
        with cluster_up(test):
            start_db(test)
            with history_open(test):
                with observing(test):
                    run_case(test)
                collect_nodes(test)
    except KeyboardInterrupt:
        test.error = "interrupted"
    except InputError:
        raise
    except Exception as e:  # noqa: BLE001 - recorded; the run is still checked
        test.error = f"{type(e).__name__}: {e}"
        if os.environ.get("WRACK_DEBUG"):
            traceback.print_exc()
    finally:
        end_record(test)
    return analyze(test)


def new_test(o: TestOptions, progress: Progress, campaign: dict[str, Any] | None) -> Test:
    """The run folder and test.json (options, seed, versions; `end` null until the end), the
    workload and the fault packages."""
    seed = o.seed if o.seed is not None else secrets.randbelow(2**31)
    start = dt.datetime.now(dt.UTC)
    name = o.name or test_name(o)
    run_dir = store.new_run(o.results, name, start)
    clients = gen.parse_concurrency(o.concurrency, o.nodes)
    record: dict[str, Any] = {
        "name": name, "run_id": store.run_id(run_dir),
        "start": start.isoformat(timespec="milliseconds"), "end": None, "seed": seed,
        "options": {**o.to_dict(), "seed": seed, "concurrency_threads": clients},
        "cluster": {"backend": o.backend, "name": f"wt{secrets.token_hex(3)}"},
        "versions": store.versions(), "git": store.git_info(), "argv": None,
    }
    if campaign is not None:
        record["campaign"] = campaign
    system = for_system(o)
    wl = system.make_workload(o.workload, record["options"])
    sched = schedule_file.load(o.schedule, system) if o.schedule is not None else None
    if sched is not None:
        table = system.fault_packages(wl.topics())[0]
        packages = [table[n]() for n in sched.packages]
        record["schedule"] = {"file": str(Path(o.schedule).resolve()), "actions": len(sched.actions)}
    else:
        packages = fault_packages(o.nemesis, system, wl.topics())
    test = Test(o, seed, run_dir, record, progress, system, wl, packages, clients + wl.send_lanes(),
                schedule=sched)
    test.save()
    return test


@contextmanager
def cluster_up(test: Test) -> Iterator[None]:
    """The cluster, its DB and the nemesis; on the way out (also after an exception, Ctrl-C or
    SIGTERM: `nemesis.guard.always_heal`) heal, collect what `collect_nodes` did not, stop the
    brokers and remove the cluster."""
    o = test.options
    test.progress.phase("setup")
    # owned by this process: if it dies without its teardown (SIGKILL), the next local cluster
    # made on the host removes this one (clusters/local.py, "owner")
    opts: dict[str, Any] = {"owner": "wrack-test", **({"inventory": o.inventory} if o.inventory else {})}
    test.cluster = backend(o.backend).create(ClusterSpec(name=test.record["cluster"]["name"], nodes=o.nodes,
                                                         transport=o.transport, options=opts))
    test.db = test.system.make_db(o, test.cluster)
    test.nemesis = Nemesis(test.cluster, test.db, test, rng=random.Random(f"{test.seed}/targets"),
                           metadata=test.system.metadata(test.db, test.cluster))
    test.recorder = schedule_file.Recorder([n.name for n in test.cluster.nodes])
    prepare_faults(test.nemesis, test.packages)  # node-side fault machinery (LazyFS, clocks): before db.setup
    test.collecting = _Collecting(test.db, o.collect_data)
    with always_heal(test.cluster, nemesis=test.nemesis, db=test.collecting, run_dir=str(test.run_dir / "nodes")):
        yield


def start_db(test: Test) -> None:
    """Set up and start the DB on every node, wait until each accepts connections and the DB
    serves (`prepare`), then what the system prepares for the workload (e.g. its topics)."""
    test.db.start_all(60)
    test.system.prepare_workload(test.db, test.workload, test.options)


@contextmanager
def history_open(test: Test) -> Iterator[None]:
    """history.jsonl, whose time 0 is now (the start of the workload), closed on the way out."""
    test.history = HistoryWriter(test.run_dir / "history.jsonl")
    test.record["history_start"] = clock_anchor(test.history.start_ns)  # node log times -> history time
    test.save()
    try:
        yield
    finally:
        test.history.close()


@contextmanager
def observing(test: Test) -> Iterator[None]:
    """The system's cluster-state observer (`SystemUnderTest.observer`, e.g. nemesis/observer.py
    over a Kafka-wire system's partitions) while the workload runs, and afterwards until the
    cluster is whole again (at most `--recovery-time-limit` s: the history ends with the
    recovered cluster); its figures go to test.json's `observer`. A system without one is
    not observed."""
    observer = test.system.observer(test.db, test.cluster, test.history)
    if observer is None:
        yield
        return
    observer.start()
    try:
        yield
        observer.wait_whole(test.options.recovery_time_limit)
    finally:
        observer.stop()
        test.record["observer"] = observer.stats.to_dict()


def run_case(test: Test) -> None:
    """The workload and the fault schedule for `--time-limit` s (the workload longer while a
    fault begun before then plays out or the mix's first round is owed, at most
    `harness.faults.OWED_GRACE` more time limits), the heal, then the workload's
    final phase: one generator on the interpreter (docs/harness.md "One test")."""
    o, wl = test.options, test.workload
    test.timings.lap("setup")
    _preload_reporting()
    if test.schedule is not None:  # --schedule FILE: its actions, nothing drawn
        schedule = ScheduleGenerator.played(test.schedule.actions)
    else:
        schedule = ScheduleGenerator(test.packages, o.nemesis_interval, random.Random(f"{test.seed}/schedule"),
                                     rotate=rotates(o.nemesis))
    # no fault starts after the time limit but those the mix's first round still owes (each
    # trigger shape once) or a schedule file's actions (ScheduleGenerator.owes); the workload
    # goes on while a fault under way plays out (a story that began late reaches its trigger
    # under load) or one is owed, at most OWED_GRACE more time limits in all
    clients = gen.clients(load(o, wl.generator()))
    grace = OWED_GRACE * o.time_limit
    main = gen.any_of(gen.while_nemesis_busy(o.time_limit, grace, clients, owed=schedule.owes),
                      gen.overtime(o.time_limit, grace, lambda _ctx: schedule.owes(), gen.nemesis(schedule)))
    steps: list[Any] = [PhaseMark(test, "workload", "setup", o.time_limit), main,
                        PhaseMark(test, "heal", "workload"), gen.nemesis(gen.once(heal_op()))]
    final = wl.final_generator()
    if final is not None:
        steps += [PhaseMark(test, "final", "heal", o.final_time_limit), gen.clients(final)]
    nodes = test.cluster.nodes
    stats = interpreter.run(gen.on_update(wl.observe, gen.phases(*steps)), threads=test.threads,
                            clients=lambda thread, process: wl.client(thread, process,
                                                                      _bootstrap_for(test.db, nodes, thread,
                                                                                     test.nemesis.client_address)),
                            history=test.history, rng=random.Random(test.seed),
                            nemesis=nemesis_client(test.nemesis, test.packages, ready_timeout=o.recovery_time_limit,
                                                   on_played=test.recorder.played if test.recorder else None,
                                                   clock=test.history.now),
                            on_event=test.progress.event, op_timeout=OP_TIMEOUT_REQUESTS * o.request_timeout)
    test.timings.lap("final" if final is not None else "heal")
    test.record["ops"] = {f"{f}:{t}": n for (f, t), n in sorted(stats.counts.items())}
    test.record["workload_summary"] = wl.summary()
    # owed packages that never began: the overtime (OWED_GRACE time limits) ran out first (the verdict's
    # warnings say so); one begun just before it ended its turn after the workload phase
    played = {a.package for a in test.recorder.actions} if test.recorder is not None else set()
    if unplayed := sorted(schedule.owed - played):
        test.record["mix_unplayed"] = unplayed


def load(o: TestOptions, ops: Any) -> Any:
    """The main phase's ops at `--rate` at most, slowed to a trickle in `--lulls`."""
    paced = gen.rate(o.rate, ops)
    spec = lull_spec(o.lulls)
    return paced if spec is None else gen.lulls(*spec, paced)


def _bootstrap_for(db: Any, nodes: list[Any], thread: int, route: Callable[[str], str] = str) -> str:
    """Every node's client address, starting at a different node for each client thread,
    each through `route` (the nemesis's `client_address`: the client-path proxy's listener
    when one is installed)."""
    n = len(nodes)
    return ",".join(route(db.client_address(nodes[(thread + i) % n])) for i in range(n))


class PhaseMark(gen.Generator):
    """Marks the start of phase `name` (yields no op): the time since the last mark goes to
    `timings[ended]`, and the progress display shows the phase with its time limit."""

    def __init__(self, test: Test, name: str, ended: str, limit: float | None = None):
        self.test, self.name, self.ended, self.limit = test, name, ended, limit
        self.done = False

    def op(self, ctx: gen.Context) -> None:
        if not self.done:
            self.done = True
            self.test.timings.lap(self.ended)
            self.test.progress.phase(self.name, self.limit)
        return None


def collect_nodes(test: Test) -> None:
    """Heal, then collect every node's log, config and data into nodes/ and stop its broker
    (in parallel); what fails is left to the guard and noted as `teardown_errors`."""
    test.progress.phase("teardown")
    errs = test.nemesis.teardown()
    errs += test.collecting.finish(test.cluster.nodes, str(test.run_dir / "nodes"))
    if errs:
        test.record["teardown_errors"] = errs


def end_record(test: Test) -> None:
    test.timings.lap("teardown")
    write_schedule(test)
    test.record["end"] = dt.datetime.now(dt.UTC).isoformat(timespec="milliseconds")
    test.record["timings"] = test.timings.marks
    if test.error:
        test.record["error"] = test.error
    test.save()


def write_schedule(test: Test) -> None:
    """schedule.json: the fault actions the run played (harness/schedule_file.py), with the
    packages it prepared and the options that shape a schedule; none when no cluster was made."""
    if test.recorder is None:
        return
    o = test.options
    sched = schedule_file.Schedule(test.recorder.actions, [p.name for p in test.packages], o.db, test.seed,
                                   schedule_file.shaping_options(o.to_dict(), takes(o)))
    sched.write(test.run_dir / "schedule.json")


def analyze(test: Test) -> RunOutcome:
    """Check the history (results.json), draw the plots and the report; the outcome with its
    exit code (an aborted test is at best unknown; one never set up is a crash)."""
    test.progress.phase("check")
    if test.history is None:  # the test never started: nothing to check
        (test.run_dir / "history.jsonl").touch()
    results: dict[str, Any] | None = None
    error = test.error
    try:
        checked = check_run(test.run_dir, time_limit=test.options.checker_time_limit)  # reads test.json's error
        results = checked.results
        test.timings.lap("check")
        problems = render_outputs(test.run_dir, test.record, analysis=checked.analysis)
        if problems:
            results["render_problems"] = problems
            store.write_json(test.run_dir / "results.json", results)
        test.timings.lap("report")
    except InputError as e:
        error = error or f"history: {e}"
    test.record["timings"] = test.timings.marks
    test.save()
    test.progress.close()
    if results is None:
        return RunOutcome(test.run_dir, None, 255, error)
    code = exit_code_for(results.get("valid"))
    if error and error != "interrupted" and code == 2 and "setup" not in test.timings.marks:
        code = 255  # the harness could not even set the test up
    return RunOutcome(test.run_dir, results, code, error)


def _preload_reporting() -> None:
    """Import the plotting and templating libraries in the background while the workload runs
    (about a second of the time spent after it otherwise)."""

    def load() -> None:
        try:
            # lazy: loaded in a background thread while the workload runs (the docstring)
            import jinja2  # noqa: F401
            import matplotlib

            matplotlib.use("Agg")
            import matplotlib.pyplot  # noqa: F401  # lazy: as above, after matplotlib.use("Agg")
        except Exception:  # noqa: BLE001 - the report stage imports them again and reports problems
            pass

    threading.Thread(target=load, name="preload-reporting", daemon=True).start()


class _Collecting:
    """The DB as `always_heal` sees it: collect (data only when asked), then stop.

    `finish(nodes)` does every node in parallel at the end of a normal run (collect, then
    SIGKILL: the test is over, a graceful shutdown would only cost time) and makes the
    guard's own per-node calls no-ops; after an exception the guard does them one by one."""

    def __init__(self, db: Any, data: bool):
        self.db = db
        self.data = data
        self.done: set[str] = set()

    def collect(self, node: Any, run_dir: str) -> Any:
        if node.name in self.done:
            return None
        return self.db.collect(node, run_dir, data=self.data)

    def teardown(self, node: Any) -> None:
        if node.name in self.done:
            return
        self.db.kill(node)
        self.db.teardown(node)

    def finish(self, nodes: list[Any], run_dir: str) -> list[str]:
        errors: list[str] = []

        def one(node: Any) -> None:
            try:
                self.collect(node, run_dir)
                self.teardown(node)
                self.done.add(node.name)
            except Exception as e:  # noqa: BLE001 - the guard retries this node
                errors.append(f"{node.name}: {e}")

        with ThreadPoolExecutor(max_workers=min(8, len(nodes))) as ex:
            list(ex.map(one, nodes))
        return errors


def run_tests(o: TestOptions, progress: Progress | None = None,
              on_outcome: Callable[[RunOutcome], None] | None = None) -> list[RunOutcome]:
    """`--test-count` runs (each with its own seed unless one was given, then seed+i); stops at
    the first run that is not valid, as Jepsen does."""
    outs = []
    for i in range(o.test_count):
        oi = TestOptions(**{**o.to_dict(), "seed": None if o.seed is None else o.seed + i})
        out = run_test(oi, progress)
        outs.append(out)
        if on_outcome is not None:
            on_outcome(out)
        if out.exit_code != 0:
            break
    return outs
