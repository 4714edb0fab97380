"""`wrack analyze RUN`: re-check a stored run and rewrite its results, plots and report.

RUN is a run folder, a `latest` link, or a test folder (its latest run). Works on runs
whose harness was killed mid-run: a torn last line is dropped, ops that never completed
count as indeterminate. The checker and policy come from the run's test.json
(`--workload` for a folder that has only history.jsonl). Exit codes: 0 valid, 1 invalid,
2 unknown, 254 bad input.
"""

from __future__ import annotations

import argparse
import json
import sys

from contracts.errors import exit_code_for
from contracts.store import resolve_run


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("analyze", help="re-check a stored run", description=__doc__.split("\n\n")[0])
    p.add_argument("runs", nargs="+", metavar="RUN", help="run folder(s), latest links or test folders")
    p.add_argument("--workload", default=None, help="the workload when test.json is missing (queue, log, noop)")
    p.add_argument("--time-limit", type=float, default=None, metavar="S",
                   help="give the checker at most S seconds (the verdict is then unknown)")
    p.add_argument("--json", action="store_true", help="one JSON line per run")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    # lazy: `wrack` imports every command module at start (--help); these cost ~0.13 s
    from harness.analysis import analyze_run
    from harness.report import verdict_word

    codes = []
    for arg in args.runs:
        run_dir = resolve_run(arg)
        res = analyze_run(run_dir, workload=args.workload, time_limit=args.time_limit)
        codes.append(exit_code_for(res.get("valid")))
        line = {"run": str(run_dir), "valid": res.get("valid"), "verdict": verdict_word(res.get("valid")),
                "anomaly_types": res.get("anomaly_types", []), "allowed": res.get("allowed", []),
                "history": res.get("history"), "report": str(run_dir / "report.html")}
        if args.json:
            sys.stdout.write(json.dumps(line, default=str) + "\n")
        else:
            h = res.get("history") or {}
            kinds = ", ".join(f"{k}{' (allowed)' if k in line['allowed'] else ''}" for k in line["anomaly_types"])
            sys.stdout.write(f"{line['verdict'].upper()}{': ' + kinds if kinds else ''}  ({run_dir})\n")
            sys.stdout.write(f"  {h.get('ok', 0)} ok, {h.get('fail', 0)} fail, {h.get('info', 0)} info, "
                             f"{h.get('never_completed', 0)} never completed, {h.get('dropped_lines', 0)} torn line(s)\n")
            for w in res.get("warnings") or []:
                sys.stdout.write(f"  warning: {w}\n")
            sys.stdout.write(f"  report: {line['report']}\n")
    return 1 if 1 in codes else 2 if 2 in codes else 0
