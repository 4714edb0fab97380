"""Mutation testing: how many bugs nobody planted the harness finds (issue 25).

Each mutant of the catalogue (bench/mutants/NAME.patch: a small patch to the broker, with
`# area:` and `# resembles:` header lines naming the real bug it resembles, and
`# equivalent:` for one argued to have no observable effect) is applied to a temporary
copy of the broker (`git archive` of HEAD's broker/ and contracts/, or `--base worktree`),
and measured two ways:

- the simulation's catch rate: `python -m broker.sim --seeds N` on the copy (failed seeds);
- its default campaign, `--runs` rounds: each round runs the default test and then its
  transaction twin (`--txn-p 0.5`), its idempotent twin (`--idempotence`) and its
  durability twin (`fsync`: `--flush-policy every --nemesis power-loss-many,partition`),
  each a real
  `wrack test` on a local cluster whose brokers run the copy (`--broker-command`), under
  `flock /tmp/wrack-e2e.lock` (one cluster at a time on this machine; `--lock FILE` for
  another, so that two invocations each run a cluster of their own beside the other's), taken
  per run so other work interleaves, or per mutant (`--lock-scope mutant`: its rounds back to back).
A round is *caught* at its first invalid twin (the others are
  skipped, `--all-twins` runs them anyway); its time to the first anomaly is that run's
  `first_bad_anomaly_time`, when the first anomaly its policy does not allow was witnessed
  (seconds from the start of the workload; `first_anomaly_time`, every anomaly's, for a
  run checked before 2026-11-29, which did not record it).

Printed per mutant: area, caught/rounds, the median time to the first anomaly, the anomaly
types, the simulation's failed/seeds, the wall time; then the share of non-equivalent
mutants caught in at least 2 of 3 rounds (at least `--runs` - 1 of `--runs`) and the
median of their times. Every run and simulation is appended to `OUT/results.jsonl` as it
ends, and a later invocation with the same `--out` resumes: what is there is not run again.

    .venv/bin/python bench/mutants.py --list               # the catalogue, by area
    .venv/bin/python bench/mutants.py --check              # does every patch apply? (exit 1 if not)
    .venv/bin/python bench/mutants.py --rebase             # follow code that moved to other files
    .venv/bin/python bench/mutants.py --out /tmp/mutants [--mutants a,b] [--runs 3]
        [--twins default,txn,idem,fsync] [--sim-seeds 100] [--no-sim] [--no-campaign]
        [--time-limit S] [--all-twins] [--control] [--keep] [--lock-scope run|mutant] [--lock FILE]
        [--markdown FILE] [--json] [--workers N | --master URL] [--tests-per-host N] [--reanalyze]

`--workers N` (a standalone Spark cluster of N 1-core workers started on this host and
stopped at the end, harness/spark_standalone.py) or `--master URL` runs the real runs as
Spark tasks (harness/spark_campaign.py): one campaign per twin, in the twins' order, of
the rounds that still owe that twin a run (a cell per round: the mutant's launcher as
`broker_command`, the round's seed), so a round caught by an earlier twin is not run again;
then the simulations, one at a time. Take the machine's cluster lock around the whole
invocation yourself (`flock /tmp/wrack-e2e.lock`). The campaign folders go under
OUT/campaigns; only invalid runs' folders are kept (all with `--keep`).

`--reanalyze` first checks the kept runs (the invalid ones) again with the current checkers
and updates their rows (after a checker change, so that the table comes from one checker).
`--control` adds the unmutated copy (`control`) to the measured set. Bad input (an unknown
mutant or twin, a patch file without its header lines) is one line and exit 254. Nothing
outside this script reads the catalogue: it measures the harness and never steers it.
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # before bench/: the Spark path imports the harness package, not bench/harness.py
CATALOGUE = ROOT / "bench" / "mutants"
LOCK = "/tmp/wrack-e2e.lock"
EXIT_BAD_INPUT = 254
# each twin's `wrack test` options beyond the defaults (TestOptions fields; `twin_flags` spells them)
TWINS: dict[str, dict[str, Any]] = {"default": {}, "txn": {"txn_p": 0.5}, "idem": {"idempotence": True},
                                    "fsync": {"flush_policy": "every", "nemesis": "power-loss-many,partition"}}
# the default campaign: the three twins and `fsync`, what a user testing durability picks (as
# the first measurement did for fsync): a flush per message and power losses of one node, a
# minority, a majority or all at once, beside partitions, each on its own clock. Not beside the mix:
# there power-loss-many is one more package of the rotation, whose turn comes after every story,
# past the run's end (seen: no power-loss-many in 190 s)
DEFAULT_TWINS = ("default", "txn", "idem", "fsync")
CONTROL = "control"


class BadInput(Exception):
    """One line for the user; exit 254."""


@dataclass(frozen=True)
class Mutant:
    name: str
    area: str
    resembles: str
    equivalent: str | None
    patch: str  # the patch text ("" for the control)


def load_catalogue(directory: Path = CATALOGUE) -> dict[str, Mutant]:
    """Every NAME.patch of `directory` (BadInput naming a file without its header lines)."""
    out = {}
    for p in sorted(directory.glob("*.patch")):
        text = p.read_text()
        head = {}
        for line in text.splitlines():
            if not line.startswith("# "):
                break
            key, _, value = line[2:].partition(": ")
            head[key] = value.strip()
        missing = [k for k in ("mutant", "area", "resembles") if not head.get(k)]
        if missing:
            raise BadInput(f"{p}: no '# {missing[0]}:' header line")
        if head["mutant"] != p.stem:
            raise BadInput(f"{p}: '# mutant: {head['mutant']}' does not match the file name")
        out[p.stem] = Mutant(p.stem, head["area"], head["resembles"], head.get("equivalent"), text)
    return out


def pick(catalogue: dict[str, Mutant], wanted: str | None, control: bool) -> list[Mutant]:
    names = [x.strip() for x in wanted.split(",") if x.strip()] if wanted else list(catalogue)
    bad = [n for n in names if n not in catalogue and n != CONTROL]
    if bad:
        raise BadInput(f"--mutants: unknown mutant {bad[0]!r} (see --list)")
    chosen = [catalogue[n] if n != CONTROL else Mutant(CONTROL, "-", "the broker as it is", None, "") for n in names]
    if control and all(m.name != CONTROL for m in chosen):
        chosen.insert(0, Mutant(CONTROL, "-", "the broker as it is", None, ""))
    return chosen


# ---------------------------------------------------------------- the broker copy
def base_tree(dest: Path, base: str) -> None:
    """broker/ and contracts/ of HEAD (or of the working tree) into `dest`."""
    if base == "worktree":
        for d in ("broker", "contracts"):
            shutil.copytree(ROOT / d, dest / d, ignore=shutil.ignore_patterns("__pycache__"))
        return
    arch = subprocess.run(["git", "-C", str(ROOT), "archive", base, "broker", "contracts"], capture_output=True,
                          check=False)
    if arch.returncode != 0:
        raise BadInput(f"--base {base}: git archive failed: {arch.stderr.decode().strip()}")
    subprocess.run(["tar", "-x", "-C", str(dest)], input=arch.stdout, check=True)


def apply_patch(dest: Path, m: Mutant) -> str | None:
    """Apply `m` inside `dest`; None, or why it does not apply."""
    if not m.patch:
        return None
    p = subprocess.run(["git", "apply", "--whitespace=nowarn", "-"], cwd=dest, input=m.patch.encode(),
                       capture_output=True, check=False)
    return None if p.returncode == 0 else p.stderr.decode().strip().splitlines()[0]


@contextmanager
def mutated(m: Mutant, base: str) -> Iterator[tuple[Path, str | None]]:
    """A temporary copy of the broker with `m` applied, and a launcher script that runs its
    broker (`--broker-command`); removed afterwards."""
    with tempfile.TemporaryDirectory(prefix=f"wrack-mutant-{m.name}-") as d:
        dest = Path(d)
        base_tree(dest, base)
        err = apply_patch(dest, m)
        launcher = dest / "run-broker"
        launcher.write_text(f"#!/bin/sh\nPYTHONPATH={dest} exec {sys.executable} -m broker.main \"$@\"\n")
        launcher.chmod(0o755)
        yield dest, err


# ---------------------------------------------------------------- measuring
class Results:
    """OUT/results.jsonl: one line per simulation and per run, appended as each ends; a row
    added here names the harness that measured it (`harness`: the checkout's commit, with
    `+dirty` for uncommitted changes), so a table resumed on a later harness says so."""

    def __init__(self, out: Path):
        self.path = out / "results.jsonl"
        self.rows: list[dict[str, Any]] = []
        if self.path.exists():
            for line in self.path.read_text().splitlines():
                if line.strip():
                    self.rows.append(json.loads(line))
        from contracts import store  # lazy: ROOT goes on sys.path first (module top)

        g = store.git_info(ROOT)
        self.harness = f"{(g['rev'] or 'unknown')[:12]}{'+dirty' if g['dirty'] else ''}"

    def add(self, row: dict[str, Any]) -> None:
        row.setdefault("harness", self.harness)
        self.rows.append(row)
        with open(self.path, "a") as f:
            f.write(json.dumps(row) + "\n")

    def save(self) -> None:
        """Rewrite the file from `rows` (after `reanalyze` changed some)."""
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text("".join(json.dumps(r) + "\n" for r in self.rows))
        tmp.replace(self.path)

    def sim(self, mutant: str, seeds: int) -> dict[str, Any] | None:
        return next((r for r in self.rows if r["kind"] == "sim" and r["mutant"] == mutant and r["seeds"] == seeds), None)

    def runs(self, mutant: str) -> list[dict[str, Any]]:
        return [r for r in self.rows if r["kind"] == "run" and r["mutant"] == mutant]


def loadavg() -> str:
    try:
        return open("/proc/loadavg").read().split()[0]
    except OSError:
        return "?"


def simulate(copy: Path, seeds: int) -> dict[str, Any]:
    """`python -m broker.sim --seeds N` on the copy: failed seeds (or that it crashed) and
    wall time."""
    t0 = time.monotonic()
    p = subprocess.run([sys.executable, "-m", "broker.sim", "--seeds", str(seeds)], cwd=copy, capture_output=True,
                       text=True, env={**os.environ, "PYTHONPATH": str(copy)}, timeout=3600, check=False)
    last = [line for line in p.stdout.splitlines() if " seeds, " in line]
    failed = int(last[-1].split(" seeds, ")[1].split()[0]) if last else None
    # no summary: the simulation itself broke down on the mutant (an exception of a seed),
    # which it shows as loudly as a failed seed
    return {"failed": failed, "crashed": not last, "wall_s": round(time.monotonic() - t0, 1),
            "error": None if last else (p.stderr.strip().splitlines() or ["no summary"])[-1][:300]}


def twin_seed(rnd: int, twin: str) -> int:
    """The seed of round `rnd`'s run of `twin` (the same on every path and every invocation)."""
    return 1000 + 10 * rnd + list(TWINS).index(twin)


