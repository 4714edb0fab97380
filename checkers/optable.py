"""The op table: one compact record per op of a history, in completion order.

Built by `checkers.stats.op_table` (any history) and by the queue checker's pass
(`checkers.queue.core`); read by `checkers.stats.summarize` and the plots.
It lives outside the queue package so that the statistics need none of the queue checker.
"""

from __future__ import annotations

from array import array
from typing import Any

OK, INFO, FAIL = 0, 1, 2
TYPE_CODE = {"ok": OK, "info": INFO, "fail": FAIL}
TYPE_NAMES = ("ok", "info", "fail")
NAN = float("nan")


class OpTable:
    """Per-op records in completion order: the compact op table stats and plots share.

    One flat `array('d')` of 6 numbers per op (`FIELDS`): process, f (a code into
    `f_names`), type (0 ok, 1 info, 2 fail), t0/t1 invoke and completion times (t1 is NaN
    for an op never completed), and index: the op's name, the `index` of its completion
    event (of its invoke if it never completed; NaN if the caller did not give it).
    Doubles hold integers exactly up to 2**53 (104 days of nanoseconds). `columns()`
    gives numpy views, plus `done` (completed or not).
    """

    FIELDS = ("process", "f", "type", "t0", "t1", "index")
    WIDTH = len(FIELDS)
    __slots__ = ("data", "f_names", "_f_code")

    def __init__(self) -> None:
        self.data = array("d")
        self.f_names: list[str] = []
        self._f_code: dict[str, int] = {}

    def f_code(self, f: str) -> int:
        c = self._f_code.get(f)
        if c is None:
            c = self._f_code[f] = len(self.f_names)
            self.f_names.append(f)
        return c

    def add(self, process: int, f: str, type_code: int, t0: float, t1: float | None,
            index: float = NAN) -> None:
        """One op; `t1` None for an op never completed."""
        self.data.extend((process, self.f_code(f), type_code, t0, NAN if t1 is None else t1, index))

    def __len__(self) -> int:
        return len(self.data) // self.WIDTH

    def columns(self) -> dict[str, Any]:
        """Numpy float64 views, one per field (no copy), and the boolean column `done`."""
        # lazy: numpy takes ~60 ms; `wrack` imports this module at every start (cmd_check's POLICIES)
        import numpy as np

        a = np.frombuffer(self.data, dtype=np.float64) if len(self.data) else np.zeros(0)
        a = a.reshape(-1, self.WIDTH)
        cols = {name: a[:, i] for i, name in enumerate(self.FIELDS)}
        cols["done"] = ~np.isnan(cols["t1"])
        return cols
