"""The declared combine: (Σ contribution, Σ samples) pairs added along the ordered tree,
left operand first at every branch, then the mean Σg / Σn. Also the mutants the gates
must tell apart from the declared program (their names: alphac.ir.mutants).

`narrow` (a binary32 learner's: `words.narrow32`) rounds each sum and quotient to its
storage format, so every add and the division are that format's own operations.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from alphac.ir.nodes import TreeBranch, TreeLeaf, TreeNode
from alphac.oracle.refusal import Refusal, Site, non_finite
from alphac.oracle.tree import postorder


@dataclass(frozen=True, eq=False)
class Mass:
    """A contribution in flight: the element-wise sum `g` (k floats) and the sample count."""

    g: np.ndarray
    n: int


def _first_bad(values: np.ndarray) -> int:
    return int(np.argmin(np.isfinite(values)))


def _same(values: np.ndarray) -> np.ndarray:
    return values


def combine(root: TreeNode, leaves: dict[int, Mass], update: int, narrow=_same) -> Mass:
    """Walk the tree in post-order; a branch adds left.g + right.g (left first) and the counts."""
    stack: list[Mass] = []
    for node in postorder(root):
        if isinstance(node, TreeLeaf):
            stack.append(leaves[node.owner])
            continue
        right = stack.pop()
        left = stack.pop()
        with np.errstate(all="ignore"):
            g = narrow(left.g + right.g)
        if not np.isfinite(g).all():
            j = _first_bad(g)
            raise non_finite(Site(update, "combine", owner=node.owner), "result of add",
                             statement="branch", coordinate=f"coordinate {j}")
        stack.append(Mass(g, left.n + right.n))
    (total,) = stack
    return total


def mean(total: Mass, update: int, narrow=_same) -> np.ndarray:
    """Σg / Σn, one correctly rounded division per coordinate; Σn = 0 refuses."""
    site = Site(update, "mean")
    if total.n <= 0:
        raise Refusal("non-finite", f"{site.describe()}: the combined sample count is "
                      f"{total.n}, so the mean Σg / Σn is not finite", site=site,
                      statement="mean")
    with np.errstate(all="ignore"):
        m = narrow(total.g / np.float64(total.n))  # n < 2**53 converts exactly
    if not np.isfinite(m).all():
        raise non_finite(site, "result of div", statement="mean",
                         coordinate=f"coordinate {_first_bad(m)}")
    return m


# ----------------------------------------------------------------------------- mutants

def swap_branch(root: TreeNode) -> TreeNode:
    """The root's right subtree trades places with the right subtree of the root's left
    branch: ((A + B) + C) becomes ((A + C) + B). Exchanging the two operands of a single
    branch could never change bits (binary64 addition is commutative); this changes which
    partial sums are formed. The root and its left child must be branches."""
    left = root.left
    return TreeBranch(root.owner, TreeBranch(left.owner, left.left, root.right), left.right)


def mutate_leaves(leaves: dict[int, Mass], order: list[int], mutant: str,
                  update: int, narrow=_same) -> dict[int, Mass]:
    """The leaf values a mutant combines instead of the declared (Σg, n) pairs."""
    if mutant == "unweighted-mean":
        out = {}
        for o, leaf in leaves.items():
            if leaf.n == 0:
                out[o] = leaf
                continue
            with np.errstate(all="ignore"):
                g = narrow(leaf.g / np.float64(leaf.n))
            if not np.isfinite(g).all():
                raise non_finite(Site(update, "mean", owner=o), "result of div",
                                 statement="owner mean", coordinate=f"coordinate {_first_bad(g)}")
            out[o] = Mass(g, 1)  # every owner with samples weighs the same
        return out
    if mutant == "duplicate-mass":
        out = dict(leaves)
        for o in order:
            if leaves[o].n > 0:  # the first leaf with samples counts its mass twice
                out[o] = Mass(leaves[o].g, 2 * leaves[o].n)
                break
        return out
    return leaves


def deliver_to_next(m: np.ndarray, coordinates) -> np.ndarray:
    """The mean the update reads when the result meant for owner t (its coordinates' sums)
    reaches owner t + 1 mod n instead: owner o's j-th coordinate (ascending, as
    `coordinates[o]` lists them) reads the mean of the j-th coordinate of owner o - 1 mod n;
    +0.0 where that owner holds fewer than j + 1 coordinates (its slice is shorter).
    A selection: the sum +0.0 divided by the count is +0.0."""
    n = len(coordinates)
    out = np.zeros(m.size)
    for o in range(n):
        mine, theirs = coordinates[o], coordinates[(o - 1) % n]
        held = min(mine.size, theirs.size)
        out[mine[:held]] = m[theirs[:held]]
    return out
