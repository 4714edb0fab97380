"""`wrack check`: run a checker over history files and print the result JSON.

One file: the result object on stdout. Several files: one JSON object per line, each with
a `file` field. The exit code is the worst verdict: any invalid 1, else any unknown 2,
else 0; bad input (any file) 254.

Checkers are modules with `check_path(path, args) -> dict` returning docs/ARCHITECTURE.md's result
object; they raise `InputError` for bad input. All options are declared here, grouped by
the checker that reads them.
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
from typing import Any

from checkers.queue.policy import POLICIES
from contracts.errors import EXIT_INVALID, EXIT_UNKNOWN, EXIT_VALID
from contracts.options import GeneralOptions

CHECKER_TIME_LIMIT = GeneralOptions().checker_time_limit  # `wrack test`'s default

CHECKERS: dict[str, str] = {
    "linearizable": "checkers.linearizable.cli",
    "queue": "checkers.queue.cli",
}


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("check", help="check history files", description=__doc__.split("\n\n")[0])
    p.add_argument("files", nargs="+", metavar="FILE", help="history files")
    p.add_argument("--checker", choices=sorted(CHECKERS), default="linearizable", help="which checker")
    p.add_argument("--json", action="store_true", help="compact JSON (one line per file)")
    p.add_argument("--time-limit", type=float, default=CHECKER_TIME_LIMIT, metavar="S",
                   help="give up after S seconds per file: the verdict is then 'unknown', saying how far "
                        f"the check got (default {CHECKER_TIME_LIMIT:g}, as `wrack test`'s "
                        "--checker-time-limit)")
    lin = p.add_argument_group("linearizable")
    lin.add_argument("--model", default="cas-register",
                     help="register, cas-register, kv or log (default cas-register)")
    lin.add_argument("--format", default=None, choices=["jsonl", "etcd-log", "kv-edn"],
                     help="input format (default: recognised from the content)")
    lin.add_argument("--html", default=None, metavar="OUT",
                     help="write the linearization/counterexample visualisation to OUT")
    lin.add_argument("--no-partition", action="store_true",
                     help="check the history as one partition (no P-compositionality)")
    q = p.add_argument_group("queue")
    q.add_argument("--allow", action="append", default=[], metavar="TYPE",
                   help="an anomaly type this configuration may show (repeatable)")
    q.add_argument("--policy", action="append", default=[], metavar="NAME",
                   help=f"a named policy of allowed types ({', '.join(POLICIES)}; repeatable)")
    q.add_argument("--ww-deps", action="store_true", help="infer ww edges from offsets (G0; G1c with ww edges)")
    q.add_argument("--plots", default=None, metavar="DIR", help="write plots and the timeline into DIR")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    # lazy: registry (CHECKERS): only the checker asked for is imported
    mod = importlib.import_module(CHECKERS[args.checker])
    many = len(args.files) > 1
    worst = EXIT_VALID
    for path in args.files:
        result: dict[str, Any] = mod.check_path(path, args)
        if many:
            result = {"file": path, **result}
        if many or args.json:
            sys.stdout.write(json.dumps(result, separators=(",", ":"), default=str) + "\n")
        else:
            sys.stdout.write(json.dumps(result, indent=2, default=str) + "\n")
        v = result.get("valid")
        if v is False:
            worst = EXIT_INVALID
        elif v is not True and worst == EXIT_VALID:
            worst = EXIT_UNKNOWN
    return worst
