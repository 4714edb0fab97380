"""compat.verdict: the expected-failures file, judging runs, the table; and the repo's own file."""

from __future__ import annotations

import pytest

from compat.verdict import (
    EXPECTED_FILE,
    FAILED,
    PASSED,
    SKIPPED,
    Case,
    SuiteRun,
    compare_with_expected,
    load_expected,
    parse_expected,
    table,
)

EXPECTED = """
# comment
kafka-python  *  test_admin_integration.py::test_delete_records*  not yet implemented: DeleteRecords
librdkafka    1  0098_consumer_txn                                creates topics with replication factor 3
"""


def test_parse_expected_keeps_the_reason_whole():
    e = parse_expected(EXPECTED)
    assert [(x.suite, x.nodes, x.pattern) for x in e] == [
        ("kafka-python", "*", "test_admin_integration.py::test_delete_records*"),
        ("librdkafka", "1", "0098_consumer_txn")]
    assert e[0].reason == "not yet implemented: DeleteRecords"


def test_an_entry_without_a_reason_is_refused_with_its_line():
    with pytest.raises(ValueError, match=r"x:2: want"):
        parse_expected("\nlibrdkafka 1 0098_consumer_txn\n", "x")


def test_judge_splits_expected_unexpected_and_now_passing():
    e = parse_expected(EXPECTED)
    runs = [SuiteRun("kafka-python", 3, [Case("test_admin_integration.py::test_delete_records_with_errors", FAILED, "boom"),
                                         Case("test_consumer_integration.py::test_group", FAILED, "timeout"),
                                         Case("test_x.py::test_y", SKIPPED, "SASL")]),
            SuiteRun("librdkafka", 3, [Case("0098_consumer_txn", FAILED, "RF 3")]),  # listed for 1 node only
            SuiteRun("librdkafka", 1, [Case("0098_consumer_txn", PASSED)])]
    v = compare_with_expected(runs, e)
    assert [(f.test, f.expected, f.reason) for f in v.failures] == [
        ("test_admin_integration.py::test_delete_records_with_errors", True, "not yet implemented: DeleteRecords"),
        ("test_consumer_integration.py::test_group", False, "timeout"),
        ("0098_consumer_txn", False, "RF 3")]
    assert v.now_passing == [("librdkafka", 1, "0098_consumer_txn")]
    assert v.exit_code == 1


def test_only_expected_failures_exit_zero_and_a_suite_that_did_not_run_does_not():
    e = parse_expected(EXPECTED)
    ok = [SuiteRun("librdkafka", 1, [Case("0098_consumer_txn", FAILED, "x"), Case("0001_multiobj", PASSED)])]
    assert compare_with_expected(ok, e).exit_code == 0
    assert compare_with_expected([SuiteRun("librdkafka", 3, error="build failed")], e).exit_code == 1


def test_a_flaky_entry_that_passes_is_not_reported_for_pruning():
    e = parse_expected("librdkafka 3 0089_max_poll_interval flaky: a race of the test's own\n")
    runs = [SuiteRun("librdkafka", 3, [Case("0089_max_poll_interval", PASSED)])]
    assert compare_with_expected(runs, e).now_passing == []
    runs = [SuiteRun("librdkafka", 3, [Case("0089_max_poll_interval", FAILED, "x")])]
    assert compare_with_expected(runs, e).exit_code == 0


def test_table_counts_and_lists_every_failure_with_its_reason():
    e = parse_expected(EXPECTED)
    runs = [SuiteRun("librdkafka", 1, [Case("0098_consumer_txn", FAILED, "x"), Case("0001_multiobj", PASSED),
                                       Case("0002_unkpart", FAILED, "new\nbug"), Case("0097_ssl", SKIPPED, "SSL")],
                     seconds=12.4)]
    out = table(runs, compare_with_expected(runs, e))
    assert "| librdkafka | 1 | 1 | 2 (1) | 1 | 12 s |" in out
    assert "librdkafka @1  0002_unkpart: new bug" in out.split("Expected failures")[0]
    assert "0098_consumer_txn: creates topics with replication factor 3" in out.split("Expected failures")[1]


def test_the_repos_expected_failures_file_parses_and_names_known_suites():
    entries = load_expected(EXPECTED_FILE)
    assert entries, "the file lists the failures measured on main"
    for x in entries:
        assert x.suite in ("kafka-python", "librdkafka"), x
        assert x.nodes == "*" or x.nodes.isdigit(), x
        assert len(x.reason) > 3, x
