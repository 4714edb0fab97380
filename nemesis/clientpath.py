"""Faults in the client path, through the Kafka-aware proxy (nemesis/kproxy.py) that
`install_client_path(nemesis)` puts between the workload's clients and the brokers.

Installing it (a package's `prepare`, before the DB starts; once per Nemesis, whichever
package asks first) starts the proxy and sets `Nemesis.client_route`, so the runner gives
the workload's clients the proxy's listeners as bootstrap servers (the harness's own
clients, the observer's and the nemesis's metadata, stay direct); the proxy is closed by
`Nemesis.teardown`, and every heal ends its rules and releases what it holds. Ops:

- `start-client-path` {"rules": [ProxyRule as a dict, ...]} / `stop-client-path`: the rules
  in force (delay, drop (cutting the connection), duplicate or reorder frames of named
  request types, in either direction, `kproxy.ProxyRule`); every action the proxy takes is journaled as a
  `client-path-action` event (type, direction, action, node, correlation id); the stop
  records how often each rule acted. A rule naming an unknown request type is refused.
- `retry-failover` (played whole: start, hold `hold_s`, stop, as one instant op) and
  `start-retry-failover` {"candidates": [[T, P], ...], "fault": "kill" | "restart",
  "drop_s": S} / `stop-retry-failover`: the answers to every Produce request to the leader
  of the first candidate that has one are dropped for `drop_s` (1.5 s), each drop cutting its
  connection (the batches are written and replicated, the producers never hear it and keep
  them to retry), then that leader
  is killed (or restarted cleanly: its producer state is rebuilt from its log); the
  producers retry on the next leader, which must recognise every batch it already has
  from the producer state it replicated (KIP-98), or the retry is a `duplicate`. The
  stop starts every node.

`client_path(nemesis)` returns the installed `ClientPath` (its `proxy`), None if none.

Packages: `client_path_package(apis)` (background: it plays beside the default rotation, on
its own clock; each window one or two rules drawn over `apis`: `draw_rule`) and
`retry_failover_package(candidates)`.
"""

from __future__ import annotations

import random
import time
import weakref
from collections.abc import Callable, Sequence
from typing import Any

from nemesis.core import FaultOp, Nemesis
from nemesis.kproxy import DEFAULT_APIS, KafkaProxy, ProxyRule, api_key_of
from nemesis.layers import BACKGROUND
from nemesis.schedule import FaultPackage
from nemesis.targets import TargetError

ACTION_F = "client-path-action"
HOLD_S = 1.5  # how long Produce answers are dropped before the leader goes (`drop_s`)
OWNER, FAILOVER = "client-path", "retry-failover"  # their rules at the proxy
DROP_LIMIT = 500  # answers dropped at most (each one is journaled)


class ClientPath:
    """The proxy installed on one Nemesis and the ops that drive it (module docstring)."""

    def __init__(self, nem: Nemesis):
        self.nem = nem
        nodes = {n.address: n.name for n in nem.cluster.nodes}
        self.proxy = KafkaProxy(nodes, lambda ev: nem.record(ACTION_F, ev), seed=nem.rng.randrange(2**31))
        self.rules: list[ProxyRule] = []

    def start(self, value: Any) -> dict[str, Any]:
        rules = [ProxyRule.from_dict(r) for r in (value or {}).get("rules", [])]
        self.rules = rules
        self.proxy.set_rules(rules, OWNER)
        return {"rules": [r.to_dict() for r in rules]}

    def stop(self, _value: Any = None) -> dict[str, Any]:
        counts = self.proxy.clear_rules(OWNER)
        out = {"acted": [{"rule": r.to_dict(), "times": n} for r, n in zip(self.rules, counts, strict=False)]}
        self.rules = []
        return out

    def retry_failover(self, value: Any) -> dict[str, Any]:
        v = dict(value or {})
        fault = v.get("fault", "kill")
        if fault not in ("kill", "restart"):
            raise ValueError(f"retry-failover: fault {fault!r} is not kill or restart")
        topic, part, leader = self._leader(v.get("candidates") or [])
        self.proxy.set_rules([ProxyRule("Produce", "drop", "response", limit=DROP_LIMIT, node=leader)], FAILOVER)
        time.sleep(float(v.get("drop_s", HOLD_S)))
        try:
            self.nem.invoke(FaultOp(fault, [leader]))
        finally:
            dropped = self.proxy.clear_rules(FAILOVER)
        return {"topic": topic, "partition": part, "leader": leader, "fault": fault,
                "answers_dropped": sum(dropped)}

    def _leader(self, candidates: Sequence[Sequence[Any]]) -> tuple[str, int, str]:
        for t, p in candidates:
            try:
                return t, int(p), self.nem.targets({"role": "leader", "topic": t, "partition": int(p)})[0]
            except Exception:  # noqa: BLE001 - no leader (or no metadata answer) now: the next one
                continue
        raise TargetError("retry-failover: no candidate partition has a leader now")

    def failover_played(self, value: Any) -> dict[str, Any]:
        """`retry-failover` (an instant op, played whole): `start-retry-failover`, held
        `hold_s`, then every node started."""
        return played_whole(self.retry_failover, self.end_failover, value)

    def end_failover(self, _value: Any = None) -> dict[str, Any]:
        self.nem.invoke(FaultOp("start", "all"))
        return {"started": "all"}

    def heal(self) -> None:
        self.proxy.clear()
        self.rules = []


