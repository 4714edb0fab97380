"""Play a fault schedule against a Nemesis the way a test does: `harness.faults`'
ScheduleGenerator on the interpreter's nemesis thread for `duration` s, then the heal op
(`Nemesis.final_heal`), through `harness.faults.nemesis_client` (no client threads)."""

from __future__ import annotations

import random
from typing import Any

from contracts import generator as gen
from contracts.history import FINAL_HEAL_F
from harness import interpreter
from harness.faults import ScheduleGenerator, heal_op, nemesis_client


def play_schedule(nem: Any, pkgs: list[Any], *, duration: float, interval: float, seed: int) -> list[str]:
    """Run the schedule and the final heal; the errors recorded (failed faults and heals)."""
    schedule = ScheduleGenerator(pkgs, interval, random.Random(seed))
    g = gen.phases(gen.time_limit(duration, gen.nemesis(schedule)), gen.nemesis(gen.once(heal_op())))
    events: list[dict[str, Any]] = []
    sink = nem.history

    class Tee:
        """The history, with a copy of every event appended."""

        def append(self, ev: dict[str, Any]) -> dict[str, Any]:
            events.append(ev)
            return sink.append(ev)

        def __getattr__(self, name: str) -> Any:
            return getattr(sink, name)

    nem.history = Tee()
    try:
        interpreter.run(g, threads=0, clients=lambda t, p: None, history=nem.history, rng=random.Random(seed),
                        nemesis=nemesis_client(nem, pkgs))
    finally:
        nem.history = sink
    finals = [e for e in events if e.get("f") == FINAL_HEAL_F]
    assert len(finals) == 1, "the heal op ran once"
    errors = [str(e["value"]) for e in events if e.get("f") == "nemesis-error"]
    errors += [x for e in events if e.get("f") == "heal-errors" for x in e["value"]["errors"]]
    return errors
