"""Wing & Gong's linearizability search with Lowe's configuration cache, for one partition.

The history is a set of ops with a call time and a return time (``None``: indeterminate,
returns at +infinity). A *configuration* is (the set of ops linearized so far, the model
state). The search is a depth-first walk over configurations (just-in-time linearization,
as in Lowe's "Testing for linearizability" and Porcupine's ``checkSingle``):

- Entries (calls, and returns of determinate ops) are numbered in time order, calls
  before returns at equal times (closed intervals: ops that touch are concurrent), and
  kept in doubly linked lists: calls of read-only ops, calls of the other (mutating) ops,
  and returns. The first return still in its list is the *boundary*: an op may be
  linearized next iff its call is before the boundary (then it is *pending*). No return
  left means every determinate op is linearized: the history is linearizable.
- Linearizing an op unlinks its call and return (O(1), undone in LIFO order on
  backtrack); a configuration already in the cache is never explored twice. The cache is
  one Python set of ``(rel, base, ind, state id)``: determinate ops are numbered in call
  order, every one below ``base`` is linearized and number ``base + i`` is iff bit ``i`` of
  the Python int ``rel`` is set, so that part stays as small as the window of concurrent
  ops however long the history; indeterminate ops (which may stay unlinearized for good)
  have their own bitset ``ind``. States are interned; every model step is computed once per (op, state id).

Pruning rules that keep verdicts exact (each skips only moves or configurations that
cannot lead to a linearization some other explored move does not reach):

1. *Read-only greedy.* If a pending read-only op (one that never changes any state) is
   legal in the current state, linearizing it now is as good as any alternative (move it
   to the front of any successful completion: the states after it are unchanged). It is
   the only move explored from that configuration.
2. *Stuck ops.* A pending read-only op R that is illegal now must still be linearized
   before its return. If every *resetting* op that could come before R is linearized
   already, only non-resetting ops can run before R; when the model says none of those can
   make R legal (``stuck``), the configuration is dead. (Registers: every write resets, so
   a read that no write can precede any more is stuck iff illegal. kv: only put resets;
   an append-only future cannot turn "ab" into "ac". log: a written offset never changes.)
   The same holds for determinate mutating ops the model marks ``blocking`` (a log send
   acknowledged at an offset the log has passed), which are watched in their own list.
3. *Indeterminate no-ops.* An indeterminate op never has to be linearized (it may not have
   happened), so linearizing one whose step leaves the state unchanged leads to a
   configuration dominated by the current one; that move is skipped. The search succeeds
   when every *determinate* op is linearized.
4. *Twins.* Indeterminate ops with the same call are interchangeable: they are linearized
   in the order of their invocations.

Move order (a heuristic; it decides how soon a linearizable history is recognised, never
the verdict): after the greedy reads, the op that returns first (if it is legal now: that
keeps the other ops pending, Lowe's just-in-time idea), then the pending mutating ops in
call order (Porcupine's order).

Bounded memory: `memory_units` counts cached configurations, states and steps; the caller
stops the search (verdict "unknown") when the total passes its cap. The search runs in slices of about
``budget`` moves (`run`), so partitions can be interleaved and a time limit checked
between slices.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import Any

State = Hashable


@dataclass(frozen=True)
class Spec:
    """What the search needs of a model (see `checkers.linearizable.models.Model`)."""

    init: State
    step: Callable[[State, Any], State | None]
    target: Callable[[Any], State | None] = lambda call: None
    resets: Callable[[Any], bool] = lambda call: True
    stuck: Callable[[State, Any], bool] = lambda state, call: True
    blocking: Callable[[Any], bool] = lambda call: False


class Search:
    """A resumable WGL search over one partition.

    ``calls[i]``, ``starts[i]``, ``ends[i]`` (``None`` = indeterminate), ``readonly[i]``
    describe op ``i``; `spec` is the model. ``groups[i]`` (default all 0) names the
    independent object op ``i`` touches when one search covers several (partitioning
    switched off): rule 2 then looks only at resets of the read's own group. Call `run` until it returns True
    (linearizable) or False (not); `final` / `best` then hold the linearization found /
    the longest partial linearization (see `frames`).
    """

    def __init__(self, calls: Sequence[Any], starts: Sequence[float], ends: Sequence[float | None],
                 readonly: Sequence[bool], spec: Spec, groups: Sequence[int] | None = None):
        n = len(calls)
        self.n = n
        self.calls = list(calls)
        self.spec = spec
        self._step_fn = spec.step
        self._stuck_fn = spec.stuck
        # interned states; the configuration cache
        self.states: list[State] = [spec.init]
        self.state_ids: dict[State, int] = {spec.init: 0}
        self.seen: set[tuple[int, int, int, int]] = {(0, 0, 0, 0)}  # (rel, base, ind, state id)
        self.steps = 0
        self.steps_cached = 0
        # per op: state id -> state id after it (-1 illegal; -3 illegal and stuck, for read-only
        # and blocking ops)
        self.trans: list[dict[int, int]] = [{} for _ in range(n)]

        # entries: (time, 0 call / 1 return, op); calls first on ties
        ents = [(starts[i], 0, i) for i in range(n)]
        ents += [(ends[i], 1, i) for i in range(n) if ends[i] is not None]
        ents.sort()
        m = len(ents)
        self.op_of = [e[2] for e in ents]
        call_entry = [0] * n
        ret_entry = [-1] * n
        for idx, (_, kind, i) in enumerate(ents):
            if kind == 0:
                call_entry[i] = idx
            else:
                ret_entry[i] = idx
        self.call_entry, self.ret_entry = call_entry, ret_entry
        # list heads m..m+2; list ends m+3.. (the returns' end is the smallest, so a scan
        # bounded by the boundary never walks past another list's end)
        self.H_RET, self.H_RO, self.H_MUT = m, m + 1, m + 2
        self.E_RET, self.E_RO, self.E_MUT = m + 4, m + 5, m + 6
        self.nxt, self.prv = self._link(m + 8, ents, lambda kind, i: self.H_RET if kind else (
            self.H_RO if readonly[i] else self.H_MUT))
        # rule 2: per group, the resetting mutating ops in call order. When there is one group
        # and every mutating op resets, that is the list of mutating calls itself.
        resets = [not readonly[i] and spec.resets(calls[i]) for i in range(n)]
        grp = list(groups) if groups is not None else [0] * n
        self.sep_rs = max(grp, default=0) > 0 or not all(resets[i] or readonly[i] for i in range(n))
        if self.sep_rs:
            ng = max(grp, default=0) + 1
            rnxt = [0] * (m + 8 + 2 * ng)
            rprv = [0] * (m + 8 + 2 * ng)
            tails = [m + 8 + 2 * g for g in range(ng)]
            for _, kind, i in ents:
                if kind == 0 and resets[i]:
                    ce, t = call_entry[i], tails[grp[i]]
                    rnxt[t] = ce
                    rprv[ce] = t
                    tails[grp[i]] = ce
            for g in range(ng):
                rnxt[tails[g]] = m + 9 + 2 * g
                rprv[m + 9 + 2 * g] = tails[g]
            self.rnxt, self.rprv = rnxt, rprv
            self.rhead = [m + 8 + 2 * g for g in grp]
        else:
            self.rnxt, self.rprv = self.nxt, self.prv
            self.rhead = [self.H_MUT] * n
        self.resets = resets
        # rule 2 for mutating ops: determinate, non-resetting ops the model says may block
        # for good (a send at an offset the log has passed), watched at every configuration
        watched = [ends[i] is not None and not readonly[i] and not resets[i] and spec.blocking(calls[i])
                   for i in range(n)]
        self.watched = watched
        self.has_watch = any(watched)
        wnxt = [0] * (m + 2)
        wprv = [0] * (m + 2)
        t = m
        for _, kind, i in ents:
            if kind == 0 and watched[i]:
                ce = call_entry[i]
                wnxt[t] = ce
                wprv[ce] = t
                t = ce
        wnxt[t] = m + 1
        wprv[m + 1] = t
        self.wnxt, self.wprv = wnxt, wprv
        self.indet = [e is None for e in ends]
        self.ro = list(readonly)
        # read-only ops legal in one known state: that state's id; -2: ask the model
        self.tsid = tsid = [-2] * n
        for i in range(n):
            if readonly[i]:
                t = spec.target(calls[i])
                if t is not None:
                    tsid[i] = self._intern(t)
        # twins: the previous indeterminate op with the same call must be linearized first
        # (-1: none). Ops are numbered in call order, so a twin has a smaller number.
        twin = [-1] * n
        last: dict[Any, int] = {}
        for i in sorted(range(n), key=lambda i: starts[i]):
            if ends[i] is None:
                c = self.calls[i]
                if c in last:
                    twin[i] = last[c]
                last[c] = i
        # bit positions: determinate ops in call order (for base/rel), indeterminate ops apart (ind)
        pos = [0] * n
        nd = ni = 0
        for i in range(n):  # ops are numbered in call order
            if ends[i] is None:
                pos[i], ni = ni, ni + 1
            else:
                pos[i], nd = nd, nd + 1
        self.pos = pos
        self.twin = [pos[j] if j >= 0 else -1 for j in twin]  # the twin's bit in `ind`
        # search state
        self.base = self.rel = self.ind = self.sid = 0
        self.stack: list[int] = []  # (op frame, state id, base, rel, ind) before each move, flat
        self.best: list[int] = []  # the longest stack seen
        self.common = 0  # best[:common] == stack[:common] (so a new best copies only the rest)
        self.result: bool | None = None
        self.final: list[int] = []  # the stack of the linearization found

    def _link(self, size: int, ents: list[tuple[Any, int, int]],
              head_of: Callable[[int, int], int]) -> tuple[list[int], list[int]]:
        """`nxt`/`prv` arrays threading each entry into the list `head_of(kind, op)`."""
        nxt = [0] * size
        prv = [0] * size
        heads = (self.H_RET, self.H_RO, self.H_MUT)
        ends = (self.E_RET, self.E_RO, self.E_MUT)
        tails = {h: h for h in heads}
        for _, kind, i in ents:
            idx = self.call_entry[i] if kind == 0 else self.ret_entry[i]
            h = head_of(kind, i)
            t = tails[h]
            nxt[t] = idx
            prv[idx] = t
            tails[h] = idx
        for h, e in zip(heads, ends, strict=True):
            nxt[tails[h]] = e
            prv[e] = tails[h]
        return nxt, prv

    @property
    def configs(self) -> int:
        """Configurations in the cache."""
        return len(self.seen)

    @property
    def memory_units(self) -> int:
        """What the memory bound counts: cached configurations, states and cached steps
        (each roughly 100 bytes)."""
        return len(self.seen) + len(self.states) + self.steps_cached

    def frames(self, stack: list[int]) -> list[tuple[int, int]]:
        """(op, state id before it) for each frame of a search stack (`best`, `final`)."""
        n = self.n
        return [(~x if x < 0 else x - n if x >= n else x, stack[j + 1]) for j, x in
                zip(range(0, len(stack), 5), stack[0::5], strict=True)]

    # ------------------------------------------------------------------ model steps

    def after(self, op: int, sid: int) -> int:
        """The state id after `op` from state `sid` (negative: illegal)."""
        r = self.trans[op].get(sid)
        return self._trans(op, sid) if r is None else r

    def _trans(self, op: int, sid: int) -> int:
        """Compute and cache `op`'s step from state `sid` (read-only: legal, -1 or -3 stuck)."""
        st = self.states[sid]
        t = self.tsid[op]
        if t >= 0:  # a target read asked only when illegal
            s = st if t == sid else None
        else:
            s = self._step_fn(st, self.calls[op])
        if s is None:
            r = -3 if (self.ro[op] or self.watched[op]) and self._stuck_fn(st, self.calls[op]) else -1
        elif self.ro[op]:
            r = sid  # a read-only step returns its state
        else:
            r = self._intern(s)
        self.trans[op][sid] = r
        self.steps_cached += 1
        return r

    def _intern(self, s: State) -> int:
        r = self.state_ids.get(s)
        if r is None:
            r = len(self.states)
            self.states.append(s)
            self.state_ids[s] = r
        return r

    # ------------------------------------------------------------------ the search

    def run(self, budget: int) -> bool | None:
        """Search for at most about `budget` moves; True/False when decided, None to continue."""
        if self.result is not None:
            return self.result
        nxt, prv, rnxt, rprv = self.nxt, self.prv, self.rnxt, self.rprv
        op_of, call_entry, ret_entry = self.op_of, self.call_entry, self.ret_entry
        trans, indet, twin = self.trans, self.indet, self.twin
        tsid, resets, ro = self.tsid, self.resets, self.ro
        seen, stack = self.seen, self.stack
        seen_add = seen.add
        tr_fn = self._trans
        H_RET, H_RO, H_MUT, E_RET = self.H_RET, self.H_RO, self.H_MUT, self.E_RET
        rhead, sep_rs = self.rhead, self.sep_rs
        wnxt, wprv, watched, has_watch, W_HEAD = self.wnxt, self.wprv, self.watched, self.has_watch, len(op_of)
        # the linearized set: determinate ops numbered below `base`, and number base + i iff bit i
        # of `rel`; indeterminate op number i iff bit i of `ind`
        base, rel, ind, sid = self.base, self.rel, self.ind, self.sid
        pos = self.pos
        n = self.n
        best, best_stack, common = len(self.best), self.best, self.common
        moves = 0
        push, pop = stack.append, stack.pop
        result: bool | None = None

        while True:
            # ---- a fresh configuration (base, rel, ind, sid)
            b = nxt[H_RET]
            if b == E_RET:
                result = True
                break
            if moves >= budget:
                break
            moves += 1
            if len(stack) > best:
                best_stack[common:] = stack[common:]
                common = best = len(stack)
            # 1. greedy reads; 2. stuck reads
            e = nxt[H_RO]
            dead = False
            while e < b:
                op = op_of[e]
                t = tsid[op]
                if t == sid:
                    break
                # frozen: the first resetting op of its group not yet linearized comes too late
                if t == -2 or rnxt[rhead[op]] > ret_entry[op]:
                    ns = trans[op].get(sid)
                    if ns is None:
                        ns = tr_fn(op, sid)
                    if ns >= 0:
                        break
                    if ns == -3 and rnxt[rhead[op]] > ret_entry[op]:
                        dead = True
                        break
                e = nxt[e]
            if not dead and has_watch and not e < b:
                # 2'. a watched op that can never be legal before its return: dead
                w = wnxt[W_HEAD]
                while w < b:
                    op = op_of[w]
                    ns = trans[op].get(sid)
                    if ns is None:
                        ns = tr_fn(op, sid)
                    if ns == -3 and rnxt[rhead[op]] > ret_entry[op]:
                        dead = True
                        break
                    w = wnxt[w]
            if dead:
                e = b
            elif e < b:
                d = pos[op] - base
                if d:
                    nrel, nbase = rel | (1 << d), base
                else:
                    nrel = rel | 1
                    d = (~nrel & (nrel + 1)).bit_length() - 1  # trailing ones
                    nrel >>= d
                    nbase = base + d
                key = (nrel, nbase, ind, sid)
                if key not in seen:
                    seen_add(key)
                    pe, ne = prv[e], nxt[e]
                    nxt[pe] = ne
                    prv[ne] = pe
                    r = ret_entry[op]
                    pe, ne = prv[r], nxt[r]
                    nxt[pe] = ne
                    prv[ne] = pe
                    push(~op)
                    push(sid)
                    push(base)
                    push(rel)
                    push(ind)
                    base, rel = nbase, nrel
                    continue
                e = b  # that move was explored already, so this configuration fails
            else:
                # 3. the op that returns first, if legal here, before the others: it keeps
                # the others pending, which usually finds a linearization sooner
                e = nxt[H_MUT]
                op = op_of[b]
                if not ro[op]:
                    ns = trans[op].get(sid)
                    if ns is None:
                        ns = tr_fn(op, sid)
                    if ns >= 0:
                        d = pos[op] - base
                        if d:
                            nrel, nbase = rel | (1 << d), base
                        else:
                            nrel = rel | 1
                            d = (~nrel & (nrel + 1)).bit_length() - 1
                            nrel >>= d
                            nbase = base + d
                        key = (nrel, nbase, ind, ns)
                        if key not in seen:
                            seen_add(key)
                            ce = call_entry[op]
                            pe, ne = prv[ce], nxt[ce]
                            nxt[pe] = ne
                            prv[ne] = pe
                            pe, ne = prv[b], nxt[b]
                            nxt[pe] = ne
                            prv[ne] = pe
                            if sep_rs and resets[op]:
                                pe, ne = rprv[ce], rnxt[ce]
                                rnxt[pe] = ne
                                rprv[ne] = pe
                            if watched[op]:
                                pe, ne = wprv[ce], wnxt[ce]
                                wnxt[pe] = ne
                                wprv[ne] = pe
                            push(op + n)
                            push(sid)
                            push(base)
                            push(rel)
                            push(ind)
                            base, rel, sid = nbase, nrel, ns
                            continue
            # 4. the pending mutating ops in call order, from e; backtrack when none is left
            while True:
                moved = False
                while e < b:
                    op = op_of[e]
                    j = twin[op]
                    if j >= 0 and not (ind >> j) & 1:
                        e = nxt[e]  # rule 4: its twin first
                        continue
                    ns = trans[op].get(sid)
                    if ns is None:
                        ns = tr_fn(op, sid)
                    if ns >= 0 and (ns != sid or not indet[op]):
                        if indet[op]:
                            nrel, nbase, nind = rel, base, ind | (1 << pos[op])
                        else:
                            nind = ind
                            d = pos[op] - base
                            if d:
                                nrel, nbase = rel | (1 << d), base
                            else:
                                nrel = rel | 1
                                d = (~nrel & (nrel + 1)).bit_length() - 1
                                nrel >>= d
                                nbase = base + d
                        key = (nrel, nbase, nind, ns)
                        if key not in seen:
                            seen_add(key)
                            pe, ne = prv[e], nxt[e]
                            nxt[pe] = ne
                            prv[ne] = pe
                            r = ret_entry[op]
                            if r >= 0:
                                pe, ne = prv[r], nxt[r]
                                nxt[pe] = ne
                                prv[ne] = pe
                            if sep_rs and resets[op]:
                                pe, ne = rprv[e], rnxt[e]
                                rnxt[pe] = ne
                                rprv[ne] = pe
                            if watched[op]:
                                pe, ne = wprv[e], wnxt[e]
                                wnxt[pe] = ne
                                wprv[ne] = pe
                            push(op)
                            push(sid)
                            push(base)
                            push(rel)
                            push(ind)
                            base, rel, ind, sid = nbase, nrel, nind, ns
                            moved = True
                            break
                    e = nxt[e]
                if moved:
                    break
                # backtrack: undo moves; read-only moves were forced, so keep undoing
                while True:
                    if not stack:
                        result = False
                        break
                    ind = pop()
                    rel = pop()
                    base = pop()
                    sid = pop()
                    x = pop()
                    if len(stack) < common:
                        common = len(stack)
                    op = ~x if x < 0 else x - n if x >= n else x
                    r = ret_entry[op]
                    if r >= 0:
                        nxt[prv[r]] = r
                        prv[nxt[r]] = r
                    ce = call_entry[op]
                    nxt[prv[ce]] = ce
                    prv[nxt[ce]] = ce
                    if x >= 0:
                        if sep_rs and resets[op]:
                            rnxt[rprv[ce]] = ce
                            rprv[rnxt[ce]] = ce
                        if watched[op]:
                            wnxt[wprv[ce]] = ce
                            wprv[wnxt[ce]] = ce
                        e = nxt[ce] if x < n else nxt[H_MUT]
                        b = nxt[H_RET]
                        break
                if result is not None:
                    break
            if result is not None:
                break

        self.base, self.rel, self.ind, self.sid = base, rel, ind, sid
        self.common = common
        self.steps += moves
        if result is True:
            self.final = stack[:]
        self.result = result
        return result
