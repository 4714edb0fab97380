"""Error classification: did a failed Kafka request definitely not happen (`fail`), or may it
have taken effect (`info`)?

Jepsen's three-way outcome needs this per error code. A wrong `fail` is a false anomaly
(an aborted read, G1a, when the write did land), so only errors that prove the broker never
appended are definite; everything else is `info`, which costs the checker nothing but
precision. Read-only operations (poll, read-at-offset) change no state: their errors are
always `fail` (the client rolls its position back).

`classify_send(code)` -> `Outcome("fail"|"info", name)` for a produce error code: Kafka
protocol codes (>= -1) and librdkafka's local codes (< -1, e.g. -192 _MSG_TIMED_OUT).
Following KAFKA-13574 (and Jepsen's redpanda client), NOT_LEADER_OR_FOLLOWER after a send
is *not* definite; NOT_ENOUGH_REPLICAS_AFTER_APPEND, timeouts and connection loss neither.

A code says how the *last* attempt of a send ended. When the client may have made more than
one (`retried=True`), a definite code proves nothing about the earlier ones, so the send is
`info` whatever the code, as Jepsen records errors after retries. librdkafka is such a
client even with `message.send.max.retries=0`: after NOT_LEADER_OR_FOLLOWER (and the other
errors that ask for a metadata refresh) it sends the batch again without counting a retry,
though that first attempt may have been appended (KAFKA-13574); the next attempt may then
end with NOT_ENOUGH_REPLICAS at a new leader whose ISR is below min.insync.replicas, while
the first copy, already replicated to that leader, is committed later (seen as a false
G1a under the wipe-follower story, issue 13).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Outcome:
    """How an op that got error `name` completes: `type` is "fail" or "info"."""

    type: str
    name: str
    code: int | None = None

    @property
    def definite(self) -> bool:
        return self.type == "fail"


# Kafka protocol error codes (name, definite for a produce request?).
KAFKA_CODES: dict[int, tuple[str, bool]] = {
    -1: ("UNKNOWN_SERVER_ERROR", False),
    1: ("OFFSET_OUT_OF_RANGE", True),
    2: ("CORRUPT_MESSAGE", True),
    3: ("UNKNOWN_TOPIC_OR_PARTITION", True),
    4: ("INVALID_FETCH_SIZE", True),
    5: ("LEADER_NOT_AVAILABLE", True),
    6: ("NOT_LEADER_OR_FOLLOWER", False),  # KAFKA-13574: may follow an append
    7: ("REQUEST_TIMED_OUT", False),
    8: ("BROKER_NOT_AVAILABLE", True),
    9: ("REPLICA_NOT_AVAILABLE", True),
    10: ("MESSAGE_TOO_LARGE", True),
    13: ("NETWORK_EXCEPTION", False),
    17: ("INVALID_TOPIC_EXCEPTION", True),
    18: ("RECORD_LIST_TOO_LARGE", True),
    19: ("NOT_ENOUGH_REPLICAS", True),  # checked before the append
    20: ("NOT_ENOUGH_REPLICAS_AFTER_APPEND", False),  # appended, not replicated
    21: ("INVALID_REQUIRED_ACKS", True),
    29: ("TOPIC_AUTHORIZATION_FAILED", True),
    31: ("CLUSTER_AUTHORIZATION_FAILED", True),
    32: ("INVALID_TIMESTAMP", True),
    35: ("UNSUPPORTED_VERSION", True),
    36: ("TOPIC_ALREADY_EXISTS", True),
    37: ("INVALID_PARTITIONS", True),
    38: ("INVALID_REPLICATION_FACTOR", True),
    40: ("INVALID_CONFIG", True),
    41: ("NOT_CONTROLLER", True),
    42: ("INVALID_REQUEST", True),
    43: ("UNSUPPORTED_FOR_MESSAGE_FORMAT", True),
    44: ("POLICY_VIOLATION", True),
    56: ("KAFKA_STORAGE_ERROR", False),
    74: ("FENCED_LEADER_EPOCH", False),
    75: ("UNKNOWN_LEADER_EPOCH", False),
    87: ("INVALID_RECORD", True),
    89: ("THROTTLING_QUOTA_EXCEEDED", True),
}

# librdkafka's local (client-side) codes: negative, below -1.
LOCAL_CODES: dict[int, tuple[str, bool]] = {
    -199: ("_BAD_MSG", False),
    -197: ("_DESTROY", False),
    -196: ("_FAIL", False),
    -195: ("_TRANSPORT", False),  # connection lost: the request may have been sent
    -193: ("_RESOLVE", True),
    -192: ("_MSG_TIMED_OUT", False),
    -190: ("_UNKNOWN_PARTITION", True),
    -188: ("_UNKNOWN_TOPIC", True),
    -187: ("_ALL_BROKERS_DOWN", False),
    -186: ("_INVALID_ARG", True),
    -185: ("_TIMED_OUT", False),
    -184: ("_QUEUE_FULL", True),  # never enqueued
    -172: ("_STATE", True),
    -152: ("_PURGE_QUEUE", True),  # purged before it was sent
    -151: ("_PURGE_INFLIGHT", False),
    -150: ("_FATAL", False),
}


def code_name(code: int) -> str:
    entry = KAFKA_CODES.get(code) or LOCAL_CODES.get(code)
    return entry[0] if entry else f"ERROR_{code}"


def classify_send(code: int | None, name: str | None = None, *, retried: bool = False) -> Outcome:
    """The outcome of a produce that failed with `code` (None: no code, e.g. a timeout in
    the harness): unknown codes are indeterminate, and so is every code when the client may
    have sent the record more than once (`retried`, see the module docstring)."""
    if code is None:
        return Outcome("info", name or "TIMEOUT", None)
    entry = KAFKA_CODES.get(code) or LOCAL_CODES.get(code)
    if entry is None:
        return Outcome("info", name or f"ERROR_{code}", code)
    return Outcome("fail" if entry[1] and not retried else "info", entry[0], code)


def classify_read(code: int | None, name: str | None = None) -> Outcome:
    """Reads change nothing: any error is a definite failure."""
    return Outcome("fail", name or (code_name(code) if code is not None else "TIMEOUT"), code)


class ClientError(Exception):
    """A request failed with a Kafka (or librdkafka) error `code` (None: timed out locally).
    `retried`: the client may have sent the record in more than one attempt, and `code` is
    the last one's (a send's outcome is then indeterminate)."""

    def __init__(self, code: int | None, name: str | None = None, detail: str = "", *, retried: bool = False):
        self.code = code
        self.name = name or (code_name(code) if code is not None else "TIMEOUT")
        self.detail = detail
        self.retried = retried
        super().__init__(f"{self.name}{': ' + detail if detail else ''}{' (may follow client retries)' if retried else ''}")

    def send_outcome(self) -> Outcome:
        return classify_send(self.code, self.name, retried=self.retried)
