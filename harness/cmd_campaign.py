"""`wrack campaign FILE.yaml`: run a matrix of tests and summarise them.

Writes campaign-results/<name>/<timestamp>/ (campaign.json, runs/, results.json,
summary.html, junit.xml; see docs/results.md). `--baseline OLD` (an old campaign folder or
its results.json) marks regressions: cells that were valid and now have an invalid or
unknown run. A cell's `expect` (valid, invalid, found, any) is defined in harness.campaign.
Exit codes: 1 on any regression, or on a checked run (valid or invalid) that missed its
cell's expectation; 2 when cells failed only through unknown or crashed runs; 0 when every
cell passed; 254 for bad input (a bad campaign file; a `--master` that does not parse, or a
master that does not answer, or gives no executor, within `--master-timeout` seconds).

`--master spark://HOST:PORT` (or `local[N]`) runs the cells x repeats as Spark tasks
(harness/spark_campaign.py): Spark places them on its executors, each runs its test on its
own host. Every finished run also goes into the pipeline's Parquet tables (`--tables DIR`,
default `<out>/_pipeline`; `--no-tables` skips it), which `wrack serve` reads for each
cell's detection rate over time and revisions.
"""

from __future__ import annotations

import argparse
import json
import os
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
    p.add_argument("--master", default=None, metavar="URL",
                   help="run the runs as Spark tasks: spark://HOST:PORT (a standalone cluster) or local[N]")
    p.add_argument("--master-timeout", type=float, default=30.0, metavar="S",
                   help="seconds the master has to answer and give an executor (default 30)")
    p.add_argument("--tests-per-host", type=int, default=None, metavar="N",
                   help="with --master: at most N tests at once on each host (default: one per 2 of its cores)")
    p.add_argument("--ship-runs", action="store_true",
                   help="with --master: executors return run folders to the driver even if they see the campaign folder")
    p.add_argument("--tables", default=None, metavar="DIR",
                   help="pipeline directory each finished run is ingested into (default OUT/_pipeline)")
    p.add_argument("--no-tables", action="store_true", help="do not ingest runs into the pipeline's tables")
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
    from harness.campaign_tables import RunTables, default_dir

    spec = C.load_spec(args.file)
    if args.repeats is not None:
        spec.repeats = max(1, args.repeats)
    overrides = _overrides(args.set)
    baseline = C.load_baseline(args.baseline) if args.baseline else None
    if args.list:
        for c in spec.cells:
            sys.stdout.write(f"{c.label()}  (expect {c.expect}, {spec.repeats} run(s))\n")
        return 0
    if args.master is not None:
        # lazy: see above
        from harness.spark_master import parse

        parse(args.master)  # bad input before anything is made
        if args.tests_per_host is not None and args.tests_per_host < 1:
            raise InputError(f"--tests-per-host: {args.tests_per_host} must be at least 1")
    root = args.out or os.environ.get("WRACK_CAMPAIGN_RESULTS") or C.DEFAULT_ROOT
    tables = None if args.no_tables else RunTables(args.tables or default_dir(root))
    if tables is not None:
        tables.check()
    progress = Progress(enabled=not args.quiet)
    if args.master is not None:
        cdir, results = _on_spark(args, spec, root, overrides, baseline, tables, progress)
    else:
        cdir, results = _in_process(spec, root, overrides, baseline, tables, progress)
    progress.close()
    _report(args, spec, cdir, results, baseline, tables)
    return C.exit_code(results)


def _in_process(spec, root, overrides, baseline, tables, progress):
    """The cells one after another in this process."""
    # lazy: see run()
    from harness import campaign as C
    from harness.runner import run_test

    total = len(spec.cells) * spec.repeats
    done = [0]

    def runner(o, campaign=None):
        progress.message(f"campaign {spec.name}: run {done[0] + 1}/{total}: {campaign and campaign['cell']}")
        return run_test(o, progress, campaign=campaign)

    def on_run(cell, rep, out):
        done[0] += 1
        progress.message(f"  -> {out.results.get('valid') if out.results else 'crashed'}  {out.run_dir}")
        if tables is not None:
            tables.add(out.run_dir)

    return C.run_campaign(spec, root=root, overrides=overrides, baseline=baseline, runner=runner, on_run=on_run)


def _on_spark(args, spec, root, overrides, baseline, tables, progress):
    """The runs as Spark tasks (harness/spark_campaign.py)."""
    # lazy: see run()
    from harness.spark_campaign import run_spark_campaign

    return run_spark_campaign(spec, master=args.master, root=root, overrides=overrides, baseline=baseline,
                              tables=tables, progress=progress, timeout=args.master_timeout,
                              ship="driver" if args.ship_runs else "auto", per_host=args.tests_per_host)


def _report(args, spec, cdir, results, baseline, tables) -> None:
    if args.json:
        sys.stdout.write(json.dumps(results, default=str) + "\n")
        return
    s = results["summary"]
    sys.stdout.write(f"campaign {spec.name}: {s['cells_passed']}/{s['cells']} cells passed; {s['runs']} runs: "
                     f"{s['valid']} valid, {s['invalid']} invalid, {s['unknown']} unknown, {s['crashed']} crashed\n")
    retried = sum(bool(r.get("retried")) for c in results["cells"] for r in c["runs"])
    if retried:
        sys.stdout.write(f"{retried} run(s) retried after their executor was lost\n")
    if baseline is not None:
        sys.stdout.write(f"regressions against {results.get('baseline')}: {s['regressions']}\n")
        for c in results["cells"]:
            if c.get("regression"):
                sys.stdout.write(f"  REGRESSION {c['label']}: was {c.get('baseline_verdict')}, now {c['verdict']}\n")
    if tables is not None:
        sys.stdout.write(f"tables: {tables.out}" + (f" ({len(tables.errors)} run(s) not ingested)" if tables.errors
                                                     else "") + "\n")
    sys.stdout.write(f"summary: {cdir / 'summary.html'}\n")
