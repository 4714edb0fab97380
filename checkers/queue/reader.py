"""Fast streaming reader of history files for the checkers (queue, stats, plots, timeline).

`EventFile(path)` iterates the events of a JSON Lines history with the same contract as
`contracts.history.read_events` (blank lines skipped, a torn last line dropped and counted,
any other bad line an `InputError(path, line)`), but it only parses: field validation is
left to the caller, which knows which fields it reads, and reports a bad event through
`EventFile.line_of(position)` so that errors still cite `FILE:LINE`. That keeps the
per-event cost at one `orjson.loads` on million-event histories.
"""

from __future__ import annotations

import os
from bisect import bisect_right
from collections.abc import Iterator
from typing import Any

from contracts.errors import InputError

try:
    import orjson as _orjson

    _loads = _orjson.loads
    _JSON_ERRORS: tuple[type[Exception], ...] = (_orjson.JSONDecodeError, ValueError)
except ImportError:  # pragma: no cover - orjson is a declared dependency
    import json as _json

    _loads = _json.loads
    _JSON_ERRORS = (ValueError,)


class EventFile:
    """Iterate the event dicts of one history file (see the module docstring).

    After (or during) iteration: `events` counts the events yielded, `dropped` the torn
    trailing lines dropped (0 or 1), `dropped_reason` says why.
    """

    def __init__(self, path: str | os.PathLike[str]):
        self.path = os.fspath(path)
        self.events = 0
        self.dropped = 0
        self.dropped_reason = ""
        self._blank: list[int] = []  # line numbers of skipped blank lines, ascending

    def line_of(self, position: int) -> int:
        """The file line of the event at 0-based `position` among the events."""
        line = position + 1
        # every blank line at or before the event's line shifts it down by one
        i = 0
        while True:
            n = bisect_right(self._blank, line)
            if n == i:
                return line
            line += n - i
            i = n

    def __iter__(self) -> Iterator[dict[str, Any]]:
        path = self.path
        try:
            f = open(path, "rb")  # noqa: SIM115 - closed in finally
        except OSError as e:
            raise InputError(f"cannot read history: {e.strerror}", path) from None
        loads = _loads
        blank = self._blank
        n = 0
        lineno = 0
        # A bad line is only an error if a good line follows it: the last line may be torn.
        pending: InputError | None = None
        try:
            for raw in f:
                lineno += 1
                try:
                    ev = loads(raw)
                except _JSON_ERRORS as e:
                    if raw.isspace():
                        blank.append(lineno)
                        continue
                    if pending is not None:
                        raise pending from None
                    pending = InputError(f"malformed JSON ({_short(e)})", path, lineno)
                    continue
                if pending is not None:
                    raise pending
                if ev.__class__ is not dict:
                    pending = InputError("not a JSON object", path, lineno)
                    continue
                n += 1
                yield ev
            if pending is not None:
                self.dropped = 1
                self.dropped_reason = f"line {pending.line}: {pending.message}"
        finally:
            self.events = n
            f.close()


def _short(e: Exception) -> str:
    s = str(e).splitlines()[0] if str(e) else type(e).__name__
    return s[:80]
