"""`wrack pipeline ingest|check|report`: the Spark data pipeline over many runs.

    wrack pipeline ingest RESULTS... --out DIR   run folders (or whole campaigns) into Parquet
    wrack pipeline check DIR                     distributed checks of the ingested runs
    wrack pipeline report DIR [--baseline DIR]   anomaly/availability analytics, plots, HTML

Spark runs `local[*]` by default; `--master URL` (or SPARK_MASTER) runs the same job on
a cluster, `--remote sc://HOST:PORT` (or SPARK_REMOTE) through Spark Connect. Exit codes:
ingest and report 0 (report 1 when runs regressed against the baseline); check the worst
verdict of all ingested runs (0 valid, 1 invalid, 2 unknown); 254 bad arguments or input;
255 a crash. See docs/pipeline.md.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
from typing import Any

from contracts.errors import EXIT_INVALID, EXIT_UNKNOWN, EXIT_VALID, InputError
from pipeline.runfolders import find_runs
from pipeline.session import resolve, session


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("pipeline", help="ingest, check and analyse many runs on Spark",
                       description=__doc__.split("\n\n")[0])
    psub = p.add_subparsers(dest="pipeline_command", metavar="ACTION", parser_class=type(p))
    psub.required = True

    def common(a: argparse.ArgumentParser) -> None:
        a.add_argument("--master", default=None, metavar="URL",
                       help="Spark master (default $SPARK_MASTER or local[*]), e.g. spark://127.0.0.1:7077")
        a.add_argument("--remote", default=None, metavar="sc://HOST:PORT",
                       help="run through Spark Connect (default $SPARK_REMOTE)")
        a.add_argument("--json", action="store_true", help="machine-readable output on stdout")
        g = a.add_mutually_exclusive_group()
        g.add_argument("--progress", dest="progress", action="store_true", default=None,
                       help="show Spark's progress bar (default: when stderr is a terminal)")
        g.add_argument("--no-progress", dest="progress", action="store_false", help="never show it")
        a.set_defaults(func=run)

    a = psub.add_parser("ingest", help="run folders into Parquet tables (incremental)",
                        description="Ingest run folders (and campaigns) into the Parquet tables of DIR; "
                                    "runs already there are skipped, damaged histories are ingested up to "
                                    "their last good line and flagged.")
    a.add_argument("paths", nargs="+", metavar="RESULTS", help="run folders, results/ roots, campaign folders")
    a.add_argument("--out", required=True, metavar="DIR", help="the pipeline directory (created if missing)")
    common(a)
    c = psub.add_parser("check", help="check the ingested runs with Spark",
                        description="Check ingested runs not checked yet (queue anomalies as DataFrame "
                                    "jobs, log workloads for linearizability per key); exit with the worst "
                                    "verdict of all ingested runs.")
    c.add_argument("dir", metavar="DIR", help="the pipeline directory")
    c.add_argument("--run", action="append", default=None, metavar="RUN_ID", help="check only this run (repeatable)")
    c.add_argument("--all", action="store_true", help="check every run again")
    c.add_argument("--allow", action="append", default=[], metavar="TYPE",
                   help="an anomaly type every run may show, on top of its policy (repeatable)")
    c.add_argument("--time-limit", type=float, default=None, metavar="S",
                   help="linearizability: give up on a key after S seconds (verdict unknown)")
    c.add_argument("--max-examples", type=int, default=32, metavar="N", help="examples kept per type (default 32)")
    common(c)
    r = psub.add_parser("report", help="analytics across the ingested runs: JSON, plots, HTML",
                        description="Anomaly rate and time-to-first-anomaly by configuration, availability and "
                                    "latency inside vs outside fault windows, and regressions against a "
                                    "baseline pipeline directory; written to DIR/report/.")
    r.add_argument("dir", metavar="DIR", help="the pipeline directory")
    r.add_argument("--baseline", default=None, metavar="DIR", help="a pipeline directory of the baseline campaign")
    r.add_argument("--out-dir", default=None, metavar="D", help="where to write (default DIR/report)")
    common(r)


def _say(msg: str) -> None:
    sys.stderr.write(f"pipeline: {msg}\n")
    sys.stderr.flush()


def _need_java() -> None:
    if os.environ.get("JAVA_HOME") or shutil.which("java"):
        return
    raise RuntimeError("Java not found: Spark needs a JRE (openjdk-17-jre-headless; `make setup` installs it)")


def run(args: argparse.Namespace) -> int:
    # lazy: pipeline.store imports pyarrow (~0.13 s); `wrack` imports every command module at start
    from pipeline import store

    if args.pipeline_command == "ingest":
        if not find_runs(args.paths):  # bad paths and empty results are bad input before Spark starts
            raise InputError("no run folders found (a run folder holds test.json or history.jsonl)", args.paths[0])
        store.prepare(args.out, create=True)
    else:
        store.prepare(args.dir, create=False)
        if args.pipeline_command == "report" and args.baseline:
            store.prepare(args.baseline, create=False)
        if args.pipeline_command == "check" and args.max_examples < 1:
            raise InputError("--max-examples must be at least 1")
    resolve(args.master, args.remote)
    if not (args.remote or os.environ.get("SPARK_REMOTE")):
        _need_java()
    with session(args.master, args.remote, progress=args.progress) as spark:
        if args.pipeline_command == "ingest":
            return _ingest(spark, args)
        if args.pipeline_command == "check":
            return _check(spark, args)
        return _report(spark, args)


def _out(obj: Any, as_json: bool, text: str) -> None:
    if as_json:
        sys.stdout.write(json.dumps(obj, separators=(",", ":"), default=str) + "\n")
    else:
        sys.stdout.write(text)


def _ingest(spark: Any, args: argparse.Namespace) -> int:
    # lazy: pyarrow: see run()
    from pipeline.ingest import ingest

    s = ingest(spark, args.paths, args.out)
    lines = [f"ingested {s.ingested} run(s), {s.ops} ops ({s.op_rows} rows); skipped {s.skipped} already ingested; "
             f"{s.seconds:.1f} s\n"]
    for d in s.damaged:
        lines.append(f"  damaged: {d['run_id']}: {d['damage']} ({d['dropped_lines']} line(s) not ingested)\n")
    _out(s.to_json(), args.json, "".join(lines))
    return EXIT_VALID


def _check(spark: Any, args: argparse.Namespace) -> int:
    # lazy: pipeline.check imports pyspark (~0.6 s): see run()
    from pipeline.check import check

    s = check(spark, args.dir, run_ids=args.run, recheck=args.all, allow=args.allow,
              max_examples=args.max_examples, time_limit=args.time_limit, say=_say)
    worst = EXIT_VALID
    for res in s.results.values():
        v = res.get("valid")
        if v is False:
            worst = EXIT_INVALID
        elif v is not True and worst == EXIT_VALID:
            worst = EXIT_UNKNOWN
    if args.json:
        for rid in sorted(s.results):
            sys.stdout.write(json.dumps({"run": rid, **s.results[rid]}, separators=(",", ":"), default=str) + "\n")
        return worst
    name = {True: "valid", False: "INVALID"}
    for rid in sorted(s.results):
        res = s.results[rid]
        mark = "*" if rid in s.checked else " "
        types = ", ".join(f"{t} ({n})" for t, n in res.get("anomaly_counts", {}).items())
        sys.stdout.write(f"{mark} {rid}: {name.get(res.get('valid'), 'unknown')}{'  ' + types if types else ''}\n")
    vs = [res.get("valid") for res in s.results.values()]
    tally = f"{vs.count(True)} valid, {vs.count(False)} invalid, {len(vs) - vs.count(True) - vs.count(False)} unknown"
    sys.stdout.write(f"checked {len(s.checked)} run(s) ({s.rows} micro-op rows) in {s.seconds:.1f} s; "
                     f"{len(s.results)} run(s) in {args.dir} (* = checked now): {tally} (exit {worst})\n")
    return worst


def _report(spark: Any, args: argparse.Namespace) -> int:
    # lazy: pyspark, matplotlib: see run()
    from pipeline.analytics import analyse
    from pipeline.report import write_report

    out_dir = args.out_dir or os.path.join(args.dir, "report")
    rep = analyse(spark, args.dir, args.baseline)
    files = write_report(rep, out_dir)
    regressed = bool(rep.get("regressions", {}).get("runs"))
    text = [f"report: {rep['runs']} run(s), {rep['checked']} checked; {len(rep['by_config'])} configuration(s); "
            f"wrote {len(files)} file(s) to {out_dir}\n"]
    for c in rep["by_config"]:
        rate = "-" if c["anomaly_rate"] is None else f"{100 * c['anomaly_rate']:.0f}%"
        text.append(f"  {c['config']}: {c['runs']} run(s), anomaly rate {rate}\n")
    if "regressions" in rep:
        text.append(f"regressions against {args.baseline}: {len(rep['regressions']['runs'])} run(s)\n")
    _out({"report_dir": out_dir, "files": files, **rep}, args.json, "".join(text))
    return EXIT_INVALID if regressed else EXIT_VALID
