"""Which words each owner holds under the deployment's partitioning: coordinates come in
blocks of B (`partitioning.block_words`), coordinate i belonging to owner (i // B) mod n
(B = 1: owner i mod n). The oracle computes the logical state once, the same for every B;
this only selects words.

Replicated: every owner holds all k parameters and all m state words. Partitioned
optimizer state: an owner holds its coordinates' state words (block b's word for
coordinate i is the (b*k + i)-th non-shared state word) and every shared state word.
Partitioned parameters: an owner holds only its coordinates' parameters. Words are listed
in coordinate order, state words in state-offset order.
"""

from __future__ import annotations

import numpy as np

from alphac.ir.nodes import Deployment
from alphac.oracle.refusal import Refusal


def state_offsets(dep: Deployment, owner: int) -> np.ndarray:
    """The state offsets (0-based within the m words) `owner` holds, ascending."""
    k, m, n = dep.learner.k, dep.learner.m, dep.owners
    part = dep.partitioning
    if not part.optimizer_state.sharded:
        return np.arange(m)
    shared = sorted(set(part.shared_state))
    if part.words_per_coordinate * k + len(shared) != m or any(not 0 <= s < m for s in shared):
        raise Refusal("oracle-inconsistent",
                      f"partitioned optimizer state claims {part.words_per_coordinate} words "
                      f"per coordinate for {k} coordinates and {len(shared)} shared words, "
                      f"but the learner has {m} state words")
    per_coordinate = np.array([o for o in range(m) if o not in set(shared)], dtype=np.int64)
    positions = np.arange(per_coordinate.size)
    mine = per_coordinate[_owner_of(positions % k, dep) == owner]
    return np.sort(np.concatenate([mine, np.array(shared, dtype=np.int64)]))


def _owner_of(coordinates: np.ndarray, dep: Deployment) -> np.ndarray:
    return (coordinates // dep.partitioning.block_words) % dep.owners


def param_coordinates(dep: Deployment, owner: int) -> np.ndarray:
    """The coordinates whose parameters `owner` holds, ascending: all k unless the
    parameters are partitioned, else `owned_coordinates`."""
    if not dep.partitioning.parameters.sharded:
        return np.arange(dep.learner.k)
    return owned_coordinates(dep, owner)


def owned_coordinates(dep: Deployment, owner: int) -> np.ndarray:
    """The coordinates of `owner`'s blocks, ascending, whatever is partitioned: each block
    b = owner, owner + n, ... contributes its coordinates b*B .. b*B + B - 1 below k."""
    k, n, B = dep.learner.k, dep.owners, dep.partitioning.block_words
    blocks = np.arange(owner, -(-k // B), n)
    coordinates = (blocks[:, None] * B + np.arange(B)).ravel()
    return coordinates[coordinates < k]
