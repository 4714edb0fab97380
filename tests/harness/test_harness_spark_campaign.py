"""`wrack campaign FILE --master URL`: a campaign's runs as Spark tasks (harness/spark_campaign.py).

The end-to-end test starts a standalone master and two workers of one core each from the
.venv's pyspark (harness/spark_standalone.py), runs a small campaign of real 3-node local
clusters through them (two cells, partitions in both, kills in one: two tests at once on this
host), kills one worker's whole process group while its test runs, and checks: every cell
meets its expectation, the killed run was retried and marked so (its lost attempt in lost/),
the two tests overlapped in time on clusters of their own, every run is in the pipeline's
tables, JUnit and the summary page carry them, and nothing is left behind (no cluster of the
campaign, no test process, no task folder, no Spark daemon). About 100 s on 2 cores.
Bad `--master` input: one line, exit 254, nothing made.
"""

from __future__ import annotations

import json
import os
import subprocess
import threading
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from harness_testlib import wrack_bin

from clusters.testing import can_run_local
from contracts.errors import InputError
from harness import campaign_task, spark_master
from harness.campaign_task import pack, unpack
from harness.netutil import free_port


@pytest.mark.parametrize("url", ["local", "local[2]", "local[*]", "local[2,3]", "spark://127.0.0.1:7077",
                                 "spark://h1:7077,h2:7078", "spark://[::1]:7077", "spark://spark-master.lan:7077"])
def test_master_urls_that_parse(url):
    assert spark_master.parse(url) == url


@pytest.mark.parametrize("url,words", [
    ("spark://", ["HOST:PORT"]), ("spark://host", ["'host'", "HOST:PORT"]), ("spark://host:0", ["1 to 65535"]),
    ("spark://host:99999", ["1 to 65535"]), ("local[0]", ["local[N]"]), ("yarn", ["spark://HOST:PORT"]),
    ("sc://127.0.0.1:15002", ["expected spark://"]), ("spark://a b:7077", ["'a b:7077'"]),
])
def test_master_urls_refused(url, words):
    with pytest.raises(InputError) as e:
        spark_master.parse(url)
    for w in words:
        assert w in e.value.message, e.value.message


def test_a_master_that_does_not_answer():
    port = free_port()
    t0 = time.monotonic()
    with pytest.raises(InputError, match=rf"spark master spark://127.0.0.1:{port} does not answer within 1.5 s"):
        spark_master.probe(f"spark://127.0.0.1:{port}", 1.5)
    assert time.monotonic() - t0 < 10


