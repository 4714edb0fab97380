"""`wrack check --checker linearizable`: one history file -> docs/ARCHITECTURE.md's result object.

`check_path(path, args)` reads the file in its format (``--format`` or recognised), checks
it against ``--model`` (P-compositionality unless ``--no-partition``), writes the HTML
visualisation to ``--html`` when asked, and returns the result. Bad input raises
`InputError` (the CLI prints it as ``wrack: error: FILE:LINE: ...`` and exits 254).
"""

from __future__ import annotations

import argparse
import os
from typing import Any

from checkers.linearizable.check import analyse
from checkers.linearizable.models import get_model
from checkers.linearizable.visualize import write_html
from contracts.errors import InputError
from contracts.formats import detect_format, read_history
from contracts.history import ReadStats, read_events


def html_path(out: str, path: str, many: bool) -> str:
    """Where the visualisation of `path` goes: OUT itself, or OUT/<file name>.html for several files."""
    if not many:
        return out
    os.makedirs(out, exist_ok=True)
    return os.path.join(out, os.path.basename(path) + ".html")


def check_path(path: str, args: argparse.Namespace) -> dict[str, Any]:
    """Check one history file; see the module docstring."""
    try:
        model = get_model(getattr(args, "model", None) or "cas-register")
    except ValueError as e:
        raise InputError(str(e), path) from None
    fmt = getattr(args, "format", None) or detect_format(path)
    stats = ReadStats()
    events = read_events(path, stats, with_lines=True) if fmt == "jsonl" else read_history(path, fmt)
    a = analyse(events, model, time_limit=getattr(args, "time_limit", None),
                partition=not getattr(args, "no_partition", False), path=path, with_lines=True)
    result = a.result()
    if stats.dropped:
        result["dropped_lines"] = stats.dropped
        result["dropped_reason"] = stats.dropped_reason
    out = getattr(args, "html", None)
    if out:
        many = len(getattr(args, "files", [path])) > 1
        target = html_path(out, path, many)
        write_html(a, target, title=os.path.basename(path))
        result["html"] = target
    return result
