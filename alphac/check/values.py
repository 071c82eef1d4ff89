"""The checker's types and values, and the caps on what a spec may declare.

A `Ty` names a family and its arguments (ANY where an erased argument is left unspecified);
the V* classes are the values checked against them (evaluate.py). Programs and file-loaded
samples are kept unevaluated (`VProgram`, `VRows`) until the learner that owns them fixes
their slot counts and sample width (see lower.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from alphac.check import words as W
from alphac.check.modules import ModuleInfo
from alphac.diagnostics import NO_SPAN, Span


NAT, BOOL, STRING, U64 = "Std.Core.Nat", "Std.Core.Bool", "Std.Core.String", "Std.Core.StdU64"
LIST, PA = "Std.Core.StdList", "Std.Core.PointwiseAssignment"
UNIVERSE = "Type"
MAX_NAT = 1 << 62
MAX_ITEMS = 1 << 20  # the most items a list of anything but words may hold
MAX_OWNERS = 1 << 16  # the most owners a deployment may have (docs/language.md)
# The most updates a deployment may declare (deploymentUpdates) and a command line may ask
# for (--rounds, alphac.driver.MAX_ROUNDS): a count of a few digits more must not start a
# run, or an oracle evaluation, that never ends.
MAX_UPDATES = 10**7
# The most parameter and state words (k + m) a learner may hold: the oracle keeps about 200
# to 400 bytes per word while it evaluates (measured: 200 bytes per parameter word of a
# plain least-squares learner), so at the cap it needs at most about 1.6 GiB; 2**26 words
# needed 27 GB and died with a MemoryError (docs/language.md).
MAX_LEARNER_WORDS = 1 << 22
# The most sample words a learner's samples written in the spec may hold in all, and the
# most samples: as many as one word file loads (a repeat of repeats names more than that
# without being expanded, and is refused by its counts).
MAX_SAMPLE_WORDS = W.MAX_WORDS


class _Any:
    def __repr__(self) -> str:
        return "_"


ANY = _Any()  # an erased argument left unspecified: accepts any


@dataclass(frozen=True)
class Ty:
    key: str
    args: tuple = ()

    def __str__(self) -> str:
        name = self.key.rpartition(".")[2]
        if self.key == UNIVERSE:
            return f"Type {self.args[0]}"
        if not self.args or all(a is ANY for a in self.args):
            return name
        return "(family " + " ".join([name] + [str(a) for a in self.args]) + ")"


def list_of(elem: Ty) -> Ty:
    return Ty(LIST, (elem,))


def compatible(actual, expected) -> bool:
    if actual is ANY or expected is ANY:
        return True
    if isinstance(actual, int) or isinstance(expected, int):
        return actual == expected
    if actual.key != expected.key or len(actual.args) != len(expected.args):
        return False
    return all(compatible(a, e) for a, e in zip(actual.args, expected.args))


# ----------------------------------------------------------------------------- values

@dataclass(eq=False)
class VNat:
    n: int
    span: Span = NO_SPAN


@dataclass(eq=False)
class VWord:
    w: int
    span: Span = NO_SPAN


@dataclass(eq=False)
class VBool:
    b: bool
    span: Span = NO_SPAN


@dataclass(eq=False)
class VString:
    s: str
    span: Span = NO_SPAN


class NatRange(Sequence):
    """The items of a Nat range `[lo .. hi]`, made on demand: a range is measured by its
    bounds (against an owner count, say) without being expanded element by element."""

    __slots__ = ("lo", "hi", "span")

    def __init__(self, lo: int, hi: int, span: Span = NO_SPAN):
        self.lo, self.hi, self.span = lo, max(hi, lo), span

    def __len__(self) -> int:
        return self.hi - self.lo

    def __getitem__(self, i):
        if isinstance(i, slice):
            return tuple(VNat(n, self.span) for n in range(self.lo, self.hi)[i])
        return VNat(range(self.lo, self.hi)[i], self.span)

    def __iter__(self):
        return (VNat(n, self.span) for n in range(self.lo, self.hi))


class Repeated(Sequence):
    """The items of `repeat N of e`: one value, N times, without N references."""

    __slots__ = ("item", "count")

    def __init__(self, item, count: int):
        self.item, self.count = item, count

    def __len__(self) -> int:
        return self.count

    def __getitem__(self, i):
        if isinstance(i, slice):
            return (self.item,) * len(range(self.count)[i])
        range(self.count)[i]  # IndexError outside
        return self.item

    def __iter__(self):
        return (self.item for _ in range(self.count))


@dataclass(eq=False)
class VList:
    items: Sequence  # a tuple, a NatRange or a Repeated
    span: Span = NO_SPAN


def word_count(v) -> int:
    """How many words a list value holds, nested lists and repeats included, measured
    without expanding a repeat (a repeated list is measured once)."""
    if isinstance(v, VWords):
        return len(v.data)
    if not isinstance(v, VList) or isinstance(v.items, NatRange):
        return 0
    if isinstance(v.items, Repeated):
        return v.items.count * word_count(v.items.item)
    return sum(word_count(x) for x in v.items)


def nats(v: VList) -> tuple[int, ...]:
    """The numbers of a list of Nat, without making a value per element where it can."""
    if isinstance(v.items, NatRange):
        return tuple(range(v.items.lo, v.items.hi))
    if isinstance(v.items, Repeated):
        return (v.items.item.n,) * v.items.count
    return tuple(n.n for n in v.items)


@dataclass(eq=False)
class VWords:
    """A list of StdU64: a uint64 array; `source` names the file it was loaded from."""

    data: np.ndarray
    span: Span = NO_SPAN
    source: str = ""
    item_spans: tuple = ()
    # the shape of the array it was loaded from when that is 2-D (rows x columns), for the
    # learner to check the columns against a width it knows; () for a flat list
    shape: tuple = ()


@dataclass(eq=False)
class VObj:
    key: str
    ctor: str
    fields: dict
    span: Span = NO_SPAN
    args: tuple = ()
    type_span: Span = NO_SPAN
    name: str = ""
    cache: dict = field(default_factory=dict)  # lowered forms, so each object lowers once
    # False when a field was missing, unknown, given twice or ill-typed (already reported):
    # the object is kept so that the checks of the fields that are fine still run.
    complete: bool = True


def whole(v) -> bool:
    """Whether a value holds no incomplete object anywhere inside."""
    stack = [v]
    while stack:
        x = stack.pop()
        if isinstance(x, VObj):
            if not x.complete:
                return False
            stack.extend(x.fields.values())
        elif isinstance(x, VList):
            if isinstance(x.items, Repeated):
                stack.append(x.items.item)
            elif not isinstance(x.items, NatRange):  # Nats only
                stack.extend(x.items)
        elif x is None:
            return False
    return True


@dataclass(eq=False)
class VProgram:
    expr: object  # ast.ListLit (per-slot form) or ast.Pointwise
    module: ModuleInfo
    slots: object  # int or ANY
    span: Span = NO_SPAN


@dataclass(eq=False)
class VRows:
    """`load "PATH" shares [...]`: rows of the learner's sample width, split among owners."""

    path: str
    shares: tuple
    span: Span = NO_SPAN
