"""The vector engine: runs a program statement by statement over whole loop ranges and a
batch of independent runs (samples) as numpy float64 arrays.

Element-wise `add subtract multiply divide sqrt negative` round each element correctly
and never fuse; the elementary functions are alphac/oracle/elementary.py's (each distinct
argument once); `abs copysign` and the comparisons are exact, `min`/`max` and `select` are
selections by `numpy.where` (ir/nodes.py); ordered sums go through `ordered.fold_partials`,
never `numpy.sum`.

Array layout: the batch is the last axis; a loop or sum variable bound at depth t sits at
axis -(t+1), so values from an outer scope broadcast into inner ones unchanged.

A `Loop` is vectorised only when that gives the sequential words: no nested loop, every
assignment writes at the loop's own index (the views it writes not overlapping), a slot
written in the loop is read only at that very index, and a vector temporary written in the
loop is read only at the loop's index after its `VectorLet`. Other loops run iteration by
iteration (their bodies may still vectorise). A read at an affine index (a 2-D view's
`base + d*i + j`) gathers its words with an index array laid out like the variables' axes.
Vector temporaries are slot stores of their own, one row per element.

Any non-finite operand or result raises `Flagged`; the caller re-runs that piece with the
scalar engine, which names the first failure in sequential order.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from alphac.ir.nodes import (Assign, Binary, Compare, Const, Index, Let, Local, Loop, Program, Select,
                             SlotRef, Sum, Unary, VectorLet, VectorLocal, children, vector_lets)
from alphac.ir.nodes import ELEMENTARY_OPS
from alphac.oracle.ordered import fold_partials
from alphac.ir.words import to_float

_LEAVES = (Const, SlotRef, Local, VectorLocal)


def _minimum(a, b):
    """IEEE 754-2019 minimum of finite operands: of -0.0 and +0.0, -0.0."""
    return np.where(a < b, a, np.where(b < a, b, np.where(np.signbit(a), a, b)))


def _maximum(a, b):
    return np.where(a > b, a, np.where(b > a, b, np.where(np.signbit(a), b, a)))


def _elementary(op: str, a):
    from alphac.oracle import elementary  # mpmath: imported by the learners that need it

    return elementary.evaluate_array(op, a)


_BINARY = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide,
           "min": _minimum, "max": _maximum, "copysign": np.copysign}
_UNARY = {"neg": np.negative, "sqrt": np.sqrt, "abs": np.abs,
          "round32": lambda a: np.asarray(a, dtype=np.float64).astype(np.float32).astype(np.float64),
          **{op: functools.partial(_elementary, op) for op in ELEMENTARY_OPS}}
_COMPARE = {"lt": np.less, "le": np.less_equal, "gt": np.greater, "ge": np.greater_equal,
            "eq": np.equal, "ne": np.not_equal}


class Flagged(Exception):
    """Something non-finite happened; the scalar engine says what and where."""


def _finite(x) -> bool:
    return bool(np.isfinite(x).all())


@dataclass(frozen=True)
class _Axis:
    lo: int
    hi: int
    depth: int


class SlotStore:
    """The slot vector as a few segments, each a (length, batch) array whose batch is 1
    (shared by every run, e.g. parameters) or B (one column per run)."""

    def __init__(self, segments: list[tuple[int, np.ndarray]]) -> None:
        self.segments = []
        pos = 0
        for start, data in segments:
            assert start == pos and data.ndim == 2, "segments must tile the slots"
            self.segments.append([start, start + data.shape[0], data])
            pos += data.shape[0]
        self.size = pos

    def _segment(self, lo: int, hi: int):
        for seg in self.segments:
            if seg[0] <= lo and hi <= seg[1]:
                return seg
        return None

    def rows(self, lo: int, hi: int) -> np.ndarray:
        """Slots [lo, hi) as a (hi-lo, batch) array (a view where one segment holds them)."""
        if not (0 <= lo <= hi <= self.size):
            raise IndexError(f"slots {lo}..{hi} outside 0..{self.size}")
        seg = self._segment(lo, hi)
        if seg is not None:
            return seg[2][lo - seg[0]:hi - seg[0]]
        batch = max(s[2].shape[1] for s in self.segments)
        parts = []
        for start, stop, data in self.segments:
            a, b = max(lo, start), min(hi, stop)
            if a < b:
                parts.append(np.broadcast_to(data[a - start:b - start], (b - a, batch)))
        return np.concatenate(parts, axis=0)

    def write(self, lo: int, hi: int, value: np.ndarray) -> None:
        """Slots [lo, hi) := value, broadcast over (hi-lo, batch)."""
        value = np.asarray(value)
        for seg in self.segments:
            start, stop, data = seg
            a, b = max(lo, start), min(hi, stop)
            if a >= b:
                continue
            part = value
            if part.ndim == 2 and part.shape[0] != 1:
                part = part[a - lo:b - lo]
            batch = part.shape[-1] if part.ndim else 1
            if batch > data.shape[1]:  # a shared segment gets one column per run
                data = seg[2] = np.repeat(data, batch, axis=1)
            data[a - start:b - start] = part if part.ndim == 2 else np.broadcast_to(
                part, (b - a, data.shape[1]))


def _walk_refs(e, bound: dict, out: list):
    """Every SlotRef and VectorLocal in `e`, with the ranges of the sum variables bound
    around it."""
    stack = [(e, bound)]
    while stack:
        e, bound = stack.pop()
        if isinstance(e, (SlotRef, VectorLocal)):
            out.append((e, bound))
            continue
        inner = {**bound, e.var: (e.lo, e.hi)} if isinstance(e, Sum) else bound
        stack.extend((c, inner) for c in children(e))


def vectorisable(loop: Loop, ranges: dict[str, tuple[int, int]]) -> bool:
    """Whether running `loop`'s statements each over the whole range gives the sequential
    words. `ranges` holds the static ranges of the enclosing loop variables."""
    bases = set()
    lets = set()
    for st in loop.body:
        if isinstance(st, Loop):
            return False
        if isinstance(st, Assign):
            if st.target.var != loop.var:
                return False
            bases.add(st.target.base)
        if isinstance(st, VectorLet):
            if st.var != loop.var:
                return False
            lets.add(st.name)
    written = sorted((b + loop.lo, b + loop.hi) for b in bases)
    if any(a[1] > b[0] for a, b in zip(written, written[1:])):
        return False  # two written views overlap: the later statement must not win everywhere
    seen = set()
    for st in loop.body:
        refs: list = []
        _walk_refs(st.value, {}, refs)
        for ref, bound in refs:
            if loop.var in bound:  # a sum shadows the loop variable
                return False
            if isinstance(ref, VectorLocal):
                if ref.name in lets and (ref.name not in seen or ref.index != Index(0, loop.var)):
                    return False
                continue
            index = ref.index
            local = {**ranges, loop.var: (loop.lo, loop.hi), **bound}
            lo, hi = index.bounds(local)
            if any(lo < b and a < hi for a, b in written) and not (
                    index.var == loop.var and index.base in bases):
                return False
        if isinstance(st, VectorLet):
            seen.add(st.name)
    return True


def _gather(store: "SlotStore", index: Index, binds: dict, shift: int = 0) -> np.ndarray:
    """The words of `store` at `index` - shift: one row for int-bound variables, an array
    laid out like the variables' axes (batch last) for those bound to an _Axis."""
    fixed = index.base - shift
    axes = []
    for v, s in index.strides:
        b = binds[v]
        if isinstance(b, _Axis):
            axes.append((s, b))
        else:
            fixed += s * b
    if not axes:
        return store.rows(fixed, fixed + 1)[0]
    if len(axes) == 1 and axes[0][0] == 1:
        b = axes[0][1]
        rows = store.rows(fixed + b.lo, fixed + b.hi)
        return rows.reshape((rows.shape[0],) + (1,) * (b.depth - 1) + (rows.shape[1],))
    depth = max(b.depth for _, b in axes)
    offsets = np.full((1,) * depth, fixed, dtype=np.int64)
    for s, b in axes:
        shape = [1] * depth
        shape[depth - b.depth] = b.hi - b.lo
        offsets = offsets + (s * np.arange(b.lo, b.hi, dtype=np.int64)).reshape(shape)
    lo, hi = int(offsets.min()), int(offsets.max()) + 1
    return store.rows(lo, hi)[offsets - lo]


