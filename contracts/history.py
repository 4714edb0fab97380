"""Histories: docs/ARCHITECTURE.md's JSON Lines format, written crash-safely and read as a stream.

One operation event per line::

    {"index": 7, "time": 1234567, "process": 3, "type": "invoke", "f": "send", "value": [["send", "k1", 42]]}

Contracts
- `HistoryWriter.append` writes one complete line per event and flushes it (optionally
  fsyncs), so a harness killed with SIGKILL leaves every appended event readable. It fills
  in a dense `index` and `time` (ns since the writer's start, monotonic) when missing, and
  is safe to call from several threads.
- `read_events` streams a file with constant memory per event. A torn last line (the
  writer died mid-line, or the tail is garbage) is dropped and counted in
  `ReadStats.dropped`; a malformed line anywhere else raises `InputError(path, line)`.
- Pairing invokes with completions is `contracts.pairing` (its rules are in its docstring);
  `pair_ops` and `Op` are re-exported here, and `read_ops` pairs a file's events.
- `clock_anchor(start_ns)`: the history's time 0 on the host's clocks (test.json's
  `history_start`), so that a system's own log lines can be put on the history's clock.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from contracts.errors import InputError
from contracts.pairing import COMPLETIONS, NEMESIS, Op, pair_ops  # noqa: F401 - re-exported

try:  # orjson is several times faster on the 1M-event histories the checkers read
    import orjson as _orjson

    def _loads(b: bytes | str) -> Any:
        return _orjson.loads(b)

    def _dumps(obj: Any) -> bytes:
        return _orjson.dumps(obj, option=_orjson.OPT_NON_STR_KEYS)

    _JSON_ERRORS: tuple[type[Exception], ...] = (_orjson.JSONDecodeError, ValueError)
except ImportError:  # pragma: no cover - orjson is a declared dependency
    import json as _json

    def _loads(b: bytes | str) -> Any:
        return _json.loads(b)

    def _dumps(obj: Any) -> bytes:
        return _json.dumps(obj, separators=(",", ":")).encode()

    _JSON_ERRORS = (ValueError,)

TYPES = frozenset(("invoke", "ok", "fail", "info"))


def dumps(obj: Any) -> bytes:
    """One compact JSON document as bytes (no trailing newline)."""
    return _dumps(obj)


def loads(b: bytes | str) -> Any:
    """Parse one JSON document."""
    return _loads(b)


# --------------------------------------------------------------------------- writing


class HistoryWriter:
    """Append-only, flushed-per-event history file.

    `path` is created (or appended to: indices continue after the existing events).
    `fsync=True` also fsyncs every event (survives power loss, slower).
    """

    def __init__(self, path: str | os.PathLike[str], *, fsync: bool = False, start_ns: int | None = None):
        self.path = os.fspath(path)
        self._fsync = fsync
        self._lock = threading.Lock()
        self._start = time.monotonic_ns() if start_ns is None else start_ns
        self._next_index = _count_complete_lines(self.path)
        self._f: IO[bytes] = open(self.path, "ab", buffering=0)  # noqa: SIM115 - closed by close()

    @property
    def start_ns(self) -> int:
        """The monotonic-clock instant that is time 0 of this history."""
        return self._start

    def now(self) -> int:
        """Nanoseconds since the history started (the `time` of an event appended now)."""
        return time.monotonic_ns() - self._start

    def append(self, event: dict[str, Any]) -> dict[str, Any]:
        """Write `event` as one line (filling `index` and `time` if missing) and return it."""
        with self._lock:
            if "index" not in event:
                event["index"] = self._next_index
            if "time" not in event:
                event["time"] = time.monotonic_ns() - self._start
            self._next_index = event["index"] + 1
            self._f.write(_dumps(event) + b"\n")  # unbuffered: one write(2) per line
            if self._fsync:
                os.fsync(self._f.fileno())
        return event

    def close(self) -> None:
        with self._lock:
            if not self._f.closed:
                os.fsync(self._f.fileno())
                self._f.close()

    def __enter__(self) -> HistoryWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _count_complete_lines(path: str) -> int:
    try:
        with open(path, "rb") as f:
            return sum(chunk.count(b"\n") for chunk in iter(lambda: f.read(1 << 20), b""))
    except FileNotFoundError:
        return 0


def write_history(path: str | os.PathLike[str], events: Iterable[dict[str, Any]]) -> int:
    """Write `events` to a new history file (replacing it); returns the number written."""
    n = 0
    with open(path, "wb") as f:
        for i, ev in enumerate(events):
            ev.setdefault("index", i)
            ev.setdefault("time", i)
            f.write(_dumps(ev) + b"\n")
            n += 1
    return n


# --------------------------------------------------------------------------- reading


@dataclass
class ReadStats:
    """What `read_events` saw: events read, torn trailing lines dropped."""

    events: int = 0
    dropped: int = 0
    dropped_reason: str = ""


def read_events(
    path: str | os.PathLike[str], stats: ReadStats | None = None, *, with_lines: bool = False
) -> Iterator[Any]:
    """Stream the events of a history file, validated.

    Yields event dicts (or `(line_number, event)` with `with_lines=True`). Missing `index`
    defaults to the event's position, missing `time` to its index. A torn last line is
    dropped and counted in `stats`; any other bad line raises `InputError`.
    """
    path = os.fspath(path)
    if stats is None:
        stats = ReadStats()
    try:
        f = open(path, "rb")  # noqa: SIM115 - closed in finally
    except OSError as e:
        raise InputError(f"cannot read history: {e.strerror}", path) from None
    try:
        pending: tuple[int, bytes] | None = None
        pos = 0
        for lineno, raw in enumerate(f, 1):
            if pending is not None:
                ev = _parse_line(path, pending[0], pending[1], pos)
                if ev is not None:
                    pos += 1
                    stats.events += 1
                    yield (pending[0], ev) if with_lines else ev
            pending = (lineno, raw)
        if pending is not None:
            ln, raw = pending
            try:
                ev = _parse_line(path, ln, raw, pos)
            except InputError as e:
                # The last line: a writer killed mid-line (or power loss) leaves it torn.
                stats.dropped += 1
                stats.dropped_reason = f"line {ln}: {e.message}"
                return
            if ev is not None:
                stats.events += 1
                yield (ln, ev) if with_lines else ev
    finally:
        f.close()


def _parse_line(path: str, lineno: int, raw: bytes, pos: int) -> dict[str, Any] | None:
    s = raw.strip()
    if not s:
        return None
    if s[:1] != b"{" or b"\x00" in s:
        raise InputError("not a JSON object", path, lineno)
    try:
        ev = _loads(s)
    except _JSON_ERRORS as e:
        raise InputError(f"malformed JSON ({_short(e)})", path, lineno) from None
    if not isinstance(ev, dict):
        raise InputError("not a JSON object", path, lineno)
    validate_event(ev, path, lineno, pos)
    return ev


def validate_event(ev: dict[str, Any], path: str | None = None, lineno: int | None = None, pos: int = 0) -> None:
    """Check one event's fields (filling defaults for `index`/`time`); raise `InputError`."""
    t = ev.get("type")
    if t not in TYPES:
        raise InputError(f"bad type {t!r} (expected invoke, ok, fail or info)", path, lineno)
    p = ev.get("process")
    if not (isinstance(p, int) and not isinstance(p, bool)) and p != NEMESIS:
        raise InputError(f"bad process {p!r} (expected an integer or \"nemesis\")", path, lineno)
    if not isinstance(ev.get("f"), str):
        raise InputError(f"bad f {ev.get('f')!r} (expected a string)", path, lineno)
    if "index" not in ev:
        ev["index"] = pos
    elif not isinstance(ev["index"], int):
        raise InputError(f"bad index {ev['index']!r}", path, lineno)
    if "time" not in ev:
        ev["time"] = ev["index"]
    elif not isinstance(ev["time"], int | float):
        raise InputError(f"bad time {ev['time']!r}", path, lineno)


