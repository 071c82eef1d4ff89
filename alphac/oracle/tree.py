"""The declared combine tree, derived from the IR's topology alone (docs/oracle.md).

Star: the left-deep chain at owner 0, ((c0 + c1) + c2) + ... Hierarchy of fan-out f: the
children of owner i are f*i+1 .. f*i+f (those below n); owner i's subtree is its own leaf,
then each child's subtree in order, left-deep, every branch at i. An explicit tree is used
as declared. Every walk keeps its own stack: a star over 10,000 owners is 10,000 deep.
"""

from __future__ import annotations

from alphac.ir.nodes import ExplicitTree, Hierarchy, Star, Topology, TreeBranch, TreeLeaf, TreeNode


def star(n: int) -> TreeNode:
    node: TreeNode = TreeLeaf(0)
    for o in range(1, n):
        node = TreeBranch(0, node, TreeLeaf(o))
    return node


def hierarchy(n: int, fanout: int) -> TreeNode:
    def children(i: int) -> range:
        return range(fanout * i + 1, min(fanout * i + fanout, n - 1) + 1)

    done: dict[int, TreeNode] = {}
    todo: list[tuple[int, bool]] = [(0, False)]
    while todo:
        i, ready = todo.pop()
        if not ready:  # first its children's subtrees, then its own
            todo.append((i, True))
            todo.extend((c, False) for c in children(i))
            continue
        node: TreeNode = TreeLeaf(i)
        for c in children(i):
            node = TreeBranch(i, node, done.pop(c))
        done[i] = node
    return done[0]


def combine_tree(n: int, topology: Topology) -> TreeNode:
    """The combine tree of `topology` over owners 0..n-1."""
    if isinstance(topology, Star):
        return star(n)
    if isinstance(topology, Hierarchy):
        return hierarchy(n, topology.fanout)
    if isinstance(topology, ExplicitTree):
        return topology.root
    raise TypeError(f"not a topology: {topology!r}")


def postorder(root: TreeNode) -> list[TreeNode]:
    """Every node, left subtree then right subtree then the node itself."""
    out: list[TreeNode] = []
    todo: list[tuple[TreeNode, bool]] = [(root, False)]
    while todo:
        node, ready = todo.pop()
        if ready or isinstance(node, TreeLeaf):
            out.append(node)
        else:
            todo.extend(((node, True), (node.right, False), (node.left, False)))
    return out


def leaves(root: TreeNode) -> list[int]:
    """The leaves' owners, left to right."""
    return [node.owner for node in postorder(root) if isinstance(node, TreeLeaf)]
