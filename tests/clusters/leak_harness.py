"""A harness process for the leak tests: up a local cluster, start stand-in brokers, throw
faults (partition, pause, a mount in a node), print `ready`, then finish according to MODE:
`normal` heals and tears down through always_heal; `wait` waits to be signalled or killed."""

from __future__ import annotations

import random
import sys
import time
from pathlib import Path

from clusters import local
from clusters.node import ClusterSpec
from nemesis.core import FaultOp, Nemesis
from nemesis.guard import always_heal
from suites.wrack.db import BrokerDB, BrokerOptions

STANDIN = str(Path(__file__).resolve().parent / "standin_broker.py")


def main() -> None:
    name, mode, nodes = sys.argv[1], sys.argv[2], int(sys.argv[3]) if len(sys.argv) > 3 else 3
    c = local.create(ClusterSpec(name=name, nodes=nodes))
    db = BrokerDB(c, BrokerOptions(command=[sys.executable, STANDIN]))
    nem = Nemesis(c, db, rng=random.Random(1))
    with always_heal(c, nemesis=nem, db=db):
        for n in c.nodes:
            db.setup(n)
            db.start(n)
        c.nodes[0].exec(["mkdir", "-p", c.nodes[0].path("m")])
        c.nodes[0].exec(["mount", "-t", "tmpfs", "wrack-leak", c.nodes[0].path("m")])
        nem.invoke(FaultOp("start-partition", "halves"))
        nem.invoke(FaultOp("pause", ["n2"]))
        print("ready", flush=True)
        if mode == "wait":
            time.sleep(120)


if __name__ == "__main__":
    main()