def wrack(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([wrack_bin(), *args], capture_output=True, text=True, timeout=timeout)


def test_bad_master_one_line_254_and_nothing_made(tmp_path):
    f = tmp_path / "c.yaml"
    f.write_text("name: c\ndefaults: {workload: noop, nodes: 1, rf: 1, min_isr: 1}\ncells:\n  - {expect: valid}\n")
    out = tmp_path / "out"
    for args, words in [(["--master", "spark://nohost"], ["bad --master", "HOST:PORT"]),
                        (["--master", "mesos://x:5050"], ["bad --master", "spark://HOST:PORT"]),
                        (["--master", f"spark://127.0.0.1:{free_port()}", "--master-timeout", "2"],
                         ["does not answer within 2 s"])]:
        p = wrack("campaign", str(f), "--out", str(out), *args)
        lines = p.stderr.splitlines()
        assert p.returncode == 254 and len(lines) == 1 and lines[0].startswith("wrack: error:"), p.stderr
        for w in words:
            assert w in lines[0], lines[0]
    assert not out.exists()


def test_run_folder_packed_and_unpacked(tmp_path):
    run = tmp_path / "a" / "20261101T000000.000"
    (run / "nodes" / "n1").mkdir(parents=True)
    (run / "test.json").write_text('{"run_id": "a/20261101T000000.000"}')
    (run / "nodes" / "n1" / "broker.log").write_bytes(b"x" * 100_000)
    dest = tmp_path / "driver" / "runs" / "a" / "20261101T000000.000"
    unpack(pack(run), dest)
    assert (dest / "test.json").read_text() == (run / "test.json").read_text()
    assert (dest / "nodes" / "n1" / "broker.log").stat().st_size == 100_000


def test_host_slots_cap_the_tests_at_once(tmp_path, monkeypatch):
    monkeypatch.setattr(campaign_task, "SLOTS", tmp_path / "slots")
    inside, most, waits = [0], [0], []
    lock = threading.Lock()

    def one() -> None:
        with campaign_task.host_slot(2) as waited:
            with lock:
                inside[0] += 1
                most[0] = max(most[0], inside[0])
            time.sleep(0.6)
            with lock:
                inside[0] -= 1
        waits.append(waited)

    threads = [threading.Thread(target=one) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(20)
    assert most[0] == 2 and len(waits) == 4
    assert max(sorted(waits)[:2]) < 0.3 and min(sorted(waits)[2:]) >= 0.4  # two waited for a slot
    with campaign_task.host_slot(None) as waited:
        assert waited == 0.0 and not (tmp_path / "slots" / "slot-2.lock").exists()


def test_the_default_cap_is_one_test_per_two_cores():
    assert [campaign_task.default_cap(c) for c in (1, 2, 3, 4, 8)] == [1, 1, 1, 2, 4]
    assert campaign_task.default_cap() >= 1


# --------------------------------------------------------------------------- end to end

CAMPAIGN = """
name: spread
repeats: 1
defaults: {backend: local, nodes: 3, workload: queue, time_limit: 12, nemesis_interval: 3, final_time_limit: 10}
cells:
  - {nemesis: [partition], expect: valid}
  - {nemesis: [partition, kill], acks: "1", expect: any}
"""


def campaign_clusters(cdir: Path) -> set[str]:
    """The cluster names of every run of the campaign folder (kept and lost attempts)."""
    return {json.loads(t.read_text())["cluster"]["name"] for t in cdir.rglob("test.json")}


def leftovers(clusters: set[str]) -> list[str]:
    ns = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout.split()
    found = [x for x in ns if any(f"wrack-{c}-" in x for c in clusters)]
    found += [str(p) for p in Path("/run/wrack/clusters").glob("*") if p.name in clusters]
    ps = subprocess.run(["ps", "-eo", "pid,args"], capture_output=True, text=True).stdout.splitlines()
    found += [x for x in ps if "harness.campaign_task" in x or any(c in x for c in clusters)]
    return found


def overlap(a: dict, b: dict) -> bool:
    """Whether two runs' test.json spans overlap (a killed run may have no end: open)."""
    end_a, end_b = a["end"] or "~", b["end"] or "~"
    return a["start"] < end_b and b["start"] < end_a


@pytest.mark.root
@pytest.mark.spark
@pytest.mark.slow
@pytest.mark.skipif(not can_run_local(), reason="needs root and network namespaces")
def test_campaign_on_two_workers_survives_a_killed_worker(tmp_path):
    from harness.spark_standalone import standalone

    f = tmp_path / "c.yaml"
    f.write_text(CAMPAIGN)
    out = tmp_path / "out"
    tasks_before = set(Path("/tmp").glob("wrack-task-*"))
    with standalone(workers=2, cores=1, memory="2g") as sc:
        # two tests at once on this host (the default cap gives a 2-core host one)
        proc = subprocess.Popen([wrack_bin(), "campaign", str(f), "--out", str(out), "--master", sc.url, "--json",
                                 "--tests-per-host", "2"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        # one reader per pipe (communicate() would race the stderr reader for its lines)
        err: list[str] = []
        out_text: list[str] = []
        readers = [threading.Thread(target=lambda: err.extend(proc.stderr), daemon=True),
                   threading.Thread(target=lambda: out_text.append(proc.stdout.read()), daemon=True)]
        for r in readers:
            r.start()
        # kill worker 0 once both tests run (two run folders of this campaign), mid-cell
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and proc.poll() is None:
            if len(list(out.glob("spread/*/runs/*/*/test.json"))) >= 2 and sc.workers[0] is not None:
                time.sleep(4)
                sc.kill_worker(0)
                break
            time.sleep(0.5)
        assert sc.workers[0] is None, "the two tests never ran at once:\n" + "".join(err[-20:])
        proc.wait(timeout=600)
        for r in readers:
            r.join(10)
        stdout = "".join(out_text)
        daemons = [w for w in sc.workers if w is not None]
    assert proc.returncode == 0, "".join(err[-40:])
    results = json.loads(stdout.strip().splitlines()[-1])
    cdir = next(out.glob("spread/2*"))
    runs = [r for c in results["cells"] for r in c["runs"]]
    assert [c["passed"] for c in results["cells"]] == [True, True]
    assert sum(r["retried"] for r in runs) == 1 and results["summary"]["crashed"] == 0
    assert any("retried" in line for line in err)
    # two tests at once on this host (the killed attempt, in lost/, and the other worker's run)
    assert len(results["lost_attempts"]) == 1
    tests = [json.loads(t.read_text()) for t in cdir.rglob("test.json")]
    assert len(tests) == 3 and len({t["cluster"]["name"] for t in tests}) == 3
    assert any(overlap(a, b) for i, a in enumerate(tests) for b in tests[i + 1:])
    # the tables got every run; JUnit and the summary carry the retry
    from pipeline import store

    rows = store.read_table(str(out / "_pipeline"), "runs").to_pylist()
    assert sorted(r["run_id"] for r in rows) == sorted(r["run_id"] for r in runs)
    assert sum(bool(r["campaign_retried"]) for r in rows) == 1
    junit = ET.fromstring((cdir / "junit.xml").read_text())
    assert junit.get("tests") == "2" and len(junit.findall("testcase/system-out")) == 1
    assert "&#8635;" in (cdir / "summary.html").read_text()
    # nothing left behind: clusters, test processes, task folders, Spark daemons
    deadline = time.monotonic() + 30
    while leftovers(campaign_clusters(cdir)) and time.monotonic() < deadline:
        time.sleep(1)
    assert leftovers(campaign_clusters(cdir)) == []
    assert set(Path("/tmp").glob("wrack-task-*")) <= tasks_before
    for p in [sc.master, *daemons]:  # the master, the workers and their executors' process groups
        with pytest.raises(ProcessLookupError):
            os.killpg(p.pid, 0)
    assert not os.path.exists(sc.folder)
