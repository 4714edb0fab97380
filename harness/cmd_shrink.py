"""`wrack shrink RUN [--budget-s S] [--times K] [--json]`: the smallest fault schedule that still shows RUN's bug.

Delta debugging (harness/shrink.py) over RUN/schedule.json: whole fault packages dropped,
the actions moved earlier and the time limit cut, single actions dropped, then fewer nodes,
keys and clients; each candidate is run up to K times (a bug shows up in 2 or 3 of 3 runs)
with RUN's options and seed, and kept when one of its runs is invalid with one of RUN's
anomaly types. The runs go to RUN/shrink/; the smallest schedule to
RUN/shrink/minimal-schedule.json (replay it with `wrack test --schedule FILE`). Progress
shows on a terminal (stderr). With `--json`, the last line is
{"schedule", "fault_events", "reproduced", "tries", "run", ...}. Exit 0 when a schedule was
written, 254 for a run that is not invalid or has no schedule.json.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from pathlib import Path
from typing import Any

from contracts.errors import InputError


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("shrink", help="shrink an invalid run's fault schedule to a minimal reproduction",
                       description=__doc__.split("\n\n")[0])
    p.add_argument("run", metavar="RUN", help="an invalid run's folder (or a latest link or test folder)")
    p.add_argument("--budget-s", type=float, default=1200.0, metavar="S",
                   help="seconds to spend at most (default 1200; no run starts that would overrun it)")
    p.add_argument("--times", type=int, default=2, metavar="K", help="runs of each candidate at most (default 2)")
    p.add_argument("--json", action="store_true", help="the result as one JSON line (the last)")
    p.set_defaults(func=run)


class _Trials:
    """Runs candidates as real tests under RUN/shrink/ (`__call__(schedule) -> shown`)."""

    def __init__(self, stored: Any, folder: Path):
        # lazy: as in `run`
        from harness import fingerprint as fpr

        self.fpr, self.stored, self.folder = fpr, stored, folder
        self.n = 0
        self.last_shown: str | None = None
        (folder / "candidates").mkdir(parents=True, exist_ok=True)

    def __call__(self, cand: Any) -> bool:
        # lazy: as in `run`
        from harness import reproduce
        from harness.runner import run_test

        self.n += 1
        path = cand.write(self.folder / "candidates" / f"{self.n:03d}.json")
        o = reproduce.options(self.stored, seed=self.stored.seed, schedule=str(path),
                              results=str(self.folder), name="candidate", **cand.options)
        out = run_test(o)
        shown = self.fpr.shows_bug(self.fpr.fingerprint(out.results), self.stored.fingerprint)
        if shown:
            self.last_shown = str(out.run_dir.resolve())
        return shown


def run(args: argparse.Namespace) -> int:
    # lazy: `wrack` imports every command module at start (--help); the runner costs ~0.13 s
    from harness import reproduce, schedule_file
    from harness.fingerprint import describe
    from harness.options import for_system
    from harness.shrink import Shrinker

    if args.times < 1:
        raise InputError(f"--times: {args.times} must be at least 1")
    stored = reproduce.load(args.run)
    fp = stored.fingerprint
    if fp["verdict"] != "invalid" or not fp["anomalies"]:
        raise InputError(f"{args.run}: the run is {fp['verdict']}, not invalid: no bug to shrink")
    if stored.schedule is None:
        raise InputError(f"{args.run}: no schedule.json (a run from before schedules were recorded)")
    system = for_system(reproduce.options(stored))
    original = schedule_file.load(stored.schedule, system)
    folder = stored.run_dir / "shrink"
    trials = _Trials(stored, folder)
    tty = sys.stderr.isatty()

    def say(message: str) -> None:
        sys.stderr.write(f"shrink: {message}\n")
        sys.stderr.flush()

    if tty:
        say(f"{describe(fp)}; {len(original.actions)} fault actions, budget {args.budget_s:.0f} s, "
            f"each candidate up to {args.times} run(s)")
    fat = (stored.results or {}).get("first_anomaly_time")
    outcome = Shrinker(original, trials, times=args.times, budget_s=args.budget_s, on_step=say if tty else None,
                       hint_s=fat / 1e9 if isinstance(fat, (int, float)) else None).run()
    minimal = outcome.schedule
    path = minimal.write(folder / "minimal-schedule.json")
    replay = shlex.join(["wrack", "test", *reproduce.flags(stored.test["options"]), "--schedule", str(path)])
    line = {"schedule": str(path.resolve()), "fault_events": len(minimal.actions), "reproduced": outcome.reproduced,
            "tries": outcome.tries, "run": trials.last_shown or str(stored.run_dir.resolve()),
            "from_events": len(original.actions), "options": minimal.options, "replay": replay,
            "out_of_budget": outcome.out_of_budget}
    if args.json:
        sys.stdout.write(json.dumps(line) + "\n")
    else:
        sys.stdout.write(f"shrunk {len(original.actions)} -> {len(minimal.actions)} fault actions in "
                         f"{outcome.tries} runs{' (budget spent)' if outcome.out_of_budget else ''}\n"
                         f"schedule: {line['schedule']}\nits run: {line['run']}\nreplay: {replay}\n")
    return 0
