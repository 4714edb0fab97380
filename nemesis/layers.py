"""A background layer beside a rotation: packages that play on their own clock while the
rotation plays the others in turn.

A package of tier `BACKGROUND` (nemesis/schedule.py's `FaultPackage.tier`) does not take a
turn in `nemesis.schedule.rotation`: `layered(packages, interval, rng, calm)` plays the
other packages by `rotation` and the background ones by `nemesis.schedule.combined` (each
flips on and off every `interval`, ±50 %), merged in time order. Background faults are
those that act on another plane than the rotation's and leave its faults alone (the client
path's proxy rules, a client's producer fenced): they overlap every fault of the rotation,
so a client retries through a leader change, a commit meets a slow answer, and so on.

Both schedules count each delay from the end of the op before it; merged, each keeps its
own clock (the sum of its delays) and an op's delay is counted from the op before it in the
merged order.
"""

from __future__ import annotations

import random
from collections.abc import Iterator, Sequence

from nemesis.core import FaultOp
from nemesis.schedule import FaultPackage, combined, rotation

BACKGROUND = -1  # FaultPackage.tier of a package played beside the rotation


def layered(pkgs: Sequence[FaultPackage], interval: float, rng: random.Random, calm: float = 0.25
            ) -> Iterator[tuple[float, FaultOp]]:
    """(delay after the previous op, op) forever; see the module docstring. Without
    background packages this is `rotation` itself; without others, `combined`."""
    front = [p for p in pkgs if p.tier != BACKGROUND]
    back = [p for p in pkgs if p.tier == BACKGROUND]
    if not back:
        yield from rotation(front, interval, rng, calm)
        return
    # each its own rng (drawn from the schedule's), so the rotation's draws do not depend on the layer's
    rot = rotation(front, interval, random.Random(rng.random()), calm) if front else iter(())
    bg = combined(back, interval, random.Random(rng.random()))
    streams = [rot, bg]
    due: list[tuple[float, FaultOp] | None] = [None, None]
    clocks = [0.0, 0.0]
    now = 0.0
    while True:
        for i, s in enumerate(streams):
            if due[i] is None:
                nxt = next(s, None)
                if nxt is not None:
                    clocks[i] += nxt[0]
                    due[i] = (clocks[i], nxt[1])
        live = [i for i in (0, 1) if due[i] is not None]
        if not live:
            return
        i = min(live, key=lambda j: due[j][0])  # type: ignore[index]
        at, op = due[i]  # type: ignore[misc]
        due[i] = None
        yield max(0.0, at - now), op
        now = max(now, at)
