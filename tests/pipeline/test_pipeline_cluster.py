"""The same pipeline on a real standalone Spark cluster and through Spark Connect.

The test starts a master and a worker with the pyspark installation's `spark-class` on
127.0.0.1 (and a Spark Connect server with its `spark-submit`), runs `wrack pipeline
ingest`, `check` and `report` on a small synthetic campaign against it, and kills every
process it started when it ends, passed or failed.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests_pipeline_util import (
    daemon,
    daemon_env,
    master_state,
    run_wrack,
    spark_home,
    wait_for,
)

from harness.netutil import free_port, port_open
from pipeline import synth

pytestmark = [pytest.mark.spark, pytest.mark.slow]


@pytest.fixture
def scratch() -> Iterator[Path]:
    d = Path(tempfile.mkdtemp(prefix="wrack-pipeline-cluster-"))
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


def _campaign(root: Path) -> list[synth.SynthRun]:
    runs = synth.write_campaign(root / "results", runs=4, total_ops=2400, seed=4, plant_unsafe=1.0,
                                matrix={"acks": ["all", "1"], "nemesis": [["partition"]]}, keys=4, concurrency=6)
    runs.append(synth.write_run(root / "results", synth.SynthConfig(ops=400, keys=2, workload="log"), name="log"))
    return runs


def _pipeline(root: Path, where: list[str], runs: list[synth.SynthRun]) -> None:
    pq = root / "pq"
    p = run_wrack(["pipeline", "ingest", str(root / "results"), "--out", str(pq), "--json", *where], cwd=root)
    assert p.returncode == 0, p.stderr[-3000:]
    assert json.loads(p.stdout)["ingested"] == len(runs)
    p = run_wrack(["pipeline", "check", str(pq), "--json", *where], cwd=root)
    assert p.returncode == 1, p.stderr[-3000:]  # the acks=1 runs got a planted lost write
    got = {r["run"]: r for r in map(json.loads, p.stdout.splitlines())}
    assert set(got) == {r.run_id for r in runs}
    for r in runs:
        if r.planted:
            assert "lost-write" in got[r.run_id]["anomaly_types"] and got[r.run_id]["valid"] is False
        else:
            assert got[r.run_id]["valid"] is True, got[r.run_id]["anomaly_counts"]
    assert got[runs[-1].run_id]["checker"] == "linearizable"
    p = run_wrack(["pipeline", "report", str(pq), "--baseline", str(pq), *where], cwd=root)
    assert p.returncode == 0, p.stderr[-3000:]
    rep = json.loads((pq / "report" / "report.json").read_text())
    assert rep["runs"] == len(runs) and rep["regressions"]["runs"] == []
    assert (pq / "report" / "anomaly-rate.png").is_file()


def test_standalone_cluster(scratch):
    env = daemon_env(scratch)
    spark_class = os.path.join(spark_home(), "bin", "spark-class")
    port, ui, wui = free_port(), free_port(), free_port()
    master_url = f"spark://127.0.0.1:{port}"
    with daemon([spark_class, "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", str(port),
                 "--webui-port", str(ui)], env, scratch / "master.log"):
        wait_for("the master", lambda: master_state(ui).get("status") == "ALIVE", 120, scratch / "master.log")
        with daemon([spark_class, "org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1", "--cores", "2",
                     "--memory", "3g", "--webui-port", str(wui), "--work-dir", str(scratch / "work"), master_url],
                    env, scratch / "worker.log"):
            wait_for("a worker", lambda: master_state(ui).get("aliveworkers", 0) >= 1, 120, scratch / "worker.log")
            runs = _campaign(scratch)
            _pipeline(scratch, ["--master", master_url], runs)
            apps = master_state(ui)
            done = [a for a in apps.get("completedapps", []) + apps.get("activeapps", [])
                    if a.get("name") == "wrack-pipeline"]
            assert len(done) == 3  # ingest, check and report each ran as an application on the cluster
            # the executors ran on the worker: their folders are in its work dir
            assert len(list((scratch / "work").glob("app-*/*/stderr"))) >= 3


def test_spark_connect(scratch):
    env = daemon_env(scratch)
    port = free_port()
    conf = {"spark.connect.grpc.binding.address": "127.0.0.1", "spark.connect.grpc.binding.port": str(port),
            "spark.ui.enabled": "false", "spark.driver.host": "127.0.0.1", "spark.driver.bindAddress": "127.0.0.1",
            "spark.pyspark.python": sys.executable, "spark.sql.shuffle.partitions": "4"}
    cmd = [os.path.join(spark_home(), "bin", "spark-submit"), "--master", "local[2]",
           "--class", "org.apache.spark.sql.connect.service.SparkConnectServer"]
    for k, v in conf.items():
        cmd += ["--conf", f"{k}={v}"]
    with daemon(cmd, env, scratch / "connect.log"):
        wait_for("the Spark Connect server", lambda: port_open(port), 180, scratch / "connect.log")
        runs = _campaign(scratch)
        _pipeline(scratch, ["--remote", f"sc://127.0.0.1:{port}"], runs)
        assert "SparkConnectServer" in (scratch / "connect.log").read_text(errors="replace")
