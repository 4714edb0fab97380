"""Invoke/completion pairing: the one set of rules that turns history events into ops.

Every reader of a history (the checkers, stats, plots and timeline, the pipeline, the
harness) pairs with this module, so one history means the same ops everywhere.

Rules (docs/ARCHITECTURE.md, "History"):

- Nemesis events (`process == "nemesis"`, usually `info`) are not client ops: they are
  never paired. Callers route them before pairing (`pair_ops` hands them to `nemesis`).
- A client `process` is an integer. Its `invoke` is completed by the next `ok`, `fail` or
  `info` event of the same process, which must carry the invoke's `f`.
- A process that got `info` never issues another op (the client continues under a new
  process id).
- An invoke never completed is indeterminate: an op of type `info` with no completion.
  Such ops come after the completed ones, in invoke order.
- Anything else is bad input, an `InputError` naming the line of the offending event: a
  second invoke while the process's op is open, an invoke after the process's `info`, a
  completion without an open invoke, a completion whose `f` differs from its invoke's, a
  type other than invoke/ok/fail/info, a client process that is not an integer.

`Pairing` is the rules as a small state machine fed one event at a time (no I/O): readers
with a loop of their own (the queue checker's single pass, the timeline, the pipeline's
batches) call `invoke`/`complete` inline. `pair_ops` is the same as a stream of `Op`
records. Positions are the caller's: 0-based event positions mapped to file lines by
`line_of` (default: position + 1), or file lines themselves with `line_of=same_line`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from contracts.errors import InputError

NEMESIS = "nemesis"
COMPLETIONS = frozenset(("ok", "fail", "info"))


def same_line(pos: int) -> int:
    """`line_of` for callers whose positions are already file lines."""
    return pos


def _next_line(pos: int) -> int:
    return pos + 1


class Pairing:
    """Open invokes per process, fed one client event at a time (see the module docstring).

    `invoke(ev, pos)` opens the process's op; `complete(ev, pos)` closes it and returns
    `(invoke event, its position)`; `never_completed()` returns the ops still open, in
    invoke order. Violations raise `InputError(message, path, line_of(pos))`.
    """

    __slots__ = ("open", "ended", "path", "line_of")

    def __init__(self, path: str | None = None, line_of: Callable[[int], int] | None = None):
        self.open: dict[int, tuple[dict[str, Any], int]] = {}  # process -> (its open invoke, position)
        self.ended: dict[int, int] = {}  # process -> position of the info that ended it
        self.path = path
        self.line_of = line_of or _next_line

    def invoke(self, ev: dict[str, Any], pos: int) -> None:
        """Open the op `ev` (an invoke) of its process."""
        p = ev["process"]
        if p.__class__ is not int:
            raise self.error(f"bad process {p!r} (expected an integer or \"nemesis\")", pos)
        if p in self.open:
            raise self.error(f"process {p} invokes {ev['f']!r} while its op from line "
                             f"{self.line_of(self.open[p][1])} is still open", pos)
        if p in self.ended:
            raise self.error(f"process {p} invokes {ev['f']!r} after its op completed info at line "
                             f"{self.line_of(self.ended[p])} (a process that gets info never issues "
                             f"another op)", pos)
        self.open[p] = (ev, pos)

    def complete(self, ev: dict[str, Any], pos: int) -> tuple[dict[str, Any], int]:
        """Close the open op of `ev`'s process with `ev` (ok, fail or info); its invoke and position."""
        p = ev["process"]
        t = ev["type"]
        entry = self.open.pop(p, None)
        if entry is None:
            if t not in COMPLETIONS:
                raise self.error(f"bad type {t!r} (expected invoke, ok, fail or info)", pos)
            raise self.error(f"{t} {ev['f']!r} of process {p} without an invoke", pos)
        inv = entry[0]
        if inv["f"] != ev["f"]:
            raise self.error(f"{t} {ev['f']!r} of process {p} completes an invoke of {inv['f']!r} "
                             f"(line {self.line_of(entry[1])})", pos)
        if t == "info":
            self.ended[p] = pos
        elif t != "ok" and t != "fail":
            raise self.error(f"bad type {t!r} (expected invoke, ok, fail or info)", pos)
        return entry

    def feed(self, ev: dict[str, Any], pos: int) -> tuple[dict[str, Any], int] | None:
        """`invoke` or `complete` by the event's type: the completed op's invoke, or None."""
        if ev["type"] == "invoke":
            self.invoke(ev, pos)
            return None
        return self.complete(ev, pos)

    def never_completed(self) -> list[tuple[dict[str, Any], int]]:
        """The ops still open, as (invoke, position) in invoke order; they are closed."""
        out = sorted(self.open.values(), key=lambda e: e[1])
        self.open.clear()
        return out

    def error(self, message: str, pos: int) -> InputError:
        return InputError(message, self.path, self.line_of(pos))


@dataclass(slots=True)
class Op:
    """One client operation: its invoke and (unless it never completed) its completion.

    `type` is the completion type (`ok`, `fail`, `info`); a never-completed op has type
    `info` and `complete is None`. `value` is the completion's value when there is one,
    else the invoke's. `line`/`ret_line` are the file lines of the two events (0 if unknown).
    """

    process: int
    f: str
    type: str
    invoke: dict[str, Any]
    complete: dict[str, Any] | None
    line: int = 0
    ret_line: int = 0

    @property
    def value(self) -> Any:
        c = self.complete
        return c.get("value") if c is not None else self.invoke.get("value")

    @property
    def index(self) -> int:
        return self.invoke["index"]

    @property
    def ret_index(self) -> int | None:
        return self.complete["index"] if self.complete is not None else None

    @property
    def time(self) -> int:
        return self.invoke["time"]

    @property
    def ret_time(self) -> int | None:
        return self.complete["time"] if self.complete is not None else None

    @property
    def indeterminate(self) -> bool:
        return self.type == "info"


def pair_ops(
    events: Iterable[Any],
    path: str | None = None,
    *,
    nemesis: Callable[[dict[str, Any]], None] | None = None,
    with_lines: bool = False,
    line_of: Callable[[int], int] | None = None,
) -> Iterator[Op]:
    """The ops of a stream of events, by `Pairing`'s rules.

    `events` are event dicts, or `(line, event)` pairs with `with_lines=True`. The line of
    an event is then that line, else `line_of(position)` when given, else its `index` + 1.
    Nemesis events go to `nemesis` (if given). Ops are yielded in completion order, then
    the never-completed ones (indeterminate) in invoke order.
    """
    pairing = Pairing(path, same_line)
    invoke = pairing.invoke
    complete = pairing.complete
    for pos, item in enumerate(events):
        if with_lines:
            line, ev = item
        else:
            ev = item
            line = line_of(pos) if line_of is not None else ev.get("index", pos) + 1
        if ev["process"] == NEMESIS:
            if nemesis is not None:
                nemesis(ev)
            continue
        if ev["type"] == "invoke":
            invoke(ev, line)
            continue
        inv, inv_line = complete(ev, line)
        yield Op(ev["process"], inv["f"], ev["type"], inv, ev, inv_line, line)
    for inv, inv_line in pairing.never_completed():
        yield Op(inv["process"], inv["f"], "info", inv, None, inv_line, 0)