class _Run:
    def __init__(self, store: SlotStore, vectors=()) -> None:
        self.store = store
        self.plans: dict[int, bool] = {}
        # vector temporaries: name -> (lo, a store of one row per element)
        self.vectors = {v.name: (v.lo, SlotStore([(0, np.zeros((v.words, 1)))])) for v in vectors}

    def _write(self, store: SlotStore, index: Index, binds: dict, v, shift: int = 0) -> None:
        """store[index - shift] := v, over the loop's whole range when its variable is an
        _Axis (a simple index then: the vectorised loop's own)."""
        b = binds.get(index.var) if index.var is not None else None
        if isinstance(b, _Axis):
            n = b.hi - b.lo
            v = np.asarray(v)
            if v.ndim < 2:
                v = v.reshape((1,) * (2 - v.ndim) + v.shape)
            v = np.broadcast_to(v, (n, v.shape[1]))
            store.write(index.base - shift + b.lo, index.base - shift + b.hi, v)
        else:
            slot = index.at(binds) - shift
            v = np.asarray(v).reshape(-1)
            store.write(slot, slot + 1, v.reshape(1, -1))

    def block(self, body, lets: dict, binds: dict, ranges: dict, depth: int) -> None:
        for st in body:
            if isinstance(st, Loop):
                if st.lo >= st.hi:
                    continue
                key = id(st)
                if key not in self.plans:
                    self.plans[key] = depth == 0 and vectorisable(st, ranges)
                inner_ranges = dict(ranges)
                inner_ranges[st.var] = (st.lo, st.hi)
                if self.plans[key]:
                    inner = dict(binds)
                    inner[st.var] = _Axis(st.lo, st.hi, 1)
                    self.block(st.body, dict(lets), inner, inner_ranges, 1)
                else:
                    for i in range(st.lo, st.hi):
                        inner = dict(binds)
                        inner[st.var] = i
                        self.block(st.body, dict(lets), inner, inner_ranges, depth)
            elif isinstance(st, Let):
                v = self.expr(st.value, lets, binds, depth)
                lets[st.name] = np.array(v) if isinstance(st.value, (SlotRef, VectorLocal)) else v
            elif isinstance(st, VectorLet):
                v = self.expr(st.value, lets, binds, depth)
                lo, store = self.vectors[st.name]
                self._write(store, Index(0, st.var), binds, v, lo)
            elif isinstance(st, Assign):
                v = self.expr(st.value, lets, binds, depth)
                self._write(self.store, st.target, binds, v)
            else:
                raise TypeError(f"not a statement: {st!r}")

    def read(self, index: Index, binds: dict) -> np.ndarray:
        return _gather(self.store, index, binds)

    def operand(self, e, lets, binds, depth):
        v = self.expr(e, lets, binds, depth)
        if isinstance(e, _LEAVES) and not _finite(v):
            raise Flagged()
        return v

    def expr(self, e, lets: dict, binds: dict, depth: int):
        if isinstance(e, SlotRef):
            return self.read(e.index, binds)
        if isinstance(e, Const):
            return np.float64(to_float(e.bits))
        if isinstance(e, Local):
            return lets[e.name]
        if isinstance(e, VectorLocal):
            lo, store = self.vectors[e.name]
            return _gather(store, e.index, binds, lo)
        if isinstance(e, Binary):
            a = self.operand(e.lhs, lets, binds, depth)
            b = self.operand(e.rhs, lets, binds, depth)
            r = _BINARY[e.op](a, b)
            if not _finite(r):
                raise Flagged()
            return r
        if isinstance(e, Unary):
            a = self.operand(e.arg, lets, binds, depth)
            r = _UNARY[e.op](a)
            if not _finite(r):
                raise Flagged()
            return r
        if isinstance(e, Compare):
            a = self.operand(e.lhs, lets, binds, depth)
            b = self.operand(e.rhs, lets, binds, depth)
            return _COMPARE[e.op](a, b)
        if isinstance(e, Select):
            c = self.expr(e.cond, lets, binds, depth)
            a = self.operand(e.then, lets, binds, depth)
            b = self.operand(e.other, lets, binds, depth)
            return np.where(c, a, b)
        if isinstance(e, Sum):
            n = e.hi - e.lo
            if n <= 0:
                return np.float64(0.0)
            inner = dict(binds)
            inner[e.var] = _Axis(e.lo, e.hi, depth + 1)
            t = np.asarray(self.expr(e.body, lets, inner, depth + 1))
            nd = depth + 2
            t = t.reshape((1,) * (nd - t.ndim) + t.shape)
            if t.shape[0] != n:
                t = np.broadcast_to(t, (n,) + t.shape[1:])
            if not _finite(t):
                raise Flagged()
            partials = fold_partials(t, axis=0)
            if not _finite(partials):
                raise Flagged()
            return partials[-1]
        raise TypeError(f"not an expression: {e!r}")


def run_program(program: Program, store: SlotStore) -> SlotStore:
    """Run `program` over `store` in place (raises `Flagged` on any non-finite value)."""
    if store.size != program.slots:
        raise ValueError(f"{store.size} slots given, the program has {program.slots}")
    with np.errstate(all="ignore"):
        _Run(store, vector_lets(program.body)).block(program.body, {}, {}, {}, 0)
    return store
