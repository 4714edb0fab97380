"""The leader cut: a partition's leader cut off from its ISR followers, its other links kept.

`cut-leader` (op value {"candidates": [[T, P], ...]}) takes the first candidate partition
with a leader, an ISR follower and no replica on the active controller's node (the fault
stories' `Story.choose`: a follower on the controller's node would cut the leader off from
the controller too, and the controller would fence it and elect a follower; seen in the
first run), else the first whose leader is on the controller's node, else the first (`_choose`).
It reads the roles from the active controller's node (as the stories do), then applies
`start-partition`
{"cut": [[leader], followers]} (recorded as such, so `stop-partition` ends it). The leader
keeps the controller: after replica.lag.time.max.ms it shrinks the ISR to itself, and a
lossy crash of it then is the ELR's case (seed 002, KIP-966 Last Replica Standing). The op
returns once the ISR is the leader alone, or after `WAIT_S` (a fault package's hold time
counts from then), at once when a follower is on the controller's node (every partition has
one in a 3-node cluster: the cut then isolates the leader), and is recorded as `cut-leader`
with what it saw: {"topic", "partition", "leader", "followers", "keeps_controller",
"isr_alone", "waited_s"}.

`install_leader_cut(nemesis)` registers the op (`harness.faults`' `partition-leader` draws
it or a whole isolation of the leader).
"""

from __future__ import annotations

import time
from typing import Any

from nemesis.core import FaultOp, Nemesis
from nemesis.targets import PartitionView, TargetError
from suites.wrack.stories import POLL_S, Story, StoryError

WAIT_S = 20.0  # longer than the test clusters' replica.lag.time.max.ms (6 s) plus the shrink's round trip
CHOOSE_S = 1.0  # how long a candidate with the roles is waited for (ISRs refill after a fault)


def cut_leader(nemesis: Nemesis, value: dict[str, Any], wait_s: float = WAIT_S) -> dict[str, Any]:
    """Cut a candidate partition's leader off from its ISR followers and wait for the ISR to
    shrink to it (module docstring). TargetError when that partition has no leader now."""
    roles = Story(nemesis, "cut-leader")  # only its choice and view of the roles: no steps, nothing to undo
    tp, v = _choose(roles, [(t, int(p)) for t, p in value["candidates"]])
    if v.leader is None:
        raise TargetError(f"partition {tp[0]}-{tp[1]} has no leader")
    nemesis.invoke(FaultOp("start-partition", {"cut": [[v.leader], v.followers]}))
    keeps_controller = _keeps_controller(roles, v)
    t0 = time.monotonic()
    alone = False
    while keeps_controller and time.monotonic() - t0 < wait_s:
        try:
            w = roles.view(tp)
            alone = w.leader == v.leader and w.isr == [v.leader]
        except Exception:  # noqa: BLE001 - no answer now: poll again
            alone = False
        if alone:
            break
        time.sleep(POLL_S)
    return {"topic": tp[0], "partition": tp[1], "leader": v.leader, "followers": v.followers,
            "keeps_controller": keeps_controller, "isr_alone": alone, "waited_s": round(time.monotonic() - t0, 2)}


def _choose(roles: Story, cands: list[tuple[str, int]]) -> tuple[tuple[str, int], PartitionView]:
    """The first candidate without a replica on the active controller's node (`Story.choose`),
    else the first whose leader is on it and keeps its quorum (its followers, cut off from
    it, are fenced and leave the ISR: the same end), else the first (the cut then takes the
    leader's controller too: the controller fences it, as a whole isolation would; nothing
    to wait for)."""
    try:
        return roles.choose(cands, 1, wait=CHOOSE_S)
    except StoryError:
        pass
    views = []
    for tp in cands:
        try:
            views.append((tp, roles.view(tp)))
        except Exception:  # noqa: BLE001 - metadata unavailable for this one: try the next
            continue
    led = [(tp, v) for tp, v in views if v.leader is not None and v.leader == v.controller and v.followers
           and _keeps_controller(roles, v)]
    if led:
        return led[0]
    return views[0] if views else (cands[0], roles.view(cands[0]))


def _keeps_controller(roles: Story, v: PartitionView) -> bool:
    """Whether the leader keeps the active controller through the cut: the controller is not
    on a follower's node, and if it is the leader's own, the voters outside the followers
    are a majority (else the followers elect a controller of their own and it fences the
    leader: in a 3-node cluster, where all three are voters)."""
    if v.controller is None:
        return True
    if v.controller in v.followers:
        return False
    voters = roles.voters()
    return v.controller != v.leader or not voters or len(voters - set(v.followers)) > len(voters) // 2


def install_leader_cut(nemesis: Nemesis) -> None:
    """Register `cut-leader` on `nemesis`."""
    nemesis.register("cut-leader", lambda value: cut_leader(nemesis, value))
