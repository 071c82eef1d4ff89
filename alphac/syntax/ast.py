"""The spec language's syntax tree: frozen dataclasses with source spans (spans never compare).

Names are kept as written (qualified names as dotted strings); nothing here is resolved.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Union

from alphac.diagnostics import NO_SPAN, Span


def _span() -> Span:
    return field(default=NO_SPAN, compare=False, hash=False, repr=False)


# ----------------------------------------------------------------------------- Nat expressions

@dataclass(frozen=True)
class NatLit:
    value: int
    span: Span = _span()


@dataclass(frozen=True)
class NatName:
    name: str
    span: Span = _span()


@dataclass(frozen=True)
class NatBin:
    op: str  # "+", "-", "*"
    lhs: "NatExpr"
    rhs: "NatExpr"
    span: Span = _span()


NatExpr = Union[NatLit, NatName, NatBin]


# ----------------------------------------------------------------------------- types

@dataclass(frozen=True)
class TypeName:
    name: str
    span: Span = _span()


@dataclass(frozen=True)
class TypeUniverse:
    level: int
    span: Span = _span()


@dataclass(frozen=True)
class TypeNat:
    """A Nat argument of an applied family: a literal or a parenthesised Nat expression."""

    value: NatExpr
    span: Span = _span()


@dataclass(frozen=True)
class TypeApply:
    family: str
    args: tuple["TypeExpr", ...]
    span: Span = _span()


TypeExpr = Union[TypeName, TypeUniverse, TypeNat, TypeApply]


# ----------------------------------------------------------------------------- expressions

@dataclass(frozen=True, slots=True)
class IntLit:
    """A decimal or hex integer as written: a Nat, or a binary64 where one is expected."""

    text: str
    value: int
    span: Span = _span()


@dataclass(frozen=True, slots=True)
class FloatLit:
    text: str  # decimal or hex float, as written
    span: Span = _span()


@dataclass(frozen=True)
class WordLit:
    """`word(0x...)`: a raw 64-bit pattern."""

    value: int
    span: Span = _span()


@dataclass(frozen=True)
class BoolLit:
    value: bool
    span: Span = _span()


@dataclass(frozen=True)
class StringLit:
    value: str
    span: Span = _span()


@dataclass(frozen=True)
class NameRef:
    name: str
    span: Span = _span()


@dataclass(frozen=True, slots=True)
class Unary:
    op: str  # "neg", "sqrt", "f64"
    arg: "Expr"
    span: Span = _span()


@dataclass(frozen=True)
class Binary:
    op: str  # "add", "sub", "mul", "div"
    lhs: "Expr"
    rhs: "Expr"
    span: Span = _span()


@dataclass(frozen=True)
class Compare:
    """`lhs OP rhs`, OP one of lt le gt ge eq ne: a Bool inside a program."""

    op: str
    lhs: "Expr"
    rhs: "Expr"
    span: Span = _span()


@dataclass(frozen=True)
class Call:
    """`name(arg, ...)`: a function of a program (min, max, abs, copysign, select)."""

    name: str
    args: tuple["Expr", ...]
    span: Span = _span()


@dataclass(frozen=True)
class FieldInit:
    name: str
    value: "Expr"
    span: Span = _span()


@dataclass(frozen=True)
class Construct:
    """`Ctor { field = e, ... }`; a bare `Ctor` is a NameRef."""

    ctor: str
    fields: tuple[FieldInit, ...]
    span: Span = _span()


@dataclass(frozen=True)
class ListLit:
    items: tuple["Expr", ...]
    span: Span = _span()


@dataclass(frozen=True)
class RangeLit:
    lo: "Expr"
    hi: "Expr"
    span: Span = _span()


@dataclass(frozen=True)
class Repeat:
    count: NatExpr
    item: "Expr"
    span: Span = _span()


@dataclass(frozen=True)
class Load:
    path: str
    shares: "Expr | None" = None
    span: Span = _span()


@dataclass(frozen=True)
class SlotRef:
    index: NatExpr
    span: Span = _span()


@dataclass(frozen=True)
class ViewRef:
    """`v[i]`, or `W[i, j]` (`column` given) for a 2-D view."""

    view: str
    index: NatExpr
    span: Span = _span()
    column: NatExpr | None = None


@dataclass(frozen=True)
class SumOf:
    var: str
    lo: NatExpr
    hi: NatExpr
    body: "Expr"
    span: Span = _span()


@dataclass(frozen=True)
class SlotAssign:
    """A per-slot program item: `slot N := e`."""

    index: NatExpr
    value: "Expr"
    span: Span = _span()
    text: str = field(default="", compare=False)


@dataclass(frozen=True)
class Pointwise:
    body: tuple["Stmt", ...]
    span: Span = _span()


Expr = Union[IntLit, FloatLit, WordLit, BoolLit, StringLit, NameRef, Unary, Binary, Compare, Call,
             Construct, ListLit, RangeLit, Repeat, Load, SlotRef, ViewRef, SumOf, SlotAssign, Pointwise]


# ----------------------------------------------------------------------------- statements

@dataclass(frozen=True)
class ViewDecl:
    """`view v = slot lo .. hi` (hi given) or `view v = slot lo` (a single-slot view);
    `view W = slot lo .. hi as h by d` (rows and cols given) is a 2-D row-major view."""

    name: str
    lo: NatExpr
    hi: NatExpr | None
    span: Span = _span()
    rows: NatExpr | None = None
    cols: NatExpr | None = None


@dataclass(frozen=True)
class Let:
    """`let x = e`, or `let z[i] = e` (`index` given): an element of a vector temporary."""

    name: str
    value: Expr
    span: Span = _span()
    index: NatExpr | None = None


@dataclass(frozen=True)
class TargetSlot:
    index: NatExpr
    span: Span = _span()


@dataclass(frozen=True)
class TargetName:
    name: str
    span: Span = _span()


@dataclass(frozen=True)
class TargetIndex:
    """`v[i] := e`, or `W[i, j] := e` (`column` given)."""

    view: str
    index: NatExpr
    span: Span = _span()
    column: NatExpr | None = None


Target = Union[TargetSlot, TargetName, TargetIndex]


@dataclass(frozen=True)
class Assign:
    target: Target
    value: Expr
    span: Span = _span()
    text: str = field(default="", compare=False)  # the target as written, for refusals


@dataclass(frozen=True)
class For:
    var: str
    lo: NatExpr
    hi: NatExpr
    body: tuple["Stmt", ...]
    span: Span = _span()


Stmt = Union[ViewDecl, Let, Assign, For]


# ----------------------------------------------------------------------------- declarations

@dataclass(frozen=True)
class ModuleDecl:
    name: str
    span: Span = _span()


@dataclass(frozen=True)
class Import:
    name: str
    span: Span = _span()


@dataclass(frozen=True)
class ParameterDecl:
    name: str
    type: TypeExpr
    span: Span = _span()


@dataclass(frozen=True)
class ConstructorDecl:
    name: str
    span: Span = _span()


@dataclass(frozen=True)
class FieldDecl:
    """`field unrestricted NAME : TYPE`, or with `= EXPR`: the value a constructor
    application that omits the field gets."""

    name: str
    type: TypeExpr
    span: Span = _span()
    default: "Expr | None" = None


Member = Union[ParameterDecl, ConstructorDecl, FieldDecl]


@dataclass(frozen=True)
class FamilyDecl:
    name: str
    kind: TypeExpr
    members: tuple[Member, ...]
    span: Span = _span()


@dataclass(frozen=True)
class ValueDecl:
    name: str
    type: TypeExpr
    value: Expr
    span: Span = _span()


Item = Union[ModuleDecl, Import, FamilyDecl, ValueDecl]


@dataclass(frozen=True)
class Module:
    file: str
    items: tuple[Item, ...]
    span: Span = _span()
