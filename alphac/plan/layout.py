"""The owner layout: which owner holds which coordinate, parameter words and state words.

Coordinates come in blocks of `block_words` (B, the partitioning's `partitionBlockWords`)
consecutive coordinates; block b belongs to owner b mod n, so with B = 1 (the default)
coordinate i belongs to owner i mod n. What an owner holds follows from the partitioning:

  parameters       its coordinates' parameters when partitioned, else all k;
  optimizer state  when partitioned, its coordinates' per-coordinate state words and every
                   shared word, else all m. The state words not declared shared form w
                   blocks of k words in offset order: block b's word for coordinate i is
                   the (b*k + i)-th non-shared state word.

The shard maps, the partitioned protocol's register sizes, selection offers and the bytes
per owner all read this one layout. Every method is linear in what it returns (the per-
coordinate state offsets are computed once), so k = 10**6 over 10,000 owners stays cheap.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

from alphac.checkpoint.manifest import Run
from alphac.ir import nodes as ir
from alphac.plan.storage import word_counts, word_partitioning



def _frozen(a: np.ndarray) -> np.ndarray:
    a.flags.writeable = False
    return a


@dataclass(frozen=True)
class OwnerLayout:
    """Who holds which coordinate, which parameter words and which state words."""

    k: int                                # coordinates (parameter words)
    m: int                                # state words
    n: int                                # owners
    parameters: ir.Placement = ir.Replicate()       # the parameters'
    optimizer_state: ir.Placement = ir.Replicate()  # the optimizer state's
    gradients: ir.Placement = ir.Replicate()        # the gradients' (sharded: reductions per owner)
    words_per_coordinate: int = 0         # w
    shared_state: tuple[int, ...] = ()    # shared state offsets, as declared
    block_words: int = 1                  # B: coordinates per block (block b -> owner b mod n)

    # ------------------------------------------------------------------ construction

    @classmethod
    def of(cls, dep: ir.Deployment) -> "OwnerLayout":
        """The layout of a deployment, in words (a binary32 learner's, which is never
        partitioned, packs two values a word: alphac/plan/storage.py)."""
        k, _, m = word_counts(dep)
        return cls.build(k, m, dep.owners, word_partitioning(dep))

    @classmethod
    def build(cls, k: int, m: int, n: int,
              partitioning: ir.Partitioning | None = None) -> "OwnerLayout":
        """The layout of k coordinates and m state words over n owners under `partitioning`
        (its block size included)."""
        part = partitioning or ir.Partitioning()
        return cls(k, m, n, part.parameters, part.optimizer_state, part.gradients,
                   part.words_per_coordinate, tuple(part.shared_state), part.block_words)

    @property
    def w(self) -> int:
        return self.words_per_coordinate

    @property
    def any(self) -> bool:
        return self.parameters.sharded or self.optimizer_state.sharded or self.gradients.sharded

    # ------------------------------------------------------------------ coordinates

    def owner_of(self, i: int) -> int:
        """The owner of coordinate i."""
        return (i // self.block_words) % self.n

    def _blocks(self) -> int:
        B = self.block_words
        return (self.k + B - 1) // B

    def coordinates(self, owner: int) -> np.ndarray:
        """The coordinates `owner` holds, ascending."""
        k, n, B = self.k, self.n, self.block_words
        if B == 1:
            return _frozen(np.arange(owner, k, n, dtype=np.int64))
        starts = np.arange(owner * B, k, n * B, dtype=np.int64)
        coords = (starts[:, None] + np.arange(B, dtype=np.int64)).ravel()
        return _frozen(coords[coords < k])

    def owned_count(self, owner: int) -> int:
        """How many coordinates `owner` holds."""
        k, n, B = self.k, self.n, self.block_words
        blocks = self._blocks()
        if not 0 <= owner < n or owner >= blocks:
            return 0
        count = (blocks - owner + n - 1) // n * B
        if (blocks - 1) % n == owner:
            count -= blocks * B - k  # the last block may be short
        return count

    def coordinate_runs(self, owner: int) -> tuple[Run, ...]:
        """`coordinates(owner)` as arithmetic runs (one strided run when B = 1)."""
        count = self.owned_count(owner)
        if count == 0:
            return ()
        B = self.block_words
        if B == 1:
            return ((owner, self.n, count),)
        return tuple((int(s), 1, min(B, self.k - int(s)))
                     for s in range(owner * B, self.k, self.n * B))

    # ------------------------------------------------------------------ words held

    def params_held(self, owner: int) -> np.ndarray:
        """The parameter words (coordinates) `owner` holds, ascending."""
        if not self.parameters.sharded:
            return _frozen(np.arange(self.k, dtype=np.int64))
        return self.coordinates(owner)

    def params_count(self, owner: int) -> int:
        return self.owned_count(owner) if self.parameters.sharded else self.k

    @cached_property
    def _coordinate_state_offsets(self) -> np.ndarray:
        keep = np.ones(self.m, dtype=bool)
        shared = np.array([j for j in self.shared_state if 0 <= j < self.m], dtype=np.int64)
        keep[shared] = False
        return _frozen(np.flatnonzero(keep)[:max(self.w, 0) * self.k].astype(np.int64))

    def coordinate_state_offsets(self) -> np.ndarray:
        """At index b*k + i: the state offset of block b's word for coordinate i (the
        (b*k + i)-th non-shared state word). Shorter than w*k when the state has fewer
        non-shared words than the claim (a claim the planner refuses)."""
        return self._coordinate_state_offsets

    def coordinate_state(self, owner: int) -> np.ndarray:
        """The per-coordinate state offsets of `owner`'s coordinates, ascending (no shared
        words); empty when the optimizer state is not partitioned."""
        if not self.optimizer_state.sharded or self.w <= 0:
            return _frozen(np.empty(0, dtype=np.int64))
        per = self._coordinate_state_offsets
        coords = self.coordinates(owner)
        ranks = (np.arange(self.w, dtype=np.int64)[:, None] * self.k + coords).ravel()
        return _frozen(per[ranks[ranks < len(per)]])

    def state_held(self, owner: int) -> np.ndarray:
        """The state offsets `owner` holds, ascending: all m when the optimizer state is not
        partitioned, else its coordinates' state words and every shared word."""
        if not self.optimizer_state.sharded:
            return _frozen(np.arange(self.m, dtype=np.int64))
        coords, shared = self.coordinate_state(owner), self.replicated_state()
        # disjoint (a coordinate's state word is never shared), both ascending: a merge
        return _frozen(np.insert(coords, np.searchsorted(coords, shared), shared).astype(np.int64))

    def state_stored(self, owner: int) -> np.ndarray:
        """The state offsets `owner` holds, in the order its executable stores them (compact
        storage): all m in offset order, or, when the optimizer state is partitioned, the
        shared words ascending, then block 0's word of each of its coordinates (ascending),
        block 1's, ... (`coordinate_state`'s order). Its parameters are stored in
        `params_held` order."""
        if not self.optimizer_state.sharded:
            return self.state_held(owner)
        return _frozen(np.concatenate([self.replicated_state(), self.coordinate_state(owner)]))

    def state_count(self, owner: int) -> int:
        if not self.optimizer_state.sharded:
            return self.m
        return len(self.coordinate_state(owner)) + len(self.replicated_state())

    def replicated_state(self) -> np.ndarray:
        """The state offsets every owner holds alike: all m, or the shared words (ascending)
        when the optimizer state is partitioned."""
        if not self.optimizer_state.sharded:
            return _frozen(np.arange(self.m, dtype=np.int64))
        return _frozen(np.unique(np.array(self.shared_state, dtype=np.int64)))


def layout_of_deployment(dep: ir.Deployment) -> OwnerLayout:
    return OwnerLayout.of(dep)
