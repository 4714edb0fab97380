"""librdkafka's own test suite, from Debian's `librdkafka` source package, against a cluster.

Preparing (once, cached under the cache dir):
1. `deploy/compat-debian-packages.txt` (the build dependencies) installed if missing;
2. `apt-get source librdkafka` with a private apt state: deb-src twins of the machine's own
   apt sources, lists in the cache dir (the system's apt configuration is left alone);
   on Debian 12 that is librdkafka 2.0.2, whose tree carries `tests/`;
3. `./configure`, `make libs`, `make -C tests build` (the `test-runner` binary).

Running: one `test-runner -Q -E -L` process per test number (quick mode, no sockem,
no local-only tests) with `TESTS=<number>`, a `test.conf` naming the cluster's brokers
and `TEST_KAFKA_VERSION=3.7.0`, `jobs` processes at a time. One process per test keeps a
crash or a hang to that test (2.0.2's runner miscounts its running tests after some
failures and stops early when run as one process). Cases are the runner's test names
(`0044_partition_cnt`); tests it filters out as local-only or sockem are left out;
skips keep the runner's reason.
"""

from __future__ import annotations

import os
import re
import subprocess
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from compat.verdict import FAILED, PASSED, SKIPPED, Case, SuiteRun

SUITE = "librdkafka"
ROOT = Path(__file__).resolve().parent.parent
PACKAGES_FILE = ROOT / "deploy" / "compat-debian-packages.txt"
KAFKA_VERSION = "3.7.0"
RUNNER_ARGS = ["-Q", "-E", "-L"]
LEFT_OUT = "Filtered due to negative test flags"  # local-only or sockem tests (-L, -E)
OTHER_SCENARIO = "needs another test scenario"  # the runner's silent skip
# The broker settings of the scenarios other than "default" (tests/scenarios/*.json).
SCENARIOS = {"noautocreate": {"auto.create.topics.enable": "false"}}
# What the suite's own clusters have that kafka-python's test config changes: Kafka's default
# initial rebalance delay. With 0, the second of two consumers created together may find
# the first alone in a generation, waiting for its application to take the assignment, and
# the rebalance then waits for a consumer the test does not poll (0118, 0089: flaky at 0).
SUITE_SETTINGS = {"group.initial.rebalance.delay.ms": "3000"}


# ---------------------------------------------------------------- preparing

def missing_packages(list_file: Path = PACKAGES_FILE) -> list[str]:
    """Packages of the list (one a line, # comments) that dpkg does not have installed."""
    out = []
    for line in list_file.read_text().splitlines():
        pkg = line.split("#")[0].strip()
        if not pkg:
            continue
        st = subprocess.run(["dpkg-query", "-W", "-f=${Status}", pkg], capture_output=True, text=True)
        if st.stdout.strip() != "install ok installed":
            out.append(pkg)
    return out


def ensure_packages(list_file: Path = PACKAGES_FILE) -> None:
    missing = missing_packages(list_file)
    if not missing:
        return
    print(f"compat: installing Debian packages: {' '.join(missing)}", flush=True)
    sudo = [] if os.geteuid() == 0 else ["sudo"]
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    subprocess.run([*sudo, "apt-get", "update", "-qq"], check=True, env=env)
    subprocess.run([*sudo, "apt-get", "install", "-y", "-qq", "--no-install-recommends", *missing],
                   check=True, env=env, stdout=subprocess.DEVNULL)


def deb_src_one_line(text: str) -> str:
    """The `deb-src` twins of a one-line-style sources.list's `deb` lines."""
    return "".join(re.sub(r"^\s*deb\s", "deb-src ", ln) + "\n" for ln in text.splitlines()
                   if re.match(r"^\s*deb\s", ln))


def deb_src_deb822(text: str) -> str:
    """The `deb-src` twins of a deb822 .sources file's enabled `deb` stanzas."""
    out = []
    for stanza in re.split(r"\n\s*\n", text):
        lines = [ln for ln in stanza.splitlines() if not ln.lstrip().startswith("#")]
        fields = {ln.split(":", 1)[0].strip().lower(): ln.split(":", 1)[1].strip() for ln in lines if ":" in ln
                  and not ln.startswith((" ", "\t"))}
        if "deb" not in fields.get("types", "").split() or fields.get("enabled", "yes").lower() == "no":
            continue
        out.append("\n".join("Types: deb-src" if ln.lower().startswith("types:") else ln for ln in lines))
    return "\n\n".join(out) + ("\n" if out else "")


