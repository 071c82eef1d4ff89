"""Register slots (alphac/plan/registers.py): in every planned protocol, registers that live
at the same time never share a slot, a slot holds the largest of its registers, an op's
destination never shares memory with its operands (the register a receive fills while its
sums are added on arrival among them), and the pool's words are the slots' frame buffers."""

from __future__ import annotations

import itertools

import pytest

from alphac import wire
from alphac.ir.nodes import Hierarchy, Star, placed
from alphac.plan import plan
from alphac.plan.registers import register_sizes, register_slots
from test_plan_support import adam_partitioning, deployment

FLAGS = list(itertools.product((False, True), repeat=3))  # optimizer_state, parameters, gradients
READS = {"send": "a", "combine": "ab", "update": "a", "slice": "a", "select": "ab", "install": "a",
         "replica-install": "a", "update-owned": "a", "place": "a", "recv-add-left": "ab",
         "recv-add-right": "ab", "recv-update": "a"}  # a received register is read as it arrives
WRITES = ("local", "recv", "combine", "slice", "offer", "select", "place", "recv-add-left", "recv-add-right")


def lifetimes(proto) -> dict[int, tuple[int, int]]:
    """Each register's (first write, last read) op index."""
    out: dict[int, list[int]] = {}
    for i, op in enumerate(proto.update_ops):
        regs = [getattr(op, x) for x in READS.get(op.kind, "")] + ([op.dst] if op.kind in WRITES else [])
        for r in regs:
            out.setdefault(r, [i, i])[1] = i
    return {r: (a, b) for r, (a, b) in out.items()}


def assert_lawful(proto, k: int, tags: int) -> None:
    slots, sizes = register_slots(proto, k), register_sizes(proto, k)
    live = lifetimes(proto)
    assert len(slots.slot) == len(sizes)
    for r, s in enumerate(slots.slot):
        assert slots.slot_words[s] >= sizes[r]
    for r, q in itertools.combinations(live, 2):
        (a0, a1), (b0, b1) = live[r], live[q]
        if slots.slot[r] == slots.slot[q]:
            assert a1 < b0 or b1 < a0, (proto.owner, r, q, live[r], live[q])
    ops = proto.update_ops
    for i, op in enumerate(ops):
        if op.kind in WRITES:
            for x in READS.get(op.kind, ""):
                assert slots.slot[op.dst] != slots.slot[getattr(op, x)]
        if op.kind == "combine" and i and ops[i - 1].kind == "recv" and ops[i - 1].dst in (op.a, op.b):
            assert slots.slot[op.dst] != slots.slot[ops[i - 1].dst]
    assert slots.pool_words(tags) == sum(wire.HEADER_WORDS + w + tags + 1 + wire.TAG_WORDS
                                         for w in slots.slot_words)
    assert len(set(slots.offsets(tags))) == len(slots.slot_words)


@pytest.mark.parametrize("n", [1, 2, 4, 7, 10])
@pytest.mark.parametrize("topology", [Star(), Hierarchy(2), Hierarchy(3)])
def test_every_planned_protocol_has_lawful_slots(n, topology):
    k = 5
    for flags in [None] + FLAGS[1:]:
        part = None if flags is None else adam_partitioning(k, *map(placed, flags))
        p = plan(deployment(n, topology, k=k, kind="adam", partitioning=part))
        for o in p.owners:
            assert o.registers == register_slots(o.protocol, k)
            assert_lawful(o.protocol, k, 2 if part is not None else 0)


def test_a_ten_thousand_owner_star_hub_needs_three_slots():
    p = plan(deployment(10_000, Star(), k=2, kind="plain", shares=(1,) * 10_000))
    hub = p.owners[0].registers
    assert len(hub.slot) == 2 * 10_000 - 1 and hub.slot_words == (3, 3, 3)
