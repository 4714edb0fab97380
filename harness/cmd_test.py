"""`wrack test`: run a test on a real cluster and print its verdict and report path.

Creates a cluster (`--backend`), starts the system under test (`--db`) on every node, runs the workload with the
nemesis schedule for `--time-limit` s, heals, reads everything back, tears down, checks,
and writes the run folder (docs/results.md). `--test-count N` runs N tests and stops at
the first one that is not valid. Exit codes: 0 valid, 1 invalid, 2 unknown, 254 bad
arguments, 255 crash (of the harness, e.g. a cluster that could not be created).
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import Field
from typing import Any

from contracts.errors import EXIT_BAD_INPUT
from contracts.options import flag_of, reader
from harness.options import DEFAULTS, SPEC, TestOptions
from harness.progress import Progress


def add_test_options(p: argparse.ArgumentParser) -> None:
    """The options of one test, one flag per `harness.options.TestOptions` field (shared
    with `wrack demo`), in an argument group per option group, plus `--quiet` and `--json`."""
    groups: dict[type, Any] = {}
    for f in SPEC:
        g = SPEC.group_of(f.name)
        if g not in groups:
            groups[g] = p.add_argument_group((g.__doc__ or g.__name__).strip().split("\n")[0].rstrip("."))
        add_option(groups[g], f)
    p.add_argument("--quiet", action="store_true", help="no progress display")
    p.add_argument("--json", action="store_true", help="print one JSON object per run on stdout")


def add_option(p: Any, f: Field) -> None:
    """The flag of one option, from its spec (help, default, how its text is read)."""
    meta, default = f.metadata, getattr(DEFAULTS, f.name)
    helptext = meta["help"] + ("" if default in (None, [], False) or meta["invert"] else
                               f" (default {','.join(default) if isinstance(default, list) else default})")
    kw: dict[str, Any] = {"dest": f.name, "help": helptext}
    if meta["invert"]:
        kw.update(action="store_false", default=default)
    elif isinstance(default, bool):
        kw.update(action="store_true", default=default)
    elif meta["repeat"]:
        kw.update(action="extend", type=reader(f), default=[],
                  metavar=meta["metavar"])
    else:
        kw.update(type=reader(f), default=default, metavar=meta["metavar"])
    p.add_argument(flag_of(f), **kw)


def options_from_args(args: argparse.Namespace) -> Any:
    """The `TestOptions` the flags give."""
    return TestOptions(**{f.name: getattr(args, f.name) for f in SPEC})


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("test", help="run a test on a real cluster", description=__doc__.split("\n\n")[0])
    add_test_options(p)
    p.set_defaults(func=run)


def print_outcome(out: Any, as_json: bool) -> None:
    # lazy: `wrack` imports every command module at start (--help); harness.report costs ~12 ms
    from harness.report import verdict_word

    res = out.results or {}
    run_dir = out.run_dir.resolve()
    line = {"run": str(run_dir), "report": str(run_dir / "report.html"), "valid": out.valid,
            "verdict": verdict_word(out.valid) if out.results is not None else "crashed",
            "anomaly_types": res.get("anomaly_types", []), "allowed": res.get("allowed", []),
            "exit_code": out.exit_code, "warnings": res.get("warnings", [])}
    if out.error:
        line["error"] = out.error
    if as_json:
        sys.stdout.write(json.dumps(line, default=str) + "\n")
    else:
        kinds = ", ".join(f"{k}{' (allowed)' if k in line['allowed'] else ''}" for k in line["anomaly_types"])
        sys.stdout.write(f"{line['verdict'].upper()}{': ' + kinds if kinds else ''}\n")
        if out.error:
            sys.stdout.write(f"error: {out.error}\n")
        for w in line["warnings"]:
            sys.stdout.write(f"warning: {w}\n")
        sys.stdout.write(f"report: {line['report']}\n")
    sys.stdout.flush()


def run(args: argparse.Namespace) -> int:
    # lazy: `wrack` imports every command module at start (--help); harness.runner costs ~0.13 s
    from harness.runner import run_tests

    o = options_from_args(args)
    progress = Progress(enabled=not args.quiet)
    outs = run_tests(o, progress, on_outcome=lambda out: print_outcome(out, args.json))
    if not outs:
        return EXIT_BAD_INPUT
    return outs[-1].exit_code
