"""Cluster up/down times per backend (and what a fault costs on the local backend).

    .venv/bin/python bench/cluster.py [--rounds N] [--nodes N] [--backends local,docker]

Prints, per backend and transport: median and max of `create` (nodes usable) and
`teardown`, plus, for the local backend, a partition start+heal and an exec round trip.
Target (issue 6): five local nodes up in at most 3 s. Backends that are not available
here (not root, no Docker, module missing) are reported as skipped. The docker backend's
figures come from its own `create`/`teardown` through the same registry; FUSE throughput
is measured by the power-loss filesystem's own bench.
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
import uuid

from clusters.backends import backend
from clusters.node import ClusterSpec


def _fmt(xs: list[float]) -> str:
    return f"median {statistics.median(xs):6.3f} s   max {max(xs):6.3f} s"


def bench_backend(name: str, transport: str, nodes: int, rounds: int) -> None:
    try:
        mod = backend(name)
    except ValueError as e:
        print(f"{name:8s} skipped: {e}")
        return
    ups, downs, parts, execs = [], [], [], []
    for _ in range(rounds):
        cname = f"bench{uuid.uuid4().hex[:6]}"
        t = time.perf_counter()
        try:
            c = mod.create(ClusterSpec(name=cname, nodes=nodes, transport=transport))
        except (PermissionError, OSError, ValueError) as e:
            print(f"{name:8s} skipped: {e}")
            mod.force_down(cname)
            return
        ups.append(time.perf_counter() - t)
        try:
            t = time.perf_counter()
            for _ in range(10):
                c.nodes[0].exec(["true"])
            execs.append((time.perf_counter() - t) / 10)
            from nemesis.core import FaultOp, Nemesis

            nem = Nemesis(c, rng=random.Random(1))
            t = time.perf_counter()
            nem.invoke(FaultOp("start-partition", "halves"))
            nem.invoke(FaultOp("stop-partition"))
            parts.append(time.perf_counter() - t)
        finally:
            t = time.perf_counter()
            c.teardown()
            downs.append(time.perf_counter() - t)
    label = f"{name}/{transport}"
    print(f"{label:14s} {nodes} nodes  up    {_fmt(ups)}")
    print(f"{label:14s} {nodes} nodes  down  {_fmt(downs)}")
    print(f"{label:14s} partition start+heal {_fmt(parts)}")
    print(f"{label:14s} exec round trip      {statistics.median(execs) * 1000:6.1f} ms")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--nodes", type=int, default=5)
    ap.add_argument("--backends", default="local,docker")
    a = ap.parse_args()
    for b in a.backends.split(","):
        if b == "local":
            bench_backend("local", "nsenter", a.nodes, a.rounds)
            bench_backend("local", "ssh", a.nodes, a.rounds)
        else:
            bench_backend(b, "nsenter", a.nodes, a.rounds)


if __name__ == "__main__":
    main()
