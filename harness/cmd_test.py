"""`wrack test`: run a test on a real cluster and print its verdict and report path.

Creates a cluster (`--backend`), starts a broker on every node, runs the workload with the
nemesis schedule for `--time-limit` s, heals, reads everything back, tears down, checks,
and writes the run folder (docs/results.md). `--test-count N` runs N tests and stops at
the first one that is not valid. Exit codes: 0 valid, 1 invalid, 2 unknown, 254 bad
arguments, 255 crash (of the harness, e.g. a cluster that could not be created).
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from typing import Any

from contracts.errors import EXIT_BAD_INPUT
from harness.options import TestOptions
from harness.progress import Progress


def _csv(s: str) -> list[str]:
    return [x.strip() for x in s.split(",") if x.strip() and x.strip() != "none"]


def add_test_options(p: argparse.ArgumentParser) -> None:
    """The options of one test (shared with `wrack demo`)."""
    d = TestOptions()
    p.add_argument("--name", default=None, help="test name (default: from workload, acks and faults)")
    p.add_argument("--backend", default=d.backend, help=f"where nodes come from: local, docker, ssh (default {d.backend})")
    p.add_argument("--nodes", type=int, default=d.nodes, help=f"number of nodes (default {d.nodes})")
    p.add_argument("--workload", default=d.workload, help=f"queue, log or noop (default {d.workload})")
    p.add_argument("--nemesis", type=_csv, default=d.nemesis, metavar="LIST",
                   help="comma list of fault packages: mix (the fault stories and generic faults in "
                        "rotation with fault-free periods), partition, kill, pause, restart, rolling-restart, "
                        "kill-leader, partition-leader, lrs, hw-truncation, leso, leader-churn, wipe-follower, "
                        "stale-alter-partition, ... or none (default mix)")
    p.add_argument("--nemesis-interval", type=float, default=d.nemesis_interval, metavar="S",
                   help=f"mean seconds between fault actions (default {d.nemesis_interval:g})")
    p.add_argument("--acks", default=d.acks, help="all, 1 or mixed (per op) (default all)")
    p.add_argument("--rf", type=int, default=d.rf, help=f"replication factor (default {d.rf})")
    p.add_argument("--min-isr", type=int, default=d.min_isr, help=f"min.insync.replicas (default {d.min_isr})")
    p.add_argument("--partitions", type=int, default=d.partitions, help=f"partitions per topic (default {d.partitions})")
    p.add_argument("--topics", type=int, default=d.topics, help=f"topics (default {d.topics})")
    p.add_argument("--flush-policy", default=d.flush_policy,
                   help="none (the OS writes back), every (fsync each message) or N messages (default none)")
    p.add_argument("--safeguard-off", action="append", default=[], metavar="NAME", dest="safeguards_off",
                   help="switch a broker safeguard off (repeatable; see docs/broker-replication.md)")
    p.add_argument("--unclean-election", action="store_true",
                   help="unclean.leader.election.enable=true: a configuration that may lose acknowledged "
                        "writes (allowed by the policy), unlike --safeguard-off clean-election-only")
    p.add_argument("--time-limit", type=float, default=d.time_limit, metavar="S",
                   help=f"seconds of workload and faults (default {d.time_limit:g})")
    p.add_argument("--final-time-limit", type=float, default=d.final_time_limit, metavar="S",
                   help=f"seconds the final read-back may take (default {d.final_time_limit:g})")
    p.add_argument("--recovery-time-limit", type=float, default=d.recovery_time_limit, metavar="S",
                   help="seconds after the final heal within which every key must take a write and a read, "
                        f"else the run is invalid with no-recovery (default {d.recovery_time_limit:g})")
    p.add_argument("--rate", type=float, default=d.rate,
                   help=f"client ops per second at most, all threads (default {d.rate:g})")
    p.add_argument("--concurrency", default=d.concurrency,
                   help="consuming client threads: a number, or Kn for K per node (default 1n)")
    p.add_argument("--in-flight", type=int, default=d.in_flight, metavar="N",
                   help="queue workload: send-only processes beside them, so up to N more sends are "
                        f"in flight at once (default {d.in_flight}; 0: none)")
    p.add_argument("--seed", type=int, default=None, help="seed for every random choice (default: random, recorded)")
    p.add_argument("--client", default=d.client, help="confluent (librdkafka) or kafka-python (default confluent)")
    p.add_argument("--request-timeout", type=float, default=d.request_timeout, metavar="S",
                   help=f"seconds before a client request is indeterminate (default {d.request_timeout:g})")
    p.add_argument("--checker-time-limit", type=float, default=d.checker_time_limit, metavar="S",
                   help="seconds a checker may take before the verdict is unknown")
    p.add_argument("--transport", default=d.transport, help="local backend: nsenter or ssh (default nsenter)")
    p.add_argument("--inventory", default=None, metavar="FILE", help="ssh backend: inventory YAML")
    p.add_argument("--controllers", type=int, default=None, metavar="N",
                   help="controller quorum voters, on the first N nodes (combined mode; default 3 for 3 or "
                        "more nodes, else 1)")
    p.add_argument("--broker-command", default=None, metavar="CMD",
                   help="command that runs the broker on a node (default wrack-broker)")
    p.add_argument("--no-data", action="store_true", help="collect node logs but not their data directories")
    p.add_argument("--results", default=None, metavar="DIR", help="results root (default ./results or $WRACK_RESULTS)")
    p.add_argument("--quiet", action="store_true", help="no progress display")
    p.add_argument("--json", action="store_true", help="print one JSON object per run on stdout")


def options_from_args(args: argparse.Namespace) -> Any:
    return TestOptions(
        name=args.name, backend=args.backend, nodes=args.nodes, workload=args.workload, nemesis=args.nemesis,
        nemesis_interval=args.nemesis_interval, acks=args.acks, rf=args.rf, min_isr=args.min_isr,
        partitions=args.partitions, topics=args.topics, flush_policy=args.flush_policy,
        safeguards_off=args.safeguards_off, unclean_election=args.unclean_election,
        time_limit=args.time_limit, rate=args.rate,
        concurrency=args.concurrency, in_flight=args.in_flight, test_count=getattr(args, "test_count", 1), seed=args.seed, client=args.client,
        request_timeout=args.request_timeout, final_time_limit=args.final_time_limit,
        recovery_time_limit=args.recovery_time_limit,
        checker_time_limit=args.checker_time_limit, transport=args.transport, inventory=args.inventory,
        controllers=args.controllers,
        broker_command=shlex.split(args.broker_command) if args.broker_command else None,
        collect_data=not args.no_data, results=args.results)


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("test", help="run a test on a real cluster", description=__doc__.split("\n\n")[0])
    add_test_options(p)
    p.add_argument("--test-count", type=int, default=1, help="run this many tests; stop at the first not valid")
    p.set_defaults(func=run)


def print_outcome(out: Any, as_json: bool) -> None:
    # lazy: `wrack` imports every command module at start (--help); harness.report costs ~12 ms
    from harness.report import verdict_word

    res = out.results or {}
    run_dir = out.run_dir.resolve()
    line = {"run": str(run_dir), "report": str(run_dir / "report.html"), "valid": out.valid,
            "verdict": verdict_word(out.valid) if out.results is not None else "crashed",
            "anomaly_types": res.get("anomaly_types", []), "allowed": res.get("allowed", []),
            "exit_code": out.exit_code}
    if out.error:
        line["error"] = out.error
    if as_json:
        sys.stdout.write(json.dumps(line, default=str) + "\n")
    else:
        kinds = ", ".join(f"{k}{' (allowed)' if k in line['allowed'] else ''}" for k in line["anomaly_types"])
        sys.stdout.write(f"{line['verdict'].upper()}{': ' + kinds if kinds else ''}\n")
        if out.error:
            sys.stdout.write(f"error: {out.error}\n")
        sys.stdout.write(f"report: {line['report']}\n")
    sys.stdout.flush()


def run(args: argparse.Namespace) -> int:
    # lazy: `wrack` imports every command module at start (--help); harness.runner costs ~0.13 s
    from harness.runner import run_tests

    o = options_from_args(args)
    progress = Progress(enabled=not args.quiet)
    outs = run_tests(o, progress, on_outcome=lambda out: print_outcome(out, args.json))
    if not outs:
        return EXIT_BAD_INPUT
    return outs[-1].exit_code
