"""One test, start to finish (docs/ARCHITECTURE.md "Data flow of one test").

`run_test(TestOptions(...))` is Jepsen's `run!`: nested scopes, each a short stage that
reads and extends one `Test` record, each undone on the way out whatever happens:

    with cluster_up(test):              # cluster, DB, nemesis; heal + collect + remove, always
        start_db(test)                  # the DB on every node, the workload's topics
        with history_open(test):        # history.jsonl: its time 0 is the workload's start
            with observing(test):       # the cluster-state observer
                run_case(test)          # workload + fault schedule, heal, final read-back
            collect_nodes(test)         # logs, configs, data into nodes/<node>/
    end_record(test)                    # test.json: end, timings, error
    analyze(test)                       # results.json, plots, timeline, report.html

1. `new_test`: a run folder (`contracts.store`), test.json (every option, the seed,
   versions, git revision; `end` null until the test ends);
2. the main phase: the workload's ops at `--rate` at most, on `--concurrency` client threads
   (and the queue workload's `--in-flight` send-only threads beside them), and the
   nemesis schedule (`--nemesis`, a fault every `--nemesis-interval` s), for `--time-limit` s;
3. heal: the nemesis's `final_heal` (every package's final ops, `heal_all`, every broker
   ready again, waiting at most `--recovery-time-limit` s for each);
4. the final phase: the workload's read-back (queue: assign all keys from the beginning,
   poll until every acknowledged offset was read, or `--final-time-limit`);
5. teardown, always (also on exceptions, Ctrl-C and SIGTERM: `nemesis.guard.always_heal`);
6. check (`harness.analysis`): results.json with the expected-anomaly policy, plots,
   timeline, report.html.

Every random choice comes from the seed: the generator's rng is `Random(seed)`, the fault
schedule's `Random("seed/schedule")`, the nemesis's target choices `Random("seed/targets")`.
`timings` in test.json records how long each stage took (bench/harness.py reads them).
"""

from __future__ import annotations

import datetime as dt
import os
import random
import secrets
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import workloads
from broker.core.safeguards import REGISTRY as SAFEGUARDS
from clusters.backends import BACKENDS, backend
from clusters.db import BrokerDB, BrokerOptions, ServiceDB
from clusters.etcd import EtcdDB
from clusters.node import ClusterSpec
from contracts import generator as gen
from contracts import store
from contracts.errors import InputError, exit_code_for
from contracts.history import HistoryWriter
from contracts.options import DEFAULTS, TestOptions, acks_name, check_choices, workload_of
from harness import interpreter
from harness.analysis import check_run, render_outputs
from harness.faults import ScheduleGenerator, fault_packages, heal_op, nemesis_client, rotates
from harness.nodelogs import clock_anchor
from harness.progress import Progress
from nemesis.core import Nemesis
from nemesis.guard import always_heal
from nemesis.observer import ClusterObserver
from nemesis.schedule import prepare as prepare_faults
from nemesis.targets import KafkaMetadata, LeaderMetadata
from workloads.base import WorkloadOptions
from workloads.kafka_io import create_topics

FLUSH_POLICIES = ("none", "every")
DB_WORKLOADS = {"wrack": ("queue", "log", "noop"), "etcd": ("register",)}  # the workloads each --db runs


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
    """The default test name: workload, acks, faults, switched-off safeguards (etcd: the DB,
    workload, read mode and faults)."""
    workload = workload_of(o)
    faults = "+".join(o.nemesis) or "nofaults"
    if o.db == "etcd":
        return store.safe_name("-".join([o.db, workload, f"{o.etcd_reads}-reads", faults]))
    parts = [workload, f"acks{o.acks}", faults]
    if o.min_isr != DEFAULTS.min_isr:
        parts.insert(2, f"minisr{o.min_isr}")
    if o.safeguards_off:
        parts.append("off-" + "+".join(o.safeguards_off))
    if o.unclean_election:
        parts.append("unclean")
    return store.safe_name("-".join(parts))


def flush_interval(policy: str) -> int | None:
    if policy == "none":
        return None
    if policy == "every":
        return 1
    return int(policy)


