"""Clock skew with libfaketime: per-node offsets, bump / strobe / reset, sampled offsets.

Mechanism: the broker starts with `LD_PRELOAD` = the libfaketime build shipped inside the
PyPI package `libfaketime` (Debian's 0.9.10 breaks Python's time.sleep: see docs/nemesis.md
"Clock skew") and these variables (`ClockHook.start_env`):

    FAKETIME_TIMESTAMP_FILE=<root>/clock/faketime   the node's offset, e.g. "+12.250000"
    FAKETIME_NO_CACHE=1            re-read the file on every call (about 4 us per time())
    FAKETIME_DISABLE_SHM=1         no /dev/shm state (brokers are SIGKILLed all the time)
    FAKETIME_DONT_FAKE_MONOTONIC=1 only the wall clock moves; sleeps and timers keep real time

Only processes started with the hook see the offset (a broker started before the hook was
added does not: the sample says so with "preloaded": false).

Faults (`install_clock(nemesis, db)`; recorded with the offsets every node then shows):
- `start-clock` {"bump": TARGET, "delta_ms": N}  adds N ms to each target's offset;
  {"bump": {"n1": ms, ...}} per node; {"strobe": TARGET, "delta_ms": D, "period_ms": P,
  "duration_s": S} flips the offset between its value and value + D every P ms for S s (a
  small daemon on the node rewrites the file, then restores it); None: a random bump or
  strobe with Jepsen's distributions.
- `stop-clock`: every offset back to 0 (strobers stopped).
- `check-clock`: only samples.

Every clock event's value carries "clock-offsets": {node: seconds}, measured by a probe
run under the same preload: one Python process takes the faked `time.time_ns()` around a
datagram whose kernel receive timestamp (SO_TIMESTAMPNS, never faked) is the real time;
offset = faked - real, to about 0.1 ms.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import shlex
import signal
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from clusters.node import DaemonSpec, Node
from nemesis.nodeside import node_python

SO_TIMESTAMPNS = 35  # Linux; not exported by Python's socket module

PROBE = (
    "import socket,struct,time\n"
    "a,b=socket.socketpair(socket.AF_UNIX,socket.SOCK_DGRAM)\n"
    f"b.setsockopt(socket.SOL_SOCKET,{SO_TIMESTAMPNS},1)\n"
    "t1=time.time_ns();a.send(b'x');m,anc,_,_=b.recvmsg(8,64);t2=time.time_ns()\n"
    f"k=[d for l,t,d in anc if l==socket.SOL_SOCKET and t=={SO_TIMESTAMPNS}][0]\n"
    "s,ns=struct.unpack('qq',k[:16])\n"
    "print(((t1+t2)//2-(s*10**9+ns))/1e9)\n"
)


def format_offset(seconds: float) -> str:
    """libfaketime's relative format: sign and seconds, no unit letters (m/h/d multiply)."""
    return f"{seconds:+.6f}"


def bump_delta_ms(rng: random.Random) -> int:
    """Jepsen's bump: +-1.5^(6 + U[0, 25)) ms, about 11 ms to 4.8 min."""
    return int(round(rng.choice((-1, 1)) * 1.5 ** (6 + rng.random() * 25)))


def strobe_params(rng: random.Random) -> dict[str, float]:
    """Jepsen's strobe: delta 2^(2 + U[0,16)) ms, period 2^U[0,10) ms, duration U[0,32) s
    (the duration is capped at 10 s here to keep schedules responsive)."""
    return {"delta_ms": int(2 ** (2 + rng.random() * 16)), "period_ms": max(1, int(2 ** (rng.random() * 10))),
            "duration_s": round(rng.random() * 10, 3)}


