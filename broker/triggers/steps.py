"""The vocabulary of bug triggers: roles of one partition, actions on them, bounded waits.

A trigger (`Trigger`) is data: the roles it needs and a tuple of steps. It does nothing by
itself; a driver plays it on a cluster (broker/sim/driver.py on a `SimCluster`,
suites/wrack/stories.py on real nodes through the Nemesis). Both drivers read the same steps,
so a trigger is written once (docs/nemesis.md "Fault stories").

**Roles** (strings) of the partition a driver picks: `LEADER`; the ISR followers in
election order (the controller elects the first ISR member in assignment order), named by
the trigger (`Roles.followers`, e.g. ("b", "c")); `FOLLOWERS`, every ISR follower when the
trigger starts; `CONTROLLER`, the active controller (the simulation: every controller).
A driver binds them once, when the trigger starts; `Wait.rebind` moves `LEADER` to the new
leader a wait saw.

**Actions.** The network (between roles; the drivers keep a list of their own rules and
heal only those):
- `Drop({AT: (FROM, ...)}, only=...)`: at each AT, what comes from each FROM is lost (one
  way; `Drop.both` writes a cut both ways). `only` narrows it: `ALL` (every packet),
  `FETCH_ANSWERS` (the FROM's fetch answers: the AT's requests still reach it, it learns
  nothing back: a starved follower), `RECORDS` (only answers that carry records: small
  answers such as epoch errors pass, so the follower keeps asking), `ALTER_PARTITION`
  (AlterPartition requests from FROM held at the controller AT, its retries too, while the
  rest of the link flows). `replace=True`: the drops this trigger made before are healed in
  the same move.
- `Isolate(ROLE)`: the role's nodes hear nobody and nobody hears them (the controller too).
- `Heal()`: every drop and isolation of this trigger is healed.

Processes: `Stop` (controlled shutdown, down until started), `Kill` (SIGKILL, down until
started), `Start`, `CrashRestart` (SIGKILL and start at once: the new registration fences
the old incarnation, no session timeout), `PowerLoss` (unsynced writes lost; it comes back),
`Wipe` (the data disk lost; it comes back empty with a new broker epoch), `Pause`, `Resume`.

**Time.** `Sleep(name, seconds, sim=(lo, hi))`: a real-node run sleeps `seconds` (a real
cluster's timing jitters by itself); the simulation draws from `sim` (default: `seconds`)
to explore interleavings; a zero `seconds` is a simulation-only pause. `Wait(name, cond,
timeout)`: poll until `cond` holds, at most `timeout` s (`sim_timeout` in the simulation,
where the lag time may be 30 s); when it does not: `on_fail=END` ends the trigger (the
driver undoes what it did), `GO_ON` goes on. `bug_only`: the awaited event is the bug
itself, which happens only with the safeguard off: not meeting it is the safeguard holding.
`If(wait, *steps)` plays the steps only if the wait is met. `Repeat(n, *steps, sim=(lo,
hi))` and `OneOf(*alternatives, weights=...)`: the simulation draws the count and the
alternative; a real-node run plays `n` times and the first alternative (the one tuned on
real clusters).

**Conditions** on the partition's registration as the controller has it (`IsrIs`, `InIsr`,
`NotInIsr`, `LeaderIs`, `NewLeader`, `HasLeader`, `IsrSize`, `All`), evaluated here by
`holds(view, roles)` on any view with `.leader` (None when there is none) and `.isr`; and on
nodes, which each driver observes its own way (`Committed`, `Held`, `Live`, `Fenced`,
`Unflushed`, `Ahead`). `Unflushed` is observable in the simulation only: a real-node run
passes it (LazyFS keeps every write a broker did not sync).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

LEADER, CONTROLLER, FOLLOWERS = "leader", "controller", "followers"
ALL, FETCH_ANSWERS, RECORDS, ALTER_PARTITION = "all", "fetch-answers", "records", "alter-partition"
END, GO_ON = "end", "go-on"

Who = str | tuple[str, ...]  # one role or several


def _roles(who: Who) -> tuple[str, ...]:
    return (who,) if isinstance(who, str) else tuple(who)


# ---------------------------------------------------------------------- conditions


class Cond:
    """A condition a wait polls for. View conditions define `holds`; node conditions are
    observed by the drivers."""

    def holds(self, view: Any, roles: Mapping[str, Any]) -> bool:
        raise NotImplementedError(f"{type(self).__name__} is observed by the driver, not on a view")


@dataclass(frozen=True)
class IsrIs(Cond):
    """The ISR is exactly these roles' nodes."""

    who: Who

    def holds(self, view: Any, roles: Mapping[str, Any]) -> bool:
        return set(view.isr) == {n for r in _roles(self.who) for n in _nodes(roles, r)}


