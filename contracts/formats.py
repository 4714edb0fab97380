"""Foreign history formats, converted to docs/ARCHITECTURE.md's events (see `contracts.history`).

- ``etcd-log``: the Jepsen etcd logs of Porcupine's test data (``INFO jepsen.util - <proc>
  :<type> :<f> <value>``; one cas-register). Values: ``nil`` -> null, integers, ``[a b]`` ->
  ``[a, b]``; ``:timed-out`` completions carry ``"error": "timed-out"`` and no value.
- ``kv-edn``: Porcupine's kv files, one flat EDN map per line (``{:process 0, :type
  :invoke, :f :append, :key "0", :value "x 0 0 y"}``); the keyed form ``[key, value]``.
- ``jsonl``: the native format (`contracts.history.read_events`).

Every reader yields ``(line_number, event)`` with ``time`` = the line number (these logs
are in real-time order) and a dense ``index``; a line it cannot parse raises
`InputError` naming the file and line. `detect_format` recognises the format from the
first non-empty line.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from typing import Any

from contracts.errors import InputError
from contracts.history import read_events

FORMATS = ("jsonl", "etcd-log", "kv-edn")

_ETCD = re.compile(
    r"INFO\s+jepsen\.util\s+-\s+(\d+)\s+:(invoke|ok|fail|info)\s+:(\w+)\s+"
    r"(nil|-?\d+|\[\s*(-?\d+|nil)\s+(-?\d+|nil)\s*\]|:[\w-]+)\s*$")
_KV_LINE = re.compile(  # the canonical key order of Porcupine's files: the fast path
    r'\{:process (\d+), :type :(invoke|ok|fail|info), :f :([\w-]+), :key "([^"\\]*)", :value (nil|"[^"\\]*")\}$')
_EDN_PAIR = re.compile(r'\s*:([\w.-]+)\s+("(?:[^"\\]|\\.)*"|nil|true|false|-?\d+|:[\w.-]+)\s*,?')


def detect_format(path: str | os.PathLike[str]) -> str:
    """`jsonl`, `etcd-log` or `kv-edn`, from the first non-empty line (empty file: jsonl)."""
    try:
        with open(path, "rb") as f:
            for raw in f:
                s = raw.strip()
                if not s:
                    continue
                if s.startswith(b"INFO") and b"jepsen" in s:
                    return "etcd-log"
                if s.startswith(b"{:"):
                    return "kv-edn"
                return "jsonl"
    except OSError as e:
        raise InputError(f"cannot read history: {e.strerror}", os.fspath(path)) from None
    return "jsonl"


def read_history(path: str | os.PathLike[str], fmt: str | None = None) -> Iterator[tuple[int, dict[str, Any]]]:
    """``(line, event)`` pairs of a history file in format `fmt` (None: `detect_format`)."""
    fmt = fmt or detect_format(path)
    if fmt == "jsonl":
        return read_events(path, with_lines=True)
    if fmt == "etcd-log":
        return read_etcd_log(path)
    if fmt == "kv-edn":
        return read_kv_edn(path)
    raise InputError(f"unknown format {fmt!r} (known: {', '.join(FORMATS)})", os.fspath(path))


def _lines(path: str) -> list[str]:
    try:
        with open(path, encoding="utf-8", errors="strict") as f:
            return f.read().splitlines()
    except UnicodeDecodeError as e:
        raise InputError(f"not UTF-8 text ({e.reason} at byte {e.start})", path) from None
    except OSError as e:
        raise InputError(f"cannot read history: {e.strerror}", path) from None


def _etcd_scalar(s: str) -> int | None:
    return None if s == "nil" else int(s)


def read_etcd_log(path: str | os.PathLike[str]) -> Iterator[tuple[int, dict[str, Any]]]:
    """Events of a Jepsen etcd log (see the module docstring)."""
    p = os.fspath(path)
    match = _ETCD.match
    index = 0
    for lineno, line in enumerate(_lines(p), 1):
        if not line.strip():
            continue
        m = match(line)
        if m is None:
            raise InputError(f"not a jepsen.util op line: {line.strip()[:60]!r}", p, lineno)
        proc, typ, f, val, a, b = m.groups()
        ev: dict[str, Any] = {"index": index, "time": lineno, "process": int(proc), "type": typ, "f": f}
        if a is not None:
            ev["value"] = [_etcd_scalar(a), _etcd_scalar(b)]
        elif val[0] == ":":
            ev["value"] = None
            ev["error"] = val[1:]
        else:
            ev["value"] = _etcd_scalar(val)
        index += 1
        yield lineno, ev


def _edn_value(tok: str) -> Any:
    if tok[0] == '"':
        return re.sub(r'\\(.)', lambda m: {"n": "\n", "t": "\t"}.get(m.group(1), m.group(1)), tok[1:-1])
    if tok == "nil":
        return None
    if tok in ("true", "false"):
        return tok == "true"
    if tok[0] == ":":
        return tok[1:]
    return int(tok)


def read_kv_edn(path: str | os.PathLike[str]) -> Iterator[tuple[int, dict[str, Any]]]:
    """Events of a Porcupine kv file (see the module docstring)."""
    p = os.fspath(path)
    pair = _EDN_PAIR.match
    fast = _KV_LINE.match
    index = 0
    for lineno, line in enumerate(_lines(p), 1):
        s = line.strip()
        if not s:
            continue
        m = fast(s)
        if m is not None:
            proc, typ, f, key, val = m.groups()
            yield lineno, {"index": index, "time": lineno, "process": int(proc), "type": typ, "f": f,
                           "value": [key, None if val == "nil" else val[1:-1]]}
            index += 1
            continue
        if not (s.startswith("{") and s.endswith("}")):
            raise InputError("not an EDN map {...}", p, lineno)
        fields: dict[str, Any] = {}
        pos, end = 1, len(s) - 1
        while pos < end:
            m = pair(s, pos, end)
            if m is None:
                raise InputError(f"unparseable EDN at column {pos + 1}: {s[pos:pos + 30]!r}", p, lineno)
            fields[m.group(1)] = _edn_value(m.group(2))
            pos = m.end()
        proc, typ, f = fields.get("process"), fields.get("type"), fields.get("f")
        if not isinstance(proc, int) or isinstance(proc, bool):
            raise InputError(f"bad :process {proc!r}", p, lineno)
        if typ not in ("invoke", "ok", "fail", "info"):
            raise InputError(f"bad :type {typ!r}", p, lineno)
        if not isinstance(f, str):
            raise InputError(f"bad :f {f!r}", p, lineno)
        if "key" not in fields:
            raise InputError("no :key", p, lineno)
        ev = {"index": index, "time": lineno, "process": proc, "type": typ, "f": f,
              "value": [fields["key"], fields.get("value")]}
        index += 1
        yield lineno, ev