class ClockHook:
    """BrokerDB hook: the offset file and the preload environment (module docstring)."""

    def __init__(self) -> None:
        self.offsets: dict[str, float] = {}
        self._lib: dict[str, str] = {}

    def offset_file(self, node: Node) -> str:
        return node.path("clock", "faketime")

    def strobe_pidfile(self, node: Node) -> str:
        return node.path("clock", "strobe.pid")

    def library(self, node: Node) -> str:
        """Path of libfaketime.so.1 on the node (from the installed `libfaketime` package)."""
        key = f"{type(node).__name__}/{node.name}/{node.address}"
        if key not in self._lib:
            code = ("import libfaketime,os;p=os.path.join(os.path.dirname(libfaketime.__file__),"
                    "'vendor','libfaketime','src','libfaketime.so.1');assert os.path.exists(p),p;print(p)")
            res = node.exec([node_python(node), "-c", code], check=False, timeout=60)
            if not res.ok:
                raise RuntimeError(f"{node.name}: no libfaketime build from the PyPI package `libfaketime` "
                                   f"({res.stderr.strip()[-200:]})")
            self._lib[key] = res.stdout.strip()
        return self._lib[key]

    def env(self, node: Node) -> dict[str, str]:
        return {"LD_PRELOAD": self.library(node), "FAKETIME_TIMESTAMP_FILE": self.offset_file(node),
                "FAKETIME_NO_CACHE": "1", "FAKETIME_DISABLE_SHM": "1", "FAKETIME_DONT_FAKE_MONOTONIC": "1"}

    # BrokerDB hook
    def setup(self, db: Any, node: Node) -> None:
        if not node.exec(["test", "-f", self.offset_file(node)], check=False).ok:
            self.set_offset(node, 0.0)

    def start_env(self, db: Any, node: Node) -> dict[str, str]:
        return self.env(node)

    def teardown(self, db: Any, node: Node) -> None:
        self.reset(node)

    # actions
    def set_offset(self, node: Node, seconds: float) -> None:
        node.write_file(self.offset_file(node), format_offset(seconds) + "\n")
        self.offsets[node.name] = seconds

    def bump(self, node: Node, delta_ms: float) -> float:
        self.stop_strobe(node)
        new = self.offsets.get(node.name, 0.0) + delta_ms / 1000.0
        self.set_offset(node, new)
        return new

    def strobe(self, node: Node, delta_ms: float, period_ms: float, duration_s: float) -> None:
        self.stop_strobe(node)
        base = self.offsets.get(node.name, 0.0)
        argv = [node_python(node), "-m", "nemesis.clock", "strobe", self.offset_file(node),
                "--base", str(base), "--delta-ms", str(delta_ms), "--period-ms", str(period_ms),
                "--duration-s", str(duration_s)]
        node.start_daemon(DaemonSpec("strobe-clock", argv, self.strobe_pidfile(node), node.path("clock", "strobe.log")))

    def stop_strobe(self, node: Node) -> None:
        pf = self.strobe_pidfile(node)
        if node.signal_daemon(pf, signal.SIGKILL):
            node.wait_daemon_exit(pf, 5)
        node.exec(["rm", "-f", pf], check=False)
        if node.name in self.offsets:
            self.set_offset(node, self.offsets[node.name])

    def reset(self, node: Node) -> None:
        self.stop_strobe(node)
        self.set_offset(node, 0.0)

    def sample(self, node: Node, pidfile: str | None = None) -> dict[str, Any]:
        """The offset a preloaded process on the node sees now (seconds), and whether the
        process in `pidfile` (the broker) runs with the preload."""
        env = " ".join(f"{k}={shlex.quote(v)}" for k, v in self.env(node).items())
        script = f"env {env} {shlex.quote(node_python(node))} -S -c {shlex.quote(PROBE)}"
        if pidfile:
            script += (f"; p=$(cat {shlex.quote(pidfile)} 2>/dev/null) && "
                       f"tr '\\0' '\\n' < /proc/$p/environ 2>/dev/null | grep -q '^FAKETIME_TIMESTAMP_FILE=' "
                       f"&& echo preloaded || true")
        res = node.sh(script, timeout=30)
        lines = res.stdout.split()
        out: dict[str, Any] = {"offset": round(float(lines[0]), 6)}
        if pidfile:
            out["preloaded"] = "preloaded" in lines[1:]
        return out


