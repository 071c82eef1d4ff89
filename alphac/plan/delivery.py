"""Runtime.NativeCombine's delivery laws (NativeCombineDeliveryLaws), checked on every
delivery the planner plans: what a delivery's declaration promises about who receives the
combined result, and how often.

  * CombineReplicateAll: every leaf owner but the root's receives the result exactly once,
    from an owner that already holds it.
  * CombineDeliverTo t: the transfers form one chain from the root's owner to t, and only
    owners on the tree path from the root to t's leaf receive, once each: on a star the hub
    sends one result instead of three; on a fan-out-2 tree of seven owners the forwarder
    on the path relays and the other subtree receives nothing.

A plan that breaks a law is refused as `combine-delivery-law`.
"""

from __future__ import annotations

from alphac.diagnostics import DiagnosticBag, Span
from alphac.ir.nodes import TreeLeaf, TreeNode
from alphac.plan.phases import Delivery
from alphac.plan.tree import delivery_path, replicate_edges

LAW = "combine-delivery-law"


class PathOwners:
    """For every leaf owner, the owners on the tree path from the root to its leaf, computed
    once per tree (each node's nearest ancestor with another owner), so that a path costs
    its owner changes, not its depth."""

    def __init__(self, nodes: list[TreeNode]):
        self.leaf: dict[int, TreeNode] = {}
        self.hop: dict[int, TreeNode | None] = {id(nodes[-1]): None}
        for node in reversed(nodes):  # reversed post-order: every parent before its children
            if isinstance(node, TreeLeaf):
                self.leaf.setdefault(node.owner, node)
                continue
            for child in (node.left, node.right):
                self.hop[id(child)] = node if child.owner != node.owner else self.hop[id(node)]

    def of(self, owner: int) -> set[int]:
        node = self.leaf.get(owner)
        path = set()
        while node is not None:
            path.add(node.owner)
            node = self.hop[id(node)]
        return path


def violations(root: TreeNode, delivery: Delivery, transfers, paths: PathOwners,
               leaf_owners: set[int]) -> list[str]:
    """What `transfers` (the result's way down, in order) breaks of the delivery's law."""
    held, out = {root.owner}, []
    for t in transfers:
        if t.sender not in held:
            out.append(f"owner {t.sender} sends the result to owner {t.receiver} before it holds it")
        if t.receiver in held:
            out.append(f"owner {t.receiver} receives the result again, from owner {t.sender}")
        held.add(t.receiver)
    if delivery.target is None:
        missing = sorted(leaf_owners - held)
        if missing:
            out.append(f"owners {', '.join(map(str, missing))} never receive the result")
        return out
    path = paths.of(delivery.target)
    off = sorted({t.receiver for t in transfers} - path)
    if off:
        out.append(f"owners {', '.join(map(str, off))} receive it off the path to owner "
                   f"{delivery.target}")
    if delivery.target not in held:
        out.append(f"owner {delivery.target} never receives it")
    return out


def check_delivery(root: TreeNode, delivery: Delivery, transfers, paths: PathOwners,
                   leaf_owners: set[int], span: Span, bag: DiagnosticBag) -> None:
    broken = violations(root, delivery, transfers, paths, leaf_owners)
    if broken:
        law = "NativeCombineReplicateAllLaw" if delivery.target is None else "NativeCombineDeliverToLaw"
        bag.error(LAW, f"the planned {delivery} breaks {law}: {broken[0]}", span,
                  broken[1:] + [f"{len(transfers)} transfers planned"])


def check_deliveries(root: TreeNode, nodes: list[TreeNode], deliveries, span: Span,
                     bag: DiagnosticBag) -> None:
    """Every delivery as the protocols run it (`protocol.replicate_edges`, then
    `protocol.delivery_path` for one target) against its law."""
    paths = PathOwners(nodes)
    leaf_owners = set(paths.leaf)
    edges = replicate_edges(root)
    parent = {e.receiver: e.sender for e in edges}
    for delivery in deliveries:
        planned = edges if delivery.target is None else delivery_path(parent, delivery.target)
        check_delivery(root, delivery, planned, paths, leaf_owners, span, bag)

