"""Membership: stop a broker for good (its data wiped) and add a fresh one with a new id.

Nodes are fixed per cluster, so "adding" a broker reuses a removed node's machine: it is
configured with a node.id never used before (`db.node_ids`, one more than the largest id
so far) and starts with an empty log dir, as a brand-new broker would.

How far this goes with `wrack-broker` (docs/broker-replication.md: no partition
reassignment): the removed id stays registered with the controller and is fenced once its
session times out; partitions that had a replica on it keep that replica in their
assignment, run with a smaller ISR and never get it back. The new id registers and is
unfenced; only partitions created after it joined can be placed on it. Controllers
(the first `controllers` nodes, which are the static KRaft voters) are never removed.

Faults (`install_membership(nemesis, db)`):
- `remove-node` TARGET (default "one") among the active non-controller nodes; at least one
  of them stays. SIGTERM (controlled shutdown), wait, wipe. Value recorded:
  {"nodes": [...], "node_ids": {node: old id}}.
- `add-node` a node name, a list, or None (= every removed node): fresh id, configure, start.
  Recorded {"nodes": [...], "node_ids": {node: new id}}.
- heal: every removed node is added back (recorded `add-node` with "final": true).

Removed nodes are in `Nemesis.removed`: no other fault's target resolves to them, so
`start all` (the kill package's stop) does not bring a removed broker back under its old id.
"""

from __future__ import annotations

from typing import Any

from nemesis.targets import TargetError, resolve


def install_membership(nemesis: Any, db: Any | None = None) -> dict[str, int]:
    """Register remove-node / add-node and the heal; returns the live `removed` map
    (node -> id it had)."""
    db = db if db is not None else nemesis.db
    if db is None:
        raise ValueError("membership needs a DB")
    removed: dict[str, int] = {}
    names = [n.name for n in nemesis.cluster.nodes]
    controllers = set(names[: max(1, db.opts.controllers)])

    def current_id(name: str) -> int:
        return db.node_ids.get(name, names.index(name))

    def remove(spec: Any) -> dict[str, Any]:
        candidates = [n for n in names if n not in controllers and n not in removed]
        if len(candidates) < 2:
            raise TargetError(f"membership: no broker can be removed (non-controller, active: {candidates}; "
                              f"one must stay)")
        if isinstance(spec, list | tuple) or (isinstance(spec, str) and spec in names):
            chosen = [spec] if isinstance(spec, str) else list(spec)
            bad = [n for n in chosen if n not in candidates]
            if bad:
                raise TargetError(f"membership: cannot remove {bad} (controllers or already removed)")
        else:
            chosen = resolve(spec or "one", candidates, nemesis.rng)
        if len(chosen) >= len(candidates):
            chosen = chosen[: len(candidates) - 1]
        ids = {}
        for n in chosen:
            node = nemesis.cluster.node(n)
            db.stop(node)
            db.wipe(node)
            ids[n] = current_id(n)
            removed[n] = ids[n]
            nemesis.removed.add(n)
            nemesis.killed.discard(n)
            nemesis.paused.discard(n)
        return {"nodes": chosen, "node_ids": ids}

    def add(spec: Any) -> dict[str, Any]:
        if spec is None or spec == "all":
            chosen = sorted(removed)
        else:
            chosen = [spec] if isinstance(spec, str) else list(spec)
            bad = [n for n in chosen if n not in removed]
            if bad:
                raise TargetError(f"membership: {bad} are not removed nodes (removed: {sorted(removed)})")
        ids = {}
        for n in chosen:
            node = nemesis.cluster.node(n)
            new_id = max([len(names) - 1, *db.node_ids.values()]) + 1
            db.node_ids[n] = new_id
            db.configure(node)
            db.start(node)
            ids[n] = new_id
            del removed[n]
            nemesis.removed.discard(n)
        return {"nodes": chosen, "node_ids": ids}

    def heal() -> None:
        if removed:
            nemesis.record("add-node", {**add(None), "final": True})

    nemesis.register("remove-node", remove)
    nemesis.register("add-node", add)
    if not any(name == "membership" for name, _ in nemesis.heals):
        nemesis.register_heal("membership", heal)
    return removed