def _short(e: Exception) -> str:
    s = str(e).splitlines()[0] if str(e) else type(e).__name__
    return s[:80]


# --------------------------------------------------------------------------- ops (paired by contracts.pairing)

def read_ops(path: str | os.PathLike[str], stats: ReadStats | None = None,
             nemesis: Callable[[dict[str, Any]], None] | None = None) -> Iterator[Op]:
    """`pair_ops` over `read_events(path)`, with file lines in errors."""
    p = os.fspath(path)
    return pair_ops(read_events(p, stats, with_lines=True), p, nemesis=nemesis, with_lines=True)


@dataclass
class FaultWindow:
    """A nemesis fault from its start event to its stop (stop None: never healed in the history)."""

    kind: str
    start: int
    stop: int | None
    start_event: dict[str, Any]
    stop_event: dict[str, Any] | None = None
    extra: dict[str, Any] = field(default_factory=dict)


# fault kind (a window's kind, a generic package's name) -> the colour of its band in the plots,
# the timeline and the report; fault packages (nemesis.schedule) shade with these, a system's own
# packages bring their colours (e.g. suites/wrack/stories.py STORY_COLORS)
FAULT_COLORS = {
    "partition": "#E9DCA0", "kill": "#E9A4A0", "pause": "#A0B1E9", "clock": "#A0E9E3", "packet": "#D1E8A0",
    "power-loss": "#C9A0E9", "corruption": "#D8B48A", "membership": "#A66AD8", "restart": "#B0E0A0",
    "rolling-restart": "#B0E0A0",
}

