"""Short constructors for IR written by hand: tests and benchmarks build programs with these."""

from __future__ import annotations

from alphac.ir.nodes import Assign, Binary, Compare, Const, Index, Select, SlotRef, Unary
from alphac.ir.words import to_bits as bits, to_float as flt  # noqa: F401 (the short names tests use)


def C(x: float) -> Const:
    return Const(bits(x))


def S(base: int, var: str | None = None) -> SlotRef:
    return SlotRef(Index(base, var))


def add(a, b) -> Binary:
    return Binary("add", a, b)


def sub(a, b) -> Binary:
    return Binary("sub", a, b)


def mul(a, b) -> Binary:
    return Binary("mul", a, b)


def div(a, b) -> Binary:
    return Binary("div", a, b)


def sqrt(a) -> Unary:
    return Unary("sqrt", a)


def neg(a) -> Unary:
    return Unary("neg", a)


def fabs(a) -> Unary:
    return Unary("abs", a)


def fmin(a, b) -> Binary:
    return Binary("min", a, b)


def fmax(a, b) -> Binary:
    return Binary("max", a, b)


def copysign(a, b) -> Binary:
    return Binary("copysign", a, b)


def cmp(op: str, a, b) -> Compare:
    return Compare(op, a, b)


def select(c, a, b) -> Select:
    return Select(c, a, b)


def assign(base: int, value, var: str | None = None, label: str = "") -> Assign:
    """`slot base := value`, or `v<base>[var] := value` inside a loop over `var`."""
    return Assign(Index(base, var), value,
                  label=label or (f"slot {base}" if var is None else f"v{base}[{var}]"))
