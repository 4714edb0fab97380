"""Fixtures: local clusters that are always removed (force_down in a finalizer), root only."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from clusters.testing import backend_clusters, backend_skip_reason, can_run_local, local_clusters


@pytest.fixture
def make_cluster() -> Iterator[Callable[..., object]]:
    """`make_cluster(nodes=3, transport="nsenter")` -> a LocalCluster removed after the test."""
    if not can_run_local():
        pytest.skip("needs root, iproute2 and util-linux (network namespaces)")
    with local_clusters() as make:
        yield make


@pytest.fixture(params=["local", pytest.param("docker", marks=pytest.mark.docker)])
def make_backend_cluster(request: pytest.FixtureRequest) -> Iterator[Callable[..., object]]:
    """`make_backend_cluster(nodes=3)` on every backend (namespaces, containers), removed after the test."""
    reason = backend_skip_reason(request.param)
    if reason:
        pytest.skip(reason)
    with backend_clusters(request.param) as make:
        yield make
