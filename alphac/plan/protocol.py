"""Combine trees and their projection onto owners: the op lists the runtime interprets.

A global schedule is built from the tree (post-order reduce, then replicate, update,
replica comparison and publication) with every send immediately followed by its matching
receive; projecting it onto each owner is deadlock-free even when sends block.
"""

from __future__ import annotations

from dataclasses import dataclass

from alphac.ir.nodes import ExplicitTree, Hierarchy, Star, Topology, TreeBranch, TreeLeaf, TreeNode

# Op kinds, in the order they are numbered in the executables' embedded tables.
OP_KINDS = (
    "local",        # dst <- this owner's (sum of contributions in sample order, sample count)
    "send",         # send register a to peer (frame kind: combine value)
    "recv",         # dst <- frame from peer
    "combine",      # dst <- a + b (element-wise, left then right; counts added)
    "update",       # apply the update program to the mean of register a
    "digest-send",  # send this owner's state digest to peer
    "digest-recv",  # receive peer's state digest and compare with this owner's; refuse if unequal
    "publish-send",  # tell peer that every replica agreed
    "publish-recv",  # wait for the publish verdict from peer
)
OP_CODE = {kind: i for i, kind in enumerate(OP_KINDS)}


@dataclass(frozen=True)
class Op:
    kind: str
    peer: int = -1
    dst: int = -1
    a: int = -1
    b: int = -1

    def words(self) -> tuple[int, int, int, int, int]:
        """The op as five signed integers: kind code, peer, dst, a, b."""
        return (OP_CODE[self.kind], self.peer, self.dst, self.a, self.b)


def hierarchy_children(owner: int, n: int, fanout: int) -> tuple[int, ...]:
    first = fanout * owner + 1
    return tuple(c for c in range(first, first + fanout) if c < n)


def build_tree(n: int, topology: Topology) -> TreeNode:
    """The ordered combine tree of a topology over owners 0..n-1 (iteratively: n may be large)."""
    if isinstance(topology, ExplicitTree):
        return topology.root
    if isinstance(topology, Star):
        node: TreeNode = TreeLeaf(0)
        for o in range(1, n):
            node = TreeBranch(0, node, TreeLeaf(o))
        return node
    assert isinstance(topology, Hierarchy)
    f = topology.fanout
    subtree: dict[int, TreeNode] = {}
    for o in range(n - 1, -1, -1):
        node = TreeLeaf(o)
        for c in hierarchy_children(o, n, f):
            node = TreeBranch(o, node, subtree.pop(c))
        subtree[o] = node
    return subtree[0]


def node_owner(node: TreeNode) -> int:
    return node.owner


def postorder(root: TreeNode) -> list[TreeNode]:
    """Nodes in post-order (left, right, node), without recursion."""
    out: list[TreeNode] = []
    stack: list[tuple[TreeNode, bool]] = [(root, False)]
    while stack:
        node, seen = stack.pop()
        if isinstance(node, TreeLeaf) or seen:
            out.append(node)
            continue
        stack.append((node, True))
        stack.append((node.right, False))
        stack.append((node.left, False))
    return out


def leaves(root: TreeNode) -> list[int]:
    return [n.owner for n in postorder(root) if isinstance(n, TreeLeaf)]


@dataclass(frozen=True)
class Transfer:
    """One value moving along a tree edge: from the owner computing `child` to its parent."""

    sender: int
    receiver: int


def reduce_edges(root: TreeNode) -> list[Transfer]:
    """The reduce phase: every transfer of a subtree value to the owner of its parent branch,
    in the order they occur."""
    out = []
    for node in postorder(root):
        if isinstance(node, TreeBranch):
            for child in (node.left, node.right):
                if child.owner != node.owner:
                    out.append(Transfer(child.owner, node.owner))
    return out


