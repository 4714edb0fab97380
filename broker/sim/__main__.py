"""``python -m broker.sim``: run random simulation seeds and report failures.

    python -m broker.sim --seeds 5000                 # seeds 0..4999, safe configuration (one process per CPU)
    python -m broker.sim --seed 1234 -v               # replay one seed, with its fault log
    python -m broker.sim --seeds 500 --safeguard-off elr   # watch the invariants fire
    python -m broker.sim --seeds 50 --story stale-hwm-leader --safeguard-off leso-check
    python -m broker.sim --seeds 200 --controllers 1     # one controller (default: 3 or 5 voters)
    python -m broker.sim --seeds 30 --raft-unsafe forget-vote   # watch the Raft invariants fire

Exit codes: 0 every seed passed, 1 some seed failed, 254 bad arguments.
"""

from __future__ import annotations

import argparse
import sys
import time

from broker.core import safeguards as sg
from broker.core.raft import UNSAFE_SWITCHES
from broker.sim.random_run import run_seeds
from broker.sim.stories import LOSSY, STORIES


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, exit 254 (the project's convention)
        sys.stderr.write(f"python -m broker.sim: error: {message}\n")
        sys.exit(254)


def main(argv: list[str] | None = None) -> int:
    p = _Parser(prog="python -m broker.sim", description="Random seeds of the deterministic replication simulation (on a controller quorum).")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--seeds", type=int, default=200, help="run seeds START..START+N-1 (default 200)")
    g.add_argument("--seed", type=int, help="run (replay) this one seed")
    p.add_argument("--start", type=int, default=0, help="first seed (default 0)")
    p.add_argument("--duration-ms", type=int, default=30000, help="virtual time with faults (default 30000)")
    p.add_argument("--settle-ms", type=int, default=30000, help="virtual time after the final heal (default 30000)")
    p.add_argument("--safeguard-off", action="append", default=[], metavar="NAME",
                   help=f"switch a safeguard off (repeatable): {', '.join(sorted(sg.REGISTRY))}")
    p.add_argument("--recovery", choices=["manual", "balanced"], default="manual",
                   help="unclean recovery of the safe configuration: manual (all faults) or balanced (no power loss)")
    p.add_argument("--story", action="append", default=None, metavar="NAME",
                   help=f"play this fault story in every seed instead of drawing them (repeatable): {', '.join(STORIES)}")
    p.add_argument("--controllers", type=int, default=None, metavar="N",
                   help="voters of the controller quorum (default: drawn per seed, 3 or sometimes 5)")
    p.add_argument("--raft-unsafe", action="append", default=[], metavar="NAME",
                   help=f"break a Raft rule of the controller quorum (repeatable): {', '.join(UNSAFE_SWITCHES)}")
    p.add_argument("--jobs", type=int, default=None, metavar="N",
                   help="worker processes (default: one per CPU; 1 runs the seeds in this process)")
    p.add_argument("-v", "--verbose", action="store_true", help="print every seed's summary and fault log")
    a = p.parse_args(argv)
    try:
        off = sg.check_names(a.safeguard_off)
    except sg.UnknownSafeguard as e:
        p.error(str(e))
    bad = [s for s in a.story or () if s not in STORIES]
    if bad:
        p.error(f"unknown story {bad[0]!r} (known: {', '.join(STORIES)})")
    lossy = sorted(set(a.story or ()) & LOSSY)
    if lossy and a.recovery == "balanced":
        p.error(f"--story {lossy[0]} loses data on disk: not with --recovery balanced")
    if a.seed is None and a.seeds <= 0:
        p.error(f"--seeds must be positive, got {a.seeds}")
    if a.duration_ms < 0 or a.settle_ms < 0:
        p.error("--duration-ms and --settle-ms must not be negative")
    bad = [u for u in a.raft_unsafe if u not in UNSAFE_SWITCHES]
    if bad:
        p.error(f"unknown Raft unsafe switch {bad[0]!r} (known: {', '.join(UNSAFE_SWITCHES)})")
    if a.jobs is not None and a.jobs < 1:
        p.error(f"--jobs must be at least 1, got {a.jobs}")
    if a.controllers is not None and a.controllers < 1:
        p.error(f"--controllers must be at least 1, got {a.controllers}")
    seeds = [a.seed] if a.seed is not None else range(a.start, a.start + a.seeds)
    t0 = time.perf_counter()
    failed = []
    runs = run_seeds(seeds, a.jobs, safeguards_off=off, duration_ms=a.duration_ms, settle_ms=a.settle_ms,
                     recovery=a.recovery, stories=tuple(a.story) if a.story else None, controllers=a.controllers,
                     raft_unsafe=frozenset(a.raft_unsafe))
    for r in runs:
        if a.verbose or not r.ok:
            print(r.summary())
            if a.verbose:
                print(f"  config {r.config}")
                print("\n".join(f"  {f}" for f in r.faults))
        if not r.ok:
            failed.append(r.seed)
    dt = time.perf_counter() - t0
    n = len(seeds)
    print(f"{n} seeds, {len(failed)} failed, {dt:.1f} s ({n / dt:.1f} seeds/s)"
          + (f"; replay with --seed {failed[0]}" if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
