"""Every explicit combine tree over a leaf order with every branch owner the tree laws
admit (a branch runs at the owner of one of the leaves beneath it), as IR: the trees the
explicit-tree gates build, launch and checkpoint."""

from __future__ import annotations

import dataclasses

from alphac.ir import nodes as ir


def trees(leaves: tuple[int, ...]):
    """Every binary tree over `leaves` (in that order) with every admitted branch owner."""
    if len(leaves) == 1:
        yield ir.TreeLeaf(leaves[0])
        return
    for cut in range(1, len(leaves)):
        for left in trees(leaves[:cut]):
            for right in trees(leaves[cut:]):
                for owner in leaves:
                    yield ir.TreeBranch(owner, left, right)


def spelled(node) -> str:
    """A tree as text: c<o> a leaf, (left + right)@o a branch."""
    if isinstance(node, ir.TreeLeaf):
        return f"c{node.owner}"
    return f"({spelled(node.left)} + {spelled(node.right)})@{node.owner}"


def on_owners(dep, n: int):
    """`dep` (four owners holding 1, 2, 3 and 0 samples) on its first n owners, every owner
    an x86-64 one, the samples of the owners left out dropped (they hold none)."""
    L = dep.learner
    shares = L.samples.shares
    assert sum(shares[n:]) == 0, "only owners without samples are left out"
    samples = ir.Samples(L.samples.width, shares[:n], L.samples.words)
    roles = (ir.Role("coordinator", (0,)), ir.Role("worker", tuple(range(1, n))))
    return dataclasses.replace(dep, learner=dataclasses.replace(L, samples=samples), owners=n,
                               roles=roles, placement=("x86_64",) * n)


def with_tree(dep, root, placement: ir.CombinePlacement = ir.CombinePlacement.BRANCH_OWNERS, every: int = 0,
              directory: str = ""):
    """`dep` combined on the explicit tree `root` (members in leaf order, replicated to all),
    placed at the branch or block owners, checkpointing every `every` updates."""
    members = tuple(ir_leaves(root))
    topology = ir.ExplicitTree(root, "members", members)
    return dataclasses.replace(dep, topology=topology, combine_placement=placement,
                               checkpoint=ir.Checkpoint(every, directory))


def ir_leaves(node):
    stack, out = [node], []
    while stack:
        x = stack.pop()
        if isinstance(x, ir.TreeLeaf):
            out.append(x.owner)
        else:
            stack += [x.right, x.left]
    return out


def cases(n: int):
    """(name, root) of every admitted tree over owners 0..n-1 in order."""
    return [(spelled(root), root) for root in trees(tuple(range(n)))]
