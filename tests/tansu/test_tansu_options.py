"""`--db tansu` without a cluster: what Tansu cannot serve is one line and exit 254 before
anything starts; its fault packages aim at the database node and the brokers; its loss rules;
the producers it gets are not idempotent; the schema's types are those Tansu's queries bind."""

from __future__ import annotations

import random
import re
import subprocess
import sys
from pathlib import Path

import pytest

import suites
from harness import options, runner
from harness.faults import fault_packages
from nemesis.targets import LeaderMetadata, resolve
from suites.tansu import faults, rules
from suites.tansu.postgres import SCHEMA, failure_cause
from workloads.kafka_io import producer_delivery

WRACK = str(Path(sys.executable).parent / "wrack")


@pytest.mark.parametrize("args, named", [
    (["--txn-p", "0.5"], "--txn-p"),
    (["--idempotence"], "--idempotence"),
    (["--nodes", "1"], "--nodes"),
    (["--postgres-setting", "bogus"], "--postgres-setting"),
    (["--safeguard-off", "elr"], "--safeguard-off"),
    (["--nemesis", "lrs"], "lrs"),
    (["--workload", "register"], "--workload"),
    (["--backend", "docker"], "--backend"),
    (["--tansu-binary", "/nonexistent/tansu"], "--tansu-binary"),
])
def test_what_tansu_cannot_serve_is_one_line_and_254(tmp_path, args, named):
    p = subprocess.run([WRACK, "test", "--db", "tansu", "--results", str(tmp_path), *args], capture_output=True,
                       text=True, timeout=60)
    assert p.returncode == 254, p.stderr
    assert len(p.stderr.strip().splitlines()) == 1 and named in p.stderr and "Traceback" not in p.stderr
    assert not any(tmp_path.iterdir())  # nothing was started or written


def test_defaults_queue_workload_and_its_own_mix():
    o = options.TestOptions(db="tansu")
    runner.validate(o)
    assert o.workload == "queue"
    assert [p.name for p in fault_packages(o.nemesis, suites.get("tansu"), {})] == list(faults.MIX)
    assert runner.test_name(options.TestOptions(db="tansu", nemesis=["kill-db"])) == "tansu-queue-acksall-kill-db"


def test_database_faults_aim_at_the_database_node():
    kill = next(p for p in fault_packages(["kill-db"], suites.get("tansu"), {}))
    op = kill.start(random.Random(1))
    assert op.f == "kill" and op.value == {"role": "controller"}
    addresses = {"n1": "10.0.0.1", "n2": "10.0.0.2", "n3": "10.0.0.3"}
    md = LeaderMetadata(list(addresses.values()), lambda: "10.0.0.1")
    assert resolve(op.value, list(addresses), random.Random(1), addresses=addresses, metadata=md) == ["n1"]
    power = next(p for p in fault_packages(["power-loss-db"], suites.get("tansu"), {}))
    assert power.start(random.Random(2)).value["nodes"] == {"role": "controller"}


def test_broker_faults_never_draw_the_database_node():
    class DB:
        def brokers(self):
            return [type("N", (), {"name": n})() for n in ("n2", "n3", "n4", "n5")]

    class Nem:
        db = DB()
        rng = random.Random(3)
        names = ["n1", "n2", "n3", "n4", "n5"]

    drawn = [faults.draw(Nem, size) for size in ("one", "minority", "all") for _ in range(20)]
    assert all("n1" not in d for d in drawn)
    assert {len(d) for d in drawn} == {1, 4} | {max(1, (4 - 1) // 2)}


def test_loss_rules_allow_nothing_but_group_rebalances_and_an_unfinished_read():
    strict = rules.choose({"workload": "queue", "acks": "1"})
    assert strict.allowed == [] and "Tansu commits" in strict.reasons[0]
    group = rules.choose({"workload": "group"})
    assert group.names == ["subscribe"] and set(group.allowed) == {"poll-skip", "nonmonotonic-poll"}
    cut = rules.choose({"workload": "queue"}, incomplete=True)
    assert cut.names == ["final-read-deadline"]
    unsafe = rules.choose({"workload": "queue", "postgres_settings": ["synchronous_commit=off"]})
    assert unsafe.allowed == [] and any("control" in n for n in unsafe.notes)


def test_tansu_producers_are_not_idempotent():
    assert producer_delivery("all", 5000)["enable.idempotence"] is True  # other systems: unchanged
    conf = producer_delivery("all", 5000, idempotent=False)
    assert conf["enable.idempotence"] is False and conf["acks"] == "all" and conf["message.send.max.retries"] == 0
    wl = suites.get("tansu").make_workload("queue", {})
    assert wl.opts.idempotent is False


def test_the_failure_cause_is_the_fatal_line():
    log = ("2026-11-28 10:00:00.000 UTC [12] LOG:  starting PostgreSQL 15\n"
           "2026-11-28 10:00:00.001 UTC [12] FATAL:  unrecognized configuration parameter \"bogus\"\n")
    assert failure_cause(log) == 'FATAL: unrecognized configuration parameter "bogus"'
    assert failure_cause("") == "it printed nothing"
    conf = ('2026-11-28 12:27:25.100 GMT [10166] LOG:  unrecognized configuration parameter "bogus_param" in file '
            '"/x/postgresql.conf" line 15\n2026-11-28 12:27:25.100 GMT [10166] FATAL:  configuration file '
            '"/x/postgresql.conf" contains errors\n')
    assert failure_cause(conf).startswith('unrecognized configuration parameter "bogus_param"')


def test_schema_types_match_what_tansu_binds():
    """The columns whose Rust types tokio-postgres checks strictly (tansu-storage 0.6.0 pg.rs):
    offsets bigint, partitions integer, producer ids bigint and epochs smallint, attributes
    smallint, record timestamps timestamptz, group state jsonb under a uuid e_tag."""
    ddl = SCHEMA.read_text()

    def col(table: str, column: str) -> str:
        body = re.search(rf"create table if not exists {table} \((.*?)\n\);", ddl, re.S).group(1)
        return re.search(rf"^\s+\"?{column}\"? (\w+)", body, re.M).group(1)

    expect = {("record", "offset_id"): "bigint", ("record", "attributes"): "smallint",
              ("record", "producer_id"): "bigint", ("record", "producer_epoch"): "smallint",
              ("record", "timestamp"): "timestamptz", ("record", "transaction_id"): "xid8",
              ("watermark", "high"): "bigint", ("topition", "partition"): "integer",
              ("topic", "partitions"): "integer", ("topic", "uuid"): "uuid",
              ("consumer_offset", "committed_offset"): "bigint", ("consumer_offset", "leader_epoch"): "integer",
              ("consumer_group_detail", "e_tag"): "uuid", ("consumer_group_detail", "detail"): "jsonb",
              ("producer", "id"): "bigserial", ("producer_epoch", "epoch"): "smallint",
              ("producer_detail", "sequence"): "integer", ("txn_produce_offset", "offset_end"): "bigint"}
    assert {k: col(*k) for k in expect} == expect
