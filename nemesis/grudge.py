"""Grudges, as in Jepsen's nemesis: pure functions from node names to who drops whom.

A grudge maps a node to the set of nodes whose packets it drops (inbound, iptables INPUT
DROP in the node's namespace). It is one-way by nature: `{b: {a}}` makes b ignore a;
symmetric partitions come from `complete_grudge` (each component drops everyone outside it).
All functions are pure and deterministic given `rng`.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Sequence

Grudge = dict[str, frozenset[str]]


def complete_grudge(components: Iterable[Iterable[str]]) -> Grudge:
    """Each component drops every node outside it (a symmetric partition)."""
    comps = [frozenset(c) for c in components]
    everyone = frozenset().union(*comps) if comps else frozenset()
    return {n: everyone - c for c in comps for n in c}


def halves(nodes: Sequence[str]) -> list[list[str]]:
    """Split in two, the first half the smaller one (Jepsen's `bisect`)."""
    k = len(nodes) // 2
    return [list(nodes[:k]), list(nodes[k:])]


def split_one(nodes: Sequence[str], node: str) -> list[list[str]]:
    """`node` alone against the rest."""
    return [[node], [n for n in nodes if n != node]]


def majority_minority(nodes: Sequence[str], rng: random.Random) -> list[list[str]]:
    """A random minority against the majority."""
    shuffled = list(nodes)
    rng.shuffle(shuffled)
    return [shuffled[: len(nodes) // 2], shuffled[len(nodes) // 2:]]


def bridge(nodes: Sequence[str]) -> Grudge:
    """Two halves that cannot see each other, plus the middle node that sees both (non-transitive)."""
    if len(nodes) < 3:
        return complete_grudge([nodes])
    mid = len(nodes) // 2
    a, m, b = set(nodes[:mid]), nodes[mid], set(nodes[mid + 1:])
    g: Grudge = {n: frozenset(b) for n in a}
    g.update({n: frozenset(a) for n in b})
    g[m] = frozenset()
    return g


def majorities_ring(nodes: Sequence[str], rng: random.Random | None = None) -> Grudge:
    """Every node sees a majority (a window around it on a ring), no two the same majority."""
    ring = list(nodes)
    if rng is not None:
        rng.shuffle(ring)
    n = len(ring)
    majority = n // 2 + 1
    half = majority // 2
    g: Grudge = {}
    for i, node in enumerate(ring):
        visible = {ring[(i + d) % n] for d in range(-half, half + 1)}
        g[node] = frozenset(set(ring) - visible)
    return g


def one_way(sources: Iterable[str], targets: Iterable[str]) -> Grudge:
    """Each of `targets` drops packets from `sources`; the reverse direction stays open."""
    src = frozenset(sources)
    return {t: src - {t} for t in targets}


def blocked_pairs(grudge: Grudge) -> set[tuple[str, str]]:
    """(src, dst) pairs whose packets from src to dst are dropped."""
    return {(s, d) for d, srcs in grudge.items() for s in srcs}
