"""The data a role executable embeds, computed in Python from the plan: each owner's op
table (with the step numbers frames carry), its peers, its samples, and the frame bounds.

Steps: an owner's ops are numbered 0, 1, ... over `update_ops` then `finish_ops`; a frame
carries its sender's op index, and a receive op carries the index of the matching send
(the j-th send of a kind from p to q matches the j-th receive of that kind at q from p).
"""

from __future__ import annotations

from dataclasses import dataclass

from alphac.plan.protocol import OP_CODE, OwnerProtocol, peers, register_count

OP_WORDS = 6  # kind, peer, dst, a, b, step
HEADER_WORDS = 8
FRAME_MAGIC = 0x31454D4152464C41  # "ALFRAME1"
OUTPUT_MAGIC = 0x3154554F41484C41  # "ALHAOUT1"
OUTPUT_FORMAT = 1
KIND_HELLO, KIND_COMBINE, KIND_DIGEST, KIND_PUBLISH = 1, 2, 3, 4

_MATCH = {"recv": "send", "digest-recv": "digest-send", "publish-recv": "publish-send"}


@dataclass(frozen=True)
class OwnerTable:
    owner: int
    ops: tuple[tuple[int, ...], ...]  # OP_WORDS each: update ops, then finish ops
    n_update: int
    n_finish: int
    peers: tuple[int, ...]
    registers: int
    sample_row: int  # first row of this owner's samples in the role's sample table
    share: int


def op_steps(protocols: tuple[OwnerProtocol, ...]) -> dict[int, tuple[int, ...]]:
    """For every owner, the step word of each op (sends: own index; receives: the index of
    the matching send at the peer; other ops: own index)."""
    sends: dict[tuple[int, int, str], list[int]] = {}
    for proto in protocols:
        for i, op in enumerate(proto.update_ops + proto.finish_ops):
            if op.kind in _MATCH.values():
                sends.setdefault((proto.owner, op.peer, op.kind), []).append(i)
    taken: dict[tuple[int, int, str], int] = {}
    out = {}
    for proto in protocols:
        steps = []
        for i, op in enumerate(proto.update_ops + proto.finish_ops):
            if op.kind in _MATCH:
                key = (op.peer, proto.owner, _MATCH[op.kind])
                j = taken.get(key, 0)
                taken[key] = j + 1
                steps.append(sends[key][j])
            else:
                steps.append(i)
        out[proto.owner] = tuple(steps)
    return out


def owner_tables(protocols: tuple[OwnerProtocol, ...], role_owners: tuple[int, ...],
                 shares: tuple[int, ...]) -> tuple[OwnerTable, ...]:
    steps = op_steps(protocols)
    by_owner = {p.owner: p for p in protocols}
    tables = []
    row = 0
    for o in role_owners:
        proto = by_owner[o]
        ops = tuple(op.words() + (step,)
                    for op, step in zip(proto.update_ops + proto.finish_ops, steps[o]))
        tables.append(OwnerTable(o, ops, len(proto.update_ops), len(proto.finish_ops),
                                 peers(proto), register_count(proto), row, shares[o]))
        row += shares[o]
    return tuple(tables)


def kind_code(kind: str) -> int:
    return OP_CODE[kind]