def twin_flags(options: dict[str, Any]) -> list[str]:
    """`wrack test` flags for `options` ({"txn_p": 0.5, "idempotence": True} -> --txn-p 0.5 --idempotence)."""
    out: list[str] = []
    for k, v in options.items():
        out += [f"--{k.replace('_', '-')}"] + ([] if v is True else [str(v)])
    return out


def run_twin(launcher: Path, out: Path, m: Mutant, rnd: int, twin: str, a: argparse.Namespace) -> dict[str, Any]:
    """One `wrack test` of `twin` on the mutated broker, under the machine's cluster lock."""
    seed = twin_seed(rnd, twin)
    name = f"{m.name}-r{rnd}-{twin}"
    lock = ["flock", a.lock] if a.lock_scope == "run" else []  # "mutant": the campaign holds it (`holding`)
    argv = [*lock, str(Path(sys.executable).parent / "wrack"), "test", "--quiet", "--json",
            "--results", str(out / "runs"), "--name", name, "--seed", str(seed), "--no-data",
            "--broker-command", str(launcher), *twin_flags(TWINS[twin])]
    if a.time_limit:
        argv += ["--time-limit", str(a.time_limit)]
    t0 = time.monotonic()
    p = _run_test(argv)
    wall = round(time.monotonic() - t0, 1)
    line = _json_line(p.stdout)
    row: dict[str, Any] = {"kind": "run", "mutant": m.name, "round": rnd, "twin": twin, "seed": seed, "wall_s": wall,
                           "load": loadavg(), "exit": p.returncode}
    if line is None:
        row.update(verdict="crashed", anomaly_types=[], error=(p.stderr.strip().splitlines() or ["no output"])[-1][:300])
        return row
    if line.get("error") == "interrupted":  # not a result: the run was cut short (SIGINT to it)
        raise KeyboardInterrupt
    row.update(_verdict(line, line["run"]), run=line["run"], error=line.get("error"))
    if line["verdict"] != "invalid" and not a.keep:
        shutil.rmtree(line["run"], ignore_errors=True)
    return row


