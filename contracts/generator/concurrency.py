"""`--concurrency`'s spec: how many client threads a test runs."""

from __future__ import annotations


def parse_concurrency(spec: str | int, nodes: int) -> int:
    """`--concurrency`: an integer, or `Kn` = K threads per node (Jepsen's `2n`)."""
    s = str(spec).strip()
    try:
        n = int(s[:-1]) * nodes if s.endswith("n") else int(s)
    except ValueError:
        raise ValueError(f"bad concurrency {spec!r} (an integer, or Kn for K per node)") from None
    if n < 1:
        raise ValueError(f"bad concurrency {spec!r} (must be at least 1)")
    return n
