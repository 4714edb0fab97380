"""The `fleet` fixture of the broker tests: a `BrokerFleet` for one test, closed after it
(every process killed, every directory removed), its temp dir named after the module."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from broker_procs import BrokerFleet


@pytest.fixture
def fleet(request: pytest.FixtureRequest) -> Iterator[BrokerFleet]:
    name = request.module.__name__.rpartition(".")[2].removeprefix("test_broker_")
    with BrokerFleet(prefix=f"wrack-test-{name}-") as f:
        yield f
