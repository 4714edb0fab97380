"""Partition changes and leader elections (Kafka's PartitionChangeBuilder, KIP-966).

`change_partition` is a pure function from a registration and a requested ISR to the next
registration (or None when nothing changes). Election order (docs/protocol-rules.md "Elections"):
keep the current leader if it is still in the ISR and usable; else the first replica in
assignment order that is in the target ISR and usable; else, when the ISR is empty, the
first usable replica of the ELR (it becomes the sole ISR member); else, if unclean
election is allowed, the first usable replica (the partition enters RECOVERING); else no
leader. The ELR (when the `elr` safeguard is on) holds the replicas removed from an ISR
below min.insync.replicas; it is cleared, with LastKnownELR, once the ISR reaches it.
Without the `elr` safeguard the ISR never shrinks to empty (the Kafka 3.5 rule that
produces Last Replica Standing).

Reassignment (KRaft's PartitionReassignmentReplicas, docs/broker.md "Kafka APIs"): a
partition being moved to a target replica list has `replicas` = the target followed by
the replicas it drops, `adding_replicas` and `removing_replicas`. Every change completes
the reassignment once its ISR holds every target replica: the dropped replicas leave the
replicas and the ISR (and the leadership), and the leader epoch is bumped whenever
replicas leave, so the removed ones are fenced.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from broker.core.messages import NO_LEADER
from broker.core.metadata import RECOVERING, PartitionRegistration


@dataclass(frozen=True, slots=True)
class ElectionPolicy:
    """How one partition may elect: its min.insync.replicas, whether KIP-966's ELR is in
    force, and whether unclean election is allowed."""

    min_isr: int = 1
    elr: bool = True
    unclean: bool = False


@dataclass(frozen=True, slots=True)
class Assignment:
    """A partition's replicas and the reassignment in progress, if any."""

    replicas: tuple[int, ...]
    adding: tuple[int, ...] = ()
    removing: tuple[int, ...] = ()


def assignment_of(reg: PartitionRegistration) -> Assignment:
    return Assignment(reg.replicas, reg.adding_replicas, reg.removing_replicas)


def reassignment_to(reg: PartitionRegistration, target: tuple[int, ...]) -> Assignment:
    """The assignment that moves `reg` to `target` (replacing any reassignment in progress:
    its adding replicas that `target` lacks are removed again)."""
    removing = tuple(sorted(set(reg.replicas) - set(target)))
    adding = tuple(sorted(set(target) - set(reg.replicas)))
    return Assignment(tuple(target) + removing, adding, removing)


def reassignment_revert(reg: PartitionRegistration) -> tuple[Assignment, tuple[int, ...], bool]:
    """Cancelling the reassignment in progress: (the original assignment, its ISR, whether
    the ISR had only adding replicas so the first original replica is forced in: unclean)."""
    original = tuple(r for r in reg.replicas if r not in reg.adding_replicas)
    isr = tuple(r for r in reg.isr if r not in reg.adding_replicas)
    if isr or not original:
        return Assignment(original), isr, False
    return Assignment(original), original[:1], True


def _completed(a: Assignment, isr: set[int]) -> tuple[Assignment, set[int]] | None:
    """The assignment and ISR once the reassignment completes, None if it cannot yet (or
    none is in progress): every target replica must be in the ISR."""
    if not a.adding and not a.removing:
        return None
    new_isr = isr - set(a.removing)
    replicas = tuple(r for r in a.replicas if r not in a.removing)
    if not new_isr or not replicas or not set(replicas) <= new_isr:
        return None
    return Assignment(replicas), new_isr


@dataclass(frozen=True, slots=True)
class ChangeResult:
    registration: PartitionRegistration
    unclean: bool = False
    leader_changed: bool = False


def _ordered(replicas: tuple[int, ...], members: set[int] | frozenset[int]) -> tuple[int, ...]:
    return tuple(r for r in replicas if r in members)


@dataclass(slots=True)
class _Election:
    """What an election decides: the leader, ISR, ELR and LastKnownELR, the recovery state,
    and whether it was unclean."""

    leader: int
    isr: tuple[int, ...]
    elr: tuple[int, ...]
    last_known_elr: tuple[int, ...]
    recovery: int
    unclean: bool = False


