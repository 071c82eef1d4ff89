"""Lark parse tree → AST: exactly one method per grammar alias; anything else raises.

Runs non-recursively (lark's Transformer_NonRecursive), so tree depth never costs Python stack.
"""

from __future__ import annotations

from lark import Token
from lark.visitors import Transformer_NonRecursive, v_args

from alphac.diagnostics import Span
from alphac.syntax import ast


def _int(token: Token) -> int:
    text = str(token)
    return int(text, 16) if text[:2] in ("0x", "0X") else int(text, 10)


@v_args(meta=True)
class ToAst(Transformer_NonRecursive):
    """Builds AST nodes with spans in `file`; `text` is the source, for target labels."""

    def __init__(self, file: str, text: str, numbers_lists=None):
        super().__init__(visit_tokens=False)
        self.file = file
        self.text = text
        self.numbers_lists = numbers_lists or {}  # lists read ahead by syntax/numbers.py, by offset

    def _span(self, meta) -> Span:
        if getattr(meta, "empty", True):
            return Span(self.file, 1, 1)
        return Span(self.file, meta.line, meta.column, meta.end_line, meta.end_column)

    def _slice(self, meta) -> str:
        if getattr(meta, "empty", True):
            return ""
        return self.text[meta.start_pos:meta.end_pos]

    def __default__(self, data, children, meta):  # grammar and transformer must not drift apart
        raise NotImplementedError(f"grammar rule {data!r} has no transformer method")

    # ------------------------------------------------------------------ module and declarations
    def module(self, meta, c):
        return ast.Module(self.file, tuple(c), self._span(meta))

    def module_decl(self, meta, c):
        return ast.ModuleDecl(c[0], self._span(meta))

    def import_decl(self, meta, c):
        return ast.Import(c[0], self._span(meta))

    def family_decl(self, meta, c):
        name, kind, *members = c
        members = [m for m in members if not isinstance(m, Token)]  # drop END_FAMILY
        return ast.FamilyDecl(str(name), kind, tuple(members), self._span(meta))

    def value_decl(self, meta, c):
        return ast.ValueDecl(str(c[0]), c[1], c[2], self._span(meta))

    def parameter_decl(self, meta, c):
        return ast.ParameterDecl(str(c[0]), c[1], self._span(meta))

    def constructor_decl(self, meta, c):
        return ast.ConstructorDecl(str(c[0]), self._span(meta))

    def field_decl(self, meta, c):
        return ast.FieldDecl(str(c[0]), c[1], self._span(meta))

    def field_default_decl(self, meta, c):
        return ast.FieldDecl(str(c[0]), c[1], self._span(meta), c[2])

    def qname(self, meta, c):
        return ".".join(str(t) for t in c)

    # ------------------------------------------------------------------ types
    def type_name(self, meta, c):
        return ast.TypeName(c[0], self._span(meta))

    def type_universe(self, meta, c):
        return ast.TypeUniverse(_int(c[0]), self._span(meta))

    def type_apply(self, meta, c):
        return ast.TypeApply(c[0], tuple(c[1:]), self._span(meta))

    def type_nat(self, meta, c):
        span = self._span(meta)
        return ast.TypeNat(ast.NatLit(_int(c[0]), span), span)

    def type_nexpr(self, meta, c):
        return ast.TypeNat(c[0], self._span(meta))

    # ------------------------------------------------------------------ Nat expressions
    def nat_add(self, meta, c):
        return ast.NatBin("+", c[0], c[1], self._span(meta))

    def nat_sub(self, meta, c):
        return ast.NatBin("-", c[0], c[1], self._span(meta))

    def nat_mul(self, meta, c):
        return ast.NatBin("*", c[0], c[1], self._span(meta))

    def nat_lit(self, meta, c):
        return ast.NatLit(_int(c[0]), self._span(meta))

    def nat_name(self, meta, c):
        return ast.NatName(c[0], self._span(meta))

    def nat_paren(self, meta, c):
        return c[0]

    # ------------------------------------------------------------------ expressions
    def sum_of(self, meta, c):
        return ast.SumOf(str(c[0]), c[1], c[2], c[3], self._span(meta))

    def repeat(self, meta, c):
        return ast.Repeat(c[0], c[1], self._span(meta))

    def add(self, meta, c):
        return ast.Binary("add", c[0], c[1], self._span(meta))

    def sub(self, meta, c):
        return ast.Binary("sub", c[0], c[1], self._span(meta))

    def mul(self, meta, c):
        return ast.Binary("mul", c[0], c[1], self._span(meta))

    def div(self, meta, c):
        return ast.Binary("div", c[0], c[1], self._span(meta))

    def neg(self, meta, c):
        return ast.Unary("neg", c[0], self._span(meta))

    def _compare(self, op: str, meta, c):
        return ast.Compare(op, c[0], c[1], self._span(meta))

    def lt(self, meta, c):
        return self._compare("lt", meta, c)

    def le(self, meta, c):
        return self._compare("le", meta, c)

    def gt(self, meta, c):
        return self._compare("gt", meta, c)

    def ge(self, meta, c):
        return self._compare("ge", meta, c)

    def eq(self, meta, c):
        return self._compare("eq", meta, c)

    def ne(self, meta, c):
        return self._compare("ne", meta, c)

    def call(self, meta, c):
        return ast.Call(str(c[0]), tuple(c[1:]), self._span(meta))

    def int_lit(self, meta, c):
        return ast.IntLit(str(c[0]), _int(c[0]), self._span(meta))

    def float_lit(self, meta, c):
        return ast.FloatLit(str(c[0]), self._span(meta))

    def hexfloat_lit(self, meta, c):
        return ast.FloatLit(str(c[0]), self._span(meta))

    def word_lit(self, meta, c):
        return ast.WordLit(_int(c[0]), self._span(meta))

    def to_f64(self, meta, c):
        return ast.Unary("f64", c[0], self._span(meta))

    def sqrt(self, meta, c):
        return ast.Unary("sqrt", c[0], self._span(meta))

    def true_lit(self, meta, c):
        return ast.BoolLit(True, self._span(meta))

    def false_lit(self, meta, c):
        return ast.BoolLit(False, self._span(meta))

    def string_lit(self, meta, c):
        return ast.StringLit(str(c[0])[1:-1], self._span(meta))

    def name_ref(self, meta, c):
        return ast.NameRef(c[0], self._span(meta))

    def construct(self, meta, c):
        return ast.Construct(c[0], tuple(c[1:]), self._span(meta))

    def field_init(self, meta, c):
        return ast.FieldInit(str(c[0]), c[1], self._span(meta))

    def list_lit(self, meta, c):
        return ast.ListLit(tuple(c), self._span(meta))

    def range_lit(self, meta, c):
        return ast.RangeLit(c[0], c[1], self._span(meta))

    def load(self, meta, c):
        return ast.Load(str(c[0])[1:-1], None, self._span(meta))

    def load_shares(self, meta, c):
        return ast.Load(str(c[0])[1:-1], c[1], self._span(meta))

    def slot_ref(self, meta, c):
        return ast.SlotRef(c[0], self._span(meta))

    def view_ref(self, meta, c):
        return ast.ViewRef(str(c[0]), c[1], self._span(meta))

    def view_ref2(self, meta, c):
        return ast.ViewRef(str(c[0]), c[1], self._span(meta), c[2])

    def pointwise(self, meta, c):
        return ast.Pointwise(tuple(c), self._span(meta))

    def paren(self, meta, c):
        return c[0]

    def numbers(self, meta, c):
        return self.numbers_lists[c[0].start_pos]

    def slot_assign(self, meta, c):
        text = self._slice(meta).split(":=", 1)[0].strip()
        return ast.SlotAssign(c[0], c[1], self._span(meta), text)

    # ------------------------------------------------------------------ statements
    def view_range(self, meta, c):
        return ast.ViewDecl(str(c[0]), c[1], c[2], self._span(meta))

    def view_matrix(self, meta, c):
        return ast.ViewDecl(str(c[0]), c[1], c[2], self._span(meta), c[3], c[4])

    def view_single(self, meta, c):
        return ast.ViewDecl(str(c[0]), c[1], None, self._span(meta))

    def let_stmt(self, meta, c):
        return ast.Let(str(c[0]), c[1], self._span(meta))

    def let_vector(self, meta, c):
        return ast.Let(str(c[0]), c[2], self._span(meta), c[1])

    def assign_stmt(self, meta, c):
        text = self._slice(meta).split(":=", 1)[0].strip()
        return ast.Assign(c[0], c[1], self._span(meta), text)

    def for_stmt(self, meta, c):
        return ast.For(str(c[0]), c[1], c[2], tuple(c[3:]), self._span(meta))

    def target_slot(self, meta, c):
        return ast.TargetSlot(c[0], self._span(meta))

    def target_name(self, meta, c):
        return ast.TargetName(str(c[0]), self._span(meta))

    def target_index(self, meta, c):
        return ast.TargetIndex(str(c[0]), c[1], self._span(meta))

    def target_index2(self, meta, c):
        return ast.TargetIndex(str(c[0]), c[1], self._span(meta), c[2])
