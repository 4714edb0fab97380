"""The sans-IO replication core: controller (on its Raft quorum), brokers' replica manager,
elections, producer state, the property table.

Every state machine here takes messages (dataclasses in `messages.py`, Raft's in
`raft_messages.py`) and the current time in milliseconds and returns `Actions` (what to send, in `messages.py`); none
does I/O or reads a clock. The asyncio shell (`broker/server/node.py`) and the
deterministic simulation (`broker/sim/`) drive the same code. See docs/broker-replication.md
and docs/broker-raft.md.
"""
