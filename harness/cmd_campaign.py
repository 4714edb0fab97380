"""`wrack campaign FILE.yaml`: run a matrix of tests and summarise them.

Writes campaign-results/<name>/<timestamp>/ (campaign.json, runs/, results.json,
summary.html, junit.xml; see docs/results.md). `--baseline OLD` (an old campaign folder or
its results.json) marks regressions: cells that were valid and now have an invalid or
unknown run. A cell's `expect` (valid, invalid, found, any) is defined in harness.campaign.
Exit codes: 1 on any regression, or on a checked run (valid or invalid) that missed its
cell's expectation; 2 when cells failed only through unknown or crashed runs; 0 when every
cell passed; 254 for a bad campaign file.
"""

from __future__ import annotations

import argparse
import json
import sys

from contracts.errors import InputError
from harness.options import SPEC
from harness.progress import Progress


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("campaign", help="run a matrix of tests (regression suites)",
                       description=__doc__.split("\n\n")[0])
    p.add_argument("file", metavar="FILE.yaml", help="campaign file (see campaigns/)")
    p.add_argument("--baseline", default=None, metavar="OLD", help="old campaign folder or results.json")
    p.add_argument("--out", default=None, metavar="DIR", help="campaign results root (default ./campaign-results)")
    p.add_argument("--repeats", type=int, default=None, help="override the file's repeats")
    p.add_argument("--set", action="append", default=[], metavar="OPT=VALUE",
                   help="override an option in every cell (repeatable; e.g. --set time_limit=10)")
    p.add_argument("--list", action="store_true", help="print the cells and exit")
    p.add_argument("--quiet", action="store_true", help="no progress display")
    p.add_argument("--json", action="store_true", help="print the campaign results JSON")
    p.set_defaults(func=run)


def _overrides(items: list[str]) -> dict:
    # lazy: `wrack` imports every command module at start (--help); yaml costs ~15 ms
    import yaml

    out = {}
    for it in items:
        if "=" not in it:
            raise InputError(f"--set {it!r}: expected OPT=VALUE")
        k, v = it.split("=", 1)
        out[k] = yaml.safe_load(v)
    return SPEC.from_mapping(out, "--set")


def run(args: argparse.Namespace) -> int:
    # lazy: `wrack` imports every command module at start (--help); these cost ~0.17 s
    from harness import campaign as C
    from harness.runner import run_test

    spec = C.load_spec(args.file)
    if args.repeats is not None:
        spec.repeats = max(1, args.repeats)
    overrides = _overrides(args.set)
    baseline = C.load_baseline(args.baseline) if args.baseline else None
    if args.list:
        for c in spec.cells:
            sys.stdout.write(f"{c.label()}  (expect {c.expect}, {spec.repeats} run(s))\n")
        return 0
    progress = Progress(enabled=not args.quiet)
    total = len(spec.cells) * spec.repeats
    done = [0]

    def runner(o, campaign=None):
        progress.message(f"campaign {spec.name}: run {done[0] + 1}/{total}: {campaign and campaign['cell']}")
        return run_test(o, progress, campaign=campaign)

    def on_run(cell, rep, out):
        done[0] += 1
        progress.message(f"  -> {out.results.get('valid') if out.results else 'crashed'}  {out.run_dir}")

    cdir, results = C.run_campaign(spec, root=args.out, overrides=overrides, baseline=baseline, runner=runner,
                                   on_run=on_run)
    progress.close()
    if args.json:
        sys.stdout.write(json.dumps(results, default=str) + "\n")
    else:
        s = results["summary"]
        sys.stdout.write(f"campaign {spec.name}: {s['cells_passed']}/{s['cells']} cells passed; {s['runs']} runs: "
                         f"{s['valid']} valid, {s['invalid']} invalid, {s['unknown']} unknown, {s['crashed']} crashed\n")
        if baseline is not None:
            sys.stdout.write(f"regressions against {results.get('baseline')}: {s['regressions']}\n")
            for c in results["cells"]:
                if c.get("regression"):
                    sys.stdout.write(f"  REGRESSION {c['label']}: was {c.get('baseline_verdict')}, now {c['verdict']}\n")
        sys.stdout.write(f"summary: {cdir / 'summary.html'}\n")
    return C.exit_code(results)