@dataclass(frozen=True)
class InIsr(Cond):
    role: str

    def holds(self, view: Any, roles: Mapping[str, Any]) -> bool:
        return roles[self.role] in view.isr


@dataclass(frozen=True)
class NotInIsr(Cond):
    role: str

    def holds(self, view: Any, roles: Mapping[str, Any]) -> bool:
        return roles[self.role] not in view.isr


@dataclass(frozen=True)
class LeaderIs(Cond):
    role: str

    def holds(self, view: Any, roles: Mapping[str, Any]) -> bool:
        return view.leader is not None and view.leader == roles[self.role]


@dataclass(frozen=True)
class NewLeader(Cond):
    """A leader, none of these roles' nodes (by default: not the bound leader)."""

    not_who: Who = LEADER

    def holds(self, view: Any, roles: Mapping[str, Any]) -> bool:
        return view.leader is not None and view.leader not in {n for r in _roles(self.not_who)
                                                                 for n in _nodes(roles, r)}


@dataclass(frozen=True)
class HasLeader(Cond):
    def holds(self, view: Any, roles: Mapping[str, Any]) -> bool:
        return view.leader is not None


@dataclass(frozen=True)
class IsrSize(Cond):
    """At least `n` ISR members."""

    n: int

    def holds(self, view: Any, roles: Mapping[str, Any]) -> bool:
        return len(view.isr) >= self.n


@dataclass(frozen=True)
class All(Cond):
    conds: tuple[Cond, ...]

    def __init__(self, *conds: Cond) -> None:
        object.__setattr__(self, "conds", conds)

    def holds(self, view: Any, roles: Mapping[str, Any]) -> bool:
        return all(c.holds(view, roles) for c in self.conds)


HEALED = All(HasLeader(), IsrSize(2))  # what a driver waits for after undoing a trigger


@dataclass(frozen=True)
class Committed(Cond):
    """The high watermark at `leader` is `count` records past the log end of `behind` (cut
    off: its log end stands): writes committed that `behind` lacks."""

    leader: str
    behind: str
    count: int
    sim_count: int | None = None  # the simulation's workload is slower (tens of records/s)


@dataclass(frozen=True)
class Held(Cond):
    """An `ALTER_PARTITION` drop of this trigger has caught a request."""


@dataclass(frozen=True)
class Live(Cond):
    """The controller counts the role's broker registered and unfenced."""

    role: str


@dataclass(frozen=True)
class Fenced(Cond):
    """The controller counts the role's broker fenced (or unregistered)."""

    role: str


@dataclass(frozen=True)
class Unflushed(Cond):
    """The role's log has records its disk has not synced (simulation only)."""

    role: str


@dataclass(frozen=True)
class Ahead(Cond):
    """The log end of `role` is past that of `other`."""

    role: str
    other: str


def _nodes(roles: Mapping[str, Any], role: str) -> tuple[Any, ...]:
    v = roles[role]
    return tuple(v) if isinstance(v, (tuple, list)) else (v,)


# ---------------------------------------------------------------------- steps


@dataclass(frozen=True)
class Drop:
    """At each key role, what comes from the listed roles is lost (module docstring)."""

    rules: Mapping[str, tuple[str, ...]]
    only: str = ALL
    replace: bool = False

    @staticmethod
    def both(a: Who, b: Who, replace: bool = False) -> Drop:
        """A cut both ways between every role of `a` and every role of `b`."""
        rules: dict[str, list[str]] = {}
        for x in _roles(a):
            rules.setdefault(x, []).extend(_roles(b))
        for y in _roles(b):
            rules.setdefault(y, []).extend(_roles(a))
        return Drop({k: tuple(v) for k, v in rules.items()}, replace=replace)


@dataclass(frozen=True)
class Isolate:
    who: Who


@dataclass(frozen=True)
class Heal:
    pass


@dataclass(frozen=True)
class OnNodes:
    """A process action on the nodes of roles `who`."""

    who: Who


class Stop(OnNodes):
    """Controlled shutdown; down until started."""


class Kill(OnNodes):
    """SIGKILL; down until started."""


class Start(OnNodes):
    """Start (once down)."""


class CrashRestart(OnNodes):
    """SIGKILL and start at once."""


class Pause(OnNodes):
    pass


class Resume(OnNodes):
    pass


@dataclass(frozen=True)
class Lossy(OnNodes):
    """A loss of the node's data; it comes back (the simulation: `sim_back` s later)."""

    sim_back: tuple[float, float] = (0.0, 0.0)


