"""Network partitions: iptables DROP grudges inside each node's own namespace.

Rules live in a dedicated chain `WRACK-NEMESIS` jumped to from INPUT (the jump carries the
comment `wrack`); `heal` flushes only that chain, `teardown` removes the jump and the chain,
so nothing else in the node's firewall is touched. Addresses outside the cluster (the
harness's own) are never dropped.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

from clusters.node import Node
from nemesis.grudge import Grudge

CHAIN = "WRACK-NEMESIS"

_ENSURE = (f"iptables -w -N {CHAIN} 2>/dev/null; "
           f"iptables -w -C INPUT -j {CHAIN} -m comment --comment wrack 2>/dev/null || "
           f"iptables -w -I INPUT 1 -j {CHAIN} -m comment --comment wrack")


def frame_test(head: bytes) -> str:
    """The xt_u32 test: the 4 bytes at offset 4 of the TCP payload are `head` (the IP and
    TCP header lengths are read from the packet)."""
    if len(head) != 4:
        raise ValueError(f"a frame head is 4 bytes, not {len(head)}")
    return f"0>>22&0x3C@12>>26&0x3C@4=0x{head.hex()}"


def frame_mark(head: bytes) -> int:
    """The conntrack mark (low 16 bits) of connections held for frames with `head`: one per
    message type, so holding one kind never drops a connection marked for another."""
    return 0x5700 | head[3]


def _parallel(nodes: list[Node], fn: Any) -> list[Any]:
    if not nodes:
        return []
    with ThreadPoolExecutor(max_workers=min(16, len(nodes))) as ex:
        return list(ex.map(fn, nodes))


class IptablesNet:
    """Apply and heal grudges on `nodes` (by node name)."""

    def __init__(self, nodes: list[Node]):
        self.nodes = {n.name: n for n in nodes}

    def drop(self, grudge: Grudge, *, new_only: bool = False, min_bytes: int | None = None,
             frame: bytes | None = None, replace: bool = False, loss: float | None = None) -> None:
        """Add DROP rules so that each node drops the packets of the nodes in its grudge.

        `new_only` drops only packets that open connections (conntrack state NEW): the node
        refuses connections from its grudge while its own connections to them keep working
        both ways. This makes one-way partitions one-way for TCP (a full inbound DROP also
        kills the replies of the node's own connections, so TCP dies both ways).

        `min_bytes` drops only packets at least that long (IP length): small packets
        (handshakes, ACKs, pings, requests and empty answers) still pass, data-carrying
        answers do not, so a peer keeps hearing requests it cannot usefully answer.

        `frame` holds the TCP connections on which a segment starts with that frame head
        (these 4 bytes after its first 4: a length-prefixed frame's head, e.g. a message
        type): that segment marks its connection (conntrack mark `frame_mark`) and every
        later packet from the sources on a marked connection is dropped too. One kind of
        request is held in the network, retries and TCP retransmissions included, while
        other connections pass.

        `loss` drops each packet with that probability only (iptables' statistic match, in
        place of tc netem's loss, which this kernel lacks): a lossy link, whose TCP
        retransmissions make it a slow one too.

        `replace`: every node's rules become exactly these (a node outside the grudge loses
        its own), in one iptables-restore commit per node, so a rule kept across the change
        never lapses (flushing, then adding, let a held request's retransmission through
        the gap)."""
        rules = self._rules(new_only, min_bytes, frame, loss)

        def one(node: Node) -> None:
            srcs = sorted(grudge.get(node.name, ()))
            ips = ",".join(self.nodes[s].address for s in srcs)
            lines = [f"-A {CHAIN} -s {ips} {r}" for r in rules] if srcs else []
            if replace:
                text = "\n".join(["*filter", f"-F {CHAIN}", *lines, "COMMIT", ""])
                node.sh(f"{_ENSURE} && iptables-restore -w --noflush <<'RULES'\n{text}RULES", timeout=30)
            elif lines:
                node.sh(" && ".join([_ENSURE, *(f"iptables -w {x}" for x in lines)]), timeout=30)

        _parallel(list(self.nodes.values()), one)

    @staticmethod
    def _rules(new_only: bool, min_bytes: int | None, frame: bytes | None, loss: float | None = None) -> list[str]:
        """The match and target of each rule a grudge's sources get (see `drop`)."""
        if frame is not None:
            mark = f"{frame_mark(frame):#x}/0xffff"
            return [f'-p tcp -m u32 --u32 "{frame_test(frame)}" -j CONNMARK --set-xmark {mark}',
                    f"-p tcp -m connmark --mark {mark} -j DROP"]
        match = "-m conntrack --ctstate NEW " if new_only else ""
        if min_bytes is not None:
            match += f"-m length --length {int(min_bytes)}:65535 "
        if loss is not None:
            match += f"-m statistic --mode random --probability {float(loss):.4f} "
        return [f"{match}-j DROP"]

    def heal(self) -> None:
        """Flush the harness's chain on every node (other rules stay)."""
        _parallel(list(self.nodes.values()),
                  lambda n: n.sh(f"iptables -w -F {CHAIN} 2>/dev/null; true", timeout=30))

    def teardown(self) -> None:
        """Remove the chain and its jump from every node."""
        _parallel(list(self.nodes.values()), lambda n: n.sh(
            f"iptables -w -D INPUT -j {CHAIN} -m comment --comment wrack 2>/dev/null; "
            f"iptables -w -F {CHAIN} 2>/dev/null; iptables -w -X {CHAIN} 2>/dev/null; true", timeout=30))

    def frames_dropped(self, node: str) -> int:
        """How many segments that start a held frame the `frame` rules on `node` have seen since
        they were added (each was dropped)."""
        res = self.nodes[node].sh(f"iptables -w -L {CHAIN} -n -v -x 2>/dev/null; true", timeout=30)
        return sum(int(line.split()[0]) for line in res.stdout.splitlines() if " u32 " in line)

    def rules(self, node: str) -> list[str]:
        """The rules of the harness's chain on `node` (iptables -S form)."""
        res = self.nodes[node].sh(f"iptables -w -S {CHAIN} 2>/dev/null; true", timeout=30)
        return [line for line in res.stdout.splitlines() if line.startswith("-A ")]
