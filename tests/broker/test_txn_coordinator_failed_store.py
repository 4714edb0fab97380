"""The transaction coordinator after a store that failed once appended: the record is in the
local log, uncommitted (NOT_ENOUGH_REPLICAS_AFTER_APPEND), and the client was told the
transition failed, so the coordinator must not answer later requests from it (found by a
control run with --txn-p 0.5: bench/figures/findings/2026-11-29-fenced-txn-committed/). The
coordinator runs on a stand-in node whose state partition is an in-memory log; its appends go
through `append_local`, replaced here to append and then answer with the error."""

from __future__ import annotations

import asyncio
import logging
from types import SimpleNamespace

from kio.schema.errors import ErrorCode

from broker.core.messages import TopicPartition
from broker.core.replica import LEADER
from broker.records import iter_batches
from broker.server import txn_coordinator as tc

E = ErrorCode


class StateLog:
    """The state partition's log: batches appended in order, read back by offset."""

    def __init__(self) -> None:
        self.batches: list[bytes] = []
        self.log_start_offset = 0

    @property
    def log_end_offset(self) -> int:
        return len(self.batches)

    def append(self, batch: bytes) -> None:
        b = bytearray(batch)
        b[0:8] = len(self.batches).to_bytes(8, "big")  # the base offset
        self.batches.append(bytes(b))

    def read(self, offset: int, _max_bytes: int) -> bytes:
        return b"".join(self.batches[offset:])


def coordinator(answers: list[ErrorCode], monkeypatch) -> tuple[tc.TxnCoordinator, StateLog]:
    log = StateLog()
    replica = SimpleNamespace(role=LEADER, leader_epoch=2, log=log)
    settings = SimpleNamespace(transaction_state_log_num_partitions=1, transaction_max_timeout_ms=900000)
    broker = SimpleNamespace(partitions={TopicPartition(tc.STATE_TOPIC, 0): replica},
                             init_producer_id=lambda: (E.none, 7000))
    node = SimpleNamespace(s=settings, log=logging.getLogger("test"), broker=broker)
    c = tc.TxnCoordinator(node, markers=None)  # type: ignore[arg-type]

    async def append_local(_node, _tp, batch, _timeout_ms):
        log.append(batch)  # appended to the leader's log whatever the answer
        return answers.pop(0) if answers else E.none

    monkeypatch.setattr(tc, "append_local", append_local)
    return c, log


def test_a_store_that_failed_after_append_is_not_answered_from(monkeypatch):
    async def scenario() -> list[ErrorCode]:
        c, log = coordinator([E.none, E.not_enough_replicas_after_append, E.not_enough_replicas], monkeypatch)
        err, pid, epoch = await c.init_producer_id("t", 60000, -1, -1)
        assert (err, epoch) == (E.none, 0)
        first = await c.add_partitions("t", pid, epoch, [("q", 1)])  # appended, not committed
        assert log.log_end_offset == 2 and len(list(iter_batches(log.read(0, 1 << 20), validate=False))) == 2
        again = await c.add_partitions("t", pid, epoch, [("q", 1)])  # the client's retry
        return [first, again]

    first, again = asyncio.run(scenario())
    assert first is E.coordinator_not_available
    # the retry is a store again (failing here), not an answer from the failed record
    assert again is E.coordinator_not_available