FINAL_HEAL_F = "final-heal"  # the nemesis event the runner journals once every fault is undone


def last_event(events: Iterable[Mapping[str, Any]], f: str) -> Mapping[str, Any] | None:
    """The last event named `f` whose value is a mapping (an observer's record), or None."""
    last = None
    for ev in events:
        if ev.get("f") == f and isinstance(ev.get("value"), Mapping):
            last = ev
    return last


def fault_windows(nemesis_events: Iterable[dict[str, Any]]) -> list[FaultWindow]:
    """Fault windows from nemesis events.

    `start-X` opens a window of kind X and `stop-X` closes the oldest open window of that
    kind; Jepsen's `kill`/`start`, `pause`/`resume` and `remove-node`/`add-node` (kind
    `membership`) pair the same way. Nemesis events of
    type `invoke` are skipped: a fault counts from the event that reports it done (the
    harness writes one `info` event per fault action; Jepsen-style invoke/info pairs work too).
    """
    aliases = {"kill": ("kill", True), "start": ("kill", False), "pause": ("pause", True),
               "resume": ("pause", False), "remove-node": ("membership", True),
               "add-node": ("membership", False)}
    open_w: dict[str, list[FaultWindow]] = {}
    out: list[FaultWindow] = []
    for ev in nemesis_events:
        if ev.get("type") == "invoke":
            continue
        f = ev["f"]
        if f.startswith("start-"):
            kind, opening = f[6:], True
        elif f.startswith("stop-"):
            kind, opening = f[5:], False
        elif f in aliases:
            kind, opening = aliases[f]
        else:
            continue
        if opening:
            w = FaultWindow(kind, ev["time"], None, ev)
            open_w.setdefault(kind, []).append(w)
            out.append(w)
        elif open_w.get(kind):
            w = open_w[kind].pop(0)
            w.stop = ev["time"]
            w.stop_event = ev
    return out


BOOT_ID = Path("/proc/sys/kernel/random/boot_id")


def clock_anchor(start_ns: int) -> dict[str, Any]:
    """The history's time 0 on this host's clocks (test.json `history_start`)."""
    mono = time.monotonic_ns()
    wall = time.time()
    try:
        boot = BOOT_ID.read_text().strip()
    except OSError:
        boot = None
    return {"wall": round(wall - (mono - start_ns) / 1e9, 6), "mono_ns": start_ns, "boot_id": boot}
