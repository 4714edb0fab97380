"""The bug triggers: one definition each, played by the simulation and on real nodes.

Each `Trigger` brings back one safeguard's historical bug when that safeguard is off
(broker/core/safeguards.py) and must lose nothing with it on; one without a safeguard
(`lagging-follower-in-isr`) is a trigger shape for bugs nobody planted and must lose
nothing on the broker as it is. Its timings are those tuned
on real clusters (replica.lag.time.max.ms 6 s, broker session 9 s, a stalled link's 3 s
timeout); `sim=` ranges are what the simulation draws from instead (its random runs explore
interleavings: docs/broker-replication.md). Names: `TRIGGERS` by name, `ALIASES` the names
they had before (the real-node stories' and the simulation's), `resolve(name)`.
"""

from __future__ import annotations

from broker.core import safeguards as sg
from broker.triggers.steps import (
    ALTER_PARTITION,
    CONTROLLER,
    FETCH_ANSWERS,
    FOLLOWERS,
    GO_ON,
    LEADER,
    RECORDS,
    All,
    Committed,
    CrashRestart,
    Drop,
    HasLeader,
    Held,
    If,
    InIsr,
    Isolate,
    IsrIs,
    IsrSize,
    Kill,
    LeaderIs,
    Live,
    NewLeader,
    NotInIsr,
    OneOf,
    PowerLoss,
    Repeat,
    Roles,
    Sleep,
    Start,
    Stop,
    Trigger,
    Unflushed,
    Wait,
    Wipe,
)

COMMITS_WITHOUT = 50  # records a trigger waits to see committed without a cut-off replica
SIM_COMMITS_WITHOUT = 5  # the simulation's workload writes tens of records a second

LAST_REPLICA_STANDING = Trigger(
    "last-replica-standing", sg.ELR,
    "Isolate the leader's ISR followers until the ISR is the leader alone; power loss of the "
    "leader (its unsynced writes are gone); heal. With the ELR a follower is elected from it; "
    "without, the leader is re-elected with what it kept and the followers truncate (KIP-966). "
    "With unclean election on and the ELR members away, the leader is elected uncleanly.",
    Roles(min_followers=1),
    (
        # isolated from every node, the controller too, they are fenced within the session (9 s);
        # the simulation also shuts them down (they leave the ISR at once, clean)
        OneOf((Isolate(FOLLOWERS),), (Stop(FOLLOWERS),)),
        Wait("isr-is-leader", IsrIs(LEADER), 30),
        Sleep("leader-alone", 0, sim=(0.05, 1.5)),  # writes on the leader alone
        Wait("unflushed", Unflushed(LEADER), 3),  # some of them not synced (simulation only)
        PowerLoss(LEADER, sim_back=(0.3, 3.0)),
        Wait("leader-after-loss", HasLeader(), 6, on_fail=GO_ON),
    ),
    aliases=("lrs",), unsynced=True)

HW_TRUNCATION = Trigger(
    "hw-truncation", sg.EPOCH_TRUNCATION,
    "Seed 000 (KIP-101): the second ISR follower C stops hearing the leader and the first "
    "follower B (its requests still reach the leader, which counts what C fetched: C's high "
    "watermark stays behind acknowledged writes). The leader shuts down: B is elected and C "
    "follows it in a new epoch (pre-KIP-101 truncating to its stale high watermark) without "
    "reaching it; B crash-restarts at once (its new registration fences the old one) and C, "
    "the last ISR member, is elected. With epoch-based truncation C kept every acknowledged write.",
    Roles(followers=("b", "c")),
    (
        Drop({"c": ("b", LEADER), "b": ("c",)}),
        Sleep("c-hw-frozen", 1.0, sim=(0.05, 1.5)),
        Stop(LEADER),
        Wait("b-elected", LeaderIs("b"), 20),
        CrashRestart("b"),  # not kill and wait for the fence: the session timeout cost ~8 s a play
        Wait("c-elected", LeaderIs("c"), 20, on_fail=GO_ON),
        Sleep("c-leads", 1.0, sim=(0.0, 1.0)),
    ),
    aliases=("restart-then-kill",))

