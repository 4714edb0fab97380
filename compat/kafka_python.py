"""kafka-python 3.0.11's `test/integration` against a running cluster.

The suite's fixtures use an external broker when `KAFKA_URI=kafka://host:port` is set
(`kafka_broker_factory` in its conftest: no JVM, no ZooKeeper), so it runs unchanged from
a copy of `test/` in a temp dir (the tree is kept in the shared folder beside the
checkout, as data/kafka-python-3.0.11: the PyPI sdist leaves parts of it out). `KAFKA_VERSION=3.7.0` is the version it tests as.

The library is the one the suite belongs to: a venv under the cache dir holds the
`compat` extra of pyproject.toml (kafka-python==3.0.11 with its codecs, pytest and the
plugins the suite uses), made once and remade when that list changes. The project's own
venv keeps whatever kafka-python the harness uses.

Cases are named by pytest node id below `test/integration/`, e.g.
`test_admin_integration.py::test_delete_records`; outcomes come from pytest's JUnit XML
(an error in setup or teardown is a failure).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
import tomllib
import xml.etree.ElementTree as ET
from pathlib import Path

from compat.verdict import FAILED, PASSED, SKIPPED, Case, SuiteRun

SUITE = "kafka-python"
ROOT = Path(__file__).resolve().parent.parent
KAFKA_VERSION = "3.7.0"


def tests_dir() -> Path:
    """The folder holding the suite's `test/` package: data/kafka-python-3.0.11 in the shared
    folder beside the repo (WRACK_SHARED names another, as for the tests)."""
    return Path(os.environ.get("WRACK_SHARED", ROOT.parent / "shared")) / "data" / "kafka-python-3.0.11"


def requirements() -> list[str]:
    """pyproject.toml's `compat` extra: what the suite's venv holds."""
    data = tomllib.loads((ROOT / "pyproject.toml").read_text())
    return list(data["project"]["optional-dependencies"]["compat"])


def ensure_venv(cache: Path) -> Path:
    """The suite venv's python, made (or remade) so that it holds `requirements()`."""
    reqs = requirements()
    venv = cache / "kafka-python-venv"
    stamp = venv / ".wrack-compat-stamp"
    want = hashlib.sha256("\n".join(reqs).encode()).hexdigest()[:16]
    python = venv / "bin" / "python"
    if python.exists() and stamp.exists() and stamp.read_text() == want:
        return python
    shutil.rmtree(venv, ignore_errors=True)
    print(f"compat: making {venv} ({', '.join(reqs)})", flush=True)
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    subprocess.run([str(python), "-m", "pip", "install", "-q", *reqs], check=True)
    stamp.write_text(want)
    return python


def run(python: Path, bootstrap: str, nodes: int, logs: Path, timeout: int = 60,
        select: list[str] | None = None) -> SuiteRun:
    """The suite (or the node ids in `select`) against the cluster at `bootstrap`
    (its first address is the suite's KAFKA_URI); pytest's output goes to logs/pytest.out."""
    run_ = SuiteRun(SUITE, nodes)
    src = tests_dir() / "test"
    if not (src / "integration").is_dir():
        run_.error = f"kafka-python's suite not found at {src} (set WRACK_SHARED)"
        return run_
    logs.mkdir(parents=True, exist_ok=True)
    start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="wrack-compat-kp-") as tmp:
        shutil.copytree(src, Path(tmp) / "test")
        (Path(tmp) / "kafka-root").mkdir()
        xml = logs / "junit.xml"
        targets = [f"test/integration/{t}" for t in select] if select else ["test/integration"]
        args = [str(python), "-m", "pytest", *targets, "-p", "no:cacheprovider", f"--timeout={timeout}",
                "--timeout-method=signal", "-q", "-rfEs", f"--junitxml={xml}"]
        env = {**os.environ, "KAFKA_VERSION": KAFKA_VERSION, "KAFKA_URI": f"kafka://{bootstrap.split(',')[0]}",
               "KAFKA_ROOT": str(Path(tmp) / "kafka-root"), "PYTHONDONTWRITEBYTECODE": "1"}
        env.pop("PYTHONPATH", None)
        with open(logs / "pytest.out", "wb") as out:
            proc = subprocess.run(args, cwd=tmp, env=env, stdout=out, stderr=subprocess.STDOUT)
    run_.seconds = time.monotonic() - start
    run_.logs = str(logs)
    if not xml.exists():
        run_.error = f"pytest exited with {proc.returncode} and wrote no report (see {logs / 'pytest.out'})"
        return run_
    run_.cases = parse_junit(xml.read_text())
    return run_


def parse_junit(text: str) -> list[Case]:
    """Cases from pytest's JUnit XML, named by node id below test/integration/."""
    cases = []
    for tc in ET.fromstring(text).iter("testcase"):
        parts = (tc.get("classname") or "").split(".")
        if parts[:2] == ["test", "integration"]:
            parts = parts[2:]
        test = "::".join([parts[0] + ".py", *parts[1:], tc.get("name", "")]) if parts else tc.get("name", "")
        outcome, message = PASSED, ""
        for child in tc:
            if child.tag in ("failure", "error"):
                outcome, message = FAILED, child.get("message") or (child.text or "").strip()
                break
            if child.tag == "skipped":
                outcome, message = SKIPPED, child.get("message") or ""
        cases.append(Case(test, outcome, message))
    return cases
