"""The transaction coordinator's state of one transactional id (Kafka's
TransactionMetadata) and how it is stored. Pure.

A transactional id has a producer id and epoch, a state and, while a transaction runs,
the partitions and consumer groups it wrote to. The legal moves are one table
(`TRANSITIONS`, as Kafka's TransactionState.validPreviousStates):

    EMPTY -> ONGOING -> PREPARE_COMMIT -> COMPLETE_COMMIT -> ONGOING ...
                     -> PREPARE_ABORT  -> COMPLETE_ABORT  -> ONGOING ...
    EMPTY / COMPLETE_* -> EMPTY (InitProducerId: the epoch is bumped)

The coordinator answers EndTxn once PREPARE_* is stored, then writes the markers and
stores COMPLETE_*. Every change is stored before it is acted on: one record per change
in the transaction state log (the internal topic `__transaction_state`, replicated like
any partition), key = the transactional id, value = `encode(meta)` (JSON). The last
record of a key is its state; a coordinator taking over a state partition replays it
(`replay`) and finishes what was prepared.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace

EMPTY = "Empty"
ONGOING = "Ongoing"
PREPARE_COMMIT = "PrepareCommit"
PREPARE_ABORT = "PrepareAbort"
COMPLETE_COMMIT = "CompleteCommit"
COMPLETE_ABORT = "CompleteAbort"

# state -> the states it may move to
TRANSITIONS: dict[str, frozenset[str]] = {
    EMPTY: frozenset({EMPTY, ONGOING}),
    ONGOING: frozenset({ONGOING, PREPARE_COMMIT, PREPARE_ABORT}),
    PREPARE_COMMIT: frozenset({COMPLETE_COMMIT}),
    PREPARE_ABORT: frozenset({COMPLETE_ABORT}),
    COMPLETE_COMMIT: frozenset({EMPTY, ONGOING}),
    COMPLETE_ABORT: frozenset({EMPTY, ONGOING}),
}
COMPLETE_OF = {PREPARE_COMMIT: COMPLETE_COMMIT, PREPARE_ABORT: COMPLETE_ABORT}
MAX_EPOCH = 32766  # an epoch that cannot be bumped gets a new producer id (Kafka: Short.MaxValue - 1)
STATE_TOPIC = "__transaction_state"


class IllegalTxnTransition(ValueError):
    """A move the table does not allow (a coordinator bug, never a client's error)."""


@dataclass(frozen=True, slots=True)
class TxnMetadata:
    txn_id: str
    producer_id: int
    epoch: int
    timeout_ms: int
    state: str = EMPTY
    partitions: frozenset[tuple[str, int]] = field(default_factory=frozenset)
    groups: frozenset[str] = field(default_factory=frozenset)

    def to(self, state: str, **changes: object) -> TxnMetadata:
        """This metadata moved to `state` (IllegalTxnTransition if the table forbids it)."""
        if state not in TRANSITIONS[self.state]:
            raise IllegalTxnTransition(f"{self.txn_id}: {self.state} -> {state}")
        return replace(self, state=state, **changes)  # type: ignore[arg-type]

    @property
    def preparing(self) -> bool:
        return self.state in COMPLETE_OF


def encode(meta: TxnMetadata) -> bytes:
    d = {"pid": meta.producer_id, "epoch": meta.epoch, "timeout": meta.timeout_ms, "state": meta.state,
         "partitions": sorted([t, p] for t, p in meta.partitions), "groups": sorted(meta.groups)}
    return json.dumps(d, separators=(",", ":")).encode()


def decode(txn_id: str, value: bytes) -> TxnMetadata:
    """The metadata stored for `txn_id`; ValueError if `value` is not one."""
    try:
        d = json.loads(value)
        state = d["state"]
        if state not in TRANSITIONS:
            raise ValueError(f"unknown state {state!r}")
        return TxnMetadata(txn_id, int(d["pid"]), int(d["epoch"]), int(d["timeout"]), state,
                           frozenset((str(t), int(p)) for t, p in d["partitions"]), frozenset(map(str, d["groups"])))
    except (KeyError, TypeError, json.JSONDecodeError) as e:
        raise ValueError(f"bad transaction state record for {txn_id!r}: {e}") from None


def replay(records: list[tuple[bytes | None, bytes | None]]) -> dict[str, TxnMetadata]:
    """The state of every transactional id after (key, value) records in log order;
    records that do not decode are skipped (a null value removes the id)."""
    out: dict[str, TxnMetadata] = {}
    for key, value in records:
        if key is None:
            continue
        txn_id = key.decode("utf-8", "replace")
        if value is None:
            out.pop(txn_id, None)
            continue
        try:
            out[txn_id] = decode(txn_id, value)
        except ValueError:
            continue
    return out
