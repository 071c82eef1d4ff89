"""Typing and evaluation of values against family schemas read from the `.alpha` declarations.

Checking is bidirectional: every expression is checked against the type its context expects.
The types and values are values.py's; lists are checked by lists.py.
"""

from __future__ import annotations

from alphac.check import words as W
from alphac.check.lists import check_list
from alphac.check.modules import CtorSchema, FieldSchema, ModuleInfo, World
from alphac.check.values import (ANY, BOOL, LIST, MAX_NAT, NAT, PA, STRING, U64, UNIVERSE, Ty, VBool, VNat,
                                 VObj, VString, VWord, compatible)
from alphac.diagnostics import NO_SPAN, Span, did_you_mean, nearest
from alphac.syntax import ast

FEW_CHOICES = 8  # an unknown name lists its family's constructors when there are this few
_BUSY = object()


class Evaluator:
    def __init__(self, world: World, stands_for: dict[str, str] | None = None):
        self.world = world
        self.bag = world.bag
        self.memo: dict[tuple[str, str], object] = {}
        self.defaults: dict[tuple[str, str, str], object] = {}  # (family, ctor, field) -> value
        # family -> the family its values stand for where that one is expected (a named
        # deployment family's value is the Deployment it names: docs/learners.md)
        self.stands_for = dict(stands_for or {})

    # ------------------------------------------------------------------ types
    def resolve_type(self, info: ModuleInfo, t: ast.TypeExpr, params: dict | None = None):
        """A Ty, an int (a Nat argument), ANY, or None after reporting an error."""
        params = params or {}
        if isinstance(t, ast.TypeUniverse):
            return Ty(UNIVERSE, (t.level,))
        if isinstance(t, ast.TypeNat):
            n = self.nat_const(info, t.value, params)
            return n
        if isinstance(t, ast.TypeName):
            if t.name in params:
                return params[t.name]
            if self._nat_value_name(info, t.name):
                return self.nat_const(info, ast.NatName(t.name, t.span), params)
            found = self.world.lookup(info, t.name, "families", t.span)
            if found is None:
                return None
            _, schema = found
            return Ty(schema.key, tuple(ANY for _ in schema.params))
        assert isinstance(t, ast.TypeApply)
        found = self.world.lookup(info, t.family, "families", t.span)
        if found is None:
            return None
        _, schema = found
        if len(t.args) != len(schema.params):
            self.bag.error("wrong-arity",
                           f"{schema.name} takes {len(schema.params)} argument(s), given {len(t.args)}",
                           t.span)
            return None
        args = []
        for arg in t.args:
            resolved = self.resolve_type(info, arg, params)
            if resolved is None:
                return None
            args.append(resolved)
        return Ty(schema.key, tuple(args))

    def validate_families(self) -> None:
        """Resolve every declared parameter and field type, and check every field's default,
        so unknown types and bad defaults are reported even in families no value uses."""
        for info in list(self.world.modules.values()):
            for schema in info.families.values():
                params = {}
                for name, t in schema.params:
                    self.resolve_type(info, t)
                    params[name] = ANY
                for ctor in schema.ctors:
                    for f in ctor.fields:
                        if f.default is None:
                            self.resolve_type(info, f.type, params)
                        else:
                            self.default_of(ctor, f)

    def default_of(self, ctor: CtorSchema, fs: FieldSchema):
        """The value of field `fs`'s default, or None after reporting (at the default). It is
        checked once, in the module that declares the family, against the field's type with
        the family's erased parameters unspecified; every application omitting the field
        shares it."""
        key = (ctor.family, ctor.name, fs.name)
        state = self.defaults.get(key)
        if state is _BUSY:
            self.bag.error("cyclic-definition", f"the default of {ctor.name}'s field {fs.name} "
                           "is defined in terms of itself", fs.default.span)
            self.defaults[key] = None
            return None
        if key in self.defaults:
            return state
        self.defaults[key] = _BUSY
        module_name, _, family_name = ctor.family.rpartition(".")
        home = self.world.modules[module_name]
        params = {name: ANY for name, _ in home.families[family_name].params}
        fty = self.resolve_type(home, fs.type, params)
        value = self.check(home, fs.default, fty) if isinstance(fty, Ty) else None
        self.defaults[key] = value
        return value

    def _nat_value_name(self, info: ModuleInfo, name: str) -> bool:
        found = self.world.lookup(info, name, "values", NO_SPAN, report=False)
        if found is None:
            return False
        module, decl = found
        return isinstance(decl.type, ast.TypeName) and decl.type.name in ("Nat", "Std.Core.Nat")

    # ------------------------------------------------------------------ named values
    def value_of(self, info: ModuleInfo, name: str, span: Span):
        """(value, type) of a named value seen from `info`, or None."""
        found = self.world.lookup(info, name, "values", span, report=False)
        if found is None:
            return None
        module, decl = found
        key = (module.name, decl.name)
        state = self.memo.get(key)
        if state is _BUSY:
            self.bag.error("cyclic-definition", f"{decl.name} is defined in terms of itself", span)
            self.memo[key] = None
            return None
        if state is not None or key in self.memo:
            return state
        self.memo[key] = _BUSY
        ty = self.resolve_type(module, decl.type)
        result = None
        if isinstance(ty, Ty):
            v = self.check(module, decl.value, ty)
            if v is not None:
                if isinstance(v, VObj):
                    v.name = v.name or decl.name
                    v.type_span = decl.type.span
                result = (v, ty)
        elif ty is not None:
            self.bag.error("type-mismatch", f"{decl.name} is given a Nat, not a type", decl.type.span)
        self.memo[key] = result
        return result

    # ------------------------------------------------------------------ Nat expressions
    def nat_const(self, info: ModuleInfo, e: ast.NatExpr, params: dict | None = None):
        """A constant Nat expression (program bounds, type arguments), or None."""
        if isinstance(e, ast.NatLit):
            return self._nat_range(e.value, e.span)
        if isinstance(e, ast.NatName):
            if params and e.name in params:
                return params[e.name]
            got = self.value_of(info, e.name, e.span)
            if got is None:
                if (self.world.lookup(info, e.name, "values", e.span, report=False) is None
                        and not self.world.unknown_is_follow_on(info)):
                    self.bag.error("unknown-name", f"no Nat value named {e.name} is in scope", e.span,
                                   self.world.suggestions(info, e.name, ("values",)))
                return None
            v, ty = got
            if not isinstance(v, VNat):
                self.bag.error("type-mismatch", f"{e.name} has type {ty}, expected Nat", e.span)
                return None
            return v.n
        lhs = self.nat_const(info, e.lhs, params)
        rhs = self.nat_const(info, e.rhs, params)
        if not isinstance(lhs, int) or not isinstance(rhs, int):
            return ANY if (lhs is ANY or rhs is ANY) else None
        return self._nat_op(e.op, lhs, rhs, e.span)

    def _nat_op(self, op: str, a: int, b: int, span: Span):
        result = a + b if op == "+" else a - b if op == "-" else a * b
        return self._nat_range(result, span)

    def _nat_range(self, n: int, span: Span):
        if n < 0:
            self.bag.error("nat-range", f"{n} is below zero; a Nat is never negative", span)
            return None
        if n > MAX_NAT:
            self.bag.error("nat-range", f"{n} is larger than the largest Nat accepted (2**62)", span)
            return None
        return n

    # ------------------------------------------------------------------ checking
    def check(self, info: ModuleInfo, e: ast.Expr, ty: Ty):
        """Check `e` against `ty`; its value, or None after reporting."""
        if isinstance(e, (ast.SlotRef, ast.ViewRef, ast.SumOf, ast.SlotAssign)):
            self.bag.error("misplaced-program-expression",
                           "slots, views and sums are only meaningful inside a pointwise program",
                           e.span)
            return None
        if isinstance(e, (ast.Call, ast.Compare)):
            what = f"{e.name}(...)" if isinstance(e, ast.Call) else "a comparison"
            self.bag.error("misplaced-program-expression",
                           f"{what} is an operation of a program: the kernels and the oracle "
                           "evaluate it, inside a pointwise program", e.span)
            return None
        if isinstance(e, ast.NameRef):
            return self._check_name(info, e, ty)
        if ty.key == NAT:
            return self._check_nat(info, e)
        if ty.key == U64:
            w = self.word(info, e)
            return None if w is None else VWord(w, e.span)
        if ty.key == BOOL:
            if isinstance(e, ast.BoolLit):
                return VBool(e.value, e.span)
            return self._mismatch(e, ty)
        if ty.key == STRING:
            if isinstance(e, ast.StringLit):
                return VString(e.value, e.span)
            return self._mismatch(e, ty)
        if ty.key == LIST:
            return check_list(self, info, e, ty)
        if ty.key in (PA, UNIVERSE):
            return self._mismatch(e, ty)
        return self._check_family(info, e, ty)

    def _stands_for(self, actual, expected) -> bool:
        """A value of `actual`'s family stands for one of `expected`'s (stands_for)."""
        return (isinstance(actual, Ty) and isinstance(expected, Ty) and not expected.args
                and self.stands_for.get(actual.key) == expected.key)

    def _describe(self, e: ast.Expr) -> str:
        return {
            ast.IntLit: "an integer", ast.FloatLit: "a number", ast.WordLit: "a word",
            ast.BoolLit: "a Bool", ast.StringLit: "a String", ast.Unary: "an arithmetic expression",
            ast.Binary: "an arithmetic expression", ast.Compare: "a comparison",
            ast.Call: "a function call", ast.Construct: "a constructor application",
            ast.ListLit: "a list", ast.RangeLit: "a range", ast.Repeat: "a repeat list",
            ast.Load: "a file load", ast.Pointwise: "a pointwise program",
        }.get(type(e), "this expression")

    def _mismatch(self, e: ast.Expr, ty: Ty):
        self.bag.error("type-mismatch", f"expected {ty}, found {self._describe(e)}", e.span)
        return None

    def _check_name(self, info: ModuleInfo, e: ast.NameRef, ty: Ty):
        got = self.value_of(info, e.name, e.span)
        if got is not None:
            v, actual = got
            if not compatible(actual, ty) and not self._stands_for(actual, ty):
                self.bag.error("type-mismatch", f"{e.name} has type {actual}, expected {ty}", e.span)
                return None
            return v
        if self.world.lookup(info, e.name, "values", e.span, report=False) is not None:
            return None  # its definition already reported
        ctor = self.world.lookup(info, e.name, "ctors", e.span, report=False)
        if ctor is None and self.world.ambiguous(info, e.name):
            self.world.lookup(info, e.name, "values", e.span)  # reports ambiguous-name
            return None
        if ctor is None:
            if not self.world.unknown_is_follow_on(info):
                self.bag.error("unknown-name", f"no value or constructor named {e.name} is in "
                               "scope", e.span, self._name_notes(info, e.name, ty))
            return None
        return self._construct(info, ast.Construct(e.name, (), e.span), ty, ctor[1], bare=True)

    def _name_notes(self, info: ModuleInfo, name: str, ty: Ty) -> list[str]:
        """A "did you mean" among the constructors of the expected family (else every value
        and constructor in scope), and the family's constructors when they are few."""
        schema = self.world.family_schema(ty.key)
        choices = [c.name for c in schema.ctors] if schema is not None else []
        hint = did_you_mean(name, choices) if choices else None
        notes = [hint] if hint else self.world.suggestions(info, name, ("values", "ctors"))
        if 1 < len(choices) <= FEW_CHOICES:
            notes.append(f"{schema.name} is one of: {', '.join(choices)}")
        return notes

    def _check_nat(self, info: ModuleInfo, e: ast.Expr):
        if isinstance(e, ast.IntLit):
            n = self._nat_range(e.value, e.span)
            return None if n is None else VNat(n, e.span)
        if isinstance(e, ast.Binary) and e.op in ("add", "sub", "mul"):
            lhs = self.check(info, e.lhs, Ty(NAT))
            rhs = self.check(info, e.rhs, Ty(NAT))
            if lhs is None or rhs is None:
                return None
            n = self._nat_op({"add": "+", "sub": "-", "mul": "*"}[e.op], lhs.n, rhs.n, e.span)
            return None if n is None else VNat(n, e.span)
        return self._mismatch(e, Ty(NAT))

    def word(self, info: ModuleInfo, e: ast.Expr):
        """A constant binary64 expression's word, or None after reporting."""
        try:
            if isinstance(e, ast.FloatLit):
                return W.parse_literal(e.text)
            if isinstance(e, ast.IntLit):
                return W.parse_literal(str(e.value)) if e.text[:2] not in ("0x", "0X") \
                    else W.from_nat(e.value)
            if isinstance(e, ast.WordLit):
                return W.raw_word(e.value)
            if isinstance(e, ast.NameRef):
                v = self._check_name(info, e, Ty(U64))
                return None if v is None else v.w
            if isinstance(e, ast.Unary) and e.op == "f64":
                n = self.check(info, e.arg, Ty(NAT))
                return None if n is None else W.from_nat(n.n)
            if isinstance(e, ast.Unary):
                arg = self.word(info, e.arg)
                return None if arg is None else W.apply(e.op, arg)
            if isinstance(e, ast.Binary):
                lhs = self.word(info, e.lhs)
                rhs = self.word(info, e.rhs)
                return None if lhs is None or rhs is None else W.apply(e.op, lhs, rhs)
        except W.WordError as exc:
            self.bag.error(exc.code, exc.message, e.span)
            return None
        if isinstance(e, (ast.SlotRef, ast.ViewRef, ast.SumOf, ast.Call, ast.Compare)):
            self.check(info, e, Ty(U64))
            return None
        return self._mismatch(e, Ty(U64))

    def _check_family(self, info: ModuleInfo, e: ast.Expr, ty: Ty):
        if not isinstance(e, ast.Construct):
            return self._mismatch(e, ty)
        found = self.world.lookup(info, e.ctor, "ctors", e.span)
        if found is None:
            return None
        return self._construct(info, e, ty, found[1])

    def _construct(self, info: ModuleInfo, e: ast.Construct, ty: Ty, ctor, bare: bool = False):
        if ctor.family != ty.key:
            family = ctor.family.rpartition(".")[2]
            self.bag.error("type-mismatch",
                           f"{ctor.name} builds {_a(family)}, expected {ty}", e.span)
            return None
        module_name, _, family_name = ctor.family.rpartition(".")
        home = self.world.modules[module_name]
        schema = home.families[family_name]
        params = {name: arg for (name, _), arg in zip(schema.params, ty.args)}
        given: dict[str, object] = {}
        ok = True
        unknown: list[ast.FieldInit] = []
        for init in e.fields:
            fs = ctor.field(init.name)
            if fs is None:
                unknown.append(init)
                ok = False
                continue
            if init.name in given:
                self.bag.error("duplicate-field", f"field {init.name} is given twice", init.span)
                ok = False
                continue
            fty = self.resolve_type(home, fs.type, params)
            given[init.name] = None
            if not isinstance(fty, Ty):
                ok = False
                continue
            v = self.check(info, init.value, fty)
            ok = ok and v is not None
            given[init.name] = v
        open_fields = [f.name for f in ctor.fields if f.name not in given]
        for fs in ctor.fields:
            if fs.name not in given and fs.default is not None:
                given[fs.name] = self.default_of(ctor, fs)  # None: reported at the default
                ok = ok and given[fs.name] is not None
        missing = [f.name for f in ctor.fields if f.name not in given]
        meant = self._unknown_fields(ctor, unknown, open_fields, missing)
        missing = [name for name in missing if name not in meant]
        if missing:
            notes = [f"a bare {ctor.name} gives only the fields that have defaults; write "
                     f"{ctor.name} {{ {missing[0]} = ..., ... }}"] if bare else []
            self.bag.error("missing-field",
                           f"{ctor.name} needs field{'s' if len(missing) > 1 else ''} "
                           f"{', '.join(missing)}", e.span, notes)
            ok = False
        return VObj(ty.key, ctor.name, given, e.span, ty.args, complete=ok)

    def _unknown_fields(self, ctor, unknown, open_fields: list[str], missing: list[str]) -> set[str]:
        """Report each unknown field with the field it most likely meant: the nearest one
        not given, or the only field missing when one unknown field stands for it. The
        fields meant, which are then not also reported missing."""
        meant: set[str] = set()
        names = ", ".join(f.name for f in ctor.fields) or "none"
        for init in unknown:
            close = nearest(init.name, [n for n in open_fields if n not in meant], 1)
            if not close and len(unknown) == 1 and len(missing) == 1:
                close = missing
            meant.update(close)
            self.bag.error("unknown-field", f"{ctor.name} has no field {init.name}", init.span,
                           ([f"did you mean {close[0]}?"] if close else [])
                           + [f"its fields: {names}"])
        return meant


def _a(noun: str) -> str:
    """`noun` with its indefinite article: "an Edge", "a Deployment"."""
    return ("an " if noun[:1].lower() in "aeiou" else "a ") + noun
