"""The ordered combine tree of a deployment: its construction, walks, edges and coverage laws.

Builds the tree of a topology (star, hierarchy, the sample tree's owner tree, or a declared
`Runtime.OrderedCombine` tree); lists the transfers along its edges that the protocols run
(reduce, replicate, the path to one owner, and the report tree that publication and
checkpoints go up); and checks that it covers every owner exactly once, in the declared
member order, with every branch combining at an owner that holds one of the contributions
below it. Every walk is iterative: a star over 10,000 owners is a chain 10,000 branches deep.
"""

from __future__ import annotations

from dataclasses import dataclass

from alphac.diagnostics import DiagnosticBag, Span
from alphac.ir.nodes import ExplicitTree, Hierarchy, Star, Topology, TreeBranch, TreeLeaf, TreeNode
from alphac.plan.sampletree import PlacedSampleTree, owner_order

# How many offending owners a note lists before it says "and N more".
NOTE_LIMIT = 12


def owner_list(owners, limit: int = NOTE_LIMIT) -> str:
    owners = list(owners)
    shown = ", ".join(str(o) for o in owners[:limit])
    if len(owners) > limit:
        shown += f" and {len(owners) - limit} more"
    return shown


def hierarchy_children(owner: int, n: int, fanout: int) -> tuple[int, ...]:
    """Owner `owner`'s children f*i+1 .. f*i+f that lie below n: a range cut at n, so that a
    fan-out far above the owner count costs nothing."""
    first = fanout * owner + 1
    return tuple(range(first, min(first + fanout, n)))


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
    return fanout_tree(range(n), topology.fanout)


def fanout_tree(order, fanout: int) -> TreeNode:
    """The hierarchy over `order` (owners by position): position i's children are the
    positions f*i+1 .. f*i+f; each owner combines its own leaf, then each child's subtree."""
    order = tuple(order)
    n = len(order)
    subtree: dict[int, TreeNode] = {}
    for i in range(n - 1, -1, -1):
        node = TreeLeaf(order[i])
        for c in hierarchy_children(i, n, fanout):
            node = TreeBranch(order[i], node, subtree.pop(c))
        subtree[i] = node
    return subtree[0]


def sample_owner_tree(tree: PlacedSampleTree) -> TreeNode:
    """The sample tree's owner tree: a binary fan-out rooted at the first owner with samples
    (`sampletree.owner_order`), so no owner sends the total more than twice. It delivers
    the total and carries publication and checkpoint reports."""
    return fanout_tree(owner_order(tree), 2)


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


def preorder(root: TreeNode) -> list[TreeNode]:
    """Nodes in pre-order (node, left, right), without recursion."""
    out: list[TreeNode] = []
    stack = [root]
    while stack:
        node = stack.pop()
        out.append(node)
        if isinstance(node, TreeBranch):
            stack.append(node.right)
            stack.append(node.left)
    return out


def leaves(root: TreeNode, nodes: list[TreeNode] | None = None) -> list[int]:
    """Leaf owners, left to right (`nodes`: the tree's post-order, if already at hand)."""
    return [n.owner for n in (postorder(root) if nodes is None else nodes) if isinstance(n, TreeLeaf)]


@dataclass(frozen=True)
class Transfer:
    """One value moving along a tree edge: from the owner computing `child` to its parent."""

    sender: int
    receiver: int


def reduce_edges(root: TreeNode, nodes: list[TreeNode] | None = None) -> list[Transfer]:
    """The reduce phase: every transfer of a subtree value to the owner of its parent branch,
    in the order they occur."""
    out = []
    for node in (postorder(root) if nodes is None else nodes):
        if isinstance(node, TreeBranch):
            for child in (node.left, node.right):
                if child.owner != node.owner:
                    out.append(Transfer(child.owner, node.owner))
    return out


def replicate_edges(root: TreeNode, deliver_to: int | None = None) -> list[Transfer]:
    """The replicate phase, reversing the reduce edges (pre-order, each owner once).

    With `deliver_to`, only the path from the root to that leaf owner (CombineDeliverTo).
    """
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
    if deliver_to is None:
        return order
    return delivery_path({e.receiver: e.sender for e in order}, deliver_to)


def delivery_path(parent: dict[int, int], target: int) -> list[Transfer]:
    """CombineDeliverTo target: the replicate edges from the root down to `target` only;
    `parent` maps each receiver of the full replicate phase to its sender."""
    path = []
    o = target
    while o in parent:
        path.append(Transfer(parent[o], o))
        o = parent[o]
    return list(reversed(path))


