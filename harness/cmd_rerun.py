"""`wrack rerun RUN [--times N] [--json]`: run a stored run again and count how often its bug returns.

Each rerun has the run's options and seed and plays its fault schedule (RUN/schedule.json,
`--schedule`; a run without one draws its schedule from the seed again). A rerun reproduces
when its anomaly fingerprint (harness/fingerprint.py: the verdict, the anomaly types and their
shape, not the offsets) is the run's. Reruns are stored beside the run, as `NAME-rerun`.
The exit code is the most common of the reruns' (ties: the worse, invalid before unknown
before valid); 254 for a folder that is not a run.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from typing import Any

from contracts.errors import InputError

EXIT_ORDER = (1, 2, 255, 0)  # ties go to the first of these


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("rerun", help="run a stored run again; how often its bug comes back",
                       description=__doc__.split("\n\n")[0])
    p.add_argument("run", metavar="RUN", help="run folder (or a latest link or test folder)")
    p.add_argument("--times", type=int, default=3, metavar="N", help="how many reruns (default 3)")
    p.add_argument("--json", action="store_true", help="one JSON line per rerun, then the summary")
    p.add_argument("--quiet", action="store_true", help="no progress display")
    p.set_defaults(func=run)


def majority(codes: list[int]) -> int:
    """The most common exit code (ties: `EXIT_ORDER`)."""
    counts = Counter(codes)
    best = max(counts.values())
    return next(c for c in (*EXIT_ORDER, *sorted(counts)) if counts.get(c) == best)


def run(args: argparse.Namespace) -> int:
    # lazy: `wrack` imports every command module at start (--help); the runner costs ~0.13 s
    from harness import fingerprint as fpr
    from harness import reproduce
    from harness.progress import Progress
    from harness.runner import run_test

    if args.times < 1:
        raise InputError(f"--times: {args.times} must be at least 1")
    stored = reproduce.load(args.run)
    original = stored.fingerprint
    sched = str(stored.schedule) if stored.schedule is not None else None
    root = stored.run_dir.parent.parent
    name = f"{stored.test.get('name') or 'run'}-rerun"
    rows: list[dict[str, Any]] = []
    for i in range(args.times):
        o = reproduce.options(stored, seed=stored.seed, schedule=sched, results=str(root), name=name)
        out = run_test(o, Progress(enabled=not args.quiet and sys.stderr.isatty()))
        fp = fpr.fingerprint(out.results)
        row = {"rerun": i + 1, "run": str(out.run_dir.resolve()), "fingerprint": fp,
               "same": fpr.same(fp, original), "exit_code": out.exit_code}
        rows.append(row)
        if args.json:
            sys.stdout.write(json.dumps(row) + "\n")
        else:
            sys.stdout.write(f"rerun {i + 1}/{args.times}: {fpr.describe(fp)}"
                             f"{' (same)' if row['same'] else ''}  {row['run']}\n")
        sys.stdout.flush()
    same = sum(r["same"] for r in rows)
    code = majority([r["exit_code"] for r in rows])
    summary = {"run": str(stored.run_dir.resolve()), "fingerprint": original, "times": args.times,
               "reproduced": same, "exit_code": code, "schedule": sched}
    if args.json:
        sys.stdout.write(json.dumps(summary) + "\n")
    else:
        sys.stdout.write(f"{same} of {args.times} reruns reproduced {fpr.describe(original)}\n")
    return code