def played_whole(start: Callable[[Any], dict[str, Any]], stop: Callable[[], dict[str, Any]], value: Any,
                 hold_s: float = 10.0) -> dict[str, Any]:
    """A window fault played as one instant op: `start(value)`, held `value["hold_s"]`, then
    `stop()`, both recorded in one value; a start that says "skipped" returns at once."""
    out = start(value)
    if "skipped" not in out:
        time.sleep(float((value or {}).get("hold_s", hold_s)))
        out.update(stop())
    return out


_INSTALLED: weakref.WeakKeyDictionary[Nemesis, ClientPath] = weakref.WeakKeyDictionary()


def client_path(nem: Nemesis) -> ClientPath | None:
    return _INSTALLED.get(nem)


def install_client_path(nem: Nemesis) -> ClientPath:
    """Start the proxy for `nem` (once) and register its ops, heal and teardown."""
    cp = _INSTALLED.get(nem)
    if cp is not None:
        return cp
    cp = _INSTALLED[nem] = ClientPath(nem)
    nem.client_route = cp.proxy.route
    nem.register("start-client-path", cp.start)
    nem.register("stop-client-path", cp.stop)
    nem.register("start-retry-failover", cp.retry_failover)
    nem.register("stop-retry-failover", cp.end_failover)
    nem.register("retry-failover", cp.failover_played)
    nem.register_heal("client-path", cp.heal)
    nem.register_teardown("client-path proxy", cp.proxy.close)
    return cp


def client_path_proxy(nem: Nemesis) -> KafkaProxy:
    """The installed proxy (installing it if needed)."""
    return install_client_path(nem).proxy


# how often each action is drawn for a client-path window; never `reorder`: TCP never
# reorders a connection's frames, and a client's answer to that can look like the broker's
# bug (nemesis/kproxy.py), a false alarm in the safe configuration
ACTION_WEIGHTS = (("delay", 4), ("drop", 3), ("duplicate", 2))
DELAYS_MS = (300, 1500, 6000)  # the last past the clients' request timeout (5 s): they retry meanwhile
SHARES = (0.2, 0.5, 1.0)
RULE_LIMIT = 30  # actions per rule and window (each one journaled)


def draw_rule(rng: random.Random, apis: Sequence[str]) -> dict[str, Any]:
    """One client-path rule over `apis` (as `ProxyRule.to_dict`): an action by
    `ACTION_WEIGHTS`, either direction, a share of the frames, a delay from `DELAYS_MS`."""
    actions = [a for a, w in ACTION_WEIGHTS for _ in range(w)]
    action = actions[rng.randrange(len(actions))]
    return ProxyRule(api=apis[rng.randrange(len(apis))], action=action,
                     direction="response" if rng.random() < 0.5 else "request",
                     p=SHARES[rng.randrange(len(SHARES))],
                     delay_ms=DELAYS_MS[rng.randrange(len(DELAYS_MS))] if action == "delay" else 0,
                     limit=RULE_LIMIT).to_dict()


def client_path_package(apis: Sequence[str] = DEFAULT_APIS, name: str = "client-path") -> FaultPackage:
    """Client-path faults on the request types `apis` (ValueError naming an unknown one): each
    window one or two `draw_rule`s; a background package (`nemesis.layers`)."""
    for a in apis:
        api_key_of(a)
    apis = list(apis)

    def start(rng: random.Random) -> FaultOp:
        return FaultOp("start-client-path", {"rules": [draw_rule(rng, apis) for _ in range(rng.randint(1, 2))]})

    return FaultPackage(name, start, FaultOp("stop-client-path"), [FaultOp("stop-client-path")], COLOR,
                        install_client_path, tier=BACKGROUND)


def retry_failover_package(candidates: Callable[[random.Random], Sequence[Sequence[Any]]]) -> FaultPackage:
    """`retry-failover` played whole on the partitions `candidates(rng)` draws (a kill, or
    now and then a clean restart of the leader; held 5-15 s), an instant of tier 0."""
    def start(rng: random.Random) -> FaultOp:
        return FaultOp("retry-failover", {"candidates": [list(c) for c in candidates(rng)],
                                          "fault": "kill" if rng.random() < 0.6 else "restart",
                                          "hold_s": round(rng.uniform(5, 15), 1)})

    return FaultPackage("retry-failover", start, None, [FaultOp("stop-retry-failover")], "#E0A8C8",
                        install_client_path, tier=0)


COLOR = "#9FD6C2"
