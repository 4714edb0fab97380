"""Event lines: one broker log line per replication event a run's report explains.

The shell writes them through the logger `wrack.broker.events` (so they carry the usual
prefix: local time, level, `[node N]`); the message itself is

    EVENT <kind> node=<id> tp=<topic-partition> <key>=<value> ... mono_ns=<int> wall=<unix s>

Values never hold spaces; a list of broker ids is comma-joined (`-` when empty). `mono_ns`
is the node's CLOCK_MONOTONIC and `wall` its wall clock (seconds, 3 decimals): a reader
maps the line to its own clock by the monotonic clock when the node runs on the same
kernel (the `clock` event's `boot_id` matches its own), else by the wall clock.

| kind | where | fields |
| --- | --- | --- |
| `clock` | node start | `boot_id` |
| `replica-opened` | a replica first seen by this process (start, or a new topic) | `tp`, `leo`, `hwm` |
| `became-leader` | this broker leads `tp` in a new epoch | `tp`, `epoch`, `from_offset` (its LEO then: the Leader Epoch Start Offset), `hwm`, `isr` |
| `became-follower` | this broker follows (or has no leader for) `tp` in a new epoch | `tp`, `epoch`, `leader` (-1: none), `leo`, `hwm` |
| `truncated` | this replica's log was cut | `tp`, `epoch`, `role`, `from_leo`, `to`, `reason` |
| `controller-active` | this node's controller became the active one (the quorum leader's, once its first record committed) | `epoch` (the quorum epoch) |
| `partition-change` | the active controller wrote a new registration of `tp` (it commits unless that controller loses leadership first) | `tp`, `leader`, `epoch`, `prev_leader`, `prev_epoch`, `election`, `isr`, `elr` |

`election` is `none` (the leader stayed), `clean` (the new leader was in the ISR),
`elr` (it came from the Eligible Leader Replicas), `unclean` (neither), `leaderless`
(no leader is left) or `initial` (the topic was created). Truncation reasons are
`diverging-epoch` (KIP-101/KIP-279: the leader said where the logs diverge),
`out-of-range` (the leader's log ends below ours), `hwm-on-become-follower` and
`hwm-on-restart` (pre-KIP-101, the `epoch-truncation` safeguard switched off).
"""

from __future__ import annotations

import re
import time
from typing import Any

LOGGER = "wrack.broker.events"  # the broker's logger's child `events`
MARK = "EVENT "
LIST_FIELDS = frozenset({"isr", "elr"})
_PREFIX_TIME = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)?)")


def format_event(kind: str, fields: dict[str, Any], mono_ns: int | None = None, wall: float | None = None) -> str:
    """The message of one event line (without the logger's prefix)."""
    parts = [MARK + kind]
    for k, v in fields.items():
        if type(v) in (list, tuple):  # not a TopicPartition (a NamedTuple): that prints as topic-partition
            v = ",".join(str(x) for x in v) or "-"
        parts.append(f"{k}={str(v).replace(' ', '_') or '-'}")
    parts.append(f"mono_ns={time.monotonic_ns() if mono_ns is None else mono_ns}")
    parts.append(f"wall={time.time() if wall is None else wall:.3f}")
    return " ".join(parts)


def parse_event(line: str) -> dict[str, Any] | None:
    """The event of one log line (`{"event": kind, field: value, ...}`), or None if the
    line is not an event line. Integers come back as ints, `isr`/`elr` as lists of ints,
    `wall` as a float; `logged` is the prefix's local time text when present."""
    at = line.find(MARK)
    if at < 0:
        return None
    tokens = line[at + len(MARK):].split()
    if not tokens:
        return None
    out: dict[str, Any] = {"event": tokens[0]}
    for tok in tokens[1:]:
        k, sep, v = tok.partition("=")
        if not sep:
            continue
        out[k] = _value(k, v)
    m = _PREFIX_TIME.match(line)
    if m:
        out["logged"] = m.group(1)
    return out


def election_kind(prev: Any, new: Any) -> str:
    """How `new` (a PartitionRegistration) chose its leader after `prev` (None: the topic
    was just created): the `election` field of a `partition-change` event."""
    if prev is None:
        return "initial"
    if new.leader == prev.leader:
        return "none"
    if new.leader < 0:
        return "leaderless"
    if new.leader in prev.isr:
        return "clean"
    if new.leader in prev.elr:
        return "elr"
    return "unclean"


def _value(k: str, v: str) -> Any:
    if k in LIST_FIELDS:
        return [] if v in ("-", "") else [int(x) if _is_int(x) else x for x in v.split(",")]
    if k == "wall":
        try:
            return float(v)
        except ValueError:
            return None
    if _is_int(v):
        return int(v)
    return None if v == "-" else v


def _is_int(s: str) -> bool:
    return s.lstrip("-").isdigit() and s not in ("-", "")
