"""`python -m compat`: run the client suites against 1- and 3-node clusters, print the table.

Exit codes: 0 when every failure is listed in the expected-failures file, 1 when a test
failed that is not (or a suite could not run, or a broker died during a suite),
254 for bad arguments or a bad expected-failures file.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from dataclasses import asdict
from pathlib import Path

from compat import kafka_python, librdkafka
from compat.cluster import LocalCluster
from compat.verdict import EXPECTED_FILE, SuiteRun, compare_with_expected, load_expected, table

ROOT = Path(__file__).resolve().parent.parent
SUITES = (kafka_python.SUITE, librdkafka.SUITE)

# The 3-node cluster replicates auto-created topics on every node (the suites' own topics
# keep the replication factor they ask for).
CLUSTER_SETTINGS = {1: {}, 3: {"default.replication.factor": "3"}}

# `--quick` (CI: about 3 minutes on 2 cores once librdkafka is built, which takes 3 more):
# kafka-python's whole suite on one node with a 30 s per-test limit, and librdkafka's tests
# that take under 15 s each on three (produce/consume, compression, groups and rebalances,
# offsets, seeks, admin, idempotence, transactions' first failure).
QUICK_PLAN = [(kafka_python.SUITE, 1), (librdkafka.SUITE, 3)]
QUICK_LIBRDKAFKA = ["0001", "0011", "0012", "0013", "0014", "0015", "0017", "0022", "0030", "0031", "0034",
                    "0039", "0040", "0042", "0044", "0048", "0050", "0051", "0054", "0056", "0063", "0081",
                    "0084", "0085", "0086", "0090", "0092", "0099", "0103", "0110", "0113", "0118"]


def default_cache() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(os.environ.get("WRACK_COMPAT_CACHE", Path(base) / "wrack" / "compat"))


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m compat", description=__doc__.splitlines()[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="the CI subset (see QUICK_PLAN in compat/__main__.py)")
    p.add_argument("--suite", action="append", choices=SUITES, help="only this suite (repeatable)")
    p.add_argument("--nodes", default="1,3", help="cluster sizes, comma-separated (default 1,3)")
    p.add_argument("--tests", help="librdkafka: only these test numbers (comma-separated); "
                   "kafka-python: only these node ids below test/integration/")
    p.add_argument("--jobs", type=int, default=4, help="librdkafka test-runner processes at a time (default 4)")
    p.add_argument("--cache", type=Path, default=default_cache(), help="librdkafka source/build and the "
                   "kafka-python venv (default ~/.cache/wrack/compat; WRACK_COMPAT_CACHE)")
    p.add_argument("--logs", type=Path, help="where the suites' and brokers' logs go (default results/compat-<time>)")
    p.add_argument("--expected", type=Path, default=EXPECTED_FILE, help="the expected-failures file")
    p.add_argument("--json", type=Path, help="also write every case and the verdict as JSON here")
    return p


def plan_of(args: argparse.Namespace) -> list[tuple[str, int]]:
    suites = args.suite or list(SUITES)
    if args.quick:
        return [(s, n) for s, n in QUICK_PLAN if s in suites]
    sizes = [int(n) for n in args.nodes.split(",")]
    return [(s, n) for n in sizes for s in suites]


def prepare(suite: str, cache: Path) -> Path:
    """The suite's interpreter (kafka-python) or test-runner (librdkafka)."""
    if suite == kafka_python.SUITE:
        return kafka_python.ensure_venv(cache)
    return librdkafka.prepare(cache)


def run_suite(suite: str, nodes: int, tool: Path, args: argparse.Namespace, logs: Path) -> SuiteRun:
    """One suite against a fresh cluster of `nodes` (librdkafka: then the tests of its other
    scenarios, each against a fresh cluster with that scenario's settings)."""
    tests = args.tests.split(",") if args.tests else None
    print(f"compat: {suite} against {nodes} node(s)", flush=True)
    if suite == kafka_python.SUITE:
        return on_cluster(nodes, {}, logs, lambda bs: kafka_python.run(
            tool, bs, nodes, logs, timeout=30 if args.quick else 60, select=tests))
    numbers = tests or (QUICK_LIBRDKAFKA if args.quick else None)
    run = on_cluster(nodes, librdkafka.SUITE_SETTINGS, logs, lambda bs: librdkafka.run(
        tool, bs, nodes, logs, jobs=args.jobs, numbers=numbers))
    for scenario, settings in librdkafka.SCENARIOS.items():
        waiting = {c.test for c in run.cases if c.message == f"scenario {scenario}"}
        if not waiting:
            continue
        print(f"compat: {suite} against {nodes} node(s), scenario {scenario}", flush=True)
        more = on_cluster(nodes, {**librdkafka.SUITE_SETTINGS, **settings}, logs / scenario,
                          lambda bs, sc=scenario, w=waiting: librdkafka.run(
                              tool, bs, nodes, logs / sc, jobs=args.jobs, numbers=sorted({t[:4] for t in w}), scenario=sc))
        ran = {c.test: c for c in more.cases if c.test in waiting}
        run.cases = [ran.get(c.test, c) for c in run.cases]
        run.seconds += more.seconds
        run.error = run.error or more.error
    return run


def on_cluster(nodes: int, settings: dict[str, str], logs: Path, body) -> SuiteRun:
    """body(bootstrap) against a fresh cluster of `nodes`; a broker that died fails the run."""
    with LocalCluster(nodes, {**CLUSTER_SETTINGS.get(nodes, {}), **settings}, keep_logs=logs / "brokers") as cluster:
        run = body(cluster.bootstrap)
        dead = cluster.crashed()
        if dead:
            run.error = f"broker node(s) {dead} exited during the suite (see {logs / 'brokers'})"
    return run


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        expected = load_expected(args.expected)
        plan = plan_of(args)
    except (OSError, ValueError) as e:
        print(f"compat: {e}", file=sys.stderr)
        return 254
    logs = args.logs or ROOT / "results" / time.strftime("compat-%Y%m%d-%H%M%S", time.gmtime())
    tools: dict[str, Path | str] = {}
    runs = []
    for suite, nodes in plan:
        if suite not in tools:
            try:
                tools[suite] = prepare(suite, args.cache)
            except Exception as e:  # noqa: BLE001 - the table says why the suite did not run
                tools[suite] = f"could not prepare {suite}: {e}"
        tool = tools[suite]
        if isinstance(tool, str):
            runs.append(SuiteRun(suite, nodes, error=tool))
            continue
        try:
            runs.append(run_suite(suite, nodes, tool, args, logs / f"{suite}-{nodes}n"))
        except (RuntimeError, TimeoutError, OSError) as e:
            runs.append(SuiteRun(suite, nodes, error=f"cluster or suite did not start: {e}"))
    verdict = compare_with_expected(runs, expected)
    print()
    print(table(runs, verdict))
    print(f"\nlogs: {logs}")
    if args.json:
        args.json.write_text(json.dumps({"runs": [asdict(r) for r in runs],
                                         "failures": [asdict(f) for f in verdict.failures],
                                         "now_passing": verdict.now_passing, "exit_code": verdict.exit_code},
                                        indent=1))
    return verdict.exit_code


if __name__ == "__main__":
    sys.exit(main())
