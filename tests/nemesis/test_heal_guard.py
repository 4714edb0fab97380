"""always_heal: an exception inside the block still heals and removes the cluster."""

from __future__ import annotations

import random

import pytest

from clusters import local
from nemesis.core import FaultOp, Nemesis
from nemesis.guard import always_heal

pytestmark = pytest.mark.root


def test_exception_in_block_heals_and_tears_down(make_cluster):
    c = make_cluster(2)
    nem = Nemesis(c, rng=random.Random(0))
    with pytest.raises(RuntimeError, match="boom"), always_heal(c, nemesis=nem) as guard:
        nem.invoke(FaultOp("start-partition", "halves"))
        raise RuntimeError("boom")
    assert guard.errors == []
    assert not [ns for ns in local._netns_list() if ns.startswith(f"wrack-{c.name}-")]
    assert guard.cleanup() == []  # idempotent
