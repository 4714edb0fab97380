"""The deterministic simulation of the replication protocol (FoundationDB-style).

The controller and N brokers from `broker/core/` run in one process on a virtual clock,
over a simulated network (delay, drop, partition, reorder) and simulated disks (the
unsynced suffix is lost on a simulated power loss), all driven by one seeded RNG. After
every step the invariants of the seed documents are checked (`invariants.py`). A failing
seed replays exactly: ``python -m broker.sim --seed N -v``.
"""