def apt_options(cache: Path, etc: Path = Path("/etc/apt")) -> list[str]:
    """apt-get options for a private source-only apt state under cache/apt, its sources
    the deb-src twins of the machine's own (written here)."""
    apt = cache / "apt"
    parts = apt / "sources.list.d"
    (apt / "lists" / "partial").mkdir(parents=True, exist_ok=True)
    parts.mkdir(parents=True, exist_ok=True)
    one_line = [etc / "sources.list", *sorted((etc / "sources.list.d").glob("*.list"))]
    (apt / "sources.list").write_text("".join(deb_src_one_line(f.read_text()) for f in one_line if f.is_file()))
    for f in parts.glob("*.sources"):
        f.unlink()
    for f in sorted((etc / "sources.list.d").glob("*.sources")):
        text = deb_src_deb822(f.read_text())
        if text:
            (parts / f.name).write_text(text)
    return ["-o", f"Dir::Etc::SourceList={apt / 'sources.list'}", "-o", f"Dir::Etc::SourceParts={parts}",
            "-o", f"Dir::State::Lists={apt / 'lists'}", "-o", "Dir::Cache::pkgcache=",
            "-o", "Dir::Cache::srcpkgcache=", "-o", "APT::Sandbox::User=root"]


def source_tree(cache: Path) -> Path | None:
    trees = sorted((cache / "src").glob("librdkafka-*/tests"))
    return trees[-1].parent if trees else None


def fetch_source(cache: Path) -> Path:
    """The unpacked source tree of Debian's librdkafka (fetched once)."""
    tree = source_tree(cache)
    if tree is not None:
        return tree
    opts = apt_options(cache)
    print("compat: apt-get source librdkafka", flush=True)
    subprocess.run(["apt-get", *opts, "update", "-qq"], check=True)
    (cache / "src").mkdir(parents=True, exist_ok=True)
    subprocess.run(["apt-get", *opts, "source", "-qq", "librdkafka"], check=True, cwd=cache / "src")
    tree = source_tree(cache)
    if tree is None:
        raise RuntimeError(f"apt-get source librdkafka left no librdkafka-*/tests under {cache / 'src'}")
    return tree


def build(tree: Path, jobs: int = 2) -> Path:
    """The tree's test-runner, built once (librdkafka, then the tests); logs in tree/.wrack-build.log."""
    runner = tree / "tests" / "test-runner"
    stamp = tree / ".wrack-built"
    if stamp.exists() and runner.exists():
        return runner
    print(f"compat: building {tree.name} and its test-runner (a few minutes)", flush=True)
    with open(tree / ".wrack-build.log", "wb") as log:
        for cmd, cwd in ((["./configure"], tree), (["make", f"-j{jobs}", "libs"], tree),
                         (["make", f"-j{jobs}", "build"], tree / "tests")):
            if subprocess.run(["nice", "-n", "19", *cmd], cwd=cwd, stdout=log, stderr=subprocess.STDOUT).returncode:
                raise RuntimeError(f"{' '.join(cmd)} failed in {cwd} (see {tree / '.wrack-build.log'})")
    stamp.write_text("ok\n")
    return runner


def prepare(cache: Path) -> Path:
    """The test-runner of Debian's librdkafka, installing, fetching and building as needed."""
    ensure_packages()
    return build(fetch_source(cache))


# ---------------------------------------------------------------- running

def test_numbers(tree: Path) -> list[str]:
    """The automated tests' numbers (0000-0999) of the tree's tests/ folder."""
    names = (p.name for p in (tree / "tests").iterdir())
    return sorted({n[:4] for n in names if re.match(r"^0\d{3}-.*\.(c|cpp)$", n)})


def scenarios(tree: Path) -> dict[str, str]:
    """Test name -> its scenario, for the tests of tests/test.c that name one (default: "default")."""
    text = (tree / "tests" / "test.c").read_text(errors="replace")
    entry = re.compile(r'_TEST\((\w+),(?:(?!_TEST\()[^;])*?\.scenario\s*=\s*"([^"]+)"')
    return {m.group(1): m.group(2) for m in entry.finditer(text)}


