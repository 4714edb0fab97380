"""Wing & Gong's linearizability search with Lowe's configuration cache, for one partition.

The history is a set of ops with a call time and a return time (``None``: indeterminate,
returns at +infinity). A *configuration* is (the set of ops linearized so far, the model
state). The search is a depth-first walk over configurations (just-in-time linearization,
as in Lowe's "Testing for linearizability" and Porcupine's ``checkSingle``):

- Entries (calls, and returns of determinate ops) are numbered in time order, calls
  before returns at equal times (closed intervals: ops that touch are concurrent), and
  kept in doubly linked lists: calls of read-only ops, calls of determinate mutating
  ops, calls of indeterminate ops (one per class, rule 4), and returns. The first return
  still in its list is the *boundary*: an op may be linearized next iff its call is before
  the boundary (then it is *pending*). No return left means every determinate op is
  linearized: the history is linearizable.
- Linearizing an op unlinks its call and return (O(1), undone in LIFO order on
  backtrack); a configuration already in the cache is never explored twice. The cache is
  one Python set of ``(rel, base, ind, state id)``: determinate ops are numbered in call
  order, every one below ``base`` is linearized and number ``base + i`` is iff bit ``i`` of
  the Python int ``rel`` is set, so that part stays as small as the window of concurrent
  ops however long the history; ``ind`` holds, per class of indeterminate ops, how many
  of them are linearized (a bit field each). States are interned; every model step is
  computed once per (op, state id).

Pruning rules that keep verdicts exact (docs/checkers-linearizable.md gives each one's
argument; each skips only moves or configurations that cannot lead to a linearization
some other explored move does not reach):

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
   A class of resetting indeterminate ops counts through its first op not linearized.
3. *Indeterminate no-ops.* An indeterminate op never has to be linearized (it may not have
   happened), so linearizing one whose step leaves the state unchanged leads to a
   configuration dominated by the current one; that move is skipped. The search succeeds
   when every *determinate* op is linearized.
4. *Classes.* Indeterminate ops with the same call are interchangeable: they are linearized
   in the order of their invocations, so a class is one list entry (its first op not
   linearized yet, at that op's call) and a count in ``ind``.
5. *Relaxed search* (``relaxed=True``): a class stays pending once linearized and can be
   linearized any number of times, without counts. Every real linearization is a relaxed
   one, so a relaxed search that fails proves the partition has none; a relaxed
   linearization is accepted only if the history has enough ops of each class invoked in
   time (`_witness`), else it counts in ``rejected`` and the search goes on (then its
   failure proves nothing). Only for models whose indeterminate ops reach finitely many
   states (the caller's business: `plan.Plan`).

Move order (a heuristic; it decides how soon a linearizable history is recognised, never
the verdict): after the greedy reads, the op that returns first (if it is legal now: that
keeps the other ops pending, Lowe's just-in-time idea), then, when the model names the one
state that op needs (``Spec.needs``, ``directed=True``), the pending mutating ops that make
that state, then the other pending mutating ops, each in call order (Porcupine's order).

`horizon`: the latest entry a dead end depended on (a boundary no move passed, a stuck
op's return). When the search fails, so does the history cut at the time of that entry
(the counterexample window's end, `window.py`).

Bounded memory: `memory_units` counts cached configurations, states and steps; the caller
stops the search ("unknown") past its cap. `run` searches in slices of about ``budget``
moves, so partitions interleave and a time limit is checked between slices. `run` is one
loop with its state in locals on purpose (the checker's hot path: no call per move); it
reads by its numbered phases.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from typing import Any

from checkers.linearizable.classes import bit_positions, classes, witness
from checkers.linearizable.modelkit import Spec

State = Hashable


class Search:
    """A resumable WGL search over one partition.

    ``calls[i]``, ``starts[i]``, ``ends[i]`` (``None`` = indeterminate), ``readonly[i]`` describe
    op ``i``, ops in call order; `spec` is the model. ``groups[i]`` (default all 0) names the
    object op ``i`` touches when one search covers several (partitioning off): rule 2 then looks
    only at resets of the read's own group. Call `run` until it returns True
    (linearizable) or False (not); `final` / `best` then hold the linearization found /
    the longest partial linearization (see `frames`).
    """

    def __init__(self, calls: Sequence[Any], starts: Sequence[float], ends: Sequence[float | None],
                 readonly: Sequence[bool], spec: Spec, groups: Sequence[int] | None = None,
                 relaxed: bool = False, directed: bool = True, also_from: Sequence[State] = ()):
        n = len(calls)
        self.n = n
        # rule 4: indeterminate ops with the same call are one class, its first op standing for
        # all (`rep`), which stays pending once linearized; `members[rep]`: their call times
        self.relaxed = relaxed  # rule 5: classes used at will, no counts
        self.ends = list(ends)
        self.rep, self.members = classes(calls, ends)
        self.mcall = {r: [starts[o] for o in ops] for r, ops in self.members.items()}
        self.keep = [relaxed and self.rep[i] == i for i in range(n)]
        self.rejected = 0  # relaxed linearizations found that no real one matches
        self.horizon = -1  # the latest entry a dead end of the search depended on
        self.calls = list(calls)
        self.spec = spec
        self._step_fn = spec.step
        self._stuck_fn = spec.stuck
        # interned states; the configuration cache
        self.states: list[State] = [spec.init]
        self.state_ids: dict[State, int] = {spec.init: 0}
        self.seen: set[tuple[int, int, int, int]] = {(0, 0, 0, 0)}  # (rel, base, ind, state id)
        # more states to start in, when the search from the ones before fails (window checks)
        self.roots = [self._intern(st) for st in reversed(also_from) if st not in self.state_ids]
        self.seen.update((0, 0, 0, r) for r in self.roots)
        self.steps = 0
        self.steps_cached = 0
        # per op: state id -> state id after it (-1 illegal; -3 illegal and stuck, for read-only
        # and blocking ops)
        self.trans: list[dict[int, int]] = [{} for _ in range(n)]

        ents = self._entries(starts, ends)
        m = len(ents)
        # list heads m..m+2; list ends m+3.. (the returns' end is the smallest, so a scan
        # bounded by the boundary never walks past another list's end)
        self.H_RET, self.H_RO, self.H_MUT, self.H_IND = m, m + 1, m + 2, m + 3
        self.E_RET, self.E_RO, self.E_MUT, self.E_IND = m + 4, m + 5, m + 6, m + 7
        rep = self.rep
        # lists: returns, read-only calls, determinate mutating calls, and per class of
        # indeterminate ops the call of its first op not linearized yet (relaxed: its first op)
        self.nxt, self.prv = self._link(m + 8, ents, lambda kind, i: self.H_RET if kind else (
            self.H_RO if readonly[i] else self.H_MUT if rep[i] < 0 else self.H_IND if rep[i] == i else -1))
        self._class_fields()
        grp = list(groups) if groups is not None else [0] * n
        self.grp = grp
        self.resets = resets = [not readonly[i] and spec.resets(calls[i]) and rep[i] < 0 for i in range(n)]
        self.ires = [rep[i] >= 0 and not readonly[i] and spec.resets(calls[i]) for i in range(n)]
        self.has_ires = any(self.ires)
        self._reset_lists(ents, readonly, grp)
        # rule 2 for mutating ops: determinate, non-resetting ops the model says may block
        # for good (a send at an offset the log has passed), watched at every configuration
        self.watched = [ends[i] is not None and not readonly[i] and not resets[i] and spec.blocking(calls[i])
                        for i in range(n)]
        self.has_watch = any(self.watched)
        self.wnxt, self.wprv = self._watch_list(ents)
        self.indet = [e is None for e in ends]
        self.ro = list(readonly)
        self._targets(directed)
        self.pos = bit_positions(ends)
        # search state
        self.base = self.rel = self.ind = self.sid = 0
        self.stack: list[int] = []  # (op frame, state id, base, rel, ind) before each move, flat
        self.best: list[int] = []  # the longest stack seen
        self.common = 0  # best[:common] == stack[:common] (so a new best copies only the rest)
        self.result: bool | None = None
        self.final: list[int] = []  # the stack of the linearization found

    def _class_fields(self) -> None:
        """Rule 4, exact mode: `nextm` (an op -> the next op of its class) and `shift` (a class's
        first op -> where its count of linearized ops starts in `ind`)."""
        self.nextm = [-1] * self.n
        self.shift = [0] * self.n
        at = 0
        for r, ops in self.members.items():
            if not self.relaxed:
                for a, b in zip(ops, ops[1:], strict=False):
                    self.nextm[a] = b
            self.shift[r] = at
            at += len(ops).bit_length()

    def _targets(self, directed: bool) -> None:
        """`tsid`: per read-only op legal in one known state, that state's id (-2: ask the
        model); `nsid` (the directed move order): the one state any determinate op needs."""
        spec, n, ends = self.spec, self.n, self.ends
        self.tsid = self._state_ids(spec.target, self.ro)
        needs = spec.needs if directed else None
        nsid = self._state_ids(needs, [e is not None for e in ends]) if needs is not None else [-2] * n
        self.nsid = [t if t >= 0 else u for t, u in zip(self.tsid, nsid, strict=True)] if directed else nsid

    def _state_ids(self, fn: Callable[[Any], State | None] | None, which: Sequence[bool]) -> list[int]:
        """Per op i with `which[i]`, the id of the state `fn(call)` (-2: None, or not asked)."""
        ids = [-2] * self.n
        if fn is None:
            return ids
        per_call: dict[Any, int] = {}
        calls = self.calls
        for i in range(self.n):
            if which[i]:
                c = calls[i]
                t = per_call.get(c)
                if t is None:
                    st = fn(c)
                    per_call[c] = t = -2 if st is None else self._intern(st)
                ids[i] = t
        return ids

    def _entries(self, starts: Sequence[float], ends: Sequence[float | None]) -> list[tuple[Any, int, int]]:
        """The entries (time, 0 call / 1 return, op) in time order, calls first on ties; sets
        `op_of` (entry -> op), `call_entry` and `ret_entry` (op -> entry, -1: no return)."""
        n = self.n
        ents = [(starts[i], 0, i) for i in range(n)]
        ents += [(ends[i], 1, i) for i in range(n) if ends[i] is not None]
        ents.sort()
        self.op_of = [e[2] for e in ents]
        self.call_entry = call_entry = [0] * n
        self.ret_entry = ret_entry = [-1] * n
        for idx, (_, kind, i) in enumerate(ents):
            if kind == 0:
                call_entry[i] = idx
            else:
                ret_entry[i] = idx
        return ents

    def _reset_lists(self, ents: list[tuple[Any, int, int]], readonly: Sequence[bool], grp: list[int]) -> None:
        """Rule 2: per group, the resetting mutating ops in call order (`rnxt`/`rprv`, op ->
        its group's head `rhead`). When there is one group and every mutating op resets, that
        is the list of mutating calls itself (`sep_rs` False)."""
        n, m, resets, call_entry = self.n, len(ents), self.resets, self.call_entry
        self.sep_rs = max(grp, default=0) > 0 or not all(resets[i] or readonly[i] or self.rep[i] >= 0
                                                          for i in range(n))
        if not self.sep_rs:
            self.rnxt, self.rprv = self.nxt, self.prv
            self.rhead = [self.H_MUT] * n
            return
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

    def _watch_list(self, ents: list[tuple[Any, int, int]]) -> tuple[list[int], list[int]]:
        """`wnxt`/`wprv`: the calls of the watched ops in call order, head m, end m + 1."""
        m, watched, call_entry = len(ents), self.watched, self.call_entry
        wnxt = [0] * (m + 2)
        wprv = [0] * (m + 2)
        t = m
        for i in (sorted(range(self.n), key=call_entry.__getitem__) if self.has_watch else ()):
            if watched[i]:
                ce = call_entry[i]
                wnxt[t] = ce
                wprv[ce] = t
                t = ce
        wnxt[t] = m + 1
        wprv[m + 1] = t
        return wnxt, wprv

    def _link(self, size: int, ents: list[tuple[Any, int, int]],
              head_of: Callable[[int, int], int]) -> tuple[list[int], list[int]]:
        """`nxt`/`prv` arrays threading each entry into the list `head_of(kind, op)`."""
        nxt = [0] * size
        prv = [0] * size
        heads = (self.H_RET, self.H_RO, self.H_MUT, self.H_IND)
        ends = (self.E_RET, self.E_RO, self.E_MUT, self.E_IND)
        tails = {h: h for h in heads}
        call_entry, ret_entry = self.call_entry, self.ret_entry
        for _, kind, i in ents:
            h = head_of(kind, i)
            if h < 0:
                continue  # an op of a class other than its first
            idx = ret_entry[i] if kind else call_entry[i]
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
        return [(~x if x < 0 else x % n, stack[j + 1]) for j, x in
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

    # Over 100 lines on purpose: the checker's inner loop in one piece (a method for backtracking costs 6%).
    def run(self, budget: int) -> bool | None:
        """Search for at most about `budget` moves; True/False when decided, None to continue."""
        if self.result is not None:
            return self.result
        nxt, prv, rnxt, rprv, wnxt, wprv = self.nxt, self.prv, self.rnxt, self.rprv, self.wnxt, self.wprv
        op_of, call_entry, ret_entry, pos, n = self.op_of, self.call_entry, self.ret_entry, self.pos, self.n
        trans, tr_fn, tsid, ro, indet = self.trans, self._trans, self.tsid, self.ro, self.indet
        shift, rep, nextm, has_ires, ind_first = self.shift, self.rep, self.nextm, self.has_ires, self._ind_resets_before
        nsid, n2 = self.nsid, 2 * self.n
        resets, sep_rs, rhead, watched, has_watch = self.resets, self.sep_rs, self.rhead, self.watched, self.has_watch
        H_RET, H_RO, H_MUT, H_IND, E_RET = self.H_RET, self.H_RO, self.H_MUT, self.H_IND, self.E_RET
        W_HEAD = len(op_of)
        seen, stack, relaxed, keep, horizon = self.seen, self.stack, self.relaxed, self.keep, self.horizon
        roots = self.roots
        seen_add, push, pop = seen.add, stack.append, stack.pop
        # the linearized set: determinate ops numbered below `base`, and number base + i iff bit i
        # of `rel`; per class of indeterminate ops, how many, in a bit field of `ind`
        base, rel, ind, sid = self.base, self.rel, self.ind, self.sid
        best, best_stack, common = len(self.best), self.best, self.common
        moves = 0
        result: bool | None = None
        restart = False
        while True:
            # ---- a fresh configuration (base, rel, ind, sid)
            b = nxt[H_RET]
            if b == E_RET:
                if not relaxed or self._witness():
                    result = True
                    break
                b = E_RET - 1  # a relaxed linearization no real one matches: a dead end
            if moves >= budget:
                break
            moves += 1
            if len(stack) > best:
                best_stack[common:] = stack[common:]
                common = best = len(stack)
            # 1. greedy reads; 2. stuck reads
            e = nxt[H_RO]
            dead = b == E_RET - 1
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
                    if ns == -3 and rnxt[rhead[op]] > ret_entry[op] and not (has_ires and ind_first(op)):
                        dead = True
                        if ret_entry[op] > horizon:
                            horizon = ret_entry[op]
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
                    if ns == -3 and rnxt[rhead[op]] > ret_entry[op] and not (has_ires and ind_first(op)):
                        dead = True
                        if ret_entry[op] > horizon:
                            horizon = ret_entry[op]
                        break
                    w = wnxt[w]
            # the first move to try, if any (`first`): op to state ns, pushed as frame x; then
            # the pending mutating ops in call order: determinate (from e) and classes (from f)
            if dead:
                first, e, f, phase, want = False, b, b, 2, -2
            elif e < b:
                first, x, ns, f, phase, want = True, ~op, sid, b, 2, -2  # the legal read: the only move
            else:
                # 3. the op that returns first, if legal here, before the others: it keeps
                # the others pending, which usually finds a linearization sooner
                first, e, f, op = False, nxt[H_MUT], nxt[H_IND], op_of[b]
                want = nsid[op]
                phase = 1 if want >= 0 else 2
                if not ro[op]:
                    ns = trans[op].get(sid)
                    if ns is None:
                        ns = tr_fn(op, sid)
                    first, x = ns >= 0, op + n
            while True:
                if first:
                    first = False
                elif e < b or f < b:
                    # 4. the pending mutating ops in call order: first those that make the
                    # state the op returning first needs (phase 1), then the others
                    if e < f:
                        op = op_of[e]
                        e = nxt[e]
                    else:
                        op = op_of[f]
                        f = nxt[f]
                    ns = trans[op].get(sid)
                    if ns is None:
                        ns = tr_fn(op, sid)
                    if ns < 0 or (ns == sid and indet[op]) or (ns == want) != (phase == 1):
                        continue
                    x = op if phase == 2 else op + n2
                elif phase == 1:
                    phase, e, f = 2, nxt[H_MUT], nxt[H_IND]
                    continue
                else:
                    # none left: backtrack; read-only moves were forced, so keep undoing
                    if b > horizon:
                        horizon = b
                    while True:
                        if not stack:
                            if roots:  # the next state to start in
                                sid, restart = roots.pop(), True
                                break
                            result = False
                            break
                        ind = pop()
                        rel = pop()
                        base = pop()
                        sid = pop()
                        x = pop()
                        if len(stack) < common:
                            common = len(stack)
                        op = ~x if x < 0 else x if x < n else x - n if x < n2 else x - n2
                        r = ret_entry[op]
                        if r >= 0:
                            nxt[prv[r]] = prv[nxt[r]] = r
                        j = nextm[op]
                        if j >= 0:  # the next op of the class leaves the list again
                            cj = call_entry[j]
                            nxt[prv[cj]] = nxt[cj]
                            prv[nxt[cj]] = prv[cj]
                        ce = call_entry[op]
                        if not keep[op]:
                            nxt[prv[ce]] = prv[nxt[ce]] = ce
                        if x >= 0:
                            if sep_rs and resets[op]:
                                rnxt[rprv[ce]] = rprv[rnxt[ce]] = ce
                            if watched[op]:
                                wnxt[wprv[ce]] = wprv[wnxt[ce]] = ce
                            b = nxt[H_RET]
                            want = nsid[op_of[b]]
                            phase = 1 if x >= n2 or (n <= x and want >= 0) else 2
                            if n <= x < n2:
                                e, f = nxt[H_MUT], nxt[H_IND]
                            elif indet[op]:
                                e, f = nxt[H_MUT], nxt[ce]
                                while e < ce:
                                    e = nxt[e]
                            else:
                                e, f = nxt[ce], nxt[H_IND]
                                while f < ce:
                                    f = nxt[f]
                            break
                    if result is not None or restart:
                        restart = False
                        break
                    continue
                # ---- the move: linearize op (state sid -> ns) unless its configuration was seen
                if indet[op]:
                    nrel, nbase = rel, base
                    nind = ind if relaxed else ind + (1 << shift[rep[op]])
                else:
                    nind = ind
                    d = pos[op] - base
                    if d:
                        nrel, nbase = rel | (1 << d), base
                    else:
                        nrel = rel | 1
                        d = (~nrel & (nrel + 1)).bit_length() - 1  # trailing ones
                        nrel >>= d
                        nbase = base + d
                key = (nrel, nbase, nind, ns)
                if key in seen:
                    if x < 0:
                        e = b  # the forced read was explored already: this configuration fails
                    continue
                seen_add(key)
                ce = call_entry[op]
                if not keep[op]:
                    pe, ne = prv[ce], nxt[ce]
                    nxt[pe] = ne
                    prv[ne] = pe
                    j = nextm[op]
                    if j >= 0:  # rule 4: the class's next op takes its place, at its own call
                        cj = call_entry[j]
                        pe = H_IND
                        while nxt[pe] < cj:
                            pe = nxt[pe]
                        ne = nxt[pe]
                        nxt[pe] = cj
                        prv[cj] = pe
                        nxt[cj] = ne
                        prv[ne] = cj
                r = ret_entry[op]
                if r >= 0:
                    pe, ne = prv[r], nxt[r]
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
                push(x)
                push(sid)
                push(base)
                push(rel)
                push(ind)
                base, rel, ind, sid = nbase, nrel, nind, ns
                break
            if result is not None:
                break
        self.horizon = horizon
        return self._pause(base, rel, ind, sid, common, moves, result)

    def _ind_resets_before(self, op: int) -> bool:
        """Rule 2 for classes of indeterminate ops: one that resets, in `op`'s group, has an op
        not linearized yet invoked before `op` returns."""
        nxt, op_of, ires, grp = self.nxt, self.op_of, self.ires, self.grp
        lim, g = self.ret_entry[op], grp[op]
        f = nxt[self.H_IND]
        while f < lim:
            o = op_of[f]
            if ires[o] and grp[o] == g:
                return True
            f = nxt[f]
        return False

    def _witness(self) -> bool:
        """Rule 5: does the relaxed linearization on the stack match a real one (`classes.witness`)?
        Counts a rejection when it does not."""
        if witness([op for op, _ in self.frames(self.stack)], self.ends, self.mcall):
            return True
        self.rejected += 1
        return False

    def _pause(self, base: int, rel: int, ind: int, sid: int, common: int, moves: int,
               result: bool | None) -> bool | None:
        """Keep the state of the search `run` leaves (to resume it); returns `result`."""
        self.base, self.rel, self.ind, self.sid = base, rel, ind, sid
        self.common = common
        self.steps += moves
        if result is True:
            self.final = self.stack[:]
        self.result = result
        return result