def validate(o: TestOptions) -> None:
    """Raise InputError naming the first bad option."""
    def bad(opt: str, msg: str) -> None:
        raise InputError(f"--{opt}: {msg}")

    o.acks = acks_name(o.acks)
    check_choices(o)
    o.workload = workload_of(o)
    if o.workload not in workloads.WORKLOADS:
        bad("workload", f"unknown workload {o.workload!r} (known: {', '.join(workloads.WORKLOADS)})")
    if o.workload not in DB_WORKLOADS[o.db]:
        bad("workload", f"{o.workload} does not run on --db {o.db} (its workloads: {', '.join(DB_WORKLOADS[o.db])})")
    if o.nodes < 1:
        bad("nodes", "at least 1")
    if o.db == "wrack":
        _validate_broker(o, bad)
    elif o.safeguards_off or o.unclean_election:
        bad("safeguard-off" if o.safeguards_off else "unclean-election", f"a wrack-broker option, not for --db {o.db}")
    for opt, v in (("time-limit", o.time_limit), ("rate", o.rate), ("nemesis-interval", o.nemesis_interval),
                   ("recovery-time-limit", o.recovery_time_limit)):
        if not v > 0:
            bad(opt, f"{v} must be positive")
    if o.test_count < 1:
        bad("test-count", "at least 1")
    if o.in_flight < 0:
        bad("in-flight", f"{o.in_flight} must not be negative")
    if not 0 <= o.txn_p <= 1 or o.txn_p > 0 and o.client != "confluent":
        bad("txn-p", f"{o.txn_p} must be between 0 and 1, and transactions need --client confluent")
    try:
        gen.parse_concurrency(o.concurrency, o.nodes)
    except ValueError as e:
        bad("concurrency", str(e))
    try:
        fault_packages(o.nemesis, {"t": 1}, db=o.db)
    except ValueError as e:
        bad("nemesis", str(e))
    if o.backend not in BACKENDS:
        bad("backend", f"unknown backend {o.backend!r} (known: {', '.join(sorted(BACKENDS))})")


def _validate_broker(o: TestOptions, bad: Callable[[str, str], None]) -> None:
    """The options of wrack-broker's cluster (`validate`)."""
    if not 1 <= o.rf <= o.nodes:
        bad("rf", f"{o.rf} must be between 1 and the number of nodes ({o.nodes})")
    if not 1 <= o.min_isr <= o.rf:
        bad("min-isr", f"{o.min_isr} must be between 1 and the replication factor ({o.rf})")
    if o.partitions < 1 or o.topics < 1:
        bad("partitions", "at least 1")
    if o.flush_policy not in FLUSH_POLICIES and not str(o.flush_policy).isdigit():
        bad("flush-policy", f"{o.flush_policy!r} is not none, every or a number of messages")
    if o.controllers is not None and not 1 <= o.controllers <= o.nodes:
        bad("controllers", f"{o.controllers} must be between 1 and the number of nodes ({o.nodes})")
    unknown = [s for s in o.safeguards_off if s not in SAFEGUARDS]
    if unknown:
        bad("safeguard-off", f"unknown safeguard {', '.join(unknown)} (known: {', '.join(sorted(SAFEGUARDS))})")


def make_db(o: TestOptions, cluster: Any) -> ServiceDB:
    """The system under test on `cluster` (`--db`)."""
    if o.db == "etcd":
        return EtcdDB(cluster)
    return BrokerDB(cluster, broker_options(o))


def cluster_metadata(db: ServiceDB, cluster: Any, timeout: float = 5.0) -> Any:
    """What role targets and the observer read: the brokers' Kafka metadata, or for another
    DB its leader (`LeaderMetadata`)."""
    if isinstance(db, BrokerDB):
        return KafkaMetadata(db.bootstrap_servers(), timeout=timeout, active_controller=db.active_controller)
    return LeaderMetadata([n.address for n in cluster.nodes], db.leader_address)


def broker_options(o: TestOptions) -> Any:
    extra = {"unclean.leader.election.enable": str(bool(o.unclean_election)).lower()}
    if o.safeguards_off:
        extra["wrack.safeguards.off"] = ",".join(o.safeguards_off)
    bo = BrokerOptions(controllers=o.controllers, replication_factor=o.rf, min_insync_replicas=o.min_isr,
                       flush_interval_messages=flush_interval(o.flush_policy), extra=extra)
    if o.broker_command:
        bo.command = list(o.broker_command)
    elif o.backend == "local":  # local nodes share this machine's files: this environment's broker
        exe = Path(sys.executable).parent / "wrack-broker"
        if exe.exists():
            bo.command = [str(exe)]
    return bo


def topic_config(o: TestOptions) -> dict[str, str]:
    cfg = {"min.insync.replicas": str(o.min_isr)}
    if o.safeguards_off:
        cfg["wrack.safeguards.off"] = ",".join(o.safeguards_off)
    return cfg


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
    workload: Any
    packages: list[Any]
    threads: int
    timings: Timings = field(default_factory=Timings)
    cluster: Any = None
    db: ServiceDB | None = None
    nemesis: Nemesis | None = None
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
    wl = workloads.make(o.workload, WorkloadOptions.from_test(record["options"]))
    test = Test(o, seed, run_dir, record, progress, wl, fault_packages(o.nemesis, wl.topics(), db=o.db),
                clients + wl.send_lanes())
    test.save()
    return test


