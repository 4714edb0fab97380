"""The wrack broker's loss rules: what one run may lose, from its configuration and fault history.

`choose(options, events=...) -> checkers.policy.Policy` is a pure function of the test
options and the history's nemesis events (fault events and `cluster-state` observations). It
only picks *names*; what each name allows, and why in words, is the one table
checkers/queue/policy.py's `ALLOWANCES`. Every pick carries the rule that made it, the
reason, and the fault events behind it; the report shows them, and the one verdict
(checkers/verdict.py) applies them.

Loss is allowed only where the protocol makes no promise (reasoning in docs/harness.md,
"Expected-anomaly policy"):
- acks=1 (or a per-op mix) -> `acks1`;
- min ISR < 2 (or RF 1) -> `min-isr1`;
- unclean leader election on (`--unclean-election`) -> `unclean-election`;
- transactions (`--txn-p`) -> `txn`;
- idempotent producers (`--idempotence`) allow nothing: a note says a duplicate is a bug
  (as everywhere: no policy allows `duplicate`);
- more lossy shutdowns of one partition's replicas at once than min.insync.replicas - 1
  (seed 002, 5.1-5.2: the ELR's bound; counted by suites/wrack/lossy.py from the fault events,
  the observed ISRs and the controller's ISR changes in the nodes' logs) ->
  `power-loss-unflushed`, for those partitions only: the pick names the partitions (`keys`)
  and the events that exceeded the bound, and the verdict does not allow the same anomaly in
  other partitions;
- the harness stopped before the final read-back (killed) -> `final-read-deadline`;
- a `wipe` of the disk of a consumer group's coordinator -> `offsets-one-copy`, for those
  groups only: the broker keeps committed offsets on the coordinator alone (no replicated
  `__consumer_offsets`, docs/broker.md), so a `lost-commit` of theirs is its known limit;
- otherwise `strict`: nothing. Power loss of at most min.insync.replicas - 1 replicas of
  each partition at a time, a flush per message, corruption or a wipe of one replica: strict.
Switching a broker safeguard off allows nothing more: finding the bug it guards against is
the point of such a run. The log workload (linearizability) has one loss verdict instead of
the queue checker's types (`allowed_by`); the no-op workload has nothing to lose.
"""

from __future__ import annotations

import zlib
from collections.abc import Mapping, Sequence
from typing import Any

from checkers.policy import Pick, Policy
from checkers.queue.policy import WHY, allowed_by
from suites.wrack.lossy import Durability, Loss, durability

LOSSY_SHUTDOWNS = "power-loss-unflushed"  # the named policy for a partition over the ELR's bound
SHOWN = 10  # lossy shutdowns named in a note (all of them are in `durability`)
IDEMPOTENCE_NOTE = ("idempotent producers (--idempotence, up to 5 requests in flight): the leader recognises a "
                    "retried batch by its producer id, epoch and sequence, so a duplicate is the broker's bug "
                    "whatever the faults (KIP-98); no policy allows one")


def _flush_per_message(flush_policy: Any) -> bool:
    return str(flush_policy) in ("every", "1", "always")


def coordinator_node(group: str, nodes: int) -> str:
    """The node whose broker coordinates `group` (broker/server/offsets.py's `coordinator_for`:
    crc32 of the group over the sorted broker ids; node nI runs broker id I-1)."""
    return f"n{zlib.crc32(group.encode('utf-8')) % nodes + 1}"


def _wiped_groups(options: Mapping[str, Any], events: Sequence[Mapping[str, Any]]
                  ) -> tuple[list[str] | None, str] | None:
    """The queue workload's groups (`wrack-t<thread>`) whose coordinator's disk a `wipe` took,
    and why; None when no disk was wiped. With membership changes (node ids renumbered) every
    group counts (keys None)."""
    wiped = sorted({n for e in events if e.get("f") == "wipe" for n in (e.get("value") or {}).get("nodes", [])})
    if not wiped:
        return None
    nodes = int(options.get("nodes", 5) or 5)
    groups = [f"wrack-t{t}" for t in range(int(options.get("concurrency_threads") or nodes))]
    if any(e.get("f") in ("remove-node", "add-node") for e in events):
        return None, f"disks wiped ({', '.join(wiped)}) with node ids renumbered"
    hit = [g for g in groups if coordinator_node(g, nodes) in wiped]
    return (hit, f"the disk of {', '.join(wiped)} wiped, the coordinator of {', '.join(hit)}") if hit else None


def _configuration(options: Mapping[str, Any], isr: int) -> list[tuple[str, str, str]]:
    """(name, rule, the setting in words) of the picks the configuration alone makes."""
    acks = str(options.get("acks", "all"))
    out = []
    if acks in ("1", "mixed"):
        out.append(("acks1", f"acks={acks}", f"acks={acks}"))
    if isr < 2:
        out.append(("min-isr1", f"min ISR {isr}", f"min ISR {isr}"))
    if float(options.get("txn_p") or 0) > 0:
        out.append(("txn", "txn ops", "txn ops (--txn-p)"))
    if options.get("unclean_election"):
        out.append(("unclean-election", "unclean election on", "unclean leader election on (--unclean-election)"))
    return out


