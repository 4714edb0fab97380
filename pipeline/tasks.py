"""Spark jobs of one task per item (a run to ingest, a run to check), the biggest first."""

from __future__ import annotations

from typing import Any


def one_each(spark: Any, rows: list[tuple[Any, ...]], schema: str) -> Any:
    """A DataFrame of `rows` (DDL `schema`), one partition per row, in the order given: the
    tasks start in that order, so put the longest first."""
    df = spark.createDataFrame([(i, *r) for i, r in enumerate(rows)], "_pos int, " + schema)
    return df.repartitionByRange(max(1, len(rows)), "_pos").drop("_pos")
