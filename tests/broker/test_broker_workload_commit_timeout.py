"""A consumer group's commit never outlives the request timeout (workloads/kafka_io.py
`commit_offsets`). librdkafka's synchronous commit has no timeout of its own: to a paused
coordinator (SIGSTOP: the connection stays open, nothing answers) it waited for as long as the
pause lasted, more than 40 s when tried, and a Tansu run hung 5 minutes in one. The client
gives up after `timeout` s with an indeterminate error, piles no second commit behind a
waiting one, and closes without waiting for it."""

from __future__ import annotations

import signal
import time

import pytest

from workloads.errors import ClientError
from workloads.kafka_clients import open_io
from workloads.kafka_io import create_topics


def test_a_commit_to_a_paused_coordinator_times_out_and_the_client_closes(fleet):
    b = fleet.single().start()
    create_topics(b.bootstrap, {"t": 1}, replication_factor=1, timeout=30)
    io = open_io("confluent", b.bootstrap, acks="all", timeout=1.0, client_id="commit-test", group="g")
    try:
        io.commit_offsets({("t", 0): 1})  # the coordinator answers
        b.signal(signal.SIGSTOP)
        t0 = time.monotonic()
        with pytest.raises(ClientError) as e:
            io.commit_offsets({("t", 0): 2})
        assert e.value.code is None and "unanswered" in str(e.value) and time.monotonic() - t0 < 5
        with pytest.raises(ClientError, match="still unanswered"):
            io.commit_offsets({("t", 0): 3})
        t1 = time.monotonic()
        io.close()
        assert time.monotonic() - t1 < 5
    finally:
        b.signal(signal.SIGCONT)


CHILD = """
import sys
from workloads.errors import ClientError
from workloads.kafka_clients import open_io
io = open_io("confluent", sys.argv[1], acks="all", timeout=1.0, client_id="commit-exit", group="g2")
io.commit_offsets({("t", 0): 1})
print("paused?", flush=True)
sys.stdin.readline()  # the test pauses the broker, then says go
try:
    io.commit_offsets({("t", 0): 2})
except ClientError:
    pass
io.close()
print("closed", flush=True)
"""


def test_a_process_with_a_commit_still_waiting_exits(fleet):
    # a commit that never returns must not keep the interpreter from exiting (a pytest
    # session once hung at exit joining the commit's thread), nor crash it
    import subprocess
    import sys

    b = fleet.single().start()
    create_topics(b.bootstrap, {"t": 1}, replication_factor=1, timeout=30)
    child = subprocess.Popen([sys.executable, "-c", CHILD, b.bootstrap], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "paused?"
        b.signal(signal.SIGSTOP)
        child.stdin.write("go\n")
        child.stdin.flush()
        out, err = child.communicate(timeout=20)
        assert child.returncode == 0 and out.strip() == "closed", (child.returncode, out, err[-2000:])
    finally:
        child.kill()
        b.signal(signal.SIGCONT)
