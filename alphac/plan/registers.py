"""Register slots: where each register of an owner's protocol lives, so that registers whose
lifetimes have ended give their memory to later ones.

Every register is written by one op of `update_ops` and read by later ops of the same
update (no register lives from one update to the next; finish and checkpoint ops use
none). The one exception is the sample tree's block stack, register 0 of its owners: no op
names it (every `sample-block` works on it), so it keeps a slot of its own. A register is
live from the op that writes it to the last op that reads it (an op's READ, WRITE and
ARRIVE operands in the op table, plan/ops.py). Walking the ops in order, the registers
the op writes take a free slot first (the register a frame fills, then the result: the
smallest slot that holds it, else the largest free one, grown; else a new slot), and only
then are the registers whose last read was this op freed: a destination never shares
memory with the operands of its own op, among them the register a `recv-add` fills while
its sums are added on arrival (docs/runtime.md, "Inside the executable"). The sends and receives of an
`exchange` run at once, so each of their registers lives until the last of them.

A slot holds the largest of its registers' words; the runtime lays slots out one after the
other, each as a frame buffer: header, words, leaf tags, checksum and an authentication
tag (`frame_words`). The plan's register bytes (plan/memory.py) are exactly these.
"""

from __future__ import annotations

from dataclasses import dataclass

from alphac import wire
from alphac.plan.ops import GROUP
from alphac.plan.protocol import OwnerProtocol, register_count


@dataclass(frozen=True)
class RegisterSlots:
    slot: tuple[int, ...]        # the slot of each register
    slot_words: tuple[int, ...]  # data words of each slot: the largest of its registers

    def frame_words(self, leaf_tags: int) -> tuple[int, ...]:
        """Words of each slot's buffer: header, data, leaf tags, checksum, tag."""
        return tuple(wire.HEADER_WORDS + w + leaf_tags + 1 + wire.TAG_WORDS for w in self.slot_words)

    def offsets(self, leaf_tags: int) -> tuple[int, ...]:
        """The word offset of each register's buffer in the owner's register pool."""
        starts, at = [], 0
        for words in self.frame_words(leaf_tags):
            starts.append(at)
            at += words
        return tuple(starts[s] for s in self.slot)

    def pool_words(self, leaf_tags: int) -> int:
        return sum(self.frame_words(leaf_tags))


def register_sizes(proto: OwnerProtocol, k: int) -> tuple[int, ...]:
    """Data words of each register: the plan's sizes, or k sums and a count each."""
    return proto.register_words or (k + 1,) * register_count(proto)


def sent_words(proto: OwnerProtocol, k: int) -> int:
    """The data words (sums and the count, or assembled words) the owner's sends carry per
    update; frame headers, leaf tags, checksums and authentication tags apart."""
    sizes = register_sizes(proto, k)
    return sum(sizes[getattr(op, op.spec.moved.word)] for op in proto.update_ops
               if op.spec.moved and not op.spec.matches)


def _moment(proto: OwnerProtocol) -> list[int]:
    """For each update op, the op at which its reads and writes are over: its own index,
    or, for the ops an op of a GROUP operand runs at once (an `exchange`'s sends and
    receives), the last of them."""
    at = list(range(len(proto.update_ops)))
    for i, op in enumerate(proto.update_ops):
        for g in op.spec.of_type(GROUP):
            n = getattr(op, g.word)
            at[i:i + n + 1] = [i + n] * (n + 1)
    return at


def _ends(proto: OwnerProtocol, count: int) -> dict[int, list[int]]:
    """The registers whose last read (or, never read, whose write) is op i, by i: the
    registers of an exchange live until all of its frames have moved."""
    last = [-1] * count
    moment = _moment(proto)
    for i, op in enumerate(proto.update_ops):
        for r in op.reads():
            last[r] = moment[i]
        for r in op.writes():
            last[r] = max(last[r], moment[i])
    ends: dict[int, list[int]] = {}
    for r, i in enumerate(last):
        ends.setdefault(i, []).append(r)
    return ends


def register_slots(proto: OwnerProtocol, k: int) -> RegisterSlots:
    """Each register's slot and each slot's words, by the liveness walk above."""
    sizes = register_sizes(proto, k)
    ends = _ends(proto, len(sizes))
    slot = [-1] * len(sizes)
    words: list[int] = []
    free: list[int] = []
    for i, op in enumerate(proto.update_ops):
        for r in op.writes():
            if slot[r] < 0:
                slot[r] = _take(free, words, sizes[r])
        free.extend(slot[r] for r in ends.get(i, ()) if slot[r] >= 0)
    for r, s in enumerate(slot):  # a register no op writes (none in a planned protocol)
        if s < 0:
            slot[r] = _take([], words, sizes[r])
    return RegisterSlots(tuple(slot), tuple(words))


def _take(free: list[int], words: list[int], need: int) -> int:
    """A free slot for `need` words (removed from `free`), grown if it must be, or a new one."""
    fits = [s for s in free if words[s] >= need]
    if fits:
        s = min(fits, key=lambda x: (words[x], x))
    elif free:
        s = max(free, key=lambda x: (words[x], -x))
        words[s] = need
    else:
        words.append(need)
        return len(words) - 1
    free.remove(s)
    return s
