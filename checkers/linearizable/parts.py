"""The records a check is made of: one op in a model's encoding (`LinOp`) and one partition
with its outcome (`Partition`). No logic."""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass, field
from typing import Any

from checkers.linearizable.window import Window
from contracts.pairing import Op


@dataclass(slots=True)
class LinOp:
    """One op of a partition, in the model's encoding, with where it came from."""

    op: Op
    key: Hashable
    call: tuple
    readonly: bool
    start: float
    end: float | None  # None: indeterminate (returns at +infinity)


@dataclass
class Partition:
    """One independently checked sub-history and its outcome.

    `order`: for a valid partition, the positions in `ops` of the linearization found
    (indeterminate ops not in it did not take effect). `linearization` is a list of
    (position in `ops`, state after): for a valid partition filled from `order` when a
    picture asks (`check.replay`), for an invalid one the longest partial linearization of
    its counterexample `window` (from one of the window's first states), which
    `cannot_follow` (a position in `ops`) cannot extend.
    `frontier` (undecided partitions): how far the search got, see `Plan.frontier`.
    """

    key: Hashable
    ops: list[LinOp]
    valid: bool | str = "unknown"
    order: list[int] = field(default_factory=list)
    linearization: list[tuple[int, Any]] = field(default_factory=list)
    cannot_follow: int | None = None
    failed_in: Any = None  # the state `cannot_follow` is illegal in
    configs: int = 0
    moves: int = 0
    stage: str = ""  # what decided it (rule 6, relaxed, exact), or the stage still running
    window: Window | None = None
    frontier: tuple[int, int] | None = None
