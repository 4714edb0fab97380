"""The broker's IO layer, sans-IO: what a shell does with the core's `Actions`.

`router.NodeRouter` is one node's decisions between its core machines (the `Broker`, the
`QuorumController`) and the world: which link carries which message, in which order the
quorum's state and log are made durable, where the broker's controller requests go, which
waiter gets an answer. It hands its shell only primitive effects (`effects.py`); the asyncio
process (broker/server/node.py) and the deterministic simulation (broker/sim/cluster.py)
each perform them in their own way, so the simulation runs the process's routing.
`links.py` names the links (`LinkKey`) and keeps a node's open ones (`LinkBook`).
"""
