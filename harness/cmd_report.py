"""`wrack report RUN...`: (re)write report.html of stored runs from what they hold.

Does not re-check (see `wrack analyze`): renders results.json, plots, the timeline and the
node logs into one self-contained HTML file, and prints its path. Exit 0, or 254 for a
path that is not a run.
"""

from __future__ import annotations

import argparse
import sys

from contracts.store import resolve_run


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("report", help="(re)write a run's HTML report", description=__doc__.split("\n\n")[0])
    p.add_argument("runs", nargs="+", metavar="RUN", help="run folder(s), latest links or test folders")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    # lazy: `wrack` imports every command module at start (--help); harness.report costs ~12 ms
    from harness.report import write_report

    for arg in args.runs:
        out = write_report(resolve_run(arg))
        sys.stdout.write(f"{out}\n")
    return 0