def replicate_edges(root: TreeNode, deliver_to: int | None = None) -> list[Transfer]:
    """The replicate phase, reversing the reduce edges (pre-order, each owner once).

    With `deliver_to`, only the path from the root to that leaf owner (CombineDeliverTo).
    """
    edges = []
    seen = {root.owner}
    # pre-order walk: a branch owner forwards the result to the owner of each child subtree
    stack: list[TreeNode] = [root]
    order: list[Transfer] = []
    while stack:
        node = stack.pop()
        if isinstance(node, TreeBranch):
            for child in (node.right, node.left):
                stack.append(child)
            for child in (node.left, node.right):
                if child.owner not in seen:
                    seen.add(child.owner)
                    order.append(Transfer(node.owner, child.owner))
    edges = order
    if deliver_to is None:
        return edges
    parent = {e.receiver: e.sender for e in edges}
    path = []
    o = deliver_to
    while o in parent:
        path.append(Transfer(parent[o], o))
        o = parent[o]
    return list(reversed(path))


@dataclass(frozen=True)
class OwnerProtocol:
    """What one owner does: `update_ops` once per update, then `finish_ops` once before
    publishing (replica comparison and the publish verdict)."""

    owner: int
    update_ops: tuple[Op, ...]
    finish_ops: tuple[Op, ...]


def project(root: TreeNode, n: int) -> tuple[OwnerProtocol, ...]:
    """Each owner's protocol for the replicated learner. Registers: 0 = own local value;
    one register per received or combined value otherwise."""
    ops: list[list[Op]] = [[] for _ in range(n)]
    nodes = postorder(root)
    reg: dict[int, int] = {}  # id(node) -> register at its owner
    next_reg = [1] * n
    for o in set(leaves(root)):
        ops[o].append(Op("local", dst=0))

    def value_at(node: TreeNode, owner: int) -> int:
        """Register holding node's value at `owner`, transferring it there if needed."""
        src = node.owner
        r = reg[id(node)]
        if src == owner:
            return r
        dst = next_reg[owner]
        next_reg[owner] += 1
        ops[src].append(Op("send", peer=owner, a=r))
        ops[owner].append(Op("recv", peer=src, dst=dst))
        return dst

    for node in nodes:
        if isinstance(node, TreeLeaf):
            reg[id(node)] = 0
            continue
        a = value_at(node.left, node.owner)
        b = value_at(node.right, node.owner)
        dst = next_reg[node.owner]
        next_reg[node.owner] += 1
        ops[node.owner].append(Op("combine", dst=dst, a=a, b=b))
        reg[id(node)] = dst

    total = {root.owner: reg[id(root)]}
    for t in replicate_edges(root):
        dst = next_reg[t.receiver]
        next_reg[t.receiver] += 1
        ops[t.sender].append(Op("send", peer=t.receiver, a=total[t.sender]))
        ops[t.receiver].append(Op("recv", peer=t.sender, dst=dst))
        total[t.receiver] = dst
    for o in range(n):
        if o in total:
            ops[o].append(Op("update", a=total[o]))
    # replica comparison up the reduce edges (each child owner once), verdict back down
    fin: list[list[Op]] = [[] for _ in range(n)]
    up = []
    seen = set()
    for t in reduce_edges(root):
        if t.sender not in seen:
            seen.add(t.sender)
            up.append(t)
    for t in up:
        fin[t.sender].append(Op("digest-send", peer=t.receiver))
        fin[t.receiver].append(Op("digest-recv", peer=t.sender))
    for t in reversed(up):
        fin[t.receiver].append(Op("publish-send", peer=t.sender))
        fin[t.sender].append(Op("publish-recv", peer=t.receiver))
    return tuple(OwnerProtocol(o, tuple(ops[o]), tuple(fin[o])) for o in range(n))


def register_count(proto: OwnerProtocol) -> int:
    regs = [0]
    for op in proto.update_ops:
        regs.extend(r for r in (op.dst, op.a, op.b) if r >= 0)
    return max(regs) + 1


def peers(proto: OwnerProtocol) -> tuple[int, ...]:
    return tuple(sorted({op.peer for op in proto.update_ops + proto.finish_ops if op.peer >= 0}))
