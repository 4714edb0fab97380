"""Bug triggers: each historical replication bug's trigger written once, as data.

`steps` is the vocabulary (roles of one partition, actions, bounded waits), `catalog` the
triggers (`TRIGGERS`, `ALIASES`, `resolve`). Two drivers play them: the simulation's
(broker/sim/driver.py, for the random runs' story mix in broker/sim/stories.py and the named
scenarios in broker/sim/scenarios.py) and the real-node one (suites/wrack/stories.py, through the
Nemesis's faults).

Why here, on the broker floor, and not in broker/sim or suites/wrack: the simulation may
import only the broker and the ground floor, and the wrack suite may import the broker but
the broker nothing above it, so the broker floor is the only one both drivers can read. Within it, not
in broker/sim: the real-node driver must not depend on the simulator, and a trigger is a
fact about the protocol (its roles, its messages, the safeguard whose bug it brings back:
broker/core/safeguards.py), not about either environment; not in broker/core either, which
is the sans-IO protocol itself. The package is pure data and imports only broker.core's
safeguard names.
"""

from broker.triggers.catalog import ALIASES, TRIGGERS, resolve
from broker.triggers.steps import Trigger

__all__ = ["ALIASES", "TRIGGERS", "Trigger", "resolve"]
