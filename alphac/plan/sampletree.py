"""The sample tree (`DataParallelSampleTree`) and its placement over owners.

The combine is a binary tree over the global sample sequence (owner 0's samples, then
owner 1's, ...; N in all): the node of height h and index j covers [j*2^h, (j+1)*2^h) cut
at N; a leaf is one sample's contribution; a branch whose right half is non-empty adds
left + right, one whose right half is empty is its left child. The tree depends on N
alone. Its placement: every node runs at the owner holding its first sample; a node whose
samples one owner holds is a *block*, evaluated there by one `sample-block` op; the
branches above the blocks move a right child to its parent's owner when the two differ.
The total then reaches every owner down the owner tree: a binary fan-out rooted at the
first owner with samples, which also carries publication and checkpoint reports.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from itertools import accumulate


def height(samples: int) -> int:
    """The root's height: ceil(log2 N), 0 for N <= 1."""
    return max(0, (samples - 1).bit_length())


def stack_depth(count: int) -> int:
    """Levels of the binary-counter stack that evaluates a block of `count` samples: after
    the i-th sample it holds one level per set bit of i, plus the sample pushed."""
    return count.bit_length()


@dataclass(frozen=True, eq=False)
class SampleNode:
    """A node of the placed tree: samples [lo, hi), computed at `owner`; a block (no
    children, evaluated locally by `sample-block`) or a branch left + right."""

    lo: int
    hi: int
    owner: int
    left: "SampleNode | None" = None
    right: "SampleNode | None" = None

    @property
    def is_block(self) -> bool:
        return self.left is None

    @property
    def name(self) -> str:
        return f"s[{self.lo},{self.hi})"


@dataclass(frozen=True, eq=False)
class PlacedSampleTree:
    """The sample tree over `shares` placed on their owners: `nodes` in post-order (every
    block and every branch above the blocks), `starts[o]` the global index of owner o's
    first sample."""

    shares: tuple[int, ...]
    starts: tuple[int, ...]
    root: SampleNode | None      # None when there are no samples
    nodes: tuple[SampleNode, ...]

    @property
    def samples(self) -> int:
        return self.starts[-1] + self.shares[-1] if self.shares else 0

    @property
    def height(self) -> int:
        return height(self.samples)

    @property
    def root_owner(self) -> int:
        """The first owner with samples (owner 0 when there are none)."""
        return self.root.owner if self.root is not None else 0

    def blocks(self, owner: int) -> tuple[SampleNode, ...]:
        """`owner`'s blocks, in sample order."""
        return tuple(x for x in self.nodes if x.is_block and x.owner == owner)

    def first(self, node: SampleNode) -> int:
        """The block's first sample as a position within its owner's share."""
        return node.lo - self.starts[node.owner]


def place(shares) -> PlacedSampleTree:
    """Split the sample tree of sum(shares) samples where its nodes straddle two owners'
    ranges; every other node is a block. Only nodes that straddle an owner boundary are
    split, at most height + 1 per boundary, so the placed tree has O(n log N) nodes."""
    shares = tuple(int(s) for s in shares)
    starts = tuple(accumulate(shares, initial=0))[:-1]
    total = sum(shares)
    ends = tuple(s + c for s, c in zip(starts, shares))

    def owner_of(i: int) -> int:
        # owners without samples share their start with the next owner: the last of them
        # that starts at or before i holds sample i
        return bisect.bisect_right(starts, i) - 1 if i < total else -1

    nodes: list[SampleNode] = []

    def node(lo: int, h: int) -> SampleNode:  # recursion depth <= height(N) <= 64
        hi = min(lo + (1 << h), total)
        while h > 0 and lo + (1 << (h - 1)) >= total:  # an empty right half: its left child
            h -= 1
        o = owner_of(lo)
        if h == 0 or hi <= ends[o]:
            out = SampleNode(lo, hi, o)
        else:
            mid = lo + (1 << (h - 1))
            left = node(lo, h - 1)
            out = SampleNode(lo, hi, o, left, node(mid, h - 1))
        nodes.append(out)
        return out

    root = node(0, height(total)) if total else None
    return PlacedSampleTree(shares, starts, root, tuple(nodes))


def owner_order(tree: PlacedSampleTree) -> tuple[int, ...]:
    """The owner tree's order: the root's owner, then every other owner ascending."""
    r = tree.root_owner
    return (r,) + tuple(o for o in range(len(tree.shares)) if o != r)