STALE_HWM_LEADER = Trigger(
    "stale-hwm-leader", sg.LESO_CHECK,
    "The LESO rule (Vanlightly 6.4.1): both ISR followers stop hearing the leader (their "
    "requests still reach it), C a moment before B; C shuts down, so the leader commits on "
    "[leader, B] what C lacks; the leader shuts down and B leads with a stale high watermark "
    "and its LESO at its log end. C comes back fetching from B but gets no records: its fetch "
    "offset is past B's stale high watermark, so without the LESO check B adds it to the ISR; "
    "B crash-restarts and C is elected without the writes. With the check C stays out.",
    Roles(followers=("b", "c")),
    (
        Drop({"c": (LEADER,)}),
        Sleep("c-frozen", 0.5, sim=(0.1, 1.0)),
        Drop({"b": (LEADER,)}),
        Sleep("b-frozen", 0.3, sim=(0.05, 0.5)),
        Stop("c"),
        Wait("c-out-of-isr", NotInIsr("c"), 8),
        # the leader commits on [leader, B] (on real nodes the stop and the poll take longer)
        Sleep("commits-without-c", 0, sim=(0.3, 1.5)),
        Stop(LEADER),
        Wait("b-elected", LeaderIs("b"), 20),
        # RECORDS, not FETCH_ANSWERS: C's first answers (an epoch error, a diverging epoch) must
        # pass, so that its next fetch reaches B at once (held, C asked again only after its
        # link's 3 s timeout); the backlog of the writes it missed is dropped
        Drop({"c": ("b",)}, only=RECORDS, replace=True),
        Start("c"),
        # the simulation's restarted C is unfenced on its heartbeat (every 2 s) and B learns it
        # on its next metadata fetch: C joined after 2.2-5.9 s where it did
        If(Wait("c-in-isr", InIsr("c"), 6, bug_only=True, sim_timeout=9),
           CrashRestart("b"),
           Wait("c-elected", LeaderIs("c"), 20, on_fail=GO_ON),
           Sleep("c-leads", 1.0, sim=(0.0, 1.0))),
    ),
    aliases=("leso",), min_isr=2)

WIPE_DURING_EXPANSION = Trigger(
    "wipe-during-expansion", sg.BROKER_EPOCH_CHECK,
    "Stale broker epoch (KAFKA-14617): the last ISR follower F crash-restarts cut off from the "
    "leader until writes commit without it, then fetches without getting records; the leader "
    "is cut off from the controller and F may catch up: the leader proposes F with F's broker "
    "epoch of now, and the request waits for the link (a pending proposal is sent again when "
    "the controller link breaks and queued until one connects). F is wiped and restarts (a new "
    "broker epoch), starved again; the cut heals (within the leader's session) and the stale "
    "proposal reaches the controller after F's new registration: only the broker-epoch check "
    "keeps the empty F out of the ISR. If F is in, it is cut off from the others, which shut "
    "down: the controller elects F.",
    # a leader that is a quorum voter, cut from the active controller, calls an election and may
    # become the controller itself: its proposal is then never held
    Roles(followers=("x", "f"), leader_nonvoter=True),
    (
        # F restarts cut off from the leader until writes commit without it: starved at once,
        # its first fetch put it back in the ISR (the high watermark stood still while F, dead,
        # was in the ISR, so F's log end was at it, and a fetch request alone counts)
        Drop.both("f", LEADER),
        CrashRestart("f"),
        Wait("f-out-of-isr", NotInIsr("f"), 8),
        Wait("commits-without-f", Committed(LEADER, "f", COMMITS_WITHOUT, SIM_COMMITS_WITHOUT), 10, on_fail=GO_ON),
        Drop({"f": (LEADER,)}, only=FETCH_ANSWERS, replace=True),  # F fetches again, and gets no records
        # the leader proposes F only once its metadata has F unfenced (a restarted broker is
        # fenced until it has caught up with the metadata)
        Wait("f-unfenced", Live("f"), 10, on_fail=GO_ON),
        Sleep("leader-learns", 1.0, sim=(0.5, 1.5)),
        Drop.both(LEADER, CONTROLLER, replace=True),  # the cut; F may catch up now
        Sleep("f-catches-up", 2.0, sim=(0.5, 2.5)),
        Drop({"f": (LEADER,)}, only=FETCH_ANSWERS),
        Wipe("f"),
        Sleep("f-re-registers", 2.0, sim=(0.5, 2.5)),
        Drop({"f": (LEADER,)}, only=FETCH_ANSWERS, replace=True),  # the leader's proposal goes out
        # F out of the ISR: the check held and F cannot be elected (starved, it never catches
        # up); the trigger ends without stopping the others (saves ~10 s on real nodes)
        If(Wait("f-in-isr", InIsr("f"), 3, bug_only=True, sim_timeout=5),
           Drop({"f": (LEADER, "x"), LEADER: ("f",), "x": ("f",)}, replace=True),
           Stop((LEADER, "x")),
           Wait("new-leader", NewLeader((LEADER, "x")), 6, on_fail=GO_ON, bug_only=True),  # F elected
           Sleep("leads", 1.0, sim=(0.0, 1.0))),
    ),
    aliases=("wipe-follower",))