def _describe(x: Loss) -> str:
    return f"{x.node} by {x.f} (event {x.index} at {x.time / 1e9:.2f} s)"


def _exceeded_reason(d: Durability) -> str:
    groups: dict[tuple[tuple[int, str], ...], list[str]] = {}  # partitions over the bound by the same events
    for k, v in sorted(d.exceeded.items()):
        groups.setdefault(tuple((x.index, x.node) for x in v), []).append(k)
    parts = []
    for keys in groups.values():
        v = d.exceeded[keys[0]]
        parts.append(f"{', '.join(keys)}: {len(v)} replicas lost data at once ({'; '.join(map(_describe, v))})")
    how = ("per the observed ISRs" if d.observed else
           "no ISR observations: counted only while the earlier ones could not have rejoined")
    return (f"more lossy unclean shutdowns of one partition's replicas at once than min.insync.replicas-1 = "
            f"{d.bound}, so the protocol promises nothing for them (seed 002, 5.1.2) ({how}): "
            + " | ".join(parts) + ". The allowance covers those partitions only: the same anomaly in "
            "another partition is not allowed")


def _within_note(d: Durability) -> str:
    hit = ", ".join(f"{k}: {n}" for k, n in sorted(d.peak.items())) or "none"
    how = "" if d.observed else (" (no ISR observations: a replica counts as back once it could have "
                                 "rejoined, which never hides a bug)")
    listed = "; ".join(map(_describe, d.losses[:SHOWN]))
    if len(d.losses) > SHOWN:
        listed += f"; and {len(d.losses) - SHOWN} more"
    return (f"{len(d.losses)} lossy unclean shutdown(s) ({listed}); at most "
            f"{max(d.peak.values(), default=0)} replica(s) of a partition lost data at once (per partition: "
            f"{hit}), within min.insync.replicas-1 = {d.bound}{how}: with acks=all the ELR promises no "
            "acknowledged write is lost")


def choose(options: Mapping[str, Any], *, incomplete: bool = False,
           events: Sequence[Mapping[str, Any]] | None = None, keys: Sequence[str] = (),
           isr_changes: Sequence[Mapping[str, Any]] = ()) -> Policy:
    """The policy of a run (see the module docstring). `events`: the history's nemesis events in
    order (None: unknown, so no fault event allows anything); `keys`: the workload's partitions;
    `isr_changes`: the controller's ISR changes from the nodes' logs (suites/wrack/lossy.py `durability`);
    `incomplete`: the harness stopped before the final read-back (killed), so acknowledged sends
    may never have been read."""
    workload = options.get("workload", "queue")
    if workload == "noop":
        return Policy(notes=["the no-op workload has nothing to lose"])
    checker = "linearizable" if workload == "log" else "queue"
    isr = min(int(options.get("min_isr", 2) or 1), int(options.get("rf", 3) or 1))
    picks = [Pick(n, f"{said}: {WHY[n]}", allowed_by(checker, n), rule) for n, rule, said in _configuration(options, isr)]
    notes: list[str] = []
    d = None
    if events is not None:
        d = durability(events, min_isr=isr, nemesis=list(options.get("nemesis") or []),
                       flush_every=_flush_per_message(options.get("flush_policy")), keys=keys,
                       all_hold_all=int(options.get("rf", 3) or 1) >= int(options.get("nodes", 5) or 1),
                       isr_changes=isr_changes)
        if d.exceeded and isr >= 2:
            evs = sorted({x.index: x for v in d.exceeded.values() for x in v}.values(), key=lambda x: x.index)
            picks.append(Pick(LOSSY_SHUTDOWNS, _exceeded_reason(d), allowed_by(checker, LOSSY_SHUTDOWNS),
                              "more concurrent lossy shutdowns than min ISR - 1 in " + ", ".join(sorted(d.exceeded)),
                              [x.to_dict() for x in evs], keys=sorted(d.exceeded)))
        elif d.losses and isr >= 2:
            notes.append(_within_note(d))
    if checker == "queue" and events is not None and (wiped := _wiped_groups(options, events)) is not None:
        groups, why = wiped
        picks.append(Pick("offsets-one-copy", f"{why}: {WHY['offsets-one-copy']}",
                          allowed_by(checker, "offsets-one-copy"), "a group coordinator's disk wiped",
                          keys=groups))
    if incomplete and checker == "queue":
        picks.append(Pick("final-read-deadline", "the harness stopped before the final read-back: "
                          + WHY["final-read-deadline"], allowed_by(checker, "final-read-deadline"),
                          "final read not done"))
    if not picks:
        notes.append(WHY["strict"] + ", no anomaly is allowed")
    if options.get("idempotence"):
        notes.append(IDEMPOTENCE_NOTE)
    if options.get("safeguards_off"):
        notes.append("safeguards switched off (" + ", ".join(options["safeguards_off"]) +
                     "): nothing more is allowed; the run is meant to find the bug they guard against")
    strict = "strict: lossy shutdowns within min ISR - 1 per partition" if d is not None and d.losses else "strict"
    return Policy(picks, notes, d, strict_rule=strict)
