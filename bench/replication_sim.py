"""Speed of the deterministic replication simulation: seeds/s and steps/s.

    .venv/bin/python bench/replication_sim.py [SEEDS]     (default 200)

Target: thousands of random seeds in a few minutes on a 2-core CI machine (one core
per process; run several processes with --start to use more cores). Compare runs on an
idle machine, or by CPU time (`/usr/bin/time -f %U`): the figures follow the load.
"""

from __future__ import annotations

import sys
import time

from broker.sim.random_run import random_run


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 200
    t0 = time.perf_counter()
    steps = acked = stories = 0
    failed = 0
    for seed in range(n):
        r = random_run(seed)
        steps += r.steps
        acked += r.acked_all + r.acked_one
        failed += not r.ok
        stories += sum(" story on " in f for f in r.faults)
    dt = time.perf_counter() - t0
    print(f"seeds            {n} ({failed} failed)")
    print(f"wall time        {dt:.1f} s")
    print(f"seeds/s          {n / dt:.2f}")
    print(f"steps/s          {steps / dt:,.0f} (mean {steps / n:,.0f} steps per seed, invariants checked after each)")
    print(f"acked writes/s   {acked / dt:,.0f}")
    print(f"stories/seed     {stories / n:.2f} (fault stories of broker/sim/stories.py played)")
    print(f"5000 seeds       {5000 / (n / dt) / 60:.1f} min on one core")


if __name__ == "__main__":
    main()
