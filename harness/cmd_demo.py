"""`wrack demo`: the main job, a real test on a 5-node local cluster, verdict and report.

Bare `wrack demo` (what `make demo` runs) is `wrack test` with the demo's settings: a
5-node local cluster, the queue workload with acks=all (min ISR 2, RF 3), partitions and
kills for 60 s; it prints what the run did (`story`: operations, faults and availability
under them, recovery after each heal, whether the replicas agree, what the checker found), the verdict and the
report's path, exit 0 valid, 1 invalid,
2 unknown, 255 crash. Test options (`--time-limit`, `--nodes`, ...) override the demo's.

`--examples-only` (or any of `--examples DIR`, `--html DIR`, `--json`) checks the bundled
example histories instead, without a cluster: ``examples/histories/`` holds files named
``<model>__<valid|invalid>__<what>.jsonl``; each is checked with the linearizability checker
and its verdict compared with the one its name promises. Exit 0 when every verdict is as
promised, 1 otherwise. ``--html DIR`` also writes each visualisation.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from contracts.errors import EXIT_INVALID, EXIT_VALID, InputError
from contracts.history import read_events
from harness.cmd_test import add_test_options, options_from_args, print_outcome
from harness.options import workload_of
from harness.progress import Progress

EXAMPLES = Path(__file__).resolve().parent.parent / "examples" / "histories"


DEMO = {"nodes": 5, "workload": "queue", "acks": "all", "min_isr": 2, "rf": 3, "nemesis": ["partition", "kill"],
        "time_limit": 60.0, "nemesis_interval": 8.0, "name": "demo"}


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("demo", help="the main job: a 60 s test on a 5-node local cluster",
                       description=__doc__.split("\n\n")[0])
    p.add_argument("--examples-only", action="store_true",
                   help="check the bundled example histories instead (no cluster)")
    p.add_argument("--examples", default=None, metavar="DIR",
                   help=f"examples mode: folder of example histories (default {EXAMPLES})")
    p.add_argument("--html", default=None, metavar="DIR", help="examples mode: write each visualisation into DIR")
    add_test_options(p)  # its --json also selects the examples mode (one JSON result per line)
    p.set_defaults(func=run, **{k: v for k, v in DEMO.items()})


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
    if args.examples_only or args.examples or args.html or args.json:
        return run_examples(args)
    # lazy: `wrack` imports every command module at start (--help); harness.runner costs ~0.13 s
    from harness.runner import run_test

    o = options_from_args(args)
    sys.stderr.write(f"wrack demo: {o.nodes}-node local cluster, {workload_of(o)} workload, acks={o.acks}, "
                     f"faults {','.join(o.nemesis) or 'none'}, {o.time_limit:g} s\n")
    out = run_test(o, Progress(enabled=not args.quiet))
    if out.results is not None and not args.quiet:
        sys.stdout.write("".join(f"{line}\n" for line in story(out.results)))
    print_outcome(out, False)
    return out.exit_code


def story(res: dict[str, Any]) -> list[str]:
    """What the run did, in a few lines from its results.json: the workload, the faults and
    availability under them, the recovery after each heal, whether the replicas' logs agree,
    what the checker found."""
    h, checked, live = res.get("history") or {}, res.get("checked") or {}, res.get("liveness") or {}
    avail = live.get("availability") or {}
    lines = [f"workload: {h.get('ok', 0) + h.get('fail', 0) + h.get('info', 0):,} operations: {h.get('ok', 0):,} ok, "
             f"{h.get('info', 0):,} indeterminate, {h.get('fail', 0):,} failed; "
             f"{checked.get('sends_acked', 0):,} acknowledged sends, {checked.get('values_read', 0):,} values read"]
    kinds: dict[str, int] = {}
    for w in avail.get("windows") or []:
        kinds[w["kind"]] = kinds.get(w["kind"], 0) + 1
    if kinds:
        held, outside = (avail.get(k, {}).get("ops", {}).get("share") for k in ("in_faults", "outside_faults"))
        shares = f"; {held:.1%} of operations succeeded while they held, {outside:.1%} outside them" \
            if held is not None and outside is not None else ""
        lines.append("faults: " + ", ".join(f"{k} {n} time(s)" for k, n in sorted(kinds.items())) + shares)
    waits = [x["seconds"] for x in live.get("first_ok_send_after_heal") or [] if x.get("seconds") is not None]
    if waits:
        keys = live.get("recovered_keys") or []
        lines.append(f"recovery: the first acknowledged send came {min(waits):.1f}-{max(waits):.1f} s after each "
                     f"of {len(waits)} heals; {len(keys)} key(s) took writes and reads within "
                     f"{live.get('bound_s', 0):g} s of the final heal")
    reps = res.get("replicas") or {}
    if reps.get("checked"):
        agree = "agree below their high watermarks" if reps.get("valid") is True else "do not all agree"
        lines.append(f"replicas: {reps.get('replicas_read', 0)} replica logs of {reps.get('partitions', 0)} "
                     f"partitions read after the final phase: they {agree}")
    found = res.get("anomaly_types") or []
    quiet = "no acknowledged write lost, duplicated or reordered" if res.get("checker") == "queue" else "no anomaly"
    lines.append(f"checked ({res.get('checker', '?')}): " + (", ".join(found) if found else quiet))
    return lines


def run_examples(args: argparse.Namespace) -> int:
    # lazy: `wrack` imports every command module at start (--help); the checker costs ~20 ms
    from checkers.linearizable.check import analyse

    rows = []
    ok = True
    for path, model, expect in examples(args.examples or EXAMPLES):
        a = analyse(read_events(path, with_lines=True), model, path=str(path), with_lines=True, time_limit=60)
        result = a.result()
        good = result["valid"] is expect
        ok &= good
        if args.html:
            # lazy: `wrack` imports every command module at start (--help); ~20 ms
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
