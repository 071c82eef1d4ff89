"""What a pointwise program may touch and what it has touched, and the proofs made with them.

A layout names a program's regions and writable range; a scope, the views, temporaries and
index variables in force at a point of the program. Slots written are kept as exact sets
(base + strides over open loops and closed ones), so that a read of a `read_after_write`
region is proven to follow its write, and two accesses in a loop are proven never to touch
each other's slots in different iterations (programs.py, access.py).
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field

from alphac.diagnostics import Span
from alphac.ir import nodes as ir


@dataclass(frozen=True)
class Region:
    name: str
    lo: int
    hi: int
    read_after_write: bool = False
    refused: str = ""  # a code: every access to the region is refused with it


@dataclass(frozen=True)
class Layout:
    """What one program may touch: its regions (in slot order) and its writable range."""

    what: str  # "contribution" or "update", for messages
    slots: int
    regions: tuple[Region, ...]
    write_lo: int
    write_hi: int


# Intervals an exact set of written slots may take before the checker stops proving with it.
_SET_LIMIT = 1 << 16


@dataclass(frozen=True)
class _View:
    base: int
    length: int | None  # None: a single-slot view
    dims: tuple[int, int] | None = None  # (rows, columns) of a 2-D view


@dataclass(frozen=True)
class _Access:
    """A slot access inside loops: its index and each of its variables' range there."""

    index: ir.Index
    ranges: dict
    span: Span

    @property
    def bounds(self) -> tuple[int, int]:
        return self.index.bounds(self.ranges)


@dataclass(frozen=True)
class _Written:
    """Slots a program has written: base + sum(stride * var) over `open`, variables of loops
    still running (the slots of their running iterations), plus every sum(stride * v) for v
    over each (stride, lo, hi) of `closed`, loops that have run to their end."""

    base: int
    open: tuple
    closed: tuple = ()

    def close(self, var: str, lo: int, hi: int) -> "_Written":
        s = dict(self.open).get(var, 0)
        return _Written(self.base, tuple((v, t) for v, t in self.open if v != var),
                        self.closed + (((s, lo, hi),) if s else ()))


@dataclass
class _Loop:
    var: str
    lo: int
    hi: int
    reads: list = field(default_factory=list)    # _Access
    writes: list = field(default_factory=list)   # _Access
    written: list = field(default_factory=list)  # _Written in its running iteration
    vectors: list = field(default_factory=list)  # the vector temporaries its body writes


@dataclass(frozen=True)
class _Vector:
    lo: int
    hi: int
    writing: str | None  # inside its loop: the loop's variable, its one readable index
    span: Span


@dataclass
class _Scope:
    views: dict  # name -> _View
    lets: set
    vars: dict  # loop and sum variables -> (lo, hi)
    # views whose declaration was refused: their uses are not reported again as unknown
    broken: set = field(default_factory=set)
    vectors: dict = field(default_factory=dict)  # vector temporaries -> _Vector

    def child(self) -> "_Scope":
        return _Scope(dict(self.views), set(self.lets), dict(self.vars), set(self.broken),
                      dict(self.vectors))

    def taken(self, name: str) -> bool:
        return (name in self.views or name in self.lets or name in self.vars or name in self.broken
                or name in self.vectors)


def _merge(pieces) -> list:
    out: list = []
    for a, b in sorted(pieces):
        if out and a <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], b))
        elif b > a:
            out.append((a, b))
    return out


def _slot_set(base: int, terms):
    """The slots base + sum(s * v), v over [lo, hi) for each (s, lo, hi) of `terms`, as
    sorted disjoint [a, b) intervals; None when that takes more than _SET_LIMIT of them."""
    cur = [(base, base + 1)]
    for s, lo, hi in sorted(terms, key=lambda term: abs(term[0])):
        if hi <= lo:
            return []
        if s < 0:
            s, lo, hi = -s, 1 - hi, 1 - lo
        if s == 0:
            continue
        if len(cur) == 1 and cur[0][1] - cur[0][0] >= s:  # consecutive copies touch
            cur = [(cur[0][0] + s * lo, cur[0][1] + s * (hi - 1))]
            continue
        if len(cur) * (hi - lo) > _SET_LIMIT:
            return None
        cur = _merge([(a + s * v, b + s * v) for v in range(lo, hi) for a, b in cur])
    return cur


def _covered(inner: list, outers: list) -> bool:
    """Whether every interval of `inner` lies in the union of the interval lists `outers`."""
    merged = _merge([piece for outer in outers for piece in outer])
    starts = [a for a, _ in merged]
    for a, b in inner:
        at = bisect.bisect_right(starts, a) - 1
        if at < 0 or merged[at][1] < b:
            return False
    return True


def _separated(read: _Access, write: _Access, var: str, outer: set) -> bool:
    """Whether two iterations of the loop over `var` never touch each other's slots through
    `read` and `write`: the same nonzero stride s in `var`, the same strides in the variables
    `outer` of the loops around it (fixed while it runs), and offsets that differ by less
    than |s| whatever the variables inside the loop (inner loops, sums) are."""
    s = read.index.stride(var)
    if s == 0 or write.index.stride(var) != s:
        return False
    if any(read.index.stride(v) != write.index.stride(v) for v in outer):
        return False

    def spread(access: _Access) -> tuple[int, int]:
        lo = hi = 0
        for v, t in access.index.strides:
            if v == var or v in outer:
                continue
            a, b = access.ranges[v]
            lo += min(t * a, t * (b - 1))
            hi += max(t * a, t * (b - 1))
        return lo, hi

    (r0, r1), (w0, w1) = spread(read), spread(write)
    base = read.index.base - write.index.base
    return base + r1 - w0 < abs(s) and base + r0 - w1 > -abs(s)
