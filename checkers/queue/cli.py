"""`wrack check --checker queue`: one history file to the result object (and plots).

`check_path(path, args)` reads the queue option group of `harness.cmd_check`:
`--allow TYPE` (repeatable; `policy:NAME` works too), `--policy NAME` (repeatable),
`--ww-deps`, `--time-limit S`, and `--plots DIR` (writes `DIR/<plot>.png` and
`DIR/timeline.html`). Unknown types or policies are bad arguments (exit 254).
"""

from __future__ import annotations

import argparse
import os
from typing import Any

from checkers.plots import write_plots
from checkers.queue import analyze_file
from checkers.queue.policy import named_policy
from checkers.timeline import write_timeline
from checkers.verdict import judge
from contracts.errors import InputError


def check_path(path: str, args: argparse.Namespace) -> dict[str, Any]:
    try:
        policy = named_policy(list(getattr(args, "allow", None) or []), list(getattr(args, "policy", None) or []))
    except ValueError as e:
        raise InputError(str(e)) from None
    an = analyze_file(path, time_limit=getattr(args, "time_limit", None),
                      ww_deps=bool(getattr(args, "ww_deps", False)))
    judge({"queue": an.result}, policy).write_into(an.result, policy)
    out_dir = getattr(args, "plots", None)
    if out_dir:
        os.makedirs(out_dir, exist_ok=True)
        write_plots(path, out_dir, analysis=an)
        write_timeline(path, os.path.join(out_dir, "timeline.html"))
    return an.result
