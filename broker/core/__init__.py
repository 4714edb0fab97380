"""The sans-IO replication core: controller, brokers' replica manager, elections.

Every state machine here takes messages (dataclasses in `messages.py`) and the current
time in milliseconds and returns actions (`actions.py`); none does I/O or reads a clock.
The asyncio shell (`broker/server.py`) and the deterministic simulation (`broker/sim/`)
drive the same code. See docs/broker-replication.md.
"""
