"""Shared fixtures: paths to the shared data and the project's executables; clusters (local
namespaces, containers) that are always removed (force_down in a finalizer); headless
Chromium that writes nothing outside a temp dir it removes."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SHARED = Path(os.environ.get("WRACK_SHARED", ROOT.parent / "shared"))
VENV_BIN = Path(sys.executable).parent


def wrack_bin() -> str:
    """The `wrack` console script of this environment."""
    p = VENV_BIN / "wrack"
    return str(p) if p.exists() else shutil.which("wrack") or "wrack"


@pytest.fixture(scope="session")
def shared() -> Path:
    if not SHARED.is_dir():
        pytest.skip(f"shared data not found at {SHARED}")
    return SHARED


def is_root() -> bool:
    return hasattr(os, "geteuid") and os.geteuid() == 0


@pytest.fixture
def make_cluster() -> Iterator[Callable[..., object]]:
    """`make_cluster(nodes=3, transport="nsenter")` -> a LocalCluster removed after the test (root only)."""
    from clusters.testing import can_run_local, local_clusters

    if not can_run_local():
        pytest.skip("needs root, iproute2 and util-linux (network namespaces)")
    with local_clusters() as make:
        yield make


@pytest.fixture(params=["local", pytest.param("docker", marks=pytest.mark.docker)])
def make_backend_cluster(request: pytest.FixtureRequest) -> Iterator[Callable[..., object]]:
    """`make_backend_cluster(nodes=3)` on every backend (namespaces, containers), removed after the test."""
    from clusters.testing import backend_clusters, backend_skip_reason

    reason = backend_skip_reason(request.param)
    if reason:
        pytest.skip(reason)
    with backend_clusters(request.param) as make:
        yield make


CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.fixture
def headless_chromium() -> Iterator[Callable[..., subprocess.CompletedProcess]]:
    """`run(*args, timeout=120, netns=False)`: headless Chromium with `args` (URL last).

    Offline: a dead proxy and no name resolution (with `netns`, also a network namespace of
    its own when `unshare -n` works). Its profile, cache and config (HOME, XDG_CACHE_HOME,
    XDG_CONFIG_HOME) live in one temp dir removed after the test: nothing lands in ~/.cache.
    """
    if CHROMIUM is None:
        pytest.skip("chromium is not installed")
    home = Path(tempfile.mkdtemp(prefix="wrack-chromium-"))
    env = {**os.environ, "HOME": str(home), "XDG_CACHE_HOME": str(home / "cache"),
           "XDG_CONFIG_HOME": str(home / "config")}
    runs = 0

    def run(*args: str, timeout: float = 120, netns: bool = False) -> subprocess.CompletedProcess:
        nonlocal runs
        runs += 1
        cmd = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
               "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-extensions",
               "--proxy-server=http://127.0.0.1:9", "--proxy-bypass-list=<-loopback>",
               "--host-resolver-rules=MAP * ~NOTFOUND", f"--user-data-dir={home / f'profile{runs}'}",
               f"--disk-cache-dir={home / 'cache'}", *args]
        if netns and subprocess.run(["unshare", "-n", "true"], capture_output=True).returncode == 0:
            cmd = ["unshare", "-n", *cmd]
        return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)

    try:
        yield run
    finally:
        shutil.rmtree(home, ignore_errors=True)