class PowerLoss(Lossy):
    """Unsynced writes lost."""


class Wipe(Lossy):
    """The data disk lost: back empty, with a new broker epoch."""


@dataclass(frozen=True)
class Sleep:
    name: str
    seconds: float
    sim: tuple[float, float] | None = None

    def sim_range(self) -> tuple[float, float]:
        return self.sim if self.sim is not None else (self.seconds, self.seconds)


@dataclass(frozen=True)
class Wait:
    name: str
    cond: Cond
    timeout: float
    on_fail: str = END
    bug_only: bool = False
    rebind: str | None = None  # when met: this role becomes the view's leader
    sim_timeout: float | None = None

    def sim_timeout_s(self) -> float:
        return self.timeout if self.sim_timeout is None else self.sim_timeout


@dataclass(frozen=True)
class If:
    """Play `steps` only if `wait` is met (its `on_fail` is ignored)."""

    wait: Wait
    steps: tuple[Step, ...]

    def __init__(self, wait: Wait, *steps: Step) -> None:
        object.__setattr__(self, "wait", wait)
        object.__setattr__(self, "steps", steps)


@dataclass(frozen=True)
class Repeat:
    """Play `steps` `times` times (the simulation draws the count from `sim`)."""

    times: int
    steps: tuple[Step, ...]
    sim: tuple[int, int] | None = None

    def __init__(self, times: int, *steps: Step, sim: tuple[int, int] | None = None) -> None:
        object.__setattr__(self, "times", times)
        object.__setattr__(self, "steps", steps)
        object.__setattr__(self, "sim", sim)


@dataclass(frozen=True)
class OneOf:
    """One of the alternatives (each a tuple of steps): the simulation draws by `weights`;
    a real-node run plays the first."""

    alternatives: tuple[tuple[Step, ...], ...]
    weights: tuple[float, ...]

    def __init__(self, *alternatives: Sequence[Step], weights: Sequence[float] | None = None) -> None:
        object.__setattr__(self, "alternatives", tuple(tuple(a) for a in alternatives))
        object.__setattr__(self, "weights", tuple(weights) if weights is not None else (1.0,) * len(alternatives))


Step = (Drop | Isolate | Heal | Stop | Kill | Start | CrashRestart | PowerLoss | Wipe | Pause | Resume | Sleep | Wait
        | If | Repeat | OneOf)


# ---------------------------------------------------------------------- the trigger


@dataclass(frozen=True)
class Roles:
    """What a trigger needs of its partition. `followers`: names of the first ISR followers
    in election order (at least `min_followers` must be in the ISR; default: as many as
    named, at least one). `nonvoter`: a follower role that should be outside the controller
    quorum (a voter cut off from the controller calls elections): swapped with another
    follower role when that one is not a voter. `leader_nonvoter`: prefer a partition led by
    a broker outside the quorum."""

    followers: tuple[str, ...] = ()
    min_followers: int = 0
    nonvoter: str | None = None
    leader_nonvoter: bool = False

    def needed(self) -> int:
        return max(self.min_followers, len(self.followers), 1)


@dataclass(frozen=True)
class Trigger:
    """One bug's trigger: its name (one name everywhere), the safeguard whose bug it brings
    back (None: a trigger shape no safeguard brings a bug back to, played for bugs nobody
    planted), the roles it needs and its steps. `aliases`: names it had before (still
    accepted). `min_isr`: it bites only with min.insync.replicas >= this; `unsynced`: only if
    the flush policy ever leaves data unsynced."""

    name: str
    safeguard: str | None
    summary: str
    roles: Roles
    steps: tuple[Step, ...]
    aliases: tuple[str, ...] = ()
    min_isr: int = 1
    unsynced: bool = False
    notes: str = field(default="", compare=False)

    @property
    def lossy(self) -> bool:
        """Whether it loses a replica's data (power loss, wipe)."""
        return any(isinstance(s, Lossy) for s in walk(self.steps))

    @property
    def power_loss(self) -> bool:
        return any(isinstance(s, PowerLoss) for s in walk(self.steps))


def walk(steps: Sequence[Step]) -> list[Step]:
    """Every step, blocks' steps included (depth first)."""
    out: list[Step] = []
    for s in steps:
        out.append(s)
        if isinstance(s, If):
            out += [s.wait, *walk(s.steps)]
        elif isinstance(s, Repeat):
            out += walk(s.steps)
        elif isinstance(s, OneOf):
            for a in s.alternatives:
                out += walk(a)
    return out


def roles_of(who: Who) -> tuple[str, ...]:
    """The roles a step's `who` names."""
    return _roles(who)
