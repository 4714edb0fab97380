"""`make compat`: real clients' own test suites against local clusters of `wrack-broker`.

    python -m compat [--quick] [--suite NAME ...] [--nodes 1,3] [--json FILE]

Each suite (kafka-python's `test/integration`, librdkafka's `tests/` from Debian's source
package) runs against a 1-node and a 3-node cluster on loopback (`compat.cluster`). The
outcomes are judged against `compat/expected-failures.txt` (`compat.verdict`): the job
prints a table (suite x nodes: passed / failed / skipped, every failure with its reason)
and exits 1 only when a test fails that the file does not list (a regression).

Modules: `cluster` (broker processes), `verdict` (cases, expected failures, the table),
`kafka_python` and `librdkafka` (prepare and run one suite), `__main__` (the CLI).
A tool beside the project's floors (like bench/): it starts the broker as a process and
imports no project package.
"""
