"""Dependency cycles between transactions: G0 (write cycles) and G1c (information-flow cycles).

Nodes are committed ops that send (ok, or indeterminate but proven committed). Edges:

- **wr** `T1 -> T2`: T2 (a txn) polled a value T1 sent. Only txn readers matter: a pure
  poll has no outgoing edge, so it can never be on a cycle.
- **ww** `T1 -> T2` (only with `ww_deps`): in some key's version order T1's send comes
  before T2's. Writers that are neither txn/multi-send ops nor read by a txn are only
  pass-through links of one key's chain, so the chain is contracted to its *relevant*
  writers (each linked to the next relevant writer of that key): reachability between
  relevant ops, and hence every cycle among them, is unchanged.

`G0` is a cycle of ww edges only; `G1c` a cycle with at least one wr edge. One example
of each is reported per strongly connected component (Tarjan, iterative).
"""

from __future__ import annotations

from collections import deque
from typing import Any

from checkers.optable import FAIL, INFO
from checkers.queue.core import QueuePass

MAX_CYCLE_SHOWN = 12


def find_cycles(qp: QueuePass, committed: set[int], ww_deps: bool, found: Any) -> None:
    writer = qp.writer

    def writer_op(k: str, v: Any) -> int | None:
        code = writer.get(k, {}).get(v)
        if code is None:
            return None
        st, op = code & 3, code >> 2
        if st == FAIL or (st == INFO and op not in committed):
            return None
        return op

    nodes = {op for op, (_w, _r, st) in qp.graph_ops.items() if st != INFO or op in committed}
    # edge label: (kind, key, value, value2)
    edges: dict[int, dict[int, tuple[str, str, Any, Any]]] = {}

    def link(a: int, b: int, label: tuple[str, str, Any, Any]) -> None:
        if a == b:
            return
        out = edges.setdefault(a, {})
        if b not in out or (out[b][0] == "ww" and label[0] == "wr"):
            out[b] = label

    relevant = set(nodes)
    for op in nodes:
        _w, reads, _st = qp.graph_ops[op]
        for k, v in reads:
            w = writer_op(k, v)
            if w is not None:
                relevant.add(w)
                link(w, op, ("wr", k, v, None))
    if ww_deps:
        for k, ov in qp.off2val.items():
            prev: tuple[int, Any] | None = None
            placed: set[Any] = set()
            for o in sorted(ov):
                v = ov[o]
                if v in placed:
                    continue
                placed.add(v)
                w = writer_op(k, v)
                if w is None or w not in relevant:
                    continue
                if prev is not None and prev[0] != w:
                    link(prev[0], w, ("ww", k, prev[1], v))
                prev = (w, v)
    for scc in _sccs(edges):
        if len(scc) < 2:
            continue
        members = set(scc)
        if ww_deps:
            cyc = _cycle(edges, members, only_ww=True)
            if cyc:
                found.add("G0", _describe("G0", cyc, edges, qp))
        cyc = _cycle(edges, members, only_ww=False)
        if cyc:
            found.add("G1c", _describe("G1c", cyc, edges, qp))


def _sccs(edges: dict[int, dict[int, Any]]) -> list[list[int]]:
    """Strongly connected components (iterative Tarjan)."""
    index: dict[int, int] = {}
    low: dict[int, int] = {}
    on: set[int] = set()
    stack: list[int] = []
    out: list[list[int]] = []
    counter = 0
    for root in list(edges):
        if root in index:
            continue
        work = [(root, iter(edges.get(root, {})))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            advanced = False
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(edges.get(w, {}))))
                    advanced = True
                    break
                if w in on and index[w] < low[v]:
                    low[v] = index[w]
            if advanced:
                continue
            work.pop()
            if work:
                u = work[-1][0]
                if low[v] < low[u]:
                    low[u] = low[v]
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                out.append(comp)
    return out


def _cycle(edges: dict[int, dict[int, tuple[str, str, Any, Any]]], members: set[int], *, only_ww: bool
           ) -> list[int] | None:
    """A short cycle inside `members`: ww edges only, or one containing a wr edge."""
    def path(src: int, dst: int) -> list[int] | None:
        prev: dict[int, int] = {src: src}
        q = deque([src])
        while q:
            u = q.popleft()
            for w, lab in edges.get(u, {}).items():
                if w not in members or w in prev or (only_ww and lab[0] != "ww"):
                    continue
                prev[w] = u
                if w == dst:
                    out = [w]
                    while out[-1] != src:
                        out.append(prev[out[-1]])
                    return out[::-1]
                q.append(w)
        return None

    for a in sorted(members):
        for b, lab in edges.get(a, {}).items():
            if b not in members:
                continue
            if only_ww and lab[0] != "ww":
                continue
            if not only_ww and lab[0] != "wr":
                continue
            back = [b] if b == a else path(b, a)
            if back is not None:
                return [a] + back  # a -> b ... -> a
    return None


def _describe(kind: str, cyc: list[int], edges: dict[int, dict[int, tuple[str, str, Any, Any]]],
              qp: QueuePass) -> dict[str, Any]:
    steps = []
    words = []
    for a, b in zip(cyc, cyc[1:], strict=False):
        lab = edges[a][b]
        if lab[0] == "wr":
            steps.append({"type": "wr", "from": a, "to": b, "key": lab[1], "value": lab[2]})
            words.append(f"op {a} sent {lab[2]!r} to key {lab[1]}, which op {b} polled")
        else:
            steps.append({"type": "ww", "from": a, "to": b, "key": lab[1], "value": lab[2], "value2": lab[3]})
            words.append(f"op {a} sent {lab[2]!r} to key {lab[1]} before op {b} sent {lab[3]!r}")
    shown = words[:MAX_CYCLE_SHOWN]
    more = f" (and {len(words) - len(shown)} more steps)" if len(words) > len(shown) else ""
    what = "a write cycle" if kind == "G0" else "a cycle of information flow"
    return {"explanation": f"{'; '.join(shown)}{more}: {what} between {len(cyc) - 1} ops",
            "ops": cyc[:-1], "cycle": cyc, "steps": steps}
