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
