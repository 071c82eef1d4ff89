"""The publication's report tree, read off the owners' finish and checkpoint ops: whose
"prepared" (and checkpoint digests) each owner reports, how many output digests its
"prepared" carries, and which owners write the manifest of their subtree."""

from __future__ import annotations

from alphac.checkpoint.write import owner_subtrees
from alphac.plan.protocol import OwnerProtocol


def subtrees(protocols: tuple[OwnerProtocol, ...]) -> dict[int, tuple[int, ...]]:
    """For every owner, the owners whose "prepared" (and checkpoint digests) it reports: its
    own and those of every owner it receives them from, transitively, ascending. ValueError
    when the finish ops' reports do not form one tree over the owners."""
    children = {p.owner: [op.peer for op in p.finish_ops if op.kind == "digest-recv"] for p in protocols}
    _, below = owner_subtrees(sorted(children), children)
    return {o: tuple(s) for o, s in below.items()}


def prepared_owners(protocols: tuple[OwnerProtocol, ...]) -> dict[int, int]:
    """For every owner, how many owners' output digests its "prepared" message carries: its
    own and those of every owner whose "prepared" it receives, transitively."""
    return {o: len(s) for o, s in subtrees(protocols).items()}


def manifest_writers(protocols: tuple[OwnerProtocol, ...]) -> frozenset[int]:
    """The owners that write and fsync the manifest of their subtree when a checkpoint is
    published (those with children in the report tree)."""
    return frozenset(p.owner for p in protocols if any(op.kind == "ckpt-manifest" for op in p.checkpoint_ops))