def report_edges(root: TreeNode, nodes: list[TreeNode] | None = None) -> list[Transfer]:
    """The tree over owners that publication and checkpoints report up: the reduce edges
    toward the root, contracted to one edge per owner. An owner's nodes all lie on its
    leaf's path to the root (a branch runs at the owner of a leaf beneath it); its top node
    is the highest of them, and it reports to the owner of the branch just above. That
    owner's top node is higher still, so the edges form a tree (the replicate phase's,
    reversed). Edges come in post-order, so an owner receives every report of its subtree
    before it sends its own. A tree whose value goes back and forth between two owners,
    ((c0 + c1) at owner 1 + c2) at owner 0, reports 1 -> 0 and 2 -> 0: owner 0's first
    move, to owner 1, is not its report."""
    nodes = postorder(root) if nodes is None else nodes
    top: dict[int, int] = {}  # owner -> id of its highest node (the first in pre-order)
    for node in preorder(root):
        top.setdefault(node.owner, id(node))
    up = []
    for node in nodes:
        if isinstance(node, TreeBranch):
            for child in (node.left, node.right):
                if child.owner != node.owner and top[child.owner] == id(child):
                    up.append(Transfer(child.owner, node.owner))
    check_report_tree(root.owner, up)
    return up


def check_report_tree(root: int, up: list[Transfer]) -> None:
    """Hold `up` to what publication and checkpoints rely on: one edge per owner but the
    root, every receiver the root or an owner that reports, and every edge into an owner
    before the edge out of it. Then each owner's way up passes edges of increasing
    position, so it has no cycle and ends at the root: checked in one pass, no walk."""
    sent_at: dict[int, int] = {}
    for i, t in enumerate(up):
        if t.sender == root or t.sender in sent_at:
            raise ValueError(f"report tree: owner {t.sender} reports twice or is the root")
        sent_at[t.sender] = i
    for i, t in enumerate(up):
        if t.receiver != root and sent_at.get(t.receiver, -1) <= i:
            raise ValueError(f"report tree: owner {t.sender} reports to owner {t.receiver}, "
                             "which has reported up already or never does")


@dataclass(frozen=True, eq=False)
class TreeShape:
    """What the planner keeps of a checked tree: post-order node list, leaf order, depth."""

    root: TreeNode
    nodes: tuple[TreeNode, ...]       # post-order
    leaf_order: tuple[int, ...]       # owners, left to right
    depth: int                        # branches on the longest root-to-leaf path

    @property
    def branches(self) -> tuple[TreeBranch, ...]:
        return tuple(n for n in self.nodes if isinstance(n, TreeBranch))


def shape_of(root: TreeNode, nodes: list[TreeNode] | None = None) -> TreeShape:
    nodes = postorder(root) if nodes is None else nodes
    depth_of: dict[int, int] = {}
    for node in nodes:
        if isinstance(node, TreeLeaf):
            depth_of[id(node)] = 0
        else:
            depth_of[id(node)] = 1 + max(depth_of[id(node.left)], depth_of[id(node.right)])
    order = tuple(n.owner for n in nodes if isinstance(n, TreeLeaf))
    return TreeShape(root, tuple(nodes), order, depth_of[id(root)])


def _span_of(node, fallback: Span) -> Span:
    span = getattr(node, "span", None)
    return span if span is not None and span.line > 0 else fallback


def check_topology(n: int, topology: Topology, span: Span, bag: DiagnosticBag) -> TreeShape | None:
    """The checked tree of `topology` over owners 0..n-1, or None with diagnostics in `bag`."""
    if isinstance(topology, Hierarchy) and topology.fanout < 1:
        # the checker refuses such a spec; IR built by hand still gets a located refusal
        bag.error("combine-leaf-missing",
                  f"a hierarchy of fan-out {topology.fanout} leaves owners without a path to the root",
                  _span_of(topology, span), [f"owners not covered: {owner_list(range(1, n))}"])
        return None
    if isinstance(topology, (Star, Hierarchy)):
        return shape_of(build_tree(n, topology))
    return check_explicit(n, topology, span, bag)


