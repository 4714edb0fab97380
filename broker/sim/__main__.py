"""``python -m broker.sim``: run random simulation seeds and report failures.

    python -m broker.sim --seeds 5000                 # seeds 0..4999, safe configuration (one process per CPU)
    python -m broker.sim --seed 1234 -v               # replay one seed, with its fault log
    python -m broker.sim --seeds 500 --safeguard-off elr   # watch the invariants fire
    python -m broker.sim --seeds 50 --story stale-hwm-leader --safeguard-off leso-check
    python -m broker.sim --seeds 200 --controllers 1     # one controller (default: 3 or 5 voters)
    python -m broker.sim --seeds 30 --raft-unsafe forget-vote   # watch the Raft invariants fire
    python -m broker.sim --shrink 7 --safeguard-off epoch-truncation   # the fewest faults that fail seed 7
    python -m broker.sim --seed 7 --safeguard-off epoch-truncation --faults g3,c1 -v   # replay them

Exit codes: 0 every seed passed, 1 some seed failed (a shrunk seed fails), 254 bad arguments
(and a seed to shrink that passes).
"""

from __future__ import annotations

import argparse
import re
import shlex
import sys
import time
from typing import Any

from broker.core import safeguards as sg
from broker.core.raft import UNSAFE_SWITCHES
from broker.sim.random_run import run_seeds
from broker.sim.shrink import NotFailing, run_gated, shrink
from broker.sim.stories import LOSSY, STORIES


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, exit 254 (the project's convention)
        sys.stderr.write(f"python -m broker.sim: error: {message}\n")
        sys.exit(254)


def main(argv: list[str] | None = None) -> int:
    p = _Parser(prog="python -m broker.sim",
                description="Random seeds of the deterministic replication simulation (on a controller quorum).")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--seeds", type=int, default=200, help="run seeds START..START+N-1 (default 200)")
    g.add_argument("--seed", type=int, help="run (replay) this one seed")
    g.add_argument("--shrink", type=int, metavar="SEED",
                   help="the fewest faults that still fail this seed (broker/sim/shrink.py), and the replay command")
    p.add_argument("--faults", default=None, metavar="SLOTS",
                   help="with --seed: only these fault slots strike (g<i>: the i-th generic strike, c<i>: the "
                        "i-th controller fault, s<i>: the i-th move after a story ended; what --shrink prints)")
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
    run_args = {"safeguards_off": off, "duration_ms": a.duration_ms, "settle_ms": a.settle_ms,
                "recovery": a.recovery, "stories": tuple(a.story) if a.story else None,
                "controllers": a.controllers, "raft_unsafe": frozenset(a.raft_unsafe)}
    if a.shrink is not None or a.faults is not None:
        return shrink_cli(p, a, run_args)
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


def shrink_cli(p: _Parser, a: argparse.Namespace, run_args: dict[str, Any]) -> int:
    """--shrink SEED (print the fewest faults and the replay command) or --seed S --faults SLOTS."""
    if a.faults is not None:
        if a.seed is None:
            p.error("--faults needs --seed")
        keep = frozenset(x.strip() for x in a.faults.split(",") if x.strip())
        bad = [x for x in keep if not re.fullmatch(r"[gcs]\d+", x)]
        if bad:
            p.error(f"--faults: {bad[0]!r} is not a fault slot (g<i>, c<i> or s<i>)")
        r, _gate = run_gated(a.seed, keep, **run_args)
        print(r.summary())
        if a.verbose:
            print(f"  config {r.config}")
            print("\n".join(f"  {f}" for f in r.faults))
        return 0 if r.ok else 1
    try:
        out = shrink(a.shrink, on_step=(lambda m: print(f"shrink: {m}", file=sys.stderr)) if sys.stderr.isatty()
                     else None, **run_args)
    except NotFailing as e:
        p.error(str(e))
    print(f"seed {out.seed} fails ({', '.join(sorted(out.signature))}) with {out.from_slots} faults; "
          f"shrunk to {len(out.slots)} in {out.runs} runs:")
    for s in out.slots:
        lines = out.lines.get(s) or ["(no fault logged)"]
        head = next((x for x in lines if not x.startswith("story on ")), lines[0])
        more = f" (+{len(lines) - 1} more lines of its story)" if len(lines) > 1 else ""
        print(f"  {s}: {head}{more}")
    print("replay: " + shlex.join(replay_command(a, out.slots)))
    return 1


def replay_command(a: argparse.Namespace, slots: list[str]) -> list[str]:
    """The command that replays `slots` of the shrunk seed with the same arguments."""
    cmd = ["python", "-m", "broker.sim", "--seed", str(a.shrink)]
    for name in a.safeguard_off:
        cmd += ["--safeguard-off", name]
    for name in a.story or ():
        cmd += ["--story", name]
    for name in a.raft_unsafe:
        cmd += ["--raft-unsafe", name]
    for flag, v, default in (("--duration-ms", a.duration_ms, 30000), ("--settle-ms", a.settle_ms, 30000),
                             ("--recovery", a.recovery, "manual"), ("--controllers", a.controllers, None)):
        if v != default:
            cmd += [flag, str(v)]
    return [*cmd, "--faults", ",".join(slots), "-v"]


if __name__ == "__main__":
    sys.exit(main())