def _elect(e: _Election, replicas: tuple[int, ...], isr_set: set[int] | frozenset[int], usable: Callable[[int], bool],
           policy: ElectionPolicy, force_leader: int | None, preferred: bool) -> _Election:
    """The leader, in the order of the module docstring, starting from the current one (`e`
    holds the registration's leader and the target ISR, ELR and LastKnownELR)."""
    if force_leader is not None:
        return _Election(force_leader, (force_leader,), (), (), RECOVERING, True)
    if preferred and replicas and replicas[0] in isr_set and usable(replicas[0]):
        e.leader = replicas[0]
        return e
    if e.leader != NO_LEADER and e.leader in isr_set and usable(e.leader):
        return e
    e.leader = next((r for r in e.isr if usable(r)), NO_LEADER)
    if e.leader == NO_LEADER and not e.isr and policy.elr:
        for r in e.elr:
            if usable(r):
                e.leader, e.isr = r, (r,)
                e.elr = tuple(x for x in e.elr if x != r)
                break
    if e.leader == NO_LEADER and policy.unclean:
        for r in replicas:
            if usable(r):
                return _Election(r, (r,), (), (), RECOVERING, True)
    return e


def change_partition(
    reg: PartitionRegistration,
    *,
    target_isr: tuple[int, ...] | set[int] | frozenset[int],
    usable: Callable[[int], bool],
    policy: ElectionPolicy,
    unclean_shutdown: frozenset[int] = frozenset(),
    leader_recovery_state: int | None = None,
    force_leader: int | None = None,
    assignment: Assignment | None = None,
    preferred: bool = False,
) -> ChangeResult | None:
    """The registration after asking for `target_isr`, electing as needed.

    `usable(b)`: broker b is registered, unfenced and not shutting down.
    `unclean_shutdown`: brokers that just re-registered after an unclean shutdown (they
    leave the ELR for LastKnownELR). `force_leader`: the replica chosen by unclean
    recovery (log inspection); it becomes the only ISR member, RECOVERING.
    `assignment`: new replicas (a reassignment's start or cancellation; default: the
    registration's). `preferred`: elect the first replica if it is in the ISR and usable
    (a preferred leader election).
    """
    a = assignment_of(reg) if assignment is None else assignment
    isr_set = set(target_isr)
    done = _completed(a, isr_set)
    if done is not None:
        a, isr_set = done
    replicas = a.replicas
    if not policy.elr and not isr_set and reg.isr:
        # Kafka 3.5: the ISR cannot shrink to empty; the last replica standing stays.
        isr_set = {reg.isr[0]} if len(reg.isr) == 1 else {reg.leader if reg.leader in reg.isr else reg.isr[0]}
    new_isr = _ordered(replicas, isr_set)
    elr: tuple[int, ...] = ()
    lkelr: tuple[int, ...] = ()
    if policy.elr:
        lkelr = _ordered(replicas, (set(reg.last_known_elr) | (set(reg.elr) & unclean_shutdown)) - isr_set)
        if len(new_isr) < policy.min_isr:
            elr = _ordered(replicas, (set(reg.isr) | set(reg.elr)) - isr_set - unclean_shutdown)
    recovery = reg.leader_recovery_state if leader_recovery_state is None else leader_recovery_state
    e = _elect(_Election(reg.leader, new_isr, elr, lkelr, recovery), replicas, isr_set, usable, policy, force_leader,
               preferred)
    leader, new_isr, elr, lkelr, recovery, unclean = e.leader, e.isr, e.elr, e.last_known_elr, e.recovery, e.unclean
    if policy.elr and len(new_isr) >= policy.min_isr:
        elr, lkelr = (), ()
    leader_changed = leader != reg.leader
    fence_removed = not set(reg.replicas) <= set(replicas)  # KRaft bumps the epoch when replicas leave
    new = replace(
        reg,
        replicas=replicas,
        adding_replicas=a.adding,
        removing_replicas=a.removing,
        isr=new_isr,
        leader=leader,
        elr=elr,
        last_known_elr=lkelr,
        leader_recovery_state=recovery,
        leader_epoch=reg.leader_epoch + 1 if leader_changed or fence_removed else reg.leader_epoch,
        partition_epoch=reg.partition_epoch,
    )
    if new == reg:
        return None
    return ChangeResult(replace(new, partition_epoch=reg.partition_epoch + 1), unclean, leader_changed)
