"""compat's suite adapters: librdkafka's runner output and apt sources, kafka-python's JUnit XML,
and a real 3-node LocalCluster that serves."""

from __future__ import annotations

import pytest

from compat import kafka_python, librdkafka
from compat.cluster import LocalCluster
from compat.verdict import FAILED, PASSED, SKIPPED, Case

G, R, C, X = "\x1b[32m", "\x1b[31m", "\x1b[36m", "\x1b[0m"

SUMMARY = f"""TEST 20261125013340 (bare, scenario default) SUMMARY
#==================================================================#
|{G} <MAIN>                                   |     PASSED |   0.400s {X}|
|{G} 0039_event_dr                            |     PASSED |   1.006s {X}|
|{C} 0039_event_log                           |    SKIPPED |   0.000s {X}|{C} Filtered due to negative test flags{X}
|{R} 0044_partition_cnt                       |     FAILED |   0.400s {X}|{R} test_admin_create_partitions():4877: CreatePartitions_result_topics returned NULL{X}
|{C} 0097_ssl_verify                          |    SKIPPED |   0.000s {X}|{C} Test requires SSL_* env-vars set up by trivup{X}
|{C} 0045_subscribe_update_topic_remove       |    SKIPPED |   0.000s {X}|
|  0113_cooperative_rebalance               |    RUNNING |  10.000s {X}|
#==================================================================#
"""


def test_summary_gives_each_test_and_leaves_out_local_only_ones():
    assert librdkafka.parse_run("0039", SUMMARY, "", 1, 300) == [
        Case("0039_event_dr", PASSED),
        Case("0044_partition_cnt", FAILED, "test_admin_create_partitions():4877: CreatePartitions_result_topics returned NULL"),
        Case("0097_ssl_verify", SKIPPED, "Test requires SSL_* env-vars set up by trivup"),
        Case("0045_subscribe_update_topic_remove", SKIPPED, "needs another test scenario"),
        Case("0113_cooperative_rebalance", FAILED, "still running when the test-runner stopped")]


def test_a_timed_out_test_gets_its_reason_from_stderr():
    out = "|  0107_topic_recreate                      |     FAILED | 160.054s |\n"
    err = ('### Test "0107_topic_recreate" failed at test.c:1216:check_test_timeouts() at Wed: ###\n'
           "Test 0107_topic_recreate timed out (timeout set to 160 seconds)\n")
    assert librdkafka.parse_run("0107", out, err, 1, 300) == [
        Case("0107_topic_recreate", FAILED, "Test 0107_topic_recreate timed out (timeout set to 160 seconds)")]


STDERR = f"""{C}[0081_admin / 0.000s] ================= Running test 0081_admin ================={X}
[0081_admin / 0.1s] ================= Running test 0081_admin_extra =================
{R}### Test "0081_admin (do_test_CreateTopics:74)" failed at 0081-admin.c:232:do_test_CreateTopics() at Wed: ###
Expected NO_ERROR, not 42: INVALID_REQUEST
[0081_admin_extra / 1.0s] ================= Test 0081_admin_extra PASSED =================
"""


def test_without_a_summary_the_started_tests_are_judged_from_stderr():
    assert librdkafka.parse_run("0081", "", STDERR, -6, 300) == [
        Case("0081_admin", FAILED, "Expected NO_ERROR, not 42: INVALID_REQUEST"),
        Case("0081_admin_extra", PASSED)]
    killed = librdkafka.parse_run("0081", "", "Running test 0081_admin =\n"
                                  "================= Running test 0081_admin =================\n", None, 300)
    assert killed == [Case("0081_admin", FAILED, "timed out after 300 s (killed)")]
    assert librdkafka.parse_run("0081", "", "", 134, 300) == [Case("0081", FAILED, "test-runner exited with 134")]
    assert librdkafka.parse_run("0004", "", "", 0, 300) == []


def test_deb_src_twins_of_the_machines_sources():
    deb822 = ("Types: deb\n# a comment\nURIs: http://mirror.example/debian\nSuites: bookworm\nComponents: main\n"
              "Signed-By: /usr/share/keyrings/k.gpg\n\n"
              "Types: deb\nURIs: http://other.example\nSuites: x\nComponents: main\nEnabled: no\n\n"
              "Types: deb-src\nURIs: http://src.example\nSuites: y\nComponents: main\n")
    assert librdkafka.deb_src_deb822(deb822) == ("Types: deb-src\nURIs: http://mirror.example/debian\n"
                                                 "Suites: bookworm\nComponents: main\n"
                                                 "Signed-By: /usr/share/keyrings/k.gpg\n")
    one = "deb http://m.example/debian bookworm main\n# deb http://x y z\ndeb-src http://a b c\n"
    assert librdkafka.deb_src_one_line(one) == "deb-src http://m.example/debian bookworm main\n"


JUNIT = """<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite name="pytest">
<testcase classname="test.integration.test_admin_integration" name="test_delete_records" time="0.9">
  <failure message="kafka.errors.IncompatibleBrokerVersion: DeleteRecordsRequest">trace</failure></testcase>
<testcase classname="test.integration.test_ssl_integration.TestSSLConnection" name="test_ssl_handshake" time="0">
  <error message="failed on setup with &quot;FileNotFoundError&quot;">trace</error></testcase>
<testcase classname="test.integration.test_sasl_integration" name="test_admin[PLAIN]" time="0">
  <skipped type="pytest.skip" message="Testing on external Kafka Broker">x</skipped></testcase>
<testcase classname="test.integration.test_producer_integration" name="test_end_to_end[gzip]" time="0.4"/>
</testsuite></testsuites>"""


def test_junit_cases_are_named_by_node_id():
    assert kafka_python.parse_junit(JUNIT) == [
        Case("test_admin_integration.py::test_delete_records", FAILED,
             "kafka.errors.IncompatibleBrokerVersion: DeleteRecordsRequest"),
        Case("test_ssl_integration.py::TestSSLConnection::test_ssl_handshake", FAILED,
             'failed on setup with "FileNotFoundError"'),
        Case("test_sasl_integration.py::test_admin[PLAIN]", SKIPPED, "Testing on external Kafka Broker"),
        Case("test_producer_integration.py::test_end_to_end[gzip]", PASSED)]


def test_kafka_pythons_requirements_pin_the_suites_library():
    assert "kafka-python[lz4,snappy,zstd,crc32c]==3.0.11" in kafka_python.requirements()


def test_a_three_node_cluster_serves_every_node():
    confluent_kafka = pytest.importorskip("confluent_kafka.admin")
    with LocalCluster(3) as cluster:
        admin = confluent_kafka.AdminClient({"bootstrap.servers": cluster.bootstrap})
        md = admin.list_topics(timeout=10)
        assert sorted(md.brokers) == [0, 1, 2]
        assert not cluster.crashed()
        base = cluster.base
    assert not base.exists()
    assert all(p.poll() is not None for p in cluster.procs)