def check_explicit(n: int, tree: ExplicitTree, fallback: Span, bag: DiagnosticBag) -> TreeShape | None:
    before = bag.count
    tspan = _span_of(tree, fallback)
    nodes = postorder(tree.root)
    if tree.coverage not in ("members", "group"):
        bag.error("combine-leaf-missing", f"unknown coverage kind {tree.coverage!r}", tspan)
        return None

    # The members: an ordered list (that fixes leaf order) or a group (any order).
    members = list(tree.members)
    seen_member: set[int] = set()
    twice_member: list[int] = []
    foreign_member: list[int] = []
    for m in members:
        if not 0 <= m < n:
            foreign_member.append(m)
        elif m in seen_member:
            twice_member.append(m)
        seen_member.add(m)
    if foreign_member:
        bag.error("combine-leaf-foreign",
                  f"the combine's {'member list' if tree.coverage == 'members' else 'group'} "
                  f"names owners outside the deployment's {n} owners", tspan,
                  [f"owners: {owner_list(foreign_member)}"])
    if twice_member:
        bag.error("combine-leaf-duplicated", "the combine's member list names an owner twice", tspan,
                  [f"owners: {owner_list(twice_member)}"])
    not_member = sorted(set(range(n)) - seen_member)
    if not_member:
        bag.error("combine-leaf-missing",
                  "the combine's coverage leaves out owners of the deployment; every owner's "
                  "contribution must be combined exactly once", tspan,
                  [f"owners not covered: {owner_list(not_member)}"])

    # Leaves: each member exactly once, no foreign owner.
    leaf_nodes = [x for x in nodes if isinstance(x, TreeLeaf)]
    first_leaf: dict[int, TreeLeaf] = {}
    dup_leaves: list[TreeLeaf] = []
    foreign_leaves: list[TreeLeaf] = []
    for leaf in leaf_nodes:
        if leaf.owner not in seen_member or not 0 <= leaf.owner < n:
            foreign_leaves.append(leaf)
        elif leaf.owner in first_leaf:
            dup_leaves.append(leaf)
        else:
            first_leaf[leaf.owner] = leaf
    members_note = None  # made once: it lists up to NOTE_LIMIT of n owners
    for leaf in foreign_leaves:
        if bag.skip("combine-leaf-foreign"):
            continue
        if members_note is None:
            members_note = f"members: {owner_list(sorted(seen_member & set(range(n))))}"
        bag.error("combine-leaf-foreign",
                  f"leaf for owner {leaf.owner} is not a member of the combine's coverage",
                  _span_of(leaf, tspan), [members_note])
    for leaf in dup_leaves:
        if bag.skip("combine-leaf-duplicated"):
            continue
        first = first_leaf[leaf.owner]
        notes = [f"owner {leaf.owner}'s contribution would be combined twice"]
        if first.span.line > 0:
            notes.append(f"its first leaf is at {first.span}")
        bag.error("combine-leaf-duplicated", f"owner {leaf.owner} has a second leaf in the combine tree",
                  _span_of(leaf, tspan), notes)
    missing = [m for m in members if 0 <= m < n and m not in first_leaf]
    if missing:
        bag.error("combine-leaf-missing", "the combine tree has no leaf for some members", tspan,
                  [f"members without a leaf: {owner_list(sorted(set(missing)))}"])

    # Ordered members fix the leaf order.
    if tree.coverage == "members" and bag.count == before:
        order = [x.owner for x in leaf_nodes]
        if order != members:
            at = next(i for i, (a, b) in enumerate(zip(order, members)) if a != b)
            bag.error("combine-leaf-order",
                      "the combine tree's leaves are not in the order of its member list", tspan,
                      [f"leaf {at} is owner {order[at]}, member {at} is owner {members[at]}"])

    # A branch combines at an owner holding one of the contributions beneath it. Leaves
    # beneath a branch occupy a contiguous range of leaf positions, so the test is a range
    # check on the owner's (first) leaf position: linear in the tree, however deep.
    position: dict[int, list[int]] = {}
    for i, leaf in enumerate(leaf_nodes):
        position.setdefault(leaf.owner, []).append(i)  # more than one only for a duplicated leaf
    span_of: dict[int, tuple[int, int]] = {}
    cursor = 0
    for node in nodes:
        if isinstance(node, TreeLeaf):
            span_of[id(node)] = (cursor, cursor + 1)
            cursor += 1
            continue
        lo = span_of.pop(id(node.left))[0]
        hi = span_of.pop(id(node.right))[1]
        span_of[id(node)] = (lo, hi)
        at = position.get(node.owner, ())
        if not (0 <= node.owner < n and any(lo <= p < hi for p in at)):
            if bag.skip("combine-branch-owner"):
                continue
            shown = [leaf_nodes[i].owner for i in range(lo, min(hi, lo + NOTE_LIMIT))]
            more = f" and {hi - lo - len(shown)} more" if hi - lo > len(shown) else ""
            bag.error("combine-branch-owner",
                      f"branch combines at owner {node.owner}, which holds no contribution beneath it",
                      _span_of(node, tspan),
                      [f"leaves beneath: {', '.join(map(str, shown))}{more}",
                       "a branch runs at the owner of one of its leaves, so the result has a "
                       "path back to every leaf owner"])
    # Every owner applies the update to the mean, so the deployment's combine must reach
    # every leaf owner; per-coordinate deliveries under gradient partitioning are derived.
    delivery = getattr(tree, "delivery", None)
    if delivery is not None:
        spared = [o for o in range(n) if o != delivery]
        bag.error("combine-delivery-partial",
                  f"the deployment's combine delivers its result to owner {delivery} only; every "
                  "owner applies the update to it", tspan,
                  [f"owners that would never receive the mean: {owner_list(spared)}",
                   "declare CombineReplicateAll; gradient partitioning derives one CombineDeliverTo "
                   "per coordinate owner itself"])
    if bag.count != before:
        return None
    return shape_of(tree.root, nodes)