_HOLD = Drop({CONTROLLER: (LEADER,)}, only=ALTER_PARTITION)

STALE_ALTER_PARTITION = Trigger(
    "stale-alter-partition", sg.PARTITION_EPOCH_CHECK,
    "Stale partition epoch (KIP-497): follower A gets no records, so the leader proposes the "
    "ISR [leader, B]; that AlterPartition is held at the controller (retries too, while the "
    "leader's heartbeats flow). B is cut off from everyone and A fetches again: the controller "
    "fences B, the ISR becomes [leader, A] and writes commit without B. B comes back to the "
    "controller (unfenced, same broker epoch) but not to the leader, then the held request "
    "goes through: without the partition-epoch check the ISR becomes [leader, B] (A is cut off "
    "from the leader as the request goes, or it would rejoin at once); the leader shuts down "
    "and B, lacking the writes, is elected.",
    Roles(followers=("a", "b"), nonvoter="b"),  # B is cut off from the controller: a voter would call elections
    (
        _HOLD,
        Drop({"a": (LEADER,)}, only=FETCH_ANSWERS),
        Wait("shrink-held", Held(), 50),
        Drop({CONTROLLER: (LEADER,)}, only=ALTER_PARTITION, replace=True),  # A fetches again
        Drop({"b": (LEADER, "a", CONTROLLER), LEADER: ("b",), "a": ("b",), CONTROLLER: ("b",)}),
        Wait("b-fenced-out", All(NotInIsr("b"), InIsr("a")), 20),
        Wait("commits-without-b", Committed(LEADER, "b", COMMITS_WITHOUT, SIM_COMMITS_WITHOUT), 20, on_fail=GO_ON),
        Drop({"b": (LEADER, "a"), LEADER: ("b",), "a": ("b",)}, replace=True),  # B back with the controller only
        _HOLD,  # re-added at once
        Wait("b-unfenced", Live("b"), 12, on_fail=GO_ON),  # the controller refuses a fenced member
        Sleep("b-settles", 0.5, sim=(0.1, 1.0)),
        # the held request goes; A is cut off from the leader now, or it rejoins the ISR at once
        Drop({"b": (LEADER, "a"), LEADER: ("b", "a"), "a": ("b", LEADER)}, replace=True),
        # not longer: A, cut off from the leader, leaves the ISR after the lag time (6 s in the
        # test clusters) and with it the last candidate but the leader; where the check was off
        # and the bug came, it came within 1.1 s (in the simulation within 0.9 s)
        If(Wait("stale-isr", InIsr("b"), 4, bug_only=True, sim_timeout=2),
           Stop(LEADER),
           Wait("new-leader", NewLeader(), 15, on_fail=GO_ON),
           Sleep("leads", 1.0, sim=(0.0, 1.0))),
    ),
    aliases=("held-alter-partition",))

LEADER_CHURN = Trigger(
    "leader-churn", sg.EPOCH_TRUNCATION,
    "Leader changes in quick succession: the leader crash-restarts (the simulation also draws "
    "a controlled shutdown or a kill -9 with a later restart), and as soon as another replica "
    "leads, that one (three times; the simulation draws 2-4). Followers that truncate on each "
    "new epoch get little time to fetch back before they may be elected.",
    Roles(min_followers=1),
    (
        Repeat(3,
               # a leader alone in the ISR comes back as its own successor (clean election): a
               # real run waits for a follower to rejoin, so that the crash moves leadership
               Wait("isr-{n}", IsrSize(2), 20, sim_timeout=0, on_fail=GO_ON),
               OneOf((CrashRestart(LEADER),),
                     (Stop(LEADER), Sleep("down-{n}", 0, sim=(0.2, 2.0)), Start(LEADER)),
                     (Kill(LEADER), Sleep("down-{n}", 0, sim=(0.2, 2.0)), Start(LEADER)),
                     weights=(0.0, 0.7, 0.3)),
               Wait("leader-{n}", NewLeader(), 20, rebind=LEADER, sim_timeout=5),
               Sleep("leads-{n}", 0, sim=(0.05, 1.5)),
               sim=(2, 4)),
    ),
    aliases=("leader-flap",))

