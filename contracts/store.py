"""The results store: one folder per run, found again by tools (docs/results.md).

    results/<test-name>/<YYYYmmddTHHMMSS.fff>/   test.json, history.jsonl, results.json,
                                                  plots/, report.html, nodes/<node>/
    results/<test-name>/latest -> <timestamp>

Contracts
- `new_run(root, name)` creates a fresh run folder (a unique UTC timestamp, bumped by 1 ms
  when taken) and points `latest` at it.
- A directory is a run folder iff it holds test.json or history.jsonl; `find_runs(paths)`
  walks the given paths recursively (not into `latest` links, no symlink loops) and yields
  every run folder once, newest first.
- `resolve_run(arg)` accepts a run folder, a `latest` link, or a test folder (its latest
  run), and raises `InputError` for anything else.
- `summarize(run)` reads test.json/results.json (both optional) into a `RunSummary`.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import platform
import re
import subprocess
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from contracts.errors import InputError

DEFAULT_ROOT = "results"
TS_FORMAT = "%Y%m%dT%H%M%S"
LATEST = "latest"
_SAFE = re.compile(r"[^A-Za-z0-9._+=-]+")


def results_root(root: str | os.PathLike[str] | None = None) -> Path:
    """The results root: `root`, else $WRACK_RESULTS, else ./results."""
    return Path(root or os.environ.get("WRACK_RESULTS") or DEFAULT_ROOT)


def safe_name(name: str) -> str:
    """A test name usable as one path component."""
    s = _SAFE.sub("_", name).strip("._") or "test"
    return s[:120]


def timestamp(t: dt.datetime) -> str:
    """`YYYYmmddTHHMMSS.fff` (UTC)."""
    t = t.astimezone(dt.UTC)
    return t.strftime(TS_FORMAT) + f".{t.microsecond // 1000:03d}"


def new_run(root: str | os.PathLike[str] | None, name: str, start: dt.datetime | None = None) -> Path:
    """Create `root/<name>/<timestamp>/` (unique) and point `latest` at it."""
    t = start or dt.datetime.now(dt.UTC)
    parent = results_root(root) / safe_name(name)
    parent.mkdir(parents=True, exist_ok=True)
    for _ in range(10_000):
        run = parent / timestamp(t)
        try:
            run.mkdir()
            break
        except FileExistsError:
            t += dt.timedelta(milliseconds=1)
    else:  # pragma: no cover - 10 000 runs in the same 10 s
        raise RuntimeError(f"no free run folder under {parent}")
    update_latest(run)
    return run


def update_latest(run: Path) -> None:
    """Point `<test folder>/latest` at `run` (atomically)."""
    link = run.parent / LATEST
    tmp = run.parent / f".{LATEST}.{os.getpid()}"
    try:
        if tmp.is_symlink():
            tmp.unlink()
        tmp.symlink_to(run.name)
        os.replace(tmp, link)
    except OSError:
        pass


def run_id(run: Path) -> str:
    """"<test-name>/<timestamp>" of a run folder."""
    run = Path(run).resolve()
    return f"{run.parent.name}/{run.name}"


def is_run(d: Path) -> bool:
    return (d / "test.json").is_file() or (d / "history.jsonl").is_file()


def find_runs(paths: Iterable[str | os.PathLike[str]]) -> list[Path]:
    """Every run folder below `paths` (see the module docstring), newest first."""
    seen: set[Path] = set()
    out: list[Path] = []
    for p in paths:
        for run in _walk(Path(p)):
            real = run.resolve()
            if real not in seen:
                seen.add(real)
                out.append(run)
    out.sort(key=lambda r: (r.name, str(r)), reverse=True)
    return out


def _walk(p: Path) -> Iterator[Path]:
    if not p.is_dir():
        return
    if is_run(p):
        yield p
        return
    stack = [p]
    visited: set[Path] = set()
    while stack:
        d = stack.pop()
        real = d.resolve()
        if real in visited:
            continue
        visited.add(real)
        try:
            children = sorted(d.iterdir())
        except OSError:
            continue
        for c in children:
            if c.name == LATEST or c.name.startswith("."):
                continue
            if c.is_dir():
                if is_run(c):
                    yield c
                else:
                    stack.append(c)


def resolve_run(arg: str | os.PathLike[str]) -> Path:
    """A run folder from a run folder, a `latest` link or a test folder (its latest run)."""
    p = Path(arg)
    if not p.exists():
        # a test name inside the default root
        cand = results_root() / str(arg)
        if cand.exists():
            p = cand
        else:
            raise InputError("no such run folder", str(arg))
    if p.is_dir() and is_run(p):
        return p.resolve() if p.is_symlink() else p
    if (p / LATEST).exists() and is_run(p / LATEST):
        return (p / LATEST).resolve()
    runs = find_runs([p]) if p.is_dir() else []
    if len(runs) == 1:
        return runs[0]
    if runs:
        raise InputError(f"{len(runs)} runs below this folder; name one of them", str(arg))
    raise InputError("not a run folder (no test.json or history.jsonl)", str(arg))


# --------------------------------------------------------------------------- metadata


def versions() -> dict[str, str]:
    """Versions of what ran the test: wrack, python, the Kafka clients."""
    out = {"python": platform.python_version()}
    try:
        # lazy: importlib.metadata takes ~20 ms; `wrack` imports this module at every start
        from importlib.metadata import version

        out["wrack"] = version("wrack")
    except Exception:  # noqa: BLE001 - not installed (a source checkout)
        out["wrack"] = "unknown"
    try:
        # lazy: optional client (ImportError: left out), 30 ms
        import confluent_kafka

        v, lv = confluent_kafka.version(), confluent_kafka.libversion()
        out["confluent_kafka"] = v if isinstance(v, str) else v[0]
        out["librdkafka"] = lv if isinstance(lv, str) else lv[0]
    except ImportError:
        pass
    try:
        # lazy: optional client (ImportError: left out), 0.2 s
        import kafka

        out["kafka_python"] = kafka.__version__
    except ImportError:
        pass
    return out


def git_info(cwd: str | os.PathLike[str] | None = None) -> dict[str, Any]:
    """{"rev": commit or None, "dirty": bool} of the checkout the harness runs from."""
    here = cwd or Path(__file__).resolve().parent.parent
    try:
        rev = subprocess.run(["git", "rev-parse", "HEAD"], cwd=here, capture_output=True, text=True,
                             timeout=10).stdout.strip() or None
        dirty = bool(subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=here,
                                    capture_output=True, text=True, timeout=10).stdout.strip())
    except (OSError, subprocess.SubprocessError):
        return {"rev": None, "dirty": False}
    return {"rev": rev, "dirty": dirty}


def write_json(path: Path, obj: Any) -> None:
    """Write JSON atomically (tmp + rename)."""
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(obj, indent=2, sort_keys=False, default=str) + "\n")
    os.replace(tmp, path)


def read_json(path: Path) -> Any:
    """The JSON in `path`, or None when it is missing or unreadable."""
    try:
        return json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return None


@dataclass
class RunSummary:
    """One line of a run listing (serve, campaigns)."""

    path: str
    run_id: str
    name: str
    start: str | None
    valid: Any  # True | False | "unknown" | None (never checked)
    options: dict[str, Any] = field(default_factory=dict)
    anomaly_types: list[str] = field(default_factory=list)
    seed: int | None = None
    has_report: bool = False

    def verdict(self) -> str:
        if self.valid is True:
            return "valid"
        if self.valid is False:
            return "invalid"
        if self.valid is None:
            return "unchecked"
        return "unknown"

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "verdict": self.verdict()}


def summarize(run: Path) -> RunSummary:
    test = read_json(run / "test.json")
    test = test if isinstance(test, dict) else {}
    res = read_json(run / "results.json")
    res = res if isinstance(res, dict) else None
    options = test.get("options")
    return RunSummary(
        path=str(run), run_id=test.get("run_id") or run_id(run), name=test.get("name") or run.parent.name,
        start=test.get("start"), valid=None if res is None else res.get("valid", "unknown"),
        options=options if isinstance(options, dict) else {},
        anomaly_types=list((res or {}).get("anomaly_types") or []), seed=test.get("seed"),
        has_report=(run / "report.html").is_file())
