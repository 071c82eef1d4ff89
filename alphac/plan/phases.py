"""Reduce and replicate phases of a combine tree, and the delivery of its result.

The reduce phase lists every value that moves up the tree (which subtree, from whom, to
which branch at whom, in the order the branches run). The replicate phase moves the
result back down: to every leaf owner (`CombineReplicateAll`) or only along the path to
one owner (`CombineDeliverTo t`), leaving everybody else's value as it was.
"""

from __future__ import annotations

from dataclasses import dataclass

from alphac.ir.nodes import TreeBranch, TreeLeaf, TreeNode
from alphac.plan.tree import postorder, replicate_edges


@dataclass(frozen=True)
class Transfer:
    """One value on one tree edge.

    `value` names what moves: `c<o>` is owner o's contribution, `b<j>` the j-th branch in
    post-order. `branch` is the branch (post-order number) that combines it on arrival;
    -1 in the replicate phase, where the value is always the combined result.
    """

    step: int
    sender: int
    receiver: int
    value: str
    branch: int = -1


@dataclass(frozen=True)
class Delivery:
    """`CombineReplicateAll` (target None) or `CombineDeliverTo target`."""

    target: int | None = None

    @property
    def kind(self) -> str:
        return "replicate-all" if self.target is None else "deliver-to"

    def __str__(self) -> str:
        return "CombineReplicateAll" if self.target is None else f"CombineDeliverTo {self.target}"


REPLICATE_ALL = Delivery()


def branch_numbers(nodes) -> dict[int, int]:
    """id(branch) -> its post-order branch number."""
    out: dict[int, int] = {}
    for node in nodes:
        if isinstance(node, TreeBranch):
            out[id(node)] = len(out)
    return out


def value_name(node: TreeNode, numbers: dict[int, int]) -> str:
    return f"c{node.owner}" if isinstance(node, TreeLeaf) else f"b{numbers[id(node)]}"


def reduce_phase(root: TreeNode, nodes=None) -> tuple[Transfer, ...]:
    """Every subtree value sent to the owner of the branch that combines it, in run order.
    `nodes`: the tree's post-order, if already at hand."""
    nodes = postorder(root) if nodes is None else nodes
    numbers = branch_numbers(nodes)
    out: list[Transfer] = []
    for node in nodes:
        if not isinstance(node, TreeBranch):
            continue
        for child in (node.left, node.right):
            if child.owner != node.owner:
                out.append(Transfer(len(out), child.owner, node.owner,
                                    value_name(child, numbers), numbers[id(node)]))
    return tuple(out)


def sample_reduce_phase(tree) -> tuple[Transfer, ...]:
    """The sample tree's reduce phase (a `sampletree.PlacedSampleTree`): every right child
    sent to the owner of its parent branch, in run order; values are named by their
    samples (`s[lo,hi)`), branches by their post-order number among the branches."""
    out: list[Transfer] = []
    branch = 0
    for node in tree.nodes:
        if node.is_block:
            continue
        if node.right.owner != node.owner:
            out.append(Transfer(len(out), node.right.owner, node.owner, node.right.name, branch))
        branch += 1
    return tuple(out)


def replicate_phase(root: TreeNode, delivery: Delivery = REPLICATE_ALL, nodes=None,
                    value: str | None = None) -> tuple[Transfer, ...]:
    """The result's way down: to every leaf owner, or along the path to `delivery.target`.
    `value`: the result's name, if not the root branch's (the sample tree's total)."""
    if value is None and isinstance(root, TreeBranch):
        nodes = postorder(root) if nodes is None else nodes
        value = f"b{sum(1 for x in nodes if isinstance(x, TreeBranch)) - 1}"
    elif value is None:
        value = f"c{root.owner}"
    edges = replicate_edges(root, delivery.target)
    return tuple(Transfer(i, e.sender, e.receiver, value) for i, e in enumerate(edges))

