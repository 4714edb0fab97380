"""Shared fixtures: paths to the shared data and the project's executables; clusters (local
namespaces, containers) that are always removed (force_down in a finalizer)."""

from __future__ import annotations

import os
import shutil
import sys
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
