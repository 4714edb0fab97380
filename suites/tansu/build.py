"""Tansu's binary: built from its cargo package on first use, then cached.

`binary(version)` is where the build of `version` lives: `~/.cache/wrack/tansu/VERSION/bin/tansu`
(`$XDG_CACHE_HOME` is honoured; `WRACK_TANSU_CACHE` overrides the whole cache folder).
`ensure(version)` returns it, building it first when it is missing with

    cargo install tansu --version VERSION --locked --features postgres --root CACHE/VERSION

(PostgreSQL is a cargo feature of the crate; its default features have no storage engine
we use). The build runs under a file lock, so two tests that start at once build once; its
output goes to CACHE/VERSION/build.log. On this 2-core machine a fresh build took 10 min
unloaded and about 50 min at a load average of 10-15 (docs/tansu.md, "Build"). A machine
without cargo, or a build that fails, raises `BuildError` naming the log.

`python -m suites.tansu.build [VERSION]` builds (or finds) it and prints the path and the time
taken: .ci/run calls it before the test suite, so the build is not charged to one test.
"""

from __future__ import annotations

import argparse
import fcntl
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

VERSION = "0.6.0"


class BuildError(RuntimeError):
    """Tansu could not be built (no cargo, or cargo failed: see the log named)."""


def cache_root() -> Path:
    if os.environ.get("WRACK_TANSU_CACHE"):
        return Path(os.environ["WRACK_TANSU_CACHE"])
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "wrack" / "tansu"


def binary(version: str = VERSION) -> Path:
    """Where the build of `version` is (whether or not it exists yet)."""
    return cache_root() / version / "bin" / "tansu"


def cargo() -> str | None:
    """The cargo to build with: on PATH, else rustup's default place."""
    found = shutil.which("cargo")
    if found:
        return found
    home = Path(os.environ.get("CARGO_HOME") or Path.home() / ".cargo") / "bin" / "cargo"
    return str(home) if home.exists() else None


def ensure(version: str = VERSION, *, quiet: bool = True) -> Path:
    """The binary of `version`, built first if missing (module docstring); BuildError if it cannot be."""
    exe = binary(version)
    if exe.exists():
        return exe
    root = exe.parent.parent
    root.mkdir(parents=True, exist_ok=True)
    with open(root / "build.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another test may be building it: wait for that build
        if exe.exists():
            return exe
        tool = cargo()
        if tool is None:
            raise BuildError(f"Tansu {version} is not built ({exe}) and there is no cargo to build it")
        log = root / "build.log"
        argv = [tool, "install", "tansu", "--version", version, "--locked", "--features", "postgres",
                "--root", str(root)]
        if not quiet:
            print(f"building Tansu {version}: {' '.join(argv)} (log: {log})", file=sys.stderr, flush=True)
        with open(log, "w") as out:
            out.write(" ".join(argv) + "\n")
            out.flush()
            rc = subprocess.run(argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL).returncode
        if rc != 0 or not exe.exists():
            raise BuildError(f"building Tansu {version} failed (cargo exit {rc}); see {log}")
    return exe


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m suites.tansu.build", description=__doc__.split("\n\n")[0])
    p.add_argument("version", nargs="?", default=VERSION)
    a = p.parse_args(argv)
    t0 = time.monotonic()
    try:
        exe = ensure(a.version, quiet=False)
    except BuildError as e:
        print(f"tansu build: {e}", file=sys.stderr)
        return 1
    load = Path("/proc/loadavg").read_text().split()[:3] if Path("/proc/loadavg").exists() else []
    print(f"tansu {a.version}: {exe} ({time.monotonic() - t0:.0f} s; load average {' '.join(load)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
