"""Fixtures of the pipeline tests: one local SparkSession for the whole test session.

The project root goes first on sys.path: with `.venv/bin/pytest` (no cwd on the path),
`tests/checkers/` would otherwise shadow the `checkers` package as a namespace package.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

ROOT = str(Path(__file__).resolve().parents[2])
if sys.path[:1] != [ROOT]:
    sys.path.insert(0, ROOT)


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    """A real local[2] Spark session, shared by every Spark test (stopped at the end)."""
    from pipeline.session import session

    # Small test data: few shuffle partitions keep the task count (and the runtime) down.
    with session("local[2]", progress=False, conf={"spark.sql.shuffle.partitions": "4"}) as s:
        yield s
