"""One test, start to finish (docs/ARCHITECTURE.md "Data flow of one test").

`run_test(TestOptions(...))`:

1. a run folder (`contracts.store`), test.json (every option, the seed, versions, git
   revision; `end` null until the test ends);
2. create the cluster (`--backend`), install and start a broker on every node, wait until
   each accepts connections, create the workload's topics (every partition has a leader);
   then history.jsonl is opened: its time 0 is the start of the workload;
3. the main phase: the workload's ops at `--rate` at most, on `--concurrency` client threads
   (and the queue workload's `--in-flight` send-only threads beside them), and the
   nemesis schedule (`--nemesis`, a fault every `--nemesis-interval` s), for `--time-limit` s;
4. heal: every package's final ops, then `Nemesis.heal_all`; wait until every broker
   accepts connections again;
5. the final phase: the workload's read-back (queue: assign all keys from the beginning,
   poll until every acknowledged offset was read, or `--final-time-limit`);
6. teardown, always (also on exceptions and Ctrl-C: `nemesis.guard.always_heal`): heal,
   collect each node's log, config and data into nodes/<node>/, stop brokers, remove the
   cluster;
7. check (`harness.analysis`): results.json with the expected-anomaly policy, plots,
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
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import workloads
from broker.core.safeguards import REGISTRY as SAFEGUARDS
from clusters.backends import BACKENDS, backend
from clusters.db import BROKER_PORT, BrokerDB, BrokerOptions
from clusters.node import ClusterSpec
from contracts import generator as gen
from contracts import store
from contracts.errors import InputError, exit_code_for
from contracts.history import FINAL_HEAL_F, HistoryWriter
from contracts.options import TestOptions, check_choices
from harness import interpreter
from harness.analysis import check_run, render_outputs, workload_options
from harness.faults import HEAL_F, ScheduleGenerator, fault_packages, heal_op, rotates
from harness.nodelogs import clock_anchor
from harness.progress import Progress
from nemesis.core import FaultOp, Nemesis
from nemesis.guard import always_heal
from nemesis.observer import ClusterObserver
from nemesis.schedule import final_ops
from nemesis.schedule import prepare as prepare_faults
from nemesis.targets import KafkaMetadata
from workloads.kafka_io import create_topics

FLUSH_POLICIES = ("none", "every")


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
    """The default test name: workload, acks, faults, switched-off safeguards."""
    parts = [o.workload, f"acks{o.acks}", "+".join(o.nemesis) or "nofaults"]
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

    if o.workload not in workloads.WORKLOADS:
        bad("workload", f"unknown workload {o.workload!r} (known: {', '.join(workloads.WORKLOADS)})")
    if o.nodes < 1:
        bad("nodes", "at least 1")
    o.acks = {"-1": "all"}.get(str(o.acks), str(o.acks))
    check_choices(o)
    if not 1 <= o.rf <= o.nodes:
        bad("rf", f"{o.rf} must be between 1 and the number of nodes ({o.nodes})")
    if not 1 <= o.min_isr <= o.rf:
        bad("min-isr", f"{o.min_isr} must be between 1 and the replication factor ({o.rf})")
    if o.partitions < 1 or o.topics < 1:
        bad("partitions", "at least 1")
    if o.flush_policy not in FLUSH_POLICIES and not str(o.flush_policy).isdigit():
        bad("flush-policy", f"{o.flush_policy!r} is not none, every or a number of messages")
    for opt, v in (("time-limit", o.time_limit), ("rate", o.rate), ("nemesis-interval", o.nemesis_interval),
                   ("recovery-time-limit", o.recovery_time_limit)):
        if not v > 0:
            bad(opt, f"{v} must be positive")
    if o.test_count < 1:
        bad("test-count", "at least 1")
    if o.controllers is not None and not 1 <= o.controllers <= o.nodes:
        bad("controllers", f"{o.controllers} must be between 1 and the number of nodes ({o.nodes})")
    if o.in_flight < 0:
        bad("in-flight", f"{o.in_flight} must not be negative")
    try:
        gen.parse_concurrency(o.concurrency, o.nodes)
    except ValueError as e:
        bad("concurrency", str(e))
    try:
        fault_packages(o.nemesis, {"t": 1})
    except ValueError as e:
        bad("nemesis", str(e))
    if o.safeguards_off:
        unknown = [s for s in o.safeguards_off if s not in SAFEGUARDS]
        if unknown:
            bad("safeguard-off", f"unknown safeguard {', '.join(unknown)} (known: {', '.join(sorted(SAFEGUARDS))})")
    if o.backend not in BACKENDS:
        bad("backend", f"unknown backend {o.backend!r} (known: {', '.join(sorted(BACKENDS))})")


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


class _Timings:
    def __init__(self) -> None:
        self.marks: dict[str, float] = {}
        self._t = time.monotonic()

    def lap(self, name: str) -> None:
        now = time.monotonic()
        self.marks[name] = round(self.marks.get(name, 0.0) + now - self._t, 3)
        self._t = now


def _bootstrap_for(nodes: list[Any], thread: int) -> str:
    n = len(nodes)
    order = [nodes[(thread + i) % n] for i in range(n)]
    return ",".join(f"{x.address}:{BROKER_PORT}" for x in order)


def run_test(o: TestOptions, progress: Progress | None = None,
             campaign: dict[str, Any] | None = None,
             on_run_dir: Callable[[Path], None] | None = None) -> RunOutcome:
    """Run one test (see the module docstring). Bad options raise InputError before anything
    is created; everything after that ends in a RunOutcome (a crash has exit code 255)."""
    validate(o)
    progress = progress or Progress(enabled=False)
    seed = o.seed if o.seed is not None else secrets.randbelow(2**31)
    name = o.name or test_name(o)
    start = dt.datetime.now(dt.UTC)
    run_dir = store.new_run(o.results, name, start)
    if on_run_dir is not None:
        on_run_dir(run_dir)
    cluster_name = f"wt{secrets.token_hex(3)}"
    clients = gen.parse_concurrency(o.concurrency, o.nodes)
    test: dict[str, Any] = {
        "name": name, "run_id": store.run_id(run_dir), "start": start.isoformat(timespec="milliseconds"),
        "end": None, "seed": seed, "options": {**o.to_dict(), "seed": seed, "concurrency_threads": clients},
        "cluster": {"backend": o.backend, "name": cluster_name}, "versions": store.versions(),
        "git": store.git_info(), "argv": None,
    }
    if campaign is not None:
        test["campaign"] = campaign
    store.write_json(run_dir / "test.json", test)
    timings = _Timings()
    wl = workloads.make(o.workload, workload_options(test["options"]))
    threads = clients + wl.send_lanes()
    topics = wl.topics()
    pkgs = fault_packages(o.nemesis, topics)
    history: HistoryWriter | None = None  # opened when the workload starts: time 0 is its start
    observer = None  # nemesis.observer.ClusterObserver: cluster-state events while the workload runs
    error: str | None = None
    cluster = None
    try:
        progress.phase("setup")
        mod = backend(o.backend)
        opts = {"inventory": o.inventory} if o.inventory else {}
        cluster = mod.create(ClusterSpec(name=cluster_name, nodes=o.nodes, transport=o.transport, options=opts))
        db = BrokerDB(cluster, broker_options(o))
        nem = Nemesis(cluster, db, None, rng=random.Random(f"{seed}/targets"),
                      metadata=KafkaMetadata(db.bootstrap_servers(), active_controller=db.active_controller))
        prepare_faults(nem, pkgs)  # node-side fault machinery (LazyFS mounts, clock preload): before db.setup
        collecting = _Collecting(db, o.collect_data)
        with always_heal(cluster, nemesis=nem, db=collecting, run_dir=str(run_dir / "nodes")):
            with ThreadPoolExecutor(max_workers=min(8, len(cluster.nodes))) as ex:
                list(ex.map(db.setup, cluster.nodes))
                list(ex.map(db.start, cluster.nodes))
                list(ex.map(lambda n: db.wait_ready(n, 60), cluster.nodes))
            if topics:
                create_topics(db.bootstrap_servers(), topics, replication_factor=o.rf,
                              config=topic_config(o), timeout=60)
            history = HistoryWriter(run_dir / "history.jsonl")
            test["history_start"] = clock_anchor(history.start_ns)  # node log times -> history time
            store.write_json(run_dir / "test.json", test)
            nem.history = history
            observer = ClusterObserver(KafkaMetadata(db.bootstrap_servers(), timeout=2.0,
                                                     active_controller=db.active_controller),
                                       {n.name: n.address for n in cluster.nodes}, history).start()
            timings.lap("setup")
            _preload_reporting()

            def nemesis_op(op: dict[str, Any]) -> Any:
                try:
                    if op["f"] == HEAL_F:
                        errs = []
                        for fop in final_ops(pkgs):
                            try:
                                nem.invoke(fop)
                            except Exception as e:  # noqa: BLE001
                                errs.append(f"{fop.f}: {e}")
                        errs += nem.heal_all()
                        for n in cluster.nodes:
                            try:
                                db.wait_ready(n, 30)
                            except Exception as e:  # noqa: BLE001
                                errs.append(f"{n.name} not ready: {e}")
                        if errs:
                            history.append({"process": "nemesis", "type": "info", "f": "heal-errors",
                                            "value": {"errors": errs}})
                        history.append({"process": "nemesis", "type": "info", "f": FINAL_HEAL_F,
                                        "value": {"healed": not errs}})  # liveness is judged from here
                        return None
                    return nem.invoke(FaultOp(op["f"], op.get("value")))
                except Exception as e:  # noqa: BLE001 - a fault that fails is recorded, the test goes on
                    history.append({"process": "nemesis", "type": "info", "f": "nemesis-error",
                                    "value": {"f": op["f"], "spec": op.get("value"), "error": f"{type(e).__name__}: {e}"}})
                    return None

            sched_rng = random.Random(f"{seed}/schedule")
            main = gen.time_limit(o.time_limit, gen.any_of(
                gen.clients(gen.rate(o.rate, wl.generator())),
                gen.nemesis(ScheduleGenerator(pkgs, o.nemesis_interval, sched_rng, rotate=rotates(o.nemesis)))))
            final = wl.final_generator()
            phase_names = iter(["workload", "heal", "final"])
            phase_limits = {"workload": o.time_limit, "final": o.final_time_limit}

            class _PhaseMarker(gen.Generator):
                """Marks phase boundaries for timings and progress (yields no op)."""

                def op(self, ctx: gen.Context) -> None:
                    name = next(phase_names, None)
                    if name is not None:
                        timings.lap({"workload": "setup", "heal": "workload", "final": "heal"}[name])
                        progress.phase(name, phase_limits.get(name))
                    return None

            steps: list[Any] = [_PhaseMarker(), main, _PhaseMarker(), gen.nemesis(gen.once(heal_op()))]
            if final is not None:
                steps += [_PhaseMarker(), gen.clients(final)]
            clients = {}  # thread -> bootstrap

            def open_client(thread: int, process: int) -> Any:
                bs = clients.get(thread) or _bootstrap_for(cluster.nodes, thread)
                clients[thread] = bs
                return wl.client(thread, process, bs)

            stats = interpreter.run(gen.on_update(wl.observe, gen.phases(*steps)), threads=threads, clients=open_client, history=history,
                                    rng=random.Random(seed), nemesis=nemesis_op, on_event=progress.event)
            timings.lap("final" if final is not None else "heal")
            test["ops"] = {f"{f}:{t}": n for (f, t), n in sorted(stats.counts.items())}
            if hasattr(wl, "summary"):
                test["workload_summary"] = wl.summary()
            observer.stop()
            test["observer"] = observer.stats.to_dict()
            progress.phase("teardown")
            errs = nem.teardown()
            errs += collecting.finish(cluster.nodes, str(run_dir / "nodes"))
            if errs:
                test["teardown_errors"] = errs
    except KeyboardInterrupt:
        error = "interrupted"
    except InputError:
        raise
    except Exception as e:  # noqa: BLE001 - recorded; the run is still checked
        error = f"{type(e).__name__}: {e}"
        if os.environ.get("WRACK_DEBUG"):
            traceback.print_exc()
    finally:
        if observer is not None:
            observer.stop()
        if history is not None:
            history.close()
        timings.lap("teardown")
        test["end"] = dt.datetime.now(dt.UTC).isoformat(timespec="milliseconds")
        test["timings"] = timings.marks
        if error:
            test["error"] = error
        store.write_json(run_dir / "test.json", test)
    progress.phase("check")
    results: dict[str, Any] | None = None
    if history is None:  # the test never started: nothing to check
        (run_dir / "history.jsonl").touch()
    try:
        checked = check_run(run_dir, time_limit=o.checker_time_limit)
        results = checked.results
        if error:
            results["run_error"] = error
            if results.get("valid") is True:
                results["valid"] = "unknown"  # an aborted test proves nothing
            store.write_json(run_dir / "results.json", results)
        timings.lap("check")
        problems = render_outputs(run_dir, test, analysis=checked.analysis)
        if problems:
            results["render_problems"] = problems
            store.write_json(run_dir / "results.json", results)
        timings.lap("report")
    except InputError as e:
        error = error or f"history: {e}"
    test["timings"] = timings.marks
    store.write_json(run_dir / "test.json", test)
    progress.close()
    if results is None:
        return RunOutcome(run_dir, None, 255, error)
    code = exit_code_for(results.get("valid"))
    if error and error != "interrupted" and code == 2 and "setup" not in timings.marks:
        code = 255  # the harness could not even set the test up
    return RunOutcome(run_dir, results, code, error)


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