def _run_test(argv: list[str]) -> subprocess.CompletedProcess[str]:
    """Run `argv` (flock and `wrack test`) in its own process group; interrupted, send the group
    SIGINT and wait for the test to tear its cluster down (not SIGKILL: that would leave its
    namespaces and mounts), then re-raise."""
    with subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          start_new_session=True) as proc:
        try:
            out, err = proc.communicate(timeout=3600)
        except BaseException:
            os.killpg(proc.pid, signal.SIGINT)
            try:
                proc.communicate(timeout=180)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
            raise
    return subprocess.CompletedProcess(argv, proc.returncode, out, err)


def _json_line(stdout: str) -> dict[str, Any] | None:
    """The JSON line `wrack test --json` or `wrack analyze --json` printed, or None."""
    return next((json.loads(x) for x in stdout.splitlines() if x.startswith("{")), None)


def _verdict(line: dict[str, Any], run: str) -> dict[str, Any]:
    """A run's row fields from its JSON line and its results.json: verdict, anomaly types and
    the seconds to the first anomaly its policy does not allow (`_first_bad`)."""
    t = _first_bad(_read_json(Path(run) / "results.json"))
    return {"verdict": line["verdict"], "anomaly_types": line.get("anomaly_types", []),
            "first_anomaly_s": None if t is None else round(t / 1e9, 1)}