def install_clock(nemesis: Any, db: Any | None = None) -> ClockHook:
    """Add a ClockHook to `db` (once; before the brokers start) and register start-clock,
    stop-clock, check-clock and the clock heal on `nemesis`."""
    db = db if db is not None else nemesis.db
    hook = next((h for h in getattr(db, "hooks", []) if isinstance(h, ClockHook)), None) if db is not None else None
    if hook is None:
        hook = ClockHook()
        if db is not None:
            db.hooks.append(hook)
    state = {"skewed": False}

    def node(name: str) -> Node:
        return nemesis.cluster.node(name)

    def offsets() -> dict[str, Any]:
        pf = db.pidfile if db is not None and hasattr(db, "pidfile") else None

        def one(n: Node) -> tuple[str, dict[str, Any]]:
            return n.name, hook.sample(n, pf(n) if pf else None)

        with ThreadPoolExecutor(max_workers=min(8, len(nemesis.cluster.nodes))) as ex:
            got = dict(ex.map(one, nemesis.cluster.nodes))
        out: dict[str, Any] = {"clock-offsets": {k: v["offset"] for k, v in got.items()}}
        if pf:
            out["preloaded"] = {k: v["preloaded"] for k, v in got.items()}
        return out

    def start(value: Any) -> dict[str, Any]:
        if value is None:
            rng = nemesis.rng
            if rng.random() < 0.5:
                value = {"bump": "one" if rng.random() < 0.5 else "majority", "delta_ms": bump_delta_ms(rng)}
            else:
                value = {"strobe": "one", **strobe_params(rng)}
        if not isinstance(value, dict) or not ({"bump", "strobe"} & set(value)):
            raise ValueError(f"start-clock needs {{'bump': ...}} or {{'strobe': ...}}, not {value!r}")
        rec: dict[str, Any] = {}
        if "bump" in value:
            spec = value["bump"]
            if isinstance(spec, dict):
                deltas = {n: float(ms) for n, ms in spec.items()}
                nemesis.targets(list(deltas))  # validates the names
            else:
                deltas = {n: float(value["delta_ms"]) for n in nemesis.targets(spec or "one")}
            rec = {"action": "bump", "delta_ms": deltas,
                   "offsets_set": {n: round(hook.bump(node(n), ms), 6) for n, ms in deltas.items()}}
        else:
            names = nemesis.targets(value["strobe"] or "one")
            d, p, s = float(value["delta_ms"]), float(value["period_ms"]), float(value["duration_s"])
            if p <= 0 or s < 0:
                raise ValueError(f"strobe needs period_ms > 0 and duration_s >= 0, not {value!r}")
            for n in names:
                hook.strobe(node(n), d, p, s)
            rec = {"action": "strobe", "nodes": names, "delta_ms": d, "period_ms": p, "duration_s": s}
        state["skewed"] = True
        return {**rec, **offsets()}

    def stop(_value: Any = None) -> dict[str, Any]:
        for n in nemesis.cluster.nodes:
            hook.reset(n)
        state["skewed"] = False
        return {"action": "reset", **offsets()}

    def heal() -> None:
        if state["skewed"] or any(v != 0.0 for v in hook.offsets.values()):
            nemesis.record("stop-clock", {**stop(), "final": True})

    nemesis.register("start-clock", start)
    nemesis.register("stop-clock", stop)
    nemesis.register("check-clock", lambda _v: {"action": "check", **offsets()})
    if not any(name == "clock" for name, _ in nemesis.heals):
        nemesis.register_heal("clock", heal)
    return hook


# --------------------------------------------------------------------------- node side


def strobe_main(path: str, base: float, delta_ms: float, period_ms: float, duration_s: float) -> None:
    """Flip the offset file between base and base + delta every period, then restore base.
    Each flip replaces the file atomically (a reader sees one value or the other)."""
    vals = [format_offset(base) + "\n", format_offset(base + delta_ms / 1000.0) + "\n"]
    tmp = path + ".strobe"
    period = period_ms / 1000.0
    end = time.monotonic() + duration_s
    nxt = time.monotonic()
    i = 1

    def put(v: str) -> None:
        with open(tmp, "w") as f:
            f.write(v)
        os.replace(tmp, path)

    def restore(*_: Any) -> None:
        put(vals[0])
        sys.exit(0)

    signal.signal(signal.SIGTERM, restore)
    while time.monotonic() < end:
        put(vals[i])
        i ^= 1
        nxt += period
        time.sleep(max(0.0, min(nxt, end) - time.monotonic()))
    put(vals[0])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m nemesis.clock", description="clock skew helpers on a node")
    sub = ap.add_subparsers(dest="what", required=True)
    s = sub.add_parser("strobe", help="flip an offset file (see strobe_main)")
    s.add_argument("file")
    s.add_argument("--base", type=float, default=0.0)
    s.add_argument("--delta-ms", type=float, required=True)
    s.add_argument("--period-ms", type=float, required=True)
    s.add_argument("--duration-s", type=float, required=True)
    a = ap.parse_args(argv)
    if not (a.period_ms > 0 and a.duration_s >= 0 and math.isfinite(a.delta_ms)):
        print("strobe: needs --period-ms > 0, --duration-s >= 0", file=sys.stderr)
        return 254
    strobe_main(a.file, a.base, a.delta_ms, a.period_ms, a.duration_s)
    print(json.dumps({"strobe": "done"}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
