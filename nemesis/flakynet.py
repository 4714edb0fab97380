"""A flaky network between the nodes without tc netem (not in this kernel): packet loss by
iptables' statistic match, delay by a slow link (a tbf qdisc's queue).

`install_flaky_net(nemesis)` registers:

- `start-flaky-net` {"nodes": TARGET, "loss": P, "rate_kbit": R, "latency_ms": L} /
  `stop-flaky-net`: the links between the `nodes` (a `nemesis.targets` spec; default
  "all") and every other node lose each packet with probability `loss` (both ways: each
  side drops that share of what the other sends it; TCP's retransmissions turn it into
  delay as well); with `rate_kbit`, each of those nodes also sends through a token bucket
  of that rate on its interface (tbf), whose queue holds a packet up to `latency_ms`
  before dropping it: a slow, congested link, hence delay. Recorded with the nodes, the
  lossy links and the shaping applied. The stop removes both (the network heal flushes
  the loss rules; a registered heal removes the qdiscs).
"""

from __future__ import annotations

import random
from typing import Any

from nemesis.core import FaultOp, Nemesis
from nemesis.schedule import FaultPackage

IFACE = "eth0"  # the nodes' interface (clusters/local.py; docker's too)


def _shape_cmd(rate_kbit: int, latency_ms: int) -> str:
    return (f"tc qdisc replace dev {IFACE} root tbf rate {int(rate_kbit)}kbit burst 16kb "
            f"latency {int(latency_ms)}ms")


UNSHAPE = f"tc qdisc del dev {IFACE} root 2>/dev/null; true"


class FlakyNet:
    def __init__(self, nem: Nemesis):
        self.nem = nem
        self.shaped: list[str] = []

    def start(self, value: Any) -> dict[str, Any]:
        v = dict(value or {})
        nodes = self.nem.targets(v.get("nodes", "all"))
        names = self.nem.names
        loss = float(v.get("loss", 0.0))
        if not 0 <= loss < 1:
            raise ValueError(f"flaky-net: loss {loss} must be in [0, 1)")
        out: dict[str, Any] = {"nodes": nodes}
        if loss > 0:
            grudge: dict[str, frozenset[str]] = {n: frozenset(m for m in names if m != n) for n in nodes}
            for m in names:
                if m not in nodes:
                    grudge[m] = frozenset(nodes)
            self.nem.net.drop(grudge, loss=loss, replace=True)
            self.nem.partitioned = True
            out["loss"] = loss
            out["lossy_links"] = sorted({tuple(sorted((a, b))) for a, bs in grudge.items() for b in bs})
        if v.get("rate_kbit"):
            rate, latency = int(v["rate_kbit"]), int(v.get("latency_ms", 500))
            for n in nodes:
                self.nem.cluster.node(n).sh(_shape_cmd(rate, latency), timeout=30)
                self.shaped.append(n)
            out.update(rate_kbit=rate, latency_ms=latency)
        return out

    def stop(self, _value: Any = None) -> dict[str, Any]:
        self.nem.net.heal()
        self.nem.partitioned = False
        return {"healed": "flaky-net", "unshaped": self.unshape()}

    def unshape(self) -> list[str]:
        done, self.shaped = sorted(set(self.shaped)), []
        for n in done:
            self.nem.cluster.node(n).sh(UNSHAPE, timeout=30)
        return done


def install_flaky_net(nem: Nemesis) -> FlakyNet:
    """Register `start-flaky-net` / `stop-flaky-net` (module docstring) on `nem`."""
    fn = FlakyNet(nem)
    nem.register("start-flaky-net", fn.start)
    nem.register("stop-flaky-net", fn.stop)
    nem.register_heal("flaky-net", fn.unshape)
    return fn


def flaky_net_package() -> FaultPackage:
    """`start-flaky-net` on one node's links, a minority's or all of them (5 to 30 % loss;
    half the time also a slow link on those nodes), `stop-flaky-net` after it."""
    targets, losses, rates, latencies = ("one", "minority", "all"), (0.05, 0.15, 0.3), (256, 1024), (200, 1000)

    def start(rng: random.Random) -> FaultOp:
        v: dict[str, Any] = {"nodes": targets[rng.randrange(3)], "loss": losses[rng.randrange(3)]}
        if rng.random() < 0.5:
            v.update(rate_kbit=rates[rng.randrange(2)], latency_ms=latencies[rng.randrange(2)])
        return FaultOp("start-flaky-net", v)

    return FaultPackage("flaky-net", start, FaultOp("stop-flaky-net"), [FaultOp("stop-flaky-net")], "#A3C4A0",
                        install_flaky_net)