def _first_bad(results: dict[str, Any]) -> int | None:
    """When the run first witnessed an anomaly its policy does not allow (ns; see the module
    docstring for runs checked before that was recorded)."""
    if "first_bad_anomaly_time" in results:
        return results["first_bad_anomaly_time"]
    return results.get("first_anomaly_time")


def _read_json(p: Path) -> dict[str, Any]:
    try:
        return json.loads(p.read_text())
    except (OSError, ValueError):
        return {}


def campaign(launcher: Path, out: Path, m: Mutant, res: Results, a: argparse.Namespace, twins: list[str]) -> None:
    """`--runs` rounds of the twins (module docstring), skipping what `res` already holds."""
    for rnd in range(1, a.runs + 1):
        done = {r["twin"]: r for r in res.runs(m.name) if r["round"] == rnd}
        if not a.all_twins and any(r["verdict"] == "invalid" for r in done.values()):
            continue
        for twin in twins:
            if twin in done:
                continue
            row = run_twin(launcher, out, m, rnd, twin, a)
            res.add(row)
            said(row)
            if row["verdict"] == "invalid" and not a.all_twins:
                break


def said(row: dict[str, Any]) -> None:
    """One line on stderr for a run that ended."""
    first = row.get("first_anomaly_s")
    print(f"  {row['mutant']} round {row['round']} {row['twin']}: {row['verdict']} "
          f"{','.join(row['anomaly_types']) or '-'}{'' if first is None else f' first anomaly {first} s'} "
          f"({row['wall_s']} s, load {row['load']})", file=sys.stderr, flush=True)


def measure(m: Mutant, res: Results, a: argparse.Namespace, twins: list[str]) -> str | None:
    """The simulation and the campaign of `m`; why its patch does not apply, or None."""
    need_sim = a.sim and res.sim(m.name, a.sim_seeds) is None
    need_runs = a.campaign and _rounds_left(m, res, a, twins)
    if not need_sim and not need_runs:
        return None
    with mutated(m, a.base) as (copy, err):
        if err is not None:
            return err
        if need_sim:
            s = simulate(copy, a.sim_seeds)
            res.add({"kind": "sim", "mutant": m.name, "seeds": a.sim_seeds, **s, "load": loadavg()})
            said = f"crashed: {s['error']}" if s["crashed"] else f"{s['failed']}/{a.sim_seeds} seeds failed"
            print(f"  {m.name} simulation: {said} ({s['wall_s']} s)", file=sys.stderr, flush=True)
        if need_runs:
            with holding(a.lock if a.lock_scope == "mutant" else None):
                campaign(copy / "run-broker", a.out, m, res, a, twins)
    return None


