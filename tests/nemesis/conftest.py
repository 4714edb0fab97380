"""Fixtures: local clusters that are always removed (force_down in a finalizer), root only."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from clusters.testing import can_run_local, local_clusters


@pytest.fixture
def make_cluster() -> Iterator[Callable[..., object]]:
    """`make_cluster(nodes=3, transport="nsenter")` -> a LocalCluster removed after the test."""
    if not can_run_local():
        pytest.skip("needs root, iproute2 and util-linux (network namespaces)")
    with local_clusters() as make:
        yield make
