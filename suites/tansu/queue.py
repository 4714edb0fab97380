"""The queue workload as Tansu runs it: the consuming clients read in assign mode without the
per-thread consumer groups that commit on every poll (workloads/queue.py, `group`).

Those commits are synchronous (librdkafka's `commit(asynchronous=False)`), which has no
timeout: against Tansu, whose every broker names itself the coordinator of every group under
one node id, one such commit never returned, more than 5 minutes after every fault had healed,
and the whole run waited for it (docs/findings/tansu-0.6.0.md). Consumer groups on Tansu are
the group workload's to test (workloads/group.py), with commits whose outcome is bounded.
"""

from __future__ import annotations

from typing import Any

from workloads.queue import QueueClient, QueueWorkload, is_send_lane


class TansuQueueWorkload(QueueWorkload):
    """QueueWorkload whose consuming clients commit to no group (module docstring)."""

    def client(self, thread: int, process: int, bootstrap: str) -> Any:
        if is_send_lane(thread, self.opts):
            return super().client(thread, process, bootstrap)
        return QueueClient(self.io_factory(process, bootstrap), self.opts)
