"""The broker's AlterPartition channel to the controller (Kafka's AlterPartitionManager
over its own controller channel), sans-IO.

One request per partition in flight until it is answered; a newer proposal of the same
partition waits behind it (a newer one replaces a queued one) and goes once the answer
comes, if its replica still waits for it. An unanswered request is sent again, unchanged
(same correlation id, epochs and ISR), whenever the link that carries it breaks
(`lost`) and after the request timeout (`resend_timed_out`), also when newer metadata
has replaced the proposal since: it may then reach the controller after the controller
changed the partition, which is what the partition-epoch and broker-epoch checks are for.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

from broker.core.messages import Actions, AlterPartitionRequest, AlterPartitionResponse, TopicPartition


@dataclass(slots=True)
class InFlightAlter:
    """An AlterPartition request sent and not yet answered, and when it last went out."""

    request: AlterPartitionRequest
    sent_at: int


class AlterPartitionChannel:
    """The AlterPartition requests of one broker's partition leaders. `still_wanted(req)`
    says whether the replica of `req.tp` still waits for `req` (its pending proposal)."""

    def __init__(self, controller_id: int, request_timeout_ms: int,
                 still_wanted: Callable[[AlterPartitionRequest], bool]) -> None:
        self.controller_id = controller_id
        self.request_timeout_ms = request_timeout_ms
        self._still_wanted = still_wanted
        self.inflight: dict[TopicPartition, InFlightAlter] = {}
        self.queued: dict[TopicPartition, AlterPartitionRequest] = {}

    def send(self, req: AlterPartitionRequest, now: int, acts: Actions) -> None:
        """Send `req` unless another request of its partition is in flight (then it waits
        for that answer; a newer proposal replaces a queued one)."""
        cur = self.inflight.get(req.tp)
        if cur is not None and cur.request.correlation_id != req.correlation_id:
            self.queued[req.tp] = req
            return
        self.inflight[req.tp] = InFlightAlter(req, now)
        acts.send(self.controller_id, req)

    def answered(self, msg: AlterPartitionResponse, now: int, acts: Actions) -> None:
        """The in-flight request of `msg.tp` is answered: send the queued one if its replica
        still waits for it."""
        cur = self.inflight.get(msg.tp)
        if cur is None or cur.request.correlation_id != msg.correlation_id:
            return
        del self.inflight[msg.tp]
        nxt = self.queued.pop(msg.tp, None)
        if nxt is not None and self._still_wanted(nxt):
            self.send(nxt, now, acts)

    def lost(self, now: int) -> Actions:
        """The link that carries AlterPartition broke (its own, as Kafka's alter-partition
        channel): every unanswered request again, unchanged, whatever the partition did since."""
        acts = Actions()
        for f in self.inflight.values():
            f.sent_at = now
            acts.send(self.controller_id, f.request)
        return acts

    def resend_timed_out(self, now: int, acts: Actions) -> None:
        """An unanswered request is sent again after the request timeout (Kafka's network
        client disconnects then, and the channel sends it again)."""
        for f in self.inflight.values():
            if now - f.sent_at >= self.request_timeout_ms:
                f.sent_at = now
                acts.send(self.controller_id, f.request)

    def forget(self, tp: TopicPartition) -> None:
        """The partition is gone from this broker: nothing of it is sent again."""
        self.inflight.pop(tp, None)
        self.queued.pop(tp, None)

    def deadlines(self) -> Iterator[int]:
        """When each unanswered request is due to go again."""
        return (f.sent_at + self.request_timeout_ms for f in self.inflight.values())
