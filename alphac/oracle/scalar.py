"""The per-slot engine: walks a program's IR with Python floats, one operation at a time.

Python floats are IEEE binary64: + - * / round to nearest-even and `math.sqrt` is the
correctly rounded square root, so every node is evaluated exactly as written (the
elementary functions by alphac/oracle/elementary.py: mpmath, rounded once); `abs`,
`copysign`, `min`, `max`, comparisons and `select` are exact (ir/nodes.py). Statements
and loop iterations run in their sequential order, so the first finite-or-refuse failure
this engine meets is the one a sequential realization meets; the vector engine hands its
failures here to be named.
"""

from __future__ import annotations

import math
import struct

from alphac.ir.nodes import (
    Assign, Binary, Compare, Const, Index, Let, Local, Loop, Program, Select, SlotRef, Sum, Unary,
    VectorLet, VectorLocal, vector_lets)
from alphac.ir.nodes import ELEMENTARY_OPS
from alphac.oracle.refusal import Site, non_finite
from alphac.ir.words import to_float

_LEAVES = (Const, SlotRef, Local, VectorLocal)
# |x| at or beyond which x rounds to binary32 infinity: the largest binary32 plus half its
# last unit, 2^128 - 2^103 (struct refuses to pack what does not fit)
_F32_LIMIT = 2.0 ** 128 - 2.0 ** 103
_isfinite = math.isfinite


def _binary(op: str, a: float, b: float) -> float:
    if op == "add":
        return a + b
    if op == "sub":
        return a - b
    if op == "mul":
        return a * b
    if op == "div":
        try:
            return a / b
        except ZeroDivisionError:  # IEEE gives ±inf or NaN: non-finite either way
            return math.nan
    if op == "min":  # IEEE 754-2019 minimum on finite operands: -0.0 below +0.0
        return a if a < b or (a == b and math.copysign(1.0, a) < 0.0) else b
    if op == "max":
        return a if a > b or (a == b and math.copysign(1.0, a) > 0.0) else b
    if op == "copysign":
        return math.copysign(a, b)
    raise ValueError(f"unknown binary operation {op!r}")


def _unary(op: str, a: float) -> float:
    if op == "neg":
        return -a
    if op == "sqrt":
        return math.sqrt(a) if a >= 0.0 else math.nan  # sqrt(-0.0) is -0.0, as in IEEE
    if op == "abs":
        return math.fabs(a)
    if op == "round32":  # the binary32 nearest a (overflow: inf), widened exactly
        return struct.unpack("<f", struct.pack("<f", a))[0] if abs(a) < _F32_LIMIT else math.copysign(math.inf, a)
    if op in ELEMENTARY_OPS:
        from alphac.oracle import elementary  # mpmath: imported by the learners that need it

        return elementary.evaluate(op, a)
    raise ValueError(f"unknown unary operation {op!r}")


_COMPARE = {"lt": float.__lt__, "le": float.__le__, "gt": float.__gt__, "ge": float.__ge__,
            "eq": float.__eq__, "ne": float.__ne__}


def compare(op: str, a: float, b: float) -> bool:
    """IEEE comparison (the operands are finite: finite-or-refuse)."""
    return _COMPARE[op](float(a), float(b))


def _coordinate(binds: dict[str, int], slot: int | None) -> str:
    if binds:
        return ", ".join(f"{v}={i}" for v, i in binds.items())
    return "" if slot is None else f"slot {slot}"


def statement_refusal(site: Site, st, what: str, binds: dict[str, int]):
    """The refusal of statement `st` (an Assign or a Let) whose `what` (e.g. `result of
    div`) was non-finite with the loop and sum variables `binds` (outermost first)."""
    if isinstance(st, Assign):
        label = st.label or f"slot {st.target}"
        slot = st.target.base if st.target.constant else None
    elif isinstance(st, VectorLet):
        label, slot = f"let {st.name}[{st.var}]", None
    else:
        label, slot = f"let {st.name}", None
    return non_finite(site, what, statement=label, span=st.span, coordinate=_coordinate(binds, slot))


def accumulate_refusal(site: Site, what: str, j: int):
    """The refusal of an owner's sum at coordinate `j` (`what`: the contribution word or
    the add's result)."""
    return non_finite(site, what, statement="accumulate", coordinate=f"coordinate {j}")


