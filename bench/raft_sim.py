"""Speed of the controller-quorum (Raft) simulation: seeds/s, steps/s, elections/s.

    .venv/bin/python bench/raft_sim.py [SEEDS]     (default 500)

Each seed is 20 s of virtual time with faults, a heal, 10 s of settling and the liveness
check; the Raft invariants are checked after every step. Also prints the virtual time a
quorum needs to elect its first leader and to fail over after the leader is killed
(median over the seeds, 3 and 5 voters, default timeouts).
"""

from __future__ import annotations

import random
import statistics
import sys
import time

from broker.core.raft import RaftConfig
from broker.sim.network import NetworkSettings
from broker.sim.raft_sim import RaftSim, RaftSimSettings, raft_run


def failover_ms(seed: int, voters: int) -> tuple[int, int]:
    """(first election, failover after killing the leader) in virtual ms."""
    sim = RaftSim(seed, RaftSimSettings(voters, 0, RaftConfig(), NetworkSettings(1, 5)))
    while not sim.leaders():
        sim.run_until(sim.now + 10)
    first = sim.now
    sim.run_until(sim.now + 1000)
    old = sim.leaders()[0]
    sim.crash(old)
    killed = sim.now
    while not [n for n in sim.leaders() if n != old]:
        sim.run_until(sim.now + 10)
    return first, sim.now - killed


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 500
    t0 = time.perf_counter()
    steps = elections = failed = committed = 0
    for seed in range(n):
        r = raft_run(seed)
        steps += r.steps
        elections += r.elections
        committed += r.committed
        failed += not r.ok
    dt = time.perf_counter() - t0
    print(f"seeds            {n} ({failed} failed)")
    print(f"wall time        {dt:.1f} s")
    print(f"seeds/s          {n / dt:.1f}")
    print(f"steps/s          {steps / dt:,.0f} (mean {steps / n:,.0f} steps per seed, invariants checked after each)")
    print(f"elections/s      {elections / dt:,.0f} (mean {elections / n:.1f} leaders per seed)")
    print(f"committed/s      {committed / dt:,.0f} entries")
    print(f"5000 seeds       {5000 / (n / dt) / 60:.1f} min on one core")
    for voters in (3, 5):
        runs = [failover_ms(random.Random(s).randrange(1 << 30), voters) for s in range(50)]
        first = statistics.median(r[0] for r in runs)
        fail = sorted(r[1] for r in runs)
        print(f"{voters} voters        first leader {first:.0f} ms, failover after a kill median {statistics.median(fail):.0f} ms,"
              f" max {fail[-1]} ms (virtual, election timeout 1000, fetch timeout 2000)")


if __name__ == "__main__":
    main()