def run(runner: Path, bootstrap: str, nodes: int, logs: Path, jobs: int = 4, numbers: list[str] | None = None,
        timeout: float = 300.0, scenario: str = "default") -> SuiteRun:
    """The tests `numbers` (default: all) of `scenario` against the cluster at `bootstrap`,
    `jobs` at a time; each test's stdout/stderr in logs/<number>.out/.err. Tests of another
    scenario are skipped, their reason naming it."""
    tree = runner.parent.parent
    numbers = numbers or test_numbers(tree)
    logs.mkdir(parents=True, exist_ok=True)
    start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="wrack-compat-rdk-") as tmp:
        conf = Path(tmp) / "test.conf"
        conf.write_text(f"bootstrap.servers={bootstrap}\ntest.topic.random=true\n")
        (Path(tmp) / "src").symlink_to(tree / "src")  # tests open ../src/statistics_schema.json
        env = {**os.environ, "RDKAFKA_TEST_CONF": str(conf), "TEST_KAFKA_VERSION": KAFKA_VERSION,
               "LD_LIBRARY_PATH": f"{tree / 'src'}:{tree / 'src-cpp'}"}

        def one(number: str) -> list[Case]:
            cwd = Path(tmp) / number
            cwd.mkdir()
            return run_one(runner, number, {**env, "TESTS": number, "TEST_SCENARIO": scenario}, cwd, logs, timeout)

        pool = ThreadPoolExecutor(max_workers=jobs)
        try:
            results = list(pool.map(one, numbers))
        finally:  # on Ctrl-C too: no test-runner outlives the run
            pool.shutdown(wait=False, cancel_futures=True)
            for p in list(_live):
                p.kill()
            pool.shutdown(wait=True)
    named = scenarios(tree)
    cases = [Case(c.test, c.outcome, f"scenario {named.get(c.test, '?')}") if c.message == OTHER_SCENARIO else c
             for cs in results for c in cs]
    return SuiteRun(SUITE, nodes, cases, time.monotonic() - start, logs=str(logs))


_live: set[subprocess.Popen] = set()


def run_one(runner: Path, number: str, env: dict[str, str], cwd: Path, logs: Path, timeout: float) -> list[Case]:
    out_path, err_path = logs / f"{number}.out", logs / f"{number}.err"
    with open(out_path, "wb") as out, open(err_path, "wb") as err:
        # line-buffered stdout: the summary survives the abort() that follows a leak of threads
        proc = subprocess.Popen(["stdbuf", "-oL", str(runner), *RUNNER_ARGS], cwd=cwd, env=env, stdout=out, stderr=err,
                                start_new_session=True)
        _live.add(proc)
        try:
            rc = proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            rc = None
        finally:
            _live.discard(proc)
    return parse_run(number, out_path.read_text(errors="replace"), err_path.read_text(errors="replace"), rc, timeout)


ANSI = re.compile(r"\x1b\[[0-9;]*m")
SUMMARY = re.compile(r"^\|\s*(?P<name>\d{4}_\S+)\s*\|\s*(?P<state>PASSED|FAILED|SKIPPED|RUNNING|DNS)\s*\|"
                     r"\s*[\d.]+s\s*\|\s?(?P<msg>.*)$")
STARTED = re.compile(r"=+ Running test (\d{4}_\S+) =+")
PASSED_LINE = re.compile(r"=+ Test (\d{4}_\S+) PASSED =+")
FAIL_BLOCK = re.compile(r'### Test "(\d{4}_[^" (]+)[^"]*" failed at [^\n]*###\n([^\n]*)')


def parse_run(number: str, stdout: str, stderr: str, rc: int | None, timeout: float) -> list[Case]:
    """One test-runner process's cases: from its summary table, or, when it died before
    printing one (abort, signal, our timeout), from the tests it started and passed."""
    stdout, stderr = ANSI.sub("", stdout), ANSI.sub("", stderr)
    cases = [c for ln in stdout.splitlines() if (c := summary_case(ln)) is not None]
    fails = {m.group(1): m.group(2).strip() for m in FAIL_BLOCK.finditer(stderr)}
    if cases:  # a timed-out test is in the summary before its failure is recorded
        return [Case(c.test, c.outcome, fails.get(c.test, "failed")) if c.outcome == FAILED and not c.message
                else c for c in cases]
    died = f"timed out after {timeout:.0f} s (killed)" if rc is None else f"test-runner exited with {rc}"
    passed = set(PASSED_LINE.findall(stderr))
    started = list(dict.fromkeys(STARTED.findall(stderr)))
    out = [Case(n, PASSED) if n in passed else Case(n, FAILED, fails.get(n) or died) for n in started]
    if not out and rc != 0:
        out.append(Case(number, FAILED, died))
    return out


def summary_case(line: str) -> Case | None:
    m = SUMMARY.match(line.strip())
    if m is None:
        return None
    name, state, msg = m.group("name"), m.group("state"), m.group("msg").strip()
    if state == "PASSED":
        return Case(name, PASSED)
    if state == "FAILED":
        return Case(name, FAILED, msg)  # empty for a timeout: parse_run fills it in
    if state == "RUNNING":
        return Case(name, FAILED, "still running when the test-runner stopped")
    if LEFT_OUT in msg or state == "DNS":
        return None
    return Case(name, SKIPPED, msg or OTHER_SCENARIO)
