"""`wrack demo`: check the bundled example histories and print their verdicts.

The examples live in ``examples/histories/`` and are named
``<model>__<valid|invalid>__<what>.jsonl``; each is checked with the linearizability
checker and its verdict compared with the one its name promises. Exit 0 when every
verdict is as promised, 1 otherwise. ``--html DIR`` also writes each visualisation.
(Until the cluster and broker are ready this is the whole demo; the harness turns it
into a real cluster test later.)
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from harness.errors import EXIT_INVALID, EXIT_VALID, InputError

EXAMPLES = Path(__file__).resolve().parent.parent / "examples" / "histories"


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("demo", help="check the bundled example histories", description=__doc__.split("\n\n")[0])
    p.add_argument("--examples", default=str(EXAMPLES), metavar="DIR", help="folder of example histories")
    p.add_argument("--html", default=None, metavar="DIR", help="write each visualisation into DIR")
    p.add_argument("--json", action="store_true", help="one JSON result per line instead of the table")
    p.set_defaults(func=run)


def examples(folder: str | os.PathLike[str]) -> list[tuple[Path, str, bool]]:
    """(path, model, expected verdict) of every example history in `folder`."""
    out = []
    for path in sorted(Path(folder).glob("*.jsonl")):
        parts = path.stem.split("__")
        if len(parts) != 3 or parts[1] not in ("valid", "invalid"):
            raise InputError("example names are <model>__<valid|invalid>__<what>.jsonl", str(path))
        out.append((path, parts[0], parts[1] == "valid"))
    if not out:
        raise InputError("no example histories (*.jsonl) found", str(folder))
    return out


def summary(result: dict[str, Any]) -> str:
    """One line about a result: the counterexample of the first failing partition, if any."""
    if result["valid"] is True:
        return f"{result['ops']} ops in {result['partitions']} partition(s) linearize"
    if result["valid"] is not False:
        return result.get("reason", "")
    ce = result["anomalies"]["nonlinearizable"][0]
    key = "" if ce["key"] is None else f"key {ce['key']!r}: "
    cf = ce.get("cannot_follow")
    if cf is None:
        return f"{key}no linearization"
    return (f"{key}after {ce['linearized_count']} linearized ops, '{cf['op']}' (process {cf['process']}, "
            f"line {cf['line']}) cannot follow (state {ce['state']})")


def run(args: argparse.Namespace) -> int:
    import json

    from checkers.linearizable.check import analyse
    from harness.history import read_events

    rows = []
    ok = True
    for path, model, expect in examples(args.examples):
        a = analyse(read_events(path, with_lines=True), model, path=str(path), with_lines=True, time_limit=60)
        result = a.result()
        good = result["valid"] is expect
        ok &= good
        if args.html:
            from checkers.linearizable.visualize import write_html

            os.makedirs(args.html, exist_ok=True)
            write_html(a, os.path.join(args.html, path.stem + ".html"), title=path.name)
        if args.json:
            sys.stdout.write(json.dumps({"file": str(path), "expected": expect, **result}, default=str) + "\n")
        rows.append((path.name, model, "valid" if expect else "invalid", str(result["valid"]).lower(),
                     "ok" if good else "UNEXPECTED", summary(result)))
    if not args.json:
        w = [max(len(r[i]) for r in rows) for i in range(5)]
        sys.stdout.write("Linearizability of the bundled example histories (examples/histories):\n")
        for r in rows:
            sys.stdout.write("  " + "  ".join(c.ljust(w[i]) for i, c in enumerate(r[:5])) + f"  {r[5]}\n")
        sys.stdout.write("every verdict as expected\n" if ok else "some verdicts were NOT as expected\n")
    return EXIT_VALID if ok else EXIT_INVALID
