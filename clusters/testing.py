"""Helpers for tests on real local clusters (any part's tests may use them).

`local_clusters()` is a context manager yielding `make(nodes=3, transport="nsenter")`;
every cluster it made is force-removed on exit, even when the test failed.
`can_run_local()` says whether this process may create local clusters (root + iproute2).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import uuid
from collections.abc import Callable, Iterator

from clusters import local
from clusters.node import ClusterSpec


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