class _Run:
    """One execution of a program over a slot list (mutated in place)."""

    def __init__(self, slots: list[float], site: Site, vectors=()) -> None:
        self.slots = slots
        self.site = site
        self.stmt = None  # the statement being executed, for refusals
        # vector temporaries: name -> (lo, words), element i at words[i - lo]
        self.vectors = {v.name: (v.lo, [0.0] * v.words) for v in vectors}

    def fail(self, what: str, binds: dict[str, int]):
        raise statement_refusal(self.site, self.stmt, what, binds)

    def block(self, body, lets: dict[str, float], binds: dict[str, int]) -> None:
        for st in body:
            if isinstance(st, Loop):
                for i in range(st.lo, st.hi):
                    inner = dict(binds)
                    inner[st.var] = i
                    self.block(st.body, dict(lets), inner)  # lets inside are per iteration
            elif isinstance(st, Let):
                self.stmt = st
                lets[st.name] = self.expr(st.value, lets, binds)
            elif isinstance(st, VectorLet):
                self.stmt = st
                lo, words = self.vectors[st.name]
                words[binds[st.var] - lo] = self.expr(st.value, lets, binds)
            elif isinstance(st, Assign):
                self.stmt = st
                value = self.expr(st.value, lets, binds)
                self.slots[_slot(st.target, binds)] = value
            else:
                raise TypeError(f"not a statement: {st!r}")

    def operand(self, e, lets, binds, what: str) -> float:
        v = self.expr(e, lets, binds)
        # results of operations are checked where they are made; leaves are checked here
        if isinstance(e, _LEAVES) and not _isfinite(v):
            self.fail(what, binds)
        return v

    def expr(self, e, lets: dict[str, float], binds: dict[str, int]) -> float:
        if isinstance(e, SlotRef):
            return self.slots[_slot(e.index, binds)]
        if isinstance(e, Const):
            return to_float(e.bits)
        if isinstance(e, Local):
            return lets[e.name]
        if isinstance(e, VectorLocal):
            lo, words = self.vectors[e.name]
            return words[_slot(e.index, binds) - lo]
        if isinstance(e, Binary):
            a = self.operand(e.lhs, lets, binds, f"operand of {e.op}")
            b = self.operand(e.rhs, lets, binds, f"operand of {e.op}")
            r = _binary(e.op, a, b)
            if not _isfinite(r):
                self.fail(f"result of {e.op}", binds)
            return r
        if isinstance(e, Unary):
            a = self.operand(e.arg, lets, binds, f"operand of {e.op}")
            r = _unary(e.op, a)
            if not _isfinite(r):
                self.fail(f"result of {e.op}", binds)
            return r
        if isinstance(e, Compare):
            a = self.operand(e.lhs, lets, binds, f"operand of {e.op}")
            b = self.operand(e.rhs, lets, binds, f"operand of {e.op}")
            return compare(e.op, a, b)
        if isinstance(e, Select):
            c = self.expr(e.cond, lets, binds)
            a = self.operand(e.then, lets, binds, "operand of select")
            b = self.operand(e.other, lets, binds, "operand of select")
            return a if c else b
        if isinstance(e, Sum):
            acc = None
            inner = dict(binds)
            for j in range(e.lo, e.hi):
                inner[e.var] = j
                t = self.expr(e.body, lets, inner)
                if not _isfinite(t):
                    self.fail("term of sum", inner)
                acc = t if acc is None else acc + t
                if not _isfinite(acc):
                    self.fail("partial sum", inner)
            return 0.0 if acc is None else acc
        raise TypeError(f"not an expression: {e!r}")


def _slot(index: Index, binds: dict[str, int]) -> int:
    if index.var is not None:
        return index.base + binds[index.var]
    return index.at(binds) if index.terms else index.base


def run_program(program: Program, slots: list[float], site: Site) -> list[float]:
    """Run `program` over `slots` (length program.slots), in place; returns `slots`."""
    if len(slots) != program.slots:
        raise ValueError(f"{len(slots)} slots given, the program has {program.slots}")
    _Run(slots, site, vector_lets(program.body)).block(program.body, {}, {})
    return slots


def accumulate(acc: list[float], contribution: list[float], site: Site, narrow=None) -> None:
    """acc[j] = acc[j] + contribution[j], one binary64 add per coordinate (with `narrow`,
    rounded to the storage format: a binary32 add), checked."""
    for j, c in enumerate(contribution):
        if not _isfinite(c):
            raise accumulate_refusal(site, "contribution word", j)
        r = acc[j] + c if narrow is None else narrow(acc[j] + c)
        if not _isfinite(r):
            raise accumulate_refusal(site, "result of add", j)
        acc[j] = r
