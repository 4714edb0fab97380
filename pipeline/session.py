"""Spark sessions for the pipeline: local by default, a cluster with a master URL, or Connect.

`session(master=..., remote=...)` is a context manager that starts (and at the end
stops) a SparkSession configured for this project:

- where: `remote` (or `SPARK_REMOTE`) = Spark Connect (`sc://host:port`); else `master`
  (or `SPARK_MASTER`, default `local[*]`): `local[N]` in this process's JVM or a cluster
  URL such as `spark://127.0.0.1:7077`.
- Python: the executors run this interpreter (`sys.executable`: the project's .venv),
  so `pipeline` and `checkers` import there too; workers on other hosts need the same path.
- sized for a 2-core, 24 GiB machine: driver memory 6 GiB in local mode (executors run
  in the driver's JVM) and 2 GiB with a cluster (`WRACK_SPARK_DRIVER_MEMORY` overrides);
  shuffle partitions 4 per core (at least 8), coalesced by adaptive execution.
- quiet: Spark logs warnings and errors only (pipeline/log4j2.properties);
  Spark's progress bar shows on a terminal (`progress=True/False` forces it).
- loopback: in local mode, and with a master on 127.x, the driver binds to 127.0.0.1.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import sys
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from contracts.errors import InputError

LOG4J = Path(__file__).with_name("log4j2.properties")
DEFAULT_MASTER = "local[*]"


def cores_of(master: str) -> int:
    """How many task slots a `local[...]` master has (other masters: 2, this machine's size)."""
    m = re.fullmatch(r"local(?:\[(\*|\d+)(?:,\d+)?\])?", master)
    if not m:
        return 2
    n = m.group(1)
    if n is None:
        return 1
    return (os.cpu_count() or 2) if n == "*" else int(n)


def base_conf(master: str, progress: bool) -> dict[str, str]:
    """The Spark configuration the pipeline runs with (before user overrides)."""
    local = master.startswith("local")
    cores = cores_of(master)
    # The throughput collector: the pipeline's jobs are batch jobs (no pause-time goal; G1's
    # concurrent threads cost CPU that a 2-core machine does not have to spare).
    java_opts = f"-XX:+UseParallelGC -Dlog4j2.configurationFile=file:{LOG4J} -Dlog4j.configurationFile=file:{LOG4J}"
    conf = {
        "spark.app.name": "wrack-pipeline",
        "spark.driver.memory": os.environ.get("WRACK_SPARK_DRIVER_MEMORY", "6g" if local else "2g"),
        "spark.sql.shuffle.partitions": str(max(8, 4 * cores)),
        "spark.default.parallelism": str(max(8, 4 * cores)),
        "spark.sql.adaptive.enabled": "true",
        "spark.sql.adaptive.coalescePartitions.enabled": "true",
        "spark.sql.execution.arrow.pyspark.enabled": "true",
        "spark.sql.session.timeZone": "UTC",
        "spark.pyspark.python": sys.executable,
        "spark.pyspark.driver.python": sys.executable,
        "spark.executorEnv.PYTHONWARNINGS": "ignore::FutureWarning",
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "true" if progress else "false",
        "spark.driver.extraJavaOptions": java_opts,
        "spark.executor.extraJavaOptions": java_opts,
        "spark.sql.parquet.compression.codec": "snappy",
    }
    if local or re.match(r"spark://127\.", master):
        conf["spark.driver.host"] = "127.0.0.1"
        conf["spark.driver.bindAddress"] = "127.0.0.1"
    return conf


def _quiet_python() -> None:
    # pyspark 4 warns about pandas 3 on every pandas UDF; the APIs we use work.
    warnings.filterwarnings("ignore", category=FutureWarning, module=r"pyspark\..*")
    # A failed query is reported once, by the exception: not also as a JSON log record.
    for name in ("DataFrameQueryContextLogger", "pyspark", "py4j"):
        logging.getLogger(name).setLevel(logging.CRITICAL)
    os.environ.setdefault("PYTHONWARNINGS", "ignore::FutureWarning")
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable


def resolve(master: str | None, remote: str | None) -> tuple[str | None, str | None]:
    """(master, remote) from the arguments and SPARK_MASTER / SPARK_REMOTE."""
    remote = remote or os.environ.get("SPARK_REMOTE") or None
    if remote:
        if not remote.startswith("sc://"):
            raise InputError(f"bad --remote {remote!r} (expected sc://host:port)")
        return None, remote
    master = master or os.environ.get("SPARK_MASTER") or DEFAULT_MASTER
    if not re.match(r"(local(\[(\*|\d+)(,\d+)?\])?|spark://.+|yarn|k8s://.+|mesos://.+)$", master):
        raise InputError(f"bad --master {master!r} (expected local[N], local[*] or spark://host:port)")
    return master, None


@contextlib.contextmanager
def session(master: str | None = None, remote: str | None = None, *, progress: bool | None = None,
            conf: dict[str, str] | None = None) -> Iterator[Any]:
    """A configured SparkSession for the duration of the `with` block."""
    master, remote = resolve(master, remote)
    if progress is None:
        progress = sys.stderr.isatty()
    _quiet_python()
    # lazy: after _quiet_python() (its warning filters and loggers); pyspark.sql takes ~0.12 s that resolve() does not need
    from pyspark.sql import SparkSession

    if remote:
        os.environ.pop("SPARK_REMOTE", None)
        spark = SparkSession.builder.remote(remote).getOrCreate()
        for k, v in base_conf("local[2]", progress).items():
            if k.startswith("spark.sql.") and "compression" not in k:
                with contextlib.suppress(Exception):
                    spark.conf.set(k, v)
    else:
        assert master is not None
        if master.startswith("local"):
            os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        builder = SparkSession.builder.master(master)
        for k, v in {**base_conf(master, progress), **(conf or {})}.items():
            builder = builder.config(k, v)
        spark = builder.getOrCreate()
        spark.sparkContext.setLogLevel("WARN")
    try:
        yield spark
    finally:
        spark.stop()


def is_connect(spark: Any) -> bool:
    """Whether `spark` is a Spark Connect session (no SparkContext, no RDDs)."""
    return type(spark).__module__.startswith("pyspark.sql.connect")
