"""Per-file entry points that pick the checker a history file wants.

- `looks_like_queue(path)`: whether a history is the Kafka queue workload's (one of its
  first events is a `send`, `poll` or `txn`);
- `run_stats(history_path)`: the statistics of `checkers.stats` for one file; for a Kafka
  queue history it runs the queue checker instead (one pass) and returns its `stats`,
  which add the realtime lag per key (ack of a send to the completion of the first poll
  that returned it).

Above both `checkers.stats` and `checkers.queue` (which computes its statistics with
`checkers.stats.summarize`), so neither imports the other's way back.
"""

from __future__ import annotations

import os
from typing import Any

from checkers.queue import analyze_file
from checkers.queue.reader import EventFile
from checkers.stats import op_table, summarize
from contracts.history import fault_windows

QUEUE_FS = frozenset({"send", "poll", "txn"})


def run_stats(history_path: str | os.PathLike[str]) -> dict[str, Any]:
    """Statistics of one history file (see the module docstring)."""
    path = os.fspath(history_path)
    if looks_like_queue(path):
        return analyze_file(path).result["stats"]
    ef = EventFile(path)
    tab, nemesis, last = op_table(ef, path, ef.line_of)
    return summarize(tab, fault_windows(nemesis), last_time=last)


def looks_like_queue(path: str, probe: int = 2000) -> bool:
    """Whether one of the first `probe` + 1 events of the file is a queue op."""
    for i, ev in enumerate(EventFile(path)):
        if ev.get("f") in QUEUE_FS:
            return True
        if i >= probe:
            break
    return False
