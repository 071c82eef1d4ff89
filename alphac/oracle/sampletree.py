"""The sample tree (`DataParallelSampleTree`, docs/oracle.md), evaluated level by level from
its definition, with no regard to owners: the oracle's own model of it.

Level 0 holds every sample's contribution (count 1) in the global sample order (owner 0's
samples, then owner 1's, ...). Level h + 1 pairs the nodes 2j and 2j + 1 of level h: left +
right, the left operand first, counts added; a last node without a partner (its right half
is empty) moves up unchanged. The one node left is the root, covering [0, N).

Levels are reduced over aligned runs of P = 2^c samples first (each run's root is a node of
level c), then over the runs' roots: the same pairs, holding only P contributions at a time.
"""

from __future__ import annotations

import numpy as np

from alphac.oracle.combine import Mass, _first_bad, _same
from alphac.oracle.refusal import Site, non_finite


class Level:
    """One level of the tree: node i covers samples first[i] .. first[i] + count[i] - 1 and
    holds the sums g[i] (k floats)."""

    def __init__(self, g: np.ndarray, count: np.ndarray, first: np.ndarray) -> None:
        self.g, self.count, self.first = g, count, first

    def up(self, owner: np.ndarray, update: int, narrow=_same) -> "Level":
        """The next level: rows 2j + 2j+1 added, a last odd row unchanged. A non-finite sum
        refuses, naming the first such branch in the level's order and the owner holding
        its first sample."""
        pairs = len(self.count) // 2
        with np.errstate(all="ignore"):
            g = narrow(self.g[0:2 * pairs:2] + self.g[1:2 * pairs:2])
        bad = ~np.isfinite(g).all(axis=1)
        if bad.any():
            i = int(np.argmax(bad))
            lo = int(self.first[2 * i])
            hi = lo + int(self.count[2 * i] + self.count[2 * i + 1])
            raise non_finite(Site(update, "combine", owner=int(owner[lo])), "result of add",
                             statement=f"branch s[{lo},{hi})", coordinate=f"coordinate {_first_bad(g[i])}")
        count = self.count[0:2 * pairs:2] + self.count[1:2 * pairs:2]
        if len(self.count) % 2:
            g = np.concatenate([g, self.g[-1:]])
            count = np.concatenate([count, self.count[-1:]])
        return Level(g, count, self.first[0::2])

    def root(self, owner: np.ndarray, update: int, narrow=_same) -> "Level":
        level = self
        while len(level.count) > 1:
            level = level.up(owner, update, narrow)
        return level


def total(runs, k: int, owner: np.ndarray, update: int, narrow=_same) -> Mass:
    """The root's (Σg, N): `runs` yields (r0, contributions) for consecutive aligned runs of
    P samples from sample r0 (rows of k floats; the last run may be shorter); `owner[i]` is
    sample i's owner. Without samples: (+0.0, 0)."""
    roots = []
    for r0, contrib in runs:
        rows = contrib.shape[0]
        level = Level(contrib, np.ones(rows, dtype=np.int64), np.arange(r0, r0 + rows, dtype=np.int64))
        roots.append(level.root(owner, update, narrow))
    if not roots:
        return Mass(np.zeros(k), 0)
    top = Level(np.concatenate([r.g for r in roots]), np.concatenate([r.count for r in roots]),
                np.concatenate([r.first for r in roots])).root(owner, update, narrow)
    return Mass(top.g[0], int(top.count[0]))


def run_length(rows_per_chunk: int) -> int:
    """P: the largest power of two not above the rows a chunk of contributions may hold."""
    return 1 << (max(1, rows_per_chunk).bit_length() - 1)