UNCLEAN_CANDIDATES = Trigger(
    "unclean-candidates", sg.CLEAN_ELECTION_ONLY,
    "A follower X leaves the ISR (cut off from the leader; restarted, or left to fall behind), "
    "writes commit without it, then every ISR member is killed: with unclean election X, "
    "lacking them, is elected; the others restart and truncate to it.",
    Roles(followers=("y", "x")),
    (
        Drop.both(LEADER, "x"),
        OneOf((Stop("x"), Sleep("x-down", 0, sim=(0.2, 2.0)), Start("x")), (), weights=(1.0, 1.0)),
        Wait("x-out-of-isr", NotInIsr("x"), 20),
        Sleep("writes-without-x", 1.0, sim=(0.2, 2.0)),
        # killed, they are fenced after their session (9 s); the simulation also shuts them down
        OneOf((Kill((LEADER, "y")),), (Stop((LEADER, "y")),)),
        Wait("x-elected", LeaderIs("x"), 15, on_fail=GO_ON, bug_only=True, sim_timeout=11),
        Sleep("x-leads", 1.0, sim=(0.0, 1.0)),
    ),
    aliases=("unclean-election",))

LAGGING_FOLLOWER_IN_ISR = Trigger(
    "lagging-follower-in-isr", None,
    "Premature ISR expansion (the kind of KAFKA-4485; no safeguard brings it back: a trigger "
    "shape for bugs nobody planted). Follower C is cut off from the leader until it falls out "
    "of the ISR (the lag time, within the leader's epoch) and writes commit without it; then "
    "its fetches reach the leader again but the answers carrying records are dropped, so it "
    "cannot catch up. A follower joins the ISR only once it has reached the high watermark: "
    "C stays out. If C is in the ISR, the leader and B stop and C, lacking committed writes, "
    "is elected.",
    Roles(followers=("b", "c")),
    (
        Drop.both(LEADER, "c"),
        Wait("c-out-of-isr", NotInIsr("c"), 15, sim_timeout=35),  # the random runs draw lag times up to 30 s
        # C stays up (its log end is read from it): writes the leader committed that C lacks
        Wait("commits-without-c", Committed(LEADER, "c", COMMITS_WITHOUT, SIM_COMMITS_WITHOUT), 10, on_fail=GO_ON),
        # RECORDS: C's fetch requests and the small answers pass, those with records do not;
        # from B too, which leads for a moment when the leader and B stop
        Drop({"c": (LEADER, "b")}, only=RECORDS, replace=True),
        If(Wait("c-in-isr", InIsr("c"), 8, bug_only=True, sim_timeout=9),
           Stop((LEADER, "b")),
           Wait("c-elected", LeaderIs("c"), 20, on_fail=GO_ON),
           Sleep("c-leads", 1.0, sim=(0.0, 1.0))),
    ))

TRIGGERS: dict[str, Trigger] = {t.name: t for t in (
    LAST_REPLICA_STANDING, HW_TRUNCATION, STALE_HWM_LEADER, WIPE_DURING_EXPANSION, STALE_ALTER_PARTITION,
    LEADER_CHURN, UNCLEAN_CANDIDATES, LAGGING_FOLLOWER_IN_ISR)}
ALIASES: dict[str, str] = {a: t.name for t in TRIGGERS.values() for a in t.aliases}


def resolve(name: str) -> Trigger:
    """The trigger `name` or an alias names; KeyError naming the known ones."""
    t = TRIGGERS.get(ALIASES.get(name, name))
    if t is None:
        raise KeyError(f"unknown trigger {name!r} (known: {', '.join(TRIGGERS)}; "
                       f"also {', '.join(sorted(ALIASES))})")
    return t
