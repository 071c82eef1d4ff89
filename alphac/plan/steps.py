"""What each op of the owners' protocols carries besides its own words: its step and what it
expects. The image writes both into every op's table row (alphac/image/image.py); the
runtime checks frames against them.

Steps: an owner numbers its ops 0, 1, ... over `update_ops`, `finish_ops`, then
`checkpoint_ops`; a frame carries its sender's op index, and a receive op carries the index
of the matching send (the j-th send of a kind from p to q matches the j-th receive of that
kind at q from p).

Expect: a receive of a sum, the sample count the plan declares beneath it (the sum of the
shares of the leaves whose contributions it holds; under the sample tree, the number of
samples the value covers; the receiver refuses another count as `frame-count`); a send or
receive of "prepared", the number of owners whose output digests it carries (the sender's
subtree); a checkpoint report, its payload's words; other ops None (nothing to check).
"""

from __future__ import annotations

from alphac.plan.ops import (COUNT_NONE, COUNT_READS, COUNT_SAMPLES, COUNT_SHARE, EXPECT_CHECKPOINT,
                             EXPECT_PREPARED, OP_TABLE)
from alphac.plan.protocol import OwnerProtocol
from alphac.plan.publication import manifest_writers, prepared_owners, subtrees

_MATCH = {k.name: k.matches for k in OP_TABLE if k.matches}  # each receive kind's send kind


def op_checks(protocols: tuple[OwnerProtocol, ...], leaf_counts, fragments,
              owners, schedule: bool = False) -> dict[int, tuple[tuple[int, int | None], ...]]:
    """For each of `owners`, every op's (step, expect), expect None where nothing is checked:
    `leaf_counts` the sample count each owner's local value reports, `fragments` every
    owner's checkpoint fragments, `schedule` whether each owner's checkpoint entry names
    its schedule file too (bounded staleness). ValueError when the finish ops' reports do
    not form one tree over the owners."""
    steps = op_steps(protocols)
    counts = expected_counts(protocols, leaf_counts, steps)
    below = subtrees(protocols)
    prepared = prepared_owners(protocols)
    inner = manifest_writers(protocols)
    out = {}
    for o in owners:
        proto = protocols[o]
        checks = []
        for i, (op, step) in enumerate(zip(proto.update_ops + proto.finish_ops + proto.checkpoint_ops,
                                           steps[o])):
            expect = counts.get((o, i))
            whose = op.peer if op.spec.matches else o  # a receive declares its sender's subtree
            if op.spec.expect == EXPECT_PREPARED:
                expect = prepared[whose]
            elif op.spec.expect == EXPECT_CHECKPOINT:
                expect = checkpoint_words(below[whose], fragments, inner, schedule)
            checks.append((step, expect))
        out[o] = tuple(checks)
    return out


def op_steps(protocols: tuple[OwnerProtocol, ...]) -> dict[int, tuple[int, ...]]:
    """For every owner, the step word of each op (sends: own index; receives: the index of
    the matching send at the peer; other ops: own index)."""
    sends: dict[tuple[int, int, str], list[int]] = {}
    for proto in protocols:
        for i, op in enumerate(proto.update_ops + proto.finish_ops + proto.checkpoint_ops):
            if op.kind in _MATCH.values():
                sends.setdefault((proto.owner, op.peer, op.kind), []).append(i)
    taken: dict[tuple[int, int, str], int] = {}
    out = {}
    for proto in protocols:
        steps = []
        for i, op in enumerate(proto.update_ops + proto.finish_ops + proto.checkpoint_ops):
            if op.kind in _MATCH:
                key = (op.peer, proto.owner, _MATCH[op.kind])
                j = taken.get(key, 0)
                taken[key] = j + 1
                steps.append(sends[key][j])
            else:
                steps.append(i)
        out[proto.owner] = tuple(steps)
    return out


def expected_counts(protocols: tuple[OwnerProtocol, ...], shares, steps) -> dict[tuple[int, int], int]:
    """The sample count beneath the value each receive of a sum gets, keyed (owner, op
    index), `shares` the count each owner's local value reports: the protocol run
    symbolically, every owner in its op order, a receive waiting for the matching send
    (found by its step) to be reached. Registers of assembled words (offer, select) hold no
    count."""
    counts: list[dict[int, int | None]] = [{} for _ in protocols]
    sent: dict[tuple[int, int], int | None] = {}
    waiting: dict[tuple[int, int], int] = {}
    pos = [0] * len(protocols)
    out: dict[tuple[int, int], int] = {}
    ready = list(range(len(protocols)))
    while ready:
        o = ready.pop()
        ops, c = protocols[o].update_ops, counts[o]
        while pos[o] < len(ops):
            i, op = pos[o], ops[pos[o]]
            spec = op.spec
            moved = spec.moved and getattr(op, spec.moved.word)
            if spec.moved and spec.matches:  # a receive of a sum: the count its send's holds
                key = (op.peer, steps[o][i])
                if key not in sent:
                    waiting[key] = o
                    break
                c[moved] = sent[key]
                if sent[key] is not None:
                    out[(o, i)] = sent[key]
            elif spec.moved:  # a send of a register
                sent[(o, i)] = c.get(moved)
                if (o, i) in waiting:
                    ready.append(waiting.pop((o, i)))
            if spec.count:
                c[op.dst] = _count(op, c, shares[o])
            pos[o] += 1
    return out


def _count(op, counts: dict[int, int | None], share: int) -> int | None:
    """The sample count of the register `op` writes, by its kind's COUNT_* rule."""
    rule = op.spec.count
    if rule == COUNT_SHARE:
        return share
    if rule == COUNT_SAMPLES:
        return op.operand("count")
    if rule == COUNT_READS:
        held = [counts.get(r) for r in op.reads()]
        return None if None in held else sum(held)
    assert rule == COUNT_NONE, rule
    return None


def checkpoint_words(subtree: tuple[int, ...], fragments, inner: frozenset[int], schedule: bool = False) -> int:
    """The payload of a checkpoint report from `subtree`: the replica digest, the entry and
    manifest counts, an entry per owner (owner, shard bytes, the shard's sha256, each
    fragment's sha256, under bounded staleness its schedule file's sha256) and one per owner
    with children (owner, its manifest's sha256)."""
    entry = 6 + (4 if schedule else 0)
    return 3 + sum(entry + 4 * len(fragments[o]) for o in subtree) + 5 * sum(1 for o in subtree if o in inner)
