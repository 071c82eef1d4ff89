"""Pointwise programs: typing, slot discipline, and lowering of both forms to ir.Program.

Views are resolved to absolute slot bases; every index is `base` or `base + var`. Each
access must stay inside the program's slots, inside one region of the layout, and writes
inside the layout's writable range; a region marked `read_after_write` (a contribution's
own slots) may be read only where the program has already written. Inside a loop, a slot
written in the loop may be read only at the very index it is written at, which is what
makes statement-by-statement vectorisation equal to the sequential order (see ir/nodes.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from alphac.check.values import Evaluator, VNat, VProgram, VWord
from alphac.diagnostics import Span, did_you_mean
from alphac.ir import nodes as ir
from alphac.syntax import ast

# A program's functions and how many arguments each takes (docs/language.md "Comparisons
# and selection"); `sqrt` and `f64` are the grammar's own.
FUNCTIONS = {"abs": 1, "min": 2, "max": 2, "copysign": 2, "select": 3}


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


@dataclass
class _Loop:
    var: str
    reads: list = field(default_factory=list)   # (Index, (lo, hi), span)
    writes: list = field(default_factory=list)  # (Index, (lo, hi))
    iter_written: set = field(default_factory=set)


@dataclass
class _Scope:
    views: dict  # name -> (base, length or None)
    lets: set
    vars: dict  # loop and sum variables -> (lo, hi)
    # views whose declaration was refused: their uses are not reported again as unknown
    broken: set = field(default_factory=set)

    def child(self) -> "_Scope":
        return _Scope(dict(self.views), set(self.lets), dict(self.vars), set(self.broken))

    def taken(self, name: str) -> bool:
        return name in self.views or name in self.lets or name in self.vars or name in self.broken


class ProgramLowering:
    def __init__(self, ev: Evaluator, prog: VProgram, layout: Layout):
        self.ev = ev
        self.bag = ev.bag
        self.info = prog.module
        self.prog = prog
        self.layout = layout
        self.written: list[tuple[int, int]] = []
        self.loops: list[_Loop] = []
        self.ok = True

    def error(self, code: str, message: str, span: Span, notes=()) -> None:
        self.ok = False
        self.bag.error(code, message, span, notes)

    # ------------------------------------------------------------------ entry
    def lower(self) -> ir.Program | None:
        scope = _Scope({}, set(), {})
        expr = self.prog.expr
        body: list = []
        if isinstance(expr, ast.Pointwise):
            body = self._stmts(expr.body, scope)
        else:
            for item in expr.items:
                if not isinstance(item, ast.SlotAssign):
                    self.error("type-mismatch", "a per-slot program lists assignments "
                               "`slot N := e`", item.span)
                    continue
                stmt = self._assign(ast.TargetSlot(item.index, item.index.span), item.value,
                                    item.span, item.text, scope)
                if stmt is not None:
                    body.append(stmt)
        if not self.ok:
            return None
        return ir.Program(self.layout.slots, tuple(body), self.prog.span)

    # ------------------------------------------------------------------ indices
    def _linear(self, e: ast.NatExpr, scope: _Scope):
        """(constant, var or None) for an index expression, or None after reporting."""
        if isinstance(e, ast.NatLit):
            return e.value, None
        if isinstance(e, ast.NatName):
            if e.name in scope.vars:
                return 0, e.name
            n = self.ev.nat_const(self.info, e)
            if not isinstance(n, int):
                self.ok = False
                return None
            return n, None
        lhs = self._linear(e.lhs, scope)
        rhs = self._linear(e.rhs, scope)
        if lhs is None or rhs is None:
            return None
        if e.op == "+" and (lhs[1] is None or rhs[1] is None):
            return lhs[0] + rhs[0], lhs[1] or rhs[1]
        if e.op == "-" and rhs[1] is None:
            return lhs[0] - rhs[0], lhs[1]
        if e.op == "*" and lhs[1] is None and rhs[1] is None:
            return lhs[0] * rhs[0], None
        self.error("invalid-index", "an index is N, i, i + N or i - N for a loop or sum "
                   "variable i and a constant N", e.span)
        return None

    def _const(self, e: ast.NatExpr, scope: _Scope, what: str):
        got = self._linear(e, scope)
        if got is None:
            return None
        if got[1] is not None:
            self.error("invalid-index", f"{what} must be a constant, not depend on {got[1]}", e.span)
            return None
        return got[0]

    def _index_scope(self, var: str, lo, hi, scope, span):
        """The scope inside `for var in lo .. hi` or `sum var in lo .. hi`, and the bounds;
        None (after a diagnostic) if var is taken or the bounds do not check."""
        if scope.taken(var):
            self.error("duplicate-definition", f"{var} is already defined here", span)
            return None
        bounds = self._bounds(lo, hi, scope, span)
        if bounds is None:
            return None
        inner = scope.child()
        inner.vars[var] = bounds
        return inner, bounds

    def _bounds(self, lo_e, hi_e, scope: _Scope, span: Span):
        lo = self._const(lo_e, scope, "a range bound")
        hi = self._const(hi_e, scope, "a range bound")
        if lo is None or hi is None:
            return None
        if lo < 0 or hi < lo:
            self.error("invalid-range", f"the range {lo} .. {hi} ends before it starts", span)
            return None
        return lo, hi

    def _range(self, index: ir.Index, scope: _Scope) -> tuple[int, int]:
        if index.var is None:
            return index.base, index.base + 1
        lo, hi = scope.vars[index.var]
        return index.base + lo, index.base + hi

    # ------------------------------------------------------------------ slot accesses
    def _access(self, index: ir.Index, scope: _Scope, span: Span, write: bool, label: str) -> bool:
        lo, hi = self._range(index, scope)
        if hi <= lo:
            return True  # an empty loop or sum touches nothing
        lay = self.layout
        shown = f"slot {lo}" if hi == lo + 1 else f"slots [{lo}, {hi})"
        region = self._region_of(lo, hi, f"{label} reaches {shown},", f"{label} spans {shown},",
                                 "each access must lie in one region", span)
        if region is None:
            return False
        if write:
            if lo < lay.write_lo or hi > lay.write_hi:
                self.error("slot-write-out-of-range",
                           f"the {lay.what} writes {shown} in its {region.name}; it may write only "
                           f"[{lay.write_lo}, {lay.write_hi})", span)
                return False
            return True
        if region.read_after_write and not self._was_written(index, lo, hi):
            self.error("slot-read-out-of-range",
                       f"the {lay.what} reads {shown} of its {region.name} before writing it", span,
                       [f"it reads [0, {lay.regions[0].hi}) and [{lay.regions[1].lo}, "
                        f"{lay.regions[1].hi}), and its own slots only after writing them"])
            return False
        return True

    def _was_written(self, index: ir.Index, lo: int, hi: int) -> bool:
        if any(index in loop.iter_written for loop in self.loops):
            return True
        pos = lo
        for a, b in sorted(self.written):
            if a <= pos < b:
                pos = b
            if pos >= hi:
                return True
        return pos >= hi

    def _record_read(self, index: ir.Index, scope: _Scope, span: Span) -> None:
        rng = self._range(index, scope)
        for loop in self.loops:
            loop.reads.append((index, rng, span))

    def _record_write(self, index: ir.Index, scope: _Scope) -> None:
        rng = self._range(index, scope)
        for loop in self.loops:
            loop.writes.append((index, rng))
        if index.var is None:
            self.written.append(rng)
        else:
            for loop in self.loops:
                if loop.var == index.var:
                    loop.iter_written.add(index)

    def _slot_index(self, index_e: ast.NatExpr, scope: _Scope):
        got = self._linear(index_e, scope)
        if got is None:
            return None
        if got[1] is not None and got[1] not in scope.vars:
            return None
        return ir.Index(got[0], got[1])

    def _view_index(self, view: str, index_e: ast.NatExpr, scope: _Scope, span: Span):
        base, length = scope.views[view]
        if length is None:
            self.error("invalid-index", f"{view} is a single-slot view; write it without an index",
                       span)
            return None
        got = self._linear(index_e, scope)
        if got is None:
            return None
        off, var = got
        lo, hi = (off, off + 1) if var is None else (off + scope.vars[var][0], off + scope.vars[var][1])
        if hi > lo and (lo < 0 or hi > length):
            reach = lo if lo < 0 else hi - 1
            self.error("index-out-of-range", f"{view}[...] reaches {view}[{reach}], but {view} has "
                       f"{length} slots", span)
            return None
        return ir.Index(base + off, var)

    # ------------------------------------------------------------------ expressions
    def _expr(self, e: ast.Expr, scope: _Scope):
        if isinstance(e, ast.SlotRef):
            index = self._slot_index(e.index, scope)
            if index is None:
                return None
            return self._read(index, scope, e.span, "the read")
        if isinstance(e, ast.ViewRef):
            if e.view not in scope.views:
                self._unknown_view(e.view, scope, e.span)
                return None
            index = self._view_index(e.view, e.index, scope, e.span)
            if index is None:
                return None
            return self._read(index, scope, e.span, f"the read of {e.view}")
        if isinstance(e, ast.NameRef):
            return self._name(e, scope)
        if isinstance(e, ast.SumOf):
            opened = self._index_scope(e.var, e.lo, e.hi, scope, e.span)
            if opened is None:
                return None
            inner, bounds = opened
            body = self._expr(e.body, inner)
            return None if body is None else ir.Sum(e.var, bounds[0], bounds[1], body, e.span)
        if isinstance(e, ast.Unary) and e.op in ("neg", "sqrt") and not (
                e.op == "neg" and isinstance(e.arg, (ast.FloatLit, ast.IntLit))):
            arg = self._expr(e.arg, scope)
            return None if arg is None else ir.Unary(e.op, arg, e.span)
        if isinstance(e, ast.Binary):
            lhs = self._expr(e.lhs, scope)
            rhs = self._expr(e.rhs, scope)
            if lhs is None or rhs is None:
                return None
            return ir.Binary(e.op, lhs, rhs, e.span)
        if isinstance(e, ast.Call):
            return self._call(e, scope)
        if isinstance(e, ast.Compare):
            self.error("type-mismatch", "a comparison is a Bool, not a binary64 value: it is the "
                       "condition of select(c, x, y)", e.span,
                       ["write select(a < b, x, y) for x where a < b holds, else y"])
            return None
        if isinstance(e, ast.Unary) and e.op == "f64" and any(
                isinstance(n, ast.NameRef) and n.name in scope.vars for n in (e.arg,)):
            self.error("type-mismatch", f"f64({e.arg.name}) converts a loop index; a program's "
                       "binary64 values come from slots, temporaries and constants", e.span)
            return None
        if isinstance(e, (ast.FloatLit, ast.IntLit, ast.WordLit, ast.Unary)):
            w = self.ev.word(self.info, e)
            if w is None:
                self.ok = False
                return None
            return ir.Const(w, e.span)
        self.error("type-mismatch", f"expected a binary64 expression, found "
                   f"{self.ev._describe(e)}", e.span)
        return None

    def _unknown_view(self, name: str, scope: _Scope, span: Span) -> None:
        """A use of a name that is no view: `unknown-name`, unless its view's declaration was
        refused already (that diagnostic is the one to read)."""
        if name in scope.broken:
            self.ok = False
            return
        self.error("unknown-name", f"no view named {name} is in scope", span)

    def _call(self, e: ast.Call, scope: _Scope):
        """A program function: min, max, copysign (binary), abs (unary), select(c, x, y)."""
        arity = FUNCTIONS.get(e.name)
        if arity is None:
            hint = did_you_mean(e.name, FUNCTIONS)
            self.error("unknown-name", f"no function named {e.name}" + (f"; {hint}" if hint else ""),
                       e.span, [f"a program's functions: {', '.join(sorted(FUNCTIONS))}"])
            return None
        if len(e.args) != arity:
            self.error("wrong-arity", f"{e.name} takes {arity} argument{'s' if arity > 1 else ''}, "
                       f"not {len(e.args)}", e.span)
            return None
        if e.name == "select":
            cond = e.args[0]
            if not isinstance(cond, ast.Compare):
                self.error("type-mismatch", "select's condition is a comparison (a < b, a <= b, "
                           "a == b, ...)", getattr(cond, "span", e.span))
                return None
            lhs, rhs = self._expr(cond.lhs, scope), self._expr(cond.rhs, scope)
            then, other = self._expr(e.args[1], scope), self._expr(e.args[2], scope)
            if None in (lhs, rhs, then, other):
                return None
            return ir.Select(ir.Compare(cond.op, lhs, rhs, cond.span), then, other, e.span)
        args = [self._expr(a, scope) for a in e.args]
        if None in args:
            return None
        if arity == 1:
            return ir.Unary(e.name, args[0], e.span)
        return ir.Binary(e.name, args[0], args[1], e.span)

    def _read(self, index: ir.Index, scope: _Scope, span: Span, label: str):
        if not self._access(index, scope, span, False, label):
            return None
        self._record_read(index, scope, span)
        return ir.SlotRef(index, span)

    def _name(self, e: ast.NameRef, scope: _Scope):
        if e.name in scope.lets:
            return ir.Local(e.name, e.span)
        if e.name in scope.views:
            base, length = scope.views[e.name]
            if length is not None:
                self.error("type-mismatch", f"{e.name} is a view of {length} slots; index it "
                           f"as {e.name}[i]", e.span)
                return None
            return self._read(ir.Index(base), scope, e.span, f"the read of {e.name}")
        if e.name in scope.vars:
            self.error("type-mismatch", f"{e.name} is a Nat index, not a binary64 value", e.span)
            return None
        if e.name in scope.broken:  # its view's declaration was refused: reported there
            self.ok = False
            return None
        got = self.ev.value_of(self.info, e.name, e.span)
        if got is None:
            if self.ev.world.lookup(self.info, e.name, "values", e.span, report=False) is None:
                self.error("unknown-name", f"no value, view or temporary named {e.name} is in scope",
                           e.span)
            self.ok = False
            return None
        v, ty = got
        if isinstance(v, VWord):
            return ir.Const(v.w, e.span)
        hint = [f"convert it explicitly: f64({e.name})"] if isinstance(v, VNat) else []
        self.error("type-mismatch", f"{e.name} has type {ty}, expected StdU64", e.span, hint)
        return None

    # ------------------------------------------------------------------ statements
    def _stmts(self, stmts, scope: _Scope) -> list:
        out = []
        for s in stmts:
            lowered = self._stmt(s, scope)
            if lowered is not None:
                out.append(lowered)
        return out

    def _stmt(self, s, scope: _Scope):
        if isinstance(s, ast.ViewDecl):
            if scope.taken(s.name):
                self.error("duplicate-definition", f"{s.name} is already defined here", s.span)
                return None
            lo = self._const(s.lo, scope, "a view's first slot")
            hi = self._const(s.hi, scope, "a view's end") if s.hi is not None else (
                None if lo is None else lo + 1)
            if lo is None or hi is None:
                scope.broken.add(s.name)
                return None
            if hi < lo:
                self.error("invalid-range", f"the view {lo} .. {hi} ends before it starts", s.span)
                scope.broken.add(s.name)
                return None
            if hi > lo:
                self._view_fits(s.name, lo, hi, s.span)  # still defined: no cascade of errors
            scope.views[s.name] = (lo, None if s.hi is None else hi - lo)
            return None
        if isinstance(s, ast.Let):
            if scope.taken(s.name):
                self.error("duplicate-definition", f"{s.name} is already defined here", s.span)
                return None
            value = self._expr(s.value, scope)
            scope.lets.add(s.name)
            return None if value is None else ir.Let(s.name, value, s.span)
        if isinstance(s, ast.Assign):
            return self._assign(s.target, s.value, s.span, s.text, scope)
        assert isinstance(s, ast.For)
        opened = self._index_scope(s.var, s.lo, s.hi, scope, s.span)
        if opened is None:
            return None
        inner, bounds = opened
        loop = _Loop(s.var)
        self.loops.append(loop)
        body = self._stmts(s.body, inner)
        self.loops.pop()
        self._loop_carried(loop, s)
        for index, rng in loop.writes:
            if index.var == s.var:
                self.written.append(rng)
        return ir.Loop(s.var, bounds[0], bounds[1], tuple(body), s.span)

    def _view_fits(self, name: str, lo: int, hi: int, span: Span) -> bool:
        covers = f"view {name} covers slots [{lo}, {hi}),"
        return self._region_of(lo, hi, covers, covers, "each view and access must lie in one region",
                               span) is not None

    def _region_of(self, lo: int, hi: int, outside: str, across: str, note: str, span: Span):
        """The one region holding slots [lo, hi), or None after `index-out-of-range` (the
        message starts with `outside`) or `region-straddle` (starts with `across`)."""
        lay = self.layout
        if lo < 0 or hi > lay.slots:
            self.error("index-out-of-range",
                       f"{outside} outside the {lay.what} program's {lay.slots} slots", span)
            return None
        region = next(r for r in lay.regions if r.lo <= lo < r.hi)
        if region.refused:
            self.error(region.refused, f"{outside.rstrip(',')} in {region.name} [{region.lo}, "
                       f"{region.hi})", span, [f"the {lay.what} may touch only slots [0, {region.lo})"])
            return None
        if hi > region.hi:
            other = next(r for r in lay.regions if r.lo < hi <= r.hi)
            self.error("region-straddle",
                       f"{across} across the {region.name} [{region.lo}, {region.hi}) and the "
                       f"{other.name} [{other.lo}, {other.hi})", span, [note])
            return None
        return region

    def _loop_carried(self, loop: _Loop, s: ast.For) -> None:
        for index, (rlo, rhi), span in loop.reads:
            if rhi <= rlo:
                continue
            for windex, (wlo, whi) in loop.writes:
                if whi <= wlo or rhi <= wlo or whi <= rlo:
                    continue
                if index == windex and index.var == loop.var:
                    continue
                self.error("loop-carried-dependence",
                           f"the loop over {loop.var} writes slot{'s' if whi - wlo > 1 else ''} "
                           f"[{wlo}, {whi}) and reads [{rlo}, {rhi}) at another index", span,
                           [f"inside the loop, read what it writes only at the loop's own index "
                            f"({loop.var})"])
                break

    def _assign(self, target, value_e, span: Span, text: str, scope: _Scope):
        if isinstance(target, ast.TargetSlot):
            index = self._slot_index(target.index, scope)
        elif isinstance(target, ast.TargetName):
            if target.name in scope.views:
                base, length = scope.views[target.name]
                if length is not None:
                    self.error("type-mismatch", f"{target.name} is a view of {length} slots; "
                               f"assign {target.name}[i]", target.span)
                    return None
                index = ir.Index(base)
            elif target.name in scope.lets:
                self.error("type-mismatch", f"{target.name} is a `let` temporary; only slots are "
                           "assigned", target.span)
                return None
            else:
                self._unknown_view(target.name, scope, target.span)
                return None
        else:
            if target.view not in scope.views:
                self._unknown_view(target.view, scope, target.span)
                return None
            index = self._view_index(target.view, target.index, scope, target.span)
        value = self._expr(value_e, scope)
        if index is None:
            return None
        if not self._access(index, scope, target.span, True, text or "the assignment"):
            return None
        self._record_write(index, scope)
        if value is None:
            return None
        return ir.Assign(index, value, span, text)