@contextmanager
def cluster_up(test: Test) -> Iterator[None]:
    """The cluster, its DB and the nemesis; on the way out (also after an exception, Ctrl-C or
    SIGTERM: `nemesis.guard.always_heal`) heal, collect what `collect_nodes` did not, stop the
    brokers and remove the cluster."""
    o = test.options
    test.progress.phase("setup")
    opts = {"inventory": o.inventory} if o.inventory else {}
    test.cluster = backend(o.backend).create(ClusterSpec(name=test.record["cluster"]["name"], nodes=o.nodes,
                                                         transport=o.transport, options=opts))
    test.db = make_db(o, test.cluster)
    test.nemesis = Nemesis(test.cluster, test.db, test, rng=random.Random(f"{test.seed}/targets"),
                           metadata=cluster_metadata(test.db, test.cluster))
    prepare_faults(test.nemesis, test.packages)  # node-side fault machinery (LazyFS, clocks): before db.setup
    test.collecting = _Collecting(test.db, o.collect_data)
    with always_heal(test.cluster, nemesis=test.nemesis, db=test.collecting, run_dir=str(test.run_dir / "nodes")):
        yield


def start_db(test: Test) -> None:
    """Set up and start the DB on every node, wait until each accepts connections and the DB
    serves (`prepare`), and create the workload's topics (every partition with a leader)."""
    db = test.db
    db.start_all(60)
    topics = test.workload.topics()
    if topics:
        create_topics(db.bootstrap_servers(), topics, replication_factor=test.options.rf,
                      config=topic_config(test.options), timeout=60)


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
    """The cluster-state observer (`nemesis.observer`: the broker's partitions) while the
    workload runs, and afterwards until every partition has a leader and a full ISR again
    (at most `--recovery-time-limit` s: the history ends with the recovered cluster); its
    figures go to test.json's `observer`. Other DBs are not observed."""
    if not isinstance(test.db, BrokerDB):
        yield
        return
    observer = ClusterObserver(cluster_metadata(test.db, test.cluster, timeout=2.0),
                               {n.name: n.address for n in test.cluster.nodes}, test.history).start()
    try:
        yield
        observer.wait_whole(test.options.recovery_time_limit)
    finally:
        observer.stop()
        test.record["observer"] = observer.stats.to_dict()


def run_case(test: Test) -> None:
    """The workload and the fault schedule for `--time-limit` s (the workload longer while a
    fault begun before then plays out, at most twice as long), the heal, then the workload's
    final phase: one generator on the interpreter (docs/harness.md "One test")."""
    o, wl = test.options, test.workload
    test.timings.lap("setup")
    _preload_reporting()
    schedule = ScheduleGenerator(test.packages, o.nemesis_interval, random.Random(f"{test.seed}/schedule"),
                                 rotate=rotates(o.nemesis))
    # no fault starts after the time limit; the workload goes on while one under way plays out
    # (a story that began late reaches its trigger under load), at most another time limit
    main = gen.any_of(gen.while_nemesis_busy(o.time_limit, o.time_limit, gen.clients(gen.rate(o.rate, wl.generator()))),
                      gen.time_limit(o.time_limit, gen.nemesis(schedule)))
    steps: list[Any] = [PhaseMark(test, "workload", "setup", o.time_limit), main,
                        PhaseMark(test, "heal", "workload"), gen.nemesis(gen.once(heal_op()))]
    final = wl.final_generator()
    if final is not None:
        steps += [PhaseMark(test, "final", "heal", o.final_time_limit), gen.clients(final)]
    nodes = test.cluster.nodes
    stats = interpreter.run(gen.on_update(wl.observe, gen.phases(*steps)), threads=test.threads,
                            clients=lambda thread, process: wl.client(thread, process,
                                                                      _bootstrap_for(test.db, nodes, thread)),
                            history=test.history, rng=random.Random(test.seed),
                            nemesis=nemesis_client(test.nemesis, test.packages, ready_timeout=o.recovery_time_limit),
                            on_event=test.progress.event)
    test.timings.lap("final" if final is not None else "heal")
    test.record["ops"] = {f"{f}:{t}": n for (f, t), n in sorted(stats.counts.items())}
    test.record["workload_summary"] = wl.summary()


def _bootstrap_for(db: ServiceDB, nodes: list[Any], thread: int) -> str:
    """Every node's client address, starting at a different node for each client thread."""
    n = len(nodes)
    return ",".join(db.client_address(nodes[(thread + i) % n]) for i in range(n))


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
    test.record["end"] = dt.datetime.now(dt.UTC).isoformat(timespec="milliseconds")
    test.record["timings"] = test.timings.marks
    if test.error:
        test.record["error"] = test.error
    test.save()


def analyze(test: Test) -> RunOutcome:
    """Check the history (results.json), draw the plots and the report; the outcome with its
    exit code (an aborted test is at best unknown; one never set up is a crash)."""
    test.progress.phase("check")
    if test.history is None:  # the test never started: nothing to check
        (test.run_dir / "history.jsonl").touch()
    results: dict[str, Any] | None = None
    error = test.error
    try:
        checked = check_run(test.run_dir, time_limit=test.options.checker_time_limit)
        results = checked.results
        if error:
            results["run_error"] = error
            if results.get("valid") is True:
                results["valid"] = "unknown"  # an aborted test proves nothing
            store.write_json(test.run_dir / "results.json", results)
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

