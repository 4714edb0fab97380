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
class ChangeResult:
    registration: PartitionRegistration
    unclean: bool = False
    leader_changed: bool = False


def _ordered(replicas: tuple[int, ...], members: set[int] | frozenset[int]) -> tuple[int, ...]:
    return tuple(r for r in replicas if r in members)


def change_partition(
    reg: PartitionRegistration,
    *,
    target_isr: tuple[int, ...] | set[int] | frozenset[int],
    usable: Callable[[int], bool],
    policy: ElectionPolicy,
    unclean_shutdown: frozenset[int] = frozenset(),
    leader_recovery_state: int | None = None,
    force_leader: int | None = None,
) -> ChangeResult | None:
    """The registration after asking for `target_isr`, electing as needed.

    `usable(b)`: broker b is registered, unfenced and not shutting down.
    `unclean_shutdown`: brokers that just re-registered after an unclean shutdown (they
    leave the ELR for LastKnownELR). `force_leader`: the replica chosen by unclean
    recovery (log inspection); it becomes the only ISR member, RECOVERING.
    """
    replicas = reg.replicas
    isr_set = set(target_isr)
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
    leader = reg.leader
    recovery = reg.leader_recovery_state if leader_recovery_state is None else leader_recovery_state
    unclean = False
    if force_leader is not None:
        leader, new_isr, elr, lkelr, recovery, unclean = force_leader, (force_leader,), (), (), RECOVERING, True
    elif not (leader != NO_LEADER and leader in isr_set and usable(leader)):
        leader = NO_LEADER
        for r in new_isr:
            if usable(r):
                leader = r
                break
        if leader == NO_LEADER and not new_isr and policy.elr:
            for r in elr:
                if usable(r):
                    leader, new_isr = r, (r,)
                    elr = tuple(x for x in elr if x != r)
                    break
        if leader == NO_LEADER and policy.unclean:
            for r in replicas:
                if usable(r):
                    leader, new_isr, elr, lkelr, recovery, unclean = r, (r,), (), (), RECOVERING, True
                    break
    if policy.elr and len(new_isr) >= policy.min_isr:
        elr, lkelr = (), ()
    leader_changed = leader != reg.leader
    new = replace(
        reg,
        isr=new_isr,
        leader=leader,
        elr=elr,
        last_known_elr=lkelr,
        leader_recovery_state=recovery,
        leader_epoch=reg.leader_epoch + 1 if leader_changed else reg.leader_epoch,
        partition_epoch=reg.partition_epoch,
    )
    if new == reg:
        return None
    return ChangeResult(replace(new, partition_epoch=reg.partition_epoch + 1), unclean, leader_changed)
