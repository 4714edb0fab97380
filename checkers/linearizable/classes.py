"""Classes of indeterminate ops (rules 4 and 5 of `search.py`) and the relaxed witness check.

Indeterminate ops with the same call are interchangeable: any linearization that uses some
of them can use, instead, the earliest-invoked ones of their class, in invocation order.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def classes(calls: Sequence[Any], ends: Sequence[float | None]) -> tuple[list[int], dict[int, list[int]]]:
    """Per op, the first indeterminate op with its call (-1: determinate); per first op, the
    ops of its class in call order (ops are given in call order)."""
    rep = [-1] * len(calls)
    first: dict[Any, int] = {}
    members: dict[int, list[int]] = {}
    for i in range(len(calls)):
        if ends[i] is None:
            r = first.setdefault(calls[i], i)
            rep[i] = r
            members.setdefault(r, []).append(i)
    return rep, members


def bit_positions(ends: Sequence[float | None]) -> list[int]:
    """Per op, its number: determinate ops in call order (for a search's base/rel),
    indeterminate ops apart. Ops are numbered in call order."""
    pos = [0] * len(ends)
    nd = ni = 0
    for i, end in enumerate(ends):
        if end is None:
            pos[i], ni = ni, ni + 1
        else:
            pos[i], nd = nd, nd + 1
    return pos


def witness(order: Sequence[int], ends: Sequence[float | None], mcall: dict[int, list[float]]) -> bool:
    """Rule 5: does a relaxed linearization (`order`: the ops in their order, a class by its
    first op) match a real one? The k-th use of a class stands for its k-th op (`mcall`:
    the class's call times in order), which must have been invoked no later than the
    return that bounds the move: the first determinate return not linearized yet. Taking
    the k-th op for the k-th use is the best choice, as bounds only grow along the order."""
    done = set()
    ret_of = sorted((e, i) for i, e in enumerate(ends) if e is not None)
    k = 0
    used: dict[int, int] = {}
    for op in order:
        if ends[op] is not None:
            done.add(op)
            continue
        while k < len(ret_of) and ret_of[k][1] in done:
            k += 1
        j = used.get(op, 0)
        sup = mcall[op]
        if j >= len(sup) or (k < len(ret_of) and sup[j] > ret_of[k][0]):
            return False
        used[op] = j + 1
    return True