@contextmanager
def holding(path: str | None) -> Iterator[None]:
    """The machine's cluster lock held for the block (none with `path` None)."""
    if path is None:
        yield
        return
    with open(path, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def _rounds_left(m: Mutant, res: Results, a: argparse.Namespace, twins: list[str]) -> bool:
    return any(_owed(m, res, a, t) for t in twins)


def _owed(m: Mutant, res: Results, a: argparse.Namespace, twin: str) -> list[int]:
    """The rounds of `m` that still owe `twin` a run: not caught by an earlier run, `twin`
    not yet run (every twin with `--all-twins`)."""
    out = []
    for rnd in range(1, a.runs + 1):
        done = {r["twin"]: r for r in res.runs(m.name) if r["round"] == rnd}
        if twin not in done and (a.all_twins or not any(r["verdict"] == "invalid" for r in done.values())):
            out.append(rnd)
    return out


def reanalyze(res: Results, names: set[str]) -> int:
    """Check the kept runs (the invalid ones) of the mutants `names` again with the current
    checkers (`wrack analyze`) and update their rows' verdict, anomaly types and time to the
    first anomaly (after a checker change: the table's figures then come from one checker).
    Returns how many rows were checked again; a run whose folder is gone keeps its row."""
    n = 0
    for row in res.rows:
        run = row.get("run")
        if row.get("kind") != "run" or row["mutant"] not in names or not run or not Path(run, "history.jsonl").is_file():
            continue
        p = subprocess.run([str(Path(sys.executable).parent / "wrack"), "analyze", run, "--json"],
                           capture_output=True, text=True, timeout=600, check=False)
        line = _json_line(p.stdout)
        if line is None:
            continue
        row.update(_verdict(line, run))
        n += 1
    res.save()
    return n


# ---------------------------------------------------------------- on Spark
def on_spark(chosen: list[Mutant], res: Results, a: argparse.Namespace, twins: list[str]) -> dict[str, str]:
    """The default campaigns of `chosen` as Spark tasks (`--workers N` started on this host,
    or `--master URL` whose executors see this host's /tmp): one campaign per twin, in the
    twins' order, of the rounds that still owe it a run, so a round caught by an earlier
    twin is not run again, as in the sequential path. {mutant: why its patch does not apply}."""
    from contextlib import ExitStack, nullcontext

    from harness.spark_standalone import standalone

    not_applied: dict[str, str] = {}
    with ExitStack() as stack:
        launchers = {}
        for m in chosen:
            if _rounds_left(m, res, a, twins):
                copy, err = stack.enter_context(mutated(m, a.base))
                if err is None:
                    launchers[m.name] = copy / "run-broker"
                else:
                    not_applied[m.name] = err
        if not launchers:
            return not_applied
        cluster = stack.enter_context(standalone(workers=a.workers) if a.workers else nullcontext(None))
        master = cluster.url if cluster is not None else a.master
        print(f"mutants: on Spark {master}", file=sys.stderr, flush=True)
        for twin in twins:
            owed = [(m, rnd) for m in chosen if m.name in launchers for rnd in _owed(m, res, a, twin)]
            if owed:
                twin_campaign(owed, twin, launchers, master, res, a)
    return not_applied


def twin_campaign(owed: list[tuple[Mutant, int]], twin: str, launchers: dict[str, Path], master: str,
                  res: Results, a: argparse.Namespace) -> None:
    """One Spark campaign: a cell (expect invalid) per owed round of `twin`, each run's row
    added to `res` as it comes back."""
    from harness import campaign as C
    from harness.options import SPEC
    from harness.progress import Progress
    from harness.spark_campaign import run_spark_campaign

    where: dict[str, tuple[Mutant, int, int]] = {}
    for m, rnd in owed:
        seed = twin_seed(rnd, twin)
        cell = C.Cell({"broker_command": [str(launchers[m.name])], "seed": seed, **TWINS[twin]}, "invalid")
        where[cell.key] = (m, rnd, seed)
    spec = C.CampaignSpec(f"mutants-{twin}", {"backend": "local", "collect_data": False},
                          [C.Cell(json.loads(k), "invalid") for k in where])

    def on_run(cell: Any, rep: int, rec: dict[str, Any]) -> None:
        if rec.get("error") == "interrupted":  # not a result: the run was cut short
            return
        m, rnd, seed = where[cell.key]
        t = _first_bad(rec)
        row = {"kind": "run", "mutant": m.name, "round": rnd, "twin": twin, "seed": seed,
               "wall_s": round(rec["wall_s"], 1), "load": loadavg(), "exit": rec.get("exit_code"),
               "verdict": rec["verdict"], "anomaly_types": rec["anomaly_types"],
               "first_anomaly_s": None if t is None else round(t / 1e9, 1), "error": rec.get("error"),
               "host": rec.get("host"), "retried": bool(rec.get("retried")), "run": rec.get("path")}
        res.add(row)
        said(row)

    cdir, results = run_spark_campaign(spec, master=master, root=a.out / "campaigns",
                                       overrides=SPEC.from_mapping({"time_limit": a.time_limit} if a.time_limit else {},
                                                                   "--time-limit"),
                                       on_run=on_run, progress=Progress(enabled=True, live=False),
                                       per_host=a.tests_per_host)
    if not a.keep:  # as the sequential path: only the folders of invalid runs stay
        for cell in results["cells"]:
            for r in cell["runs"]:
                if r["verdict"] != "invalid" and r.get("path"):
                    shutil.rmtree(cdir / r["path"], ignore_errors=True)


# ---------------------------------------------------------------- the table
def summarize(m: Mutant, res: Results, a: argparse.Namespace, not_applied: str | None,
              twins: list[str]) -> dict[str, Any]:
    """The row of `m`: rounds caught of its complete rounds (caught, or every twin of `twins`
    run), rounds begun but not complete (`pending`), times to the first anomaly, anomaly
    types, simulation."""
    runs = [r for r in res.runs(m.name) if r["round"] <= a.runs]
    begun = sorted({r["round"] for r in runs})
    caught = [rnd for rnd in begun if any(r["verdict"] == "invalid" for r in runs if r["round"] == rnd)]
    rounds = [rnd for rnd in begun if rnd in caught or set(twins) <= {r["twin"] for r in runs if r["round"] == rnd}]
    firsts = []
    for rnd in caught:
        hit = min((r for r in runs if r["round"] == rnd and r["verdict"] == "invalid"),
                  key=lambda r: list(TWINS).index(r["twin"]))
        if hit.get("first_anomaly_s") is not None:
            firsts.append(hit["first_anomaly_s"])
    sim = res.sim(m.name, a.sim_seeds)
    return {"mutant": m.name, "area": m.area, "equivalent": m.equivalent is not None, "rounds": len(rounds),
            "pending": len(begun) - len(rounds), "caught": len(caught), "first_anomaly_s": statistics.median(firsts) if firsts else None,
            "by_twin": sorted({r["twin"] for r in runs if r["verdict"] == "invalid"}, key=list(TWINS).index),
            "anomaly_types": sorted({t for r in runs if r["verdict"] == "invalid" for t in r["anomaly_types"]}),
            "errors": sum(r["verdict"] in ("crashed", "unknown") for r in runs),
            "sim_failed": ("crash" if sim.get("crashed") else sim["failed"]) if sim else None,
            "sim_seeds": a.sim_seeds if sim else None,
            "wall_s": round(sum(r["wall_s"] for r in runs) + (sim["wall_s"] if sim else 0), 1),
            "not_applied": not_applied, "resembles": m.resembles}


def fmt(x: Any) -> str:
    return "-" if x is None else (f"{x:.1f}" if isinstance(x, float) else str(x))


def totals(rows: list[dict[str, Any]], runs: int) -> dict[str, Any]:
    """The share of measured non-equivalent mutants caught in at least `runs` - 1 rounds of
    `runs` (2 of 3), and the median of their times to the first anomaly."""
    real = [r for r in rows if not r["equivalent"] and r["mutant"] != CONTROL and r["rounds"] >= runs]
    need = max(1, runs - 1)
    good = [r for r in real if r["caught"] >= need]
    times = [r["first_anomaly_s"] for r in real if r["first_anomaly_s"] is not None]
    return {"measured": len(real), "caught_enough": len(good), "need": need, "runs": runs,
            "share": round(len(good) / len(real), 3) if real else None,
            "median_first_anomaly_s": statistics.median(times) if times else None,
            "wall_s": round(sum(r["wall_s"] for r in rows), 1)}


def print_table(rows: list[dict[str, Any]], t: dict[str, Any]) -> None:
    w = max(len(r["mutant"]) for r in rows)
    print(f"{'mutant':{w}s}  {'area':24s}  caught  first anomaly (median s)  sim failed  wall s  twins; anomaly types")
    for r in rows:
        eq = " (equivalent)" if r["equivalent"] else ""
        if r["not_applied"]:
            print(f"{r['mutant']:{w}s}  {r['area']:24s}  does not apply: {r['not_applied']}")
            continue
        sim = f"{r['sim_failed']}/{r['sim_seeds']}" if r["sim_seeds"] else "-"
        print(f"{r['mutant']:{w}s}  {r['area']:24s}  {r['caught']:>2d}/{r['rounds']:<3d}  {fmt(r['first_anomaly_s']):>24s}"
              f"  {sim:>10s}  {fmt(r['wall_s']):>6s}  {','.join(r['by_twin']) or '-'}; "
              f"{', '.join(r['anomaly_types']) or 'none'}{eq}", flush=True)
    print(f"non-equivalent mutants caught in at least {t['need']} of {t['runs']} rounds: "
          f"{t['caught_enough']}/{t['measured']} ({fmt(None if t['share'] is None else 100 * t['share'])} %); "
          f"median time to the first anomaly {fmt(t['median_first_anomaly_s'])} s; "
          f"total wall {fmt(t['wall_s'])} s", flush=True)


def markdown(rows: list[dict[str, Any]], t: dict[str, Any]) -> str:
    out = ["| mutant | area | caught / rounds | first anomaly (median s) | twins that caught it | anomaly types | "
           "simulation (failed seeds) | resembles |", "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        if r["equivalent"]:
            continue
        sim = f"{r['sim_failed']}/{r['sim_seeds']}" if r["sim_seeds"] else "-"
        pending = f" (+{r['pending']} begun)" if r["pending"] else ""
        if not r["rounds"] and not r["pending"]:
            out.append(f"| `{r['mutant']}` | {r['area']} | not run yet | | | | - | {r['resembles']} |")
            continue
        out.append(f"| `{r['mutant']}` | {r['area']} | {r['caught']}/{r['rounds']}{pending} | {fmt(r['first_anomaly_s'])} | "
                   f"{', '.join(r['by_twin']) or '-'} | {', '.join(r['anomaly_types']) or '-'} | {sim} | "
                   f"{r['resembles']} |")
    out.append("")
    out.append(f"Non-equivalent mutants caught in at least {t['need']} of {t['runs']} rounds: "
               f"**{t['caught_enough']}/{t['measured']}**; median time to the first anomaly "
               f"**{fmt(t['median_first_anomaly_s'])} s**; wall time of the runs and simulations: "
               f"{fmt(t['wall_s'] / 3600 if t['wall_s'] else None)} h.")
    return "\n".join(out) + "\n"


# ---------------------------------------------------------------- main
def check(catalogue: dict[str, Mutant], base: str) -> int:
    """Apply each patch to a fresh copy; print which do not apply (exit 1 if any)."""
    bad = 0
    for m in catalogue.values():
        with mutated(m, base) as (_copy, err):
            print(f"{m.name}: {'applies' if err is None else 'DOES NOT APPLY: ' + err}")
            bad += err is not None
    print(f"{len(catalogue) - bad}/{len(catalogue)} patches apply to {base}")
    return 1 if bad else 0


def _hunks(patch: str) -> list[tuple[list[str], list[str]]]:
    """(old lines, new lines) of each hunk of a unified diff, context in both."""
    out: list[tuple[list[str], list[str]]] = []
    for line in patch.splitlines():
        if line.startswith("@@"):
            out.append(([], []))
        elif not out or line.startswith(("diff ", "index ", "--- ", "+++ ", "# ")):
            continue
        elif line.startswith("-"):
            out[-1][0].append(line[1:])
        elif line.startswith("+"):
            out[-1][1].append(line[1:])
        else:
            out[-1][0].append(line[1:])
            out[-1][1].append(line[1:])
    return out


def _locate(files: list[Path], old: list[str], new: list[str]) -> tuple[Path, str, str] | None:
    """The one file holding `old` once (context trimmed from the ends until it does)."""
    while old and new:
        o, n = "\n".join(old) + "\n", "\n".join(new) + "\n"
        hits = [f for f in files if f.read_text().count(o) == 1]
        if len(hits) == 1:
            return hits[0], o, n
        if len(old) > 1 and len(new) > 1 and old[-1] == new[-1]:
            old, new = old[:-1], new[:-1]
        elif len(old) > 1 and len(new) > 1 and old[0] == new[0]:
            old, new = old[1:], new[1:]
        else:
            return None
    return None


def rebase(catalogue: dict[str, Mutant], base: str) -> int:
    """Rewrite each patch against `base`: each hunk's text is looked up wherever it is now
    under broker/ (code moves between files), changed, and the patch made again with its
    header lines. Prints what moved and what was not found (exit 1 if any)."""
    bad = 0
    for m in catalogue.values():
        with tempfile.TemporaryDirectory(prefix="wrack-mutant-rebase-") as d:
            dest = Path(d)
            base_tree(dest, base)
            subprocess.run("git init -q && git add -A && git -c user.email=m@m -c user.name=m commit -qm base",
                           shell=True, cwd=dest, check=True)
            files = sorted((dest / "broker").rglob("*.py"))
            where = []
            for old, new in _hunks(m.patch):
                hit = _locate(files, old, new)
                if hit is None:
                    break
                f, o, n = hit
                f.write_text(f.read_text().replace(o, n))
                where.append(str(f.relative_to(dest)))
            else:
                diff = subprocess.run(["git", "diff"], cwd=dest, capture_output=True, text=True, check=True).stdout
                head = [line for line in m.patch.splitlines() if line.startswith("# ")]
                (CATALOGUE / f"{m.name}.patch").write_text("\n".join(head) + "\n" + diff)
                print(f"{m.name}: {', '.join(sorted(set(where)))}")
                continue
            bad += 1
            print(f"{m.name}: NOT FOUND in {base} (a hunk's text is gone: write the mutant again)")
    return 1 if bad else 0


def list_catalogue(catalogue: dict[str, Mutant]) -> None:
    by_area: dict[str, list[Mutant]] = {}
    for m in catalogue.values():
        by_area.setdefault(m.area, []).append(m)
    for area, ms in sorted(by_area.items()):
        print(f"{area} ({len(ms)}):")
        for m in ms:
            print(f"  {m.name}{' [equivalent]' if m.equivalent else ''}: {m.resembles}")
    eq = sum(m.equivalent is not None for m in catalogue.values())
    print(f"{len(catalogue)} mutants, {eq} argued equivalent")


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=None, help="where results.jsonl and the runs go (resumed if there)")
    ap.add_argument("--mutants", default=None, help="comma list of mutant names (default: all)")
    ap.add_argument("--runs", type=int, default=3, help="rounds of the default campaign per mutant (default 3)")
    ap.add_argument("--twins", default=",".join(DEFAULT_TWINS),
                    help=f"twins of a round, in order (default {','.join(DEFAULT_TWINS)}; fsync: "
                         "--flush-policy every --nemesis power-loss-many,partition, what a user testing "
                         "durability picks)")
    ap.add_argument("--sim-seeds", type=int, default=100, help="simulation seeds per mutant (default 100)")
    ap.add_argument("--no-sim", dest="sim", action="store_false", help="skip the simulation")
    ap.add_argument("--no-campaign", dest="campaign", action="store_false", help="skip the real runs")
    ap.add_argument("--time-limit", type=float, default=None, help="wrack test --time-limit (default: its own)")
    ap.add_argument("--all-twins", action="store_true", help="run every twin of a round, caught or not")
    ap.add_argument("--control", action="store_true", help="also measure the unmutated broker")
    ap.add_argument("--base", default="HEAD", help="the broker the mutants patch: a git revision or 'worktree'")
    ap.add_argument("--keep", action="store_true", help="keep the folders of valid runs too")
    ap.add_argument("--lock-scope", choices=("run", "mutant"), default="run",
                    help="hold the cluster lock (--lock) for each run (default) or for each mutant's whole campaign")
    ap.add_argument("--lock", default=LOCK, metavar="FILE",
                    help=f"the cluster lock (default {LOCK}: one cluster at a time on this machine; another "
                         "file lets two invocations share it, each with its own cluster)")
    ap.add_argument("--check", action="store_true", help="only check that every patch applies")
    ap.add_argument("--rebase", action="store_true",
                    help="rewrite every patch against --base, finding each hunk where its code moved")
    ap.add_argument("--list", action="store_true", help="only list the catalogue")
    ap.add_argument("--markdown", type=Path, default=None, help="also write the table as markdown to this file")
    ap.add_argument("--json", action="store_true", help="print the rows as JSON lines too")
    ap.add_argument("--reanalyze", action="store_true",
                    help="first check the kept runs in OUT again with the current checkers (wrack analyze)")
    ap.add_argument("--workers", type=int, default=0, metavar="N",
                    help="run the campaigns as Spark tasks on N 1-core workers started on this host")
    ap.add_argument("--master", default=None, metavar="URL",
                    help="run the campaigns as Spark tasks on this master (its executors must see /tmp)")
    ap.add_argument("--tests-per-host", type=int, default=None, metavar="N",
                    help="with Spark: at most N tests at once on a host (default: one per 2 of its cores)")
    return ap.parse_args(argv)


def _interrupted(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    # SIGTERM, and SIGINT where a shell started us in the background with it ignored, end the
    # run like Ctrl-C: the mutant copies (temporary folders) and the run in progress are removed
    signal.signal(signal.SIGTERM, _interrupted)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    a = parse(argv)
    try:
        catalogue = load_catalogue()
        if a.list:
            list_catalogue(catalogue)
            return 0
        if a.check:
            return check(catalogue, a.base)
        if a.rebase:
            return rebase(catalogue, a.base)
        chosen = pick(catalogue, a.mutants, a.control)
        twins = [x.strip() for x in a.twins.split(",") if x.strip()]
        bad = [t for t in twins if t not in TWINS]
        if bad or not twins:
            raise BadInput(f"--twins: unknown twin {bad[0] if bad else '(none)'!r} (known: {', '.join(TWINS)})")
        if a.runs < 1 or a.sim_seeds < 1:
            raise BadInput("--runs and --sim-seeds must be at least 1")
        if a.out is None:
            raise BadInput("--out DIR is needed (results are kept there and resumed)")
        if a.workers < 0 or (a.workers and a.master):
            raise BadInput("--workers N (N >= 1) or --master URL, not both")
    except BadInput as e:
        print(f"mutants: error: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    a.out.mkdir(parents=True, exist_ok=True)
    res = Results(a.out)
    print(f"mutants: {len(chosen)} to measure, {a.runs} round(s) of {','.join(twins)}, {a.sim_seeds} simulation "
          f"seeds; results in {a.out / 'results.jsonl'}; load average {loadavg()} at the start", file=sys.stderr)
    if a.reanalyze:
        n = reanalyze(res, {m.name for m in chosen})
        print(f"mutants: {n} kept run(s) checked again with the current checkers", file=sys.stderr)
    spark = bool(a.workers or a.master)
    try:
        not_applied = on_spark(chosen, res, a, twins) if spark and a.campaign else {}
        # on Spark the runs are done: what is left per mutant is its simulation, one at a time
        a_measure = argparse.Namespace(**{**vars(a), "campaign": False}) if spark else a
        rows = [summarize(m, res, a, not_applied.get(m.name) or measure(m, res, a_measure, twins), twins)
                for m in chosen]
    except KeyboardInterrupt:
        print(f"mutants: interrupted; the runs that ended are in {res.path} (run again to resume)", file=sys.stderr)
        return 130
    t = totals(rows, a.runs)
    print_table(rows, t)
    if a.markdown:
        a.markdown.write_text(markdown(rows, t))
    if a.json:
        for r in rows:
            print(json.dumps(r))
        print(json.dumps({"totals": t}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
