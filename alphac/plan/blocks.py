"""The block placement (`CombineAtBlockOwners`, docs/plan.md "Where the combine runs"):
the ordered reduce-scatter, each coordinate block's whole tree at the block's owner, and
the all-gather of the reduced blocks. `sch` is protocol.py's global schedule."""

from __future__ import annotations

from alphac.plan.layout import OwnerLayout
from alphac.plan.ops import Op


def block_reduce(sch, contributions, local: dict, layout: OwnerLayout) -> dict[int, int]:
    """The block placement's reduce-scatter: every owner slices each of its leaf values to
    each coordinate owner t's coordinates (the count travels with every slice); one
    exchange moves every slice to its t; t combines its slices in the tree's post-order,
    left then right, as the branch placement does (the same operands in the same order:
    the same bits). The register of block t's reduction at t, by t."""
    n = layout.n
    sliced: list[tuple[int, object, int]] = []  # (t, leaf key, register at the key's owner)
    for t in range(n):
        for key, r in local.items():
            o = contributions.owner_of(key)
            sliced.append((t, key, sch.reg(o, layout.owned_count(t) + 1)))
            sch.emit(o, Op.of("slice", owner=t, dst=sliced[-1][2], src=r))
    moved = [(contributions.owner_of(key), r, t) for t, key, r in sliced if contributions.owner_of(key) != t]
    group = [len(ops) for ops in sch.ops]  # where each owner's exchange goes
    arrived = iter(sch.exchange(moved))
    at: list[dict] = [{} for _ in range(n)]
    for t, key, r in sliced:
        at[t][key] = r if contributions.owner_of(key) == t else next(arrived)
    out = {t: contributions.reduce(sch, at[t], "combine", at=t) for t in range(n)}
    for t in range(n):
        fold_combines(sch.ops[t], group[t])
    return out


def block_gather(sch, blocks: dict[int, int], layout: OwnerLayout, k: int) -> dict[int, int]:
    """The block placement's delivery to every owner (an all-gather): one exchange sends
    each owner's reduced block to every other owner; each owner places every block at its
    owner's coordinates in a register of k sums and the count (selection, no arithmetic).
    That register, by owner."""
    n = layout.n
    moved = [(t, blocks[t], o) for t in range(n) for o in range(n) if o != t]
    held = [{o: blocks[o]} for o in range(n)]
    for (t, _, o), r in zip(moved, sch.exchange(moved)):
        held[o][t] = r
    full = {}
    for o in range(n):
        full[o] = sch.reg(o, k + 1)
        for t in range(n):
            sch.emit(o, Op.of("place", owner=t, dst=full[o], src=held[o][t]))
    return full


def fold_combines(ops: list[Op], g: int) -> None:
    """The combines after the exchange at ops[g] join it (in place), in their order: a combine
    of a register received there (its right operand first) becomes a recv-add of that
    frame, its sums added as the words arrive once its other operand is done; any other
    runs once its operands are done (docs/runtime.md, "The exchange"). A frame from a
    peer that sends this exchange two stays a receive (a peer's frames go in op order)."""
    if g >= len(ops) or ops[g].kind != "exchange":
        return
    count = ops[g].operand("count")
    group, after = list(ops[g + 1:g + 1 + count]), ops[g + 1 + count:]
    if not after or any(op.kind != "combine" for op in after):
        return
    peers = [op.peer for op in group if op.kind == "recv"]
    recv = {op.dst: op for op in group if op.kind == "recv" and peers.count(op.peer) == 1}
    for op in after:
        left, right = op.operand("left"), op.operand("right")
        moved = right if right in recv else left if left in recv else None
        if moved is None:
            group.append(op)
            continue
        group.remove(recv[moved])
        side = "recv-add-left" if moved == left else "recv-add-right"
        group.append(Op.of(side, peer=recv.pop(moved).peer, dst=op.dst, left=left, right=right))
    ops[g:] = [Op.of("exchange", count=len(group)), *group]
