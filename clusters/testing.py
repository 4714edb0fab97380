"""Helpers for tests on real local clusters (any part's tests may use them).

`local_clusters()` is a context manager yielding `make(nodes=3, transport="nsenter")`;
every cluster it made is force-removed on exit, even when the test failed.
`can_run_local()` says whether this process may create local clusters (root + iproute2).
`docker_clusters()` does the same with docker clusters (`can_run_docker()`: a daemon
answers), and `backend_clusters(backend)` picks one of the two by name, so a test can be
parametrized over backends; `backend_skip_reason(backend)` says why a backend cannot run.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import uuid
from collections.abc import Callable, Iterator

from clusters import docker, local
from clusters.node import Cluster, ClusterSpec


def can_run_local() -> bool:
    return hasattr(os, "geteuid") and os.geteuid() == 0 and shutil.which("ip") is not None \
        and shutil.which("nsenter") is not None and shutil.which("unshare") is not None


@contextlib.contextmanager
def local_clusters(prefix: str = "t") -> Iterator[Callable[..., local.LocalCluster]]:
    made: list[str] = []

    def make(nodes: int = 3, transport: str = "nsenter") -> local.LocalCluster:
        name = f"{prefix}{uuid.uuid4().hex[:8]}"
        made.append(name)
        return local.create(ClusterSpec(name=name, nodes=nodes, transport=transport))

    try:
        yield make
    finally:
        for name in made:
            local.force_down(name)


def can_run_docker() -> bool:
    return docker.available()


def backend_skip_reason(backend: str) -> str | None:
    """Why clusters of `backend` cannot be made here, or None when they can."""
    if backend == "local":
        return None if can_run_local() else "needs root, iproute2 and util-linux (network namespaces)"
    if backend == "docker":
        return None if can_run_docker() else "no Docker daemon answers"
    return f"no test clusters for backend {backend!r}"


@contextlib.contextmanager
def docker_clusters(prefix: str = "t") -> Iterator[Callable[..., Cluster]]:
    """Like `local_clusters`, with containers (the first call may build the node image)."""
    made: list[str] = []

    def make(nodes: int = 3, transport: str = "nsenter") -> Cluster:
        name = f"{prefix}{uuid.uuid4().hex[:8]}"
        made.append(name)
        return docker.create(ClusterSpec(name=name, nodes=nodes, transport=transport))

    try:
        yield make
    finally:
        for name in made:
            docker.force_down(name)


def backend_clusters(backend: str, prefix: str = "t") -> contextlib.AbstractContextManager[Callable[..., Cluster]]:
    """`local_clusters` or `docker_clusters` by backend name."""
    if backend == "local":
        return local_clusters(prefix)
    if backend == "docker":
        return docker_clusters(prefix)
    raise ValueError(f"no test clusters for backend {backend!r}")
