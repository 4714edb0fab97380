"""Spark jobs of one task per item (a run to ingest, a run to check), the biggest first."""

from __future__ import annotations

from typing import Any

from pyspark.sql import functions as F


def one_each(spark: Any, rows: list[tuple[Any, ...]], schema: str) -> Any:
    """A DataFrame of `rows` (DDL `schema`, "name type, ..."), one partition per row, in the
    order given: the tasks start in that order, so put the longest first.

    Built from `spark.range` with one partition per id and the values as literal arrays
    indexed by the id: the JVM alone makes it, no Python worker turns rows into a DataFrame
    and no shuffle places them (createDataFrame + repartitionByRange cost seconds of both
    before the first task started)."""
    fields = [f.strip().split(None, 1) for f in schema.split(",")]
    pos = (F.col("id") + 1).cast("int")
    cols = [F.element_at(F.array(*[F.lit(r[j]) for r in rows]).cast(f"array<{typ}>"), pos).alias(name)
            for j, (name, typ) in enumerate(fields)]
    return spark.range(0, len(rows), 1, max(1, len(rows))).select(*cols)
