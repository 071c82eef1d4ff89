"""Pointwise programs: typing, slot discipline, and lowering of both forms to ir.Program.

Views are resolved to absolute slot bases; every index is affine in the loop and sum
variables (`base`, `base + var`, or a 2-D view's `base + d*i + j`). Each access must stay
inside the program's slots (a 2-D access inside its view's rows and columns), inside one
region of the layout, and writes inside the layout's writable range; a region marked
`read_after_write` (a contribution's own slots) may be read only where the program has
already written, which the checker proves with exact sets of written slots (or refuses).
Inside a loop, a slot written in the loop may be read only in the iteration that writes it:
for every loop around both, the read and the write must have the same stride in the loop's
variable and in every variable outside it, and their offsets must differ by less than that
stride whatever the inner variables are, so two iterations never touch each other's slots.
That is what makes statement-by-statement vectorisation equal to the sequential order (see
ir/nodes.py); what cannot be proven so is refused (`loop-carried-dependence`). Vector
temporaries (`let z[i] = e` directly inside `for i`) are readable inside their loop at its
own index after the `let`, and after the loop at any index of its range.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field, replace

from alphac.check.values import Evaluator, VNat, VProgram, VWord
from alphac.diagnostics import Span, did_you_mean
from alphac.ir import nodes as ir
from alphac.syntax import ast

# A program's functions and how many arguments each takes (docs/language.md "Comparisons
# and selection", "Elementary functions"); `sqrt` and `f64` are the grammar's own.
FUNCTIONS = {"abs": 1, "min": 2, "max": 2, "copysign": 2, "select": 3,
             "exp": 1, "log": 1, "log1p": 1, "expm1": 1, "sigmoid": 1, "tanh": 1, "pow": 2,
             "round32": 1}
# pow(x, n): n an integer literal, 1 <= |n| <= POW_LIMIT; x * x * ... * x (n factors, left to
# right), and 1 / (that) for a negative n
POW_LIMIT = 64


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


# The words of a program's vector temporaries, all together: the kernels hold them as stack
# scratch (docs/language.md "Matrices and vector temporaries").
MAX_TEMPORARY_WORDS = 1 << 16
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


class ProgramLowering:
    def __init__(self, ev: Evaluator, prog: VProgram, layout: Layout):
        self.ev = ev
        self.bag = ev.bag
        self.info = prog.module
        self.prog = prog
        self.layout = layout
        self.written: list[_Written] = []  # written outside every loop (or in loops that ended)
        self.loops: list[_Loop] = []
        self.ok = True
        self.vector_decls: dict = {}  # every `let z[i]` of the program, by name
        self.vector_names: set = set()  # the vector temporaries declared so far
        self.refused_vectors: set = set()  # whose declaration was refused: not reported again
        self.temporary_words = 0
        self.carried: set[int] = set()  # the reads reported as loop-carried

    def error(self, code: str, message: str, span: Span, notes=()) -> None:
        self.ok = False
        self.bag.error(code, message, span, notes)

    # ------------------------------------------------------------------ entry
    def lower(self) -> ir.Program | None:
        scope = _Scope({}, set(), {})
        expr = self.prog.expr
        body: list = []
        if isinstance(expr, ast.Pointwise):
            self._collect_vectors(expr.body)
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

    def _collect_vectors(self, stmts) -> None:
        for st in stmts:
            if isinstance(st, ast.Let) and st.index is not None:
                self.vector_decls.setdefault(st.name, st)
            elif isinstance(st, ast.For):
                self._collect_vectors(st.body)

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
        return index.bounds(scope.vars)

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
        if region.read_after_write and not self._was_written(index, scope):
            self.error("slot-read-out-of-range",
                       f"the {lay.what} reads {shown} of its {region.name} before writing it", span,
                       [f"it reads [0, {lay.regions[0].hi}) and [{lay.regions[1].lo}, "
                        f"{lay.regions[1].hi}), and its own slots only after writing them"])
            return False
        return True

    def _was_written(self, index: ir.Index, scope: _Scope) -> bool:
        """Whether every slot the read may reach has been written before it: the whole read
        within what was written at fixed slots, or, for the running iterations, its part
        in the sum variables within what they wrote at the same loop indices."""
        loop_vars = {loop.var for loop in self.loops}
        records = self.written + [w for loop in self.loops for w in loop.written]

        def sets(chosen):
            return [got for got in (_slot_set(r.base, r.closed) for r in chosen) if got is not None]

        whole = _slot_set(index.base, [(s, *scope.vars[v]) for v, s in index.strides])
        if whole is not None and _covered(whole, sets(r for r in records if not r.open)):
            return True
        open_ = tuple(sorted((v, s) for v, s in index.strides if v in loop_vars))
        if not open_:
            return False
        part = _slot_set(index.base, [(s, *scope.vars[v]) for v, s in index.strides
                                      if v not in loop_vars])
        return part is not None and _covered(part, sets(r for r in records if r.open == open_))

    def _access_of(self, index: ir.Index, scope: _Scope, span: Span) -> _Access:
        return _Access(index, {v: scope.vars[v] for v in index.variables()}, span)

    def _record_read(self, index: ir.Index, scope: _Scope, span: Span) -> None:
        access = self._access_of(index, scope, span)
        for loop in self.loops:
            loop.reads.append(access)

    def _record_write(self, index: ir.Index, scope: _Scope, span: Span = Span("", 0, 0)) -> None:
        access = self._access_of(index, scope, span)
        for loop in self.loops:
            loop.writes.append(access)
        record = _Written(index.base, tuple(sorted(index.strides)))
        (self.loops[-1].written if self.loops else self.written).append(record)

    def _slot_index(self, index_e: ast.NatExpr, scope: _Scope):
        got = self._linear(index_e, scope)
        if got is None:
            return None
        if got[1] is not None and got[1] not in scope.vars:
            return None
        return ir.Index(got[0], got[1])

    @staticmethod
    def _reach(got, scope: _Scope) -> tuple[int, int]:
        off, var = got
        return (off, off + 1) if var is None else (off + scope.vars[var][0], off + scope.vars[var][1])

    def _view_index(self, view: str, index_e: ast.NatExpr, scope: _Scope, span: Span,
                    column_e: ast.NatExpr | None = None):
        v = scope.views[view]
        if v.length is None:
            self.error("invalid-index", f"{view} is a single-slot view; write it without an index",
                       span)
            return None
        if v.dims is None and column_e is not None:
            self.error("index-rank-mismatch", f"{view} is a 1-D view of {v.length} slots; index it "
                       f"as {view}[i], not with two indices", span,
                       [f"a 2-D view is declared `view {view} = slot a .. b as h by d`"])
            return None
        if v.dims is not None and column_e is None:
            h, d = v.dims
            self.error("index-rank-mismatch", f"{view} is a 2-D view of {h} by {d} slots; index it "
                       f"as {view}[i, j] (row i, column j)", span)
            return None
        got = self._linear(index_e, scope)
        col = self._linear(column_e, scope) if column_e is not None else None
        if got is None or (column_e is not None and col is None):
            return None
        if v.dims is None:
            lo, hi = self._reach(got, scope)
            if hi > lo and (lo < 0 or hi > v.length):
                reach = lo if lo < 0 else hi - 1
                self.error("index-out-of-range", f"{view}[...] reaches {view}[{reach}], but {view} has "
                           f"{v.length} slots", span)
                return None
            return ir.affine(v.base + got[0], [(got[1], 1)] if got[1] is not None else [])
        h, d = v.dims
        for (what, size), coordinate in ((("row", h), got), (("column", d), col)):
            lo, hi = self._reach(coordinate, scope)
            if hi > lo and (lo < 0 or hi > size):
                reach = lo if lo < 0 else hi - 1
                self.error("index-out-of-range", f"{view}[...] reaches {what} {reach} of {view}, but "
                           f"{view} has {size} {what}s ({h} by {d})", span)
                return None
        terms = [(var, stride) for (_, var), stride in ((got, d), (col, 1)) if var is not None]
        return ir.affine(v.base + d * got[0] + col[0], terms)

    def _vector_read(self, e: ast.ViewRef, scope: _Scope):
        """`z[k]` of a vector temporary: inside its loop at the loop's own index, after it at
        any index of the loop's range."""
        vec = scope.vectors[e.view]
        if e.column is not None:
            self.error("index-rank-mismatch", f"{e.view} is a vector temporary of {vec.hi - vec.lo} "
                       f"words; index it as {e.view}[i], not with two indices", e.span)
            return None
        got = self._linear(e.index, scope)
        if got is None:
            return None
        off, var = got
        if vec.writing is not None:
            if (off, var) != (0, vec.writing):
                self.error("loop-carried-dependence", f"the loop over {vec.writing} writes "
                           f"{e.view}[{vec.writing}] and reads {e.view} at another index", e.span,
                           [f"inside its loop, a vector temporary is read only at the loop's own index "
                            f"({vec.writing}); after the loop, at any index of its range"])
                return None
        else:
            lo, hi = self._reach(got, scope)
            if hi > lo and (lo < vec.lo or hi > vec.hi):
                reach = lo if lo < vec.lo else hi - 1
                self.error("temporary-out-of-range", f"{e.view}[...] reaches {e.view}[{reach}], but "
                           f"`let {e.view}[...]` (line {vec.span.line}) writes it only at the indices "
                           f"{vec.lo} .. {vec.hi} of its loop", e.span)
                return None
        return ir.VectorLocal(e.view, ir.affine(off, [(var, 1)] if var is not None else []), e.span)

    # ------------------------------------------------------------------ expressions
    def _expr(self, e: ast.Expr, scope: _Scope):
        if isinstance(e, ast.SlotRef):
            index = self._slot_index(e.index, scope)
            if index is None:
                return None
            return self._read(index, scope, e.span, "the read")
        if isinstance(e, ast.ViewRef):
            if e.view in scope.vectors:
                return self._vector_read(e, scope)
            if e.view not in scope.views:
                self._unknown_view(e.view, scope, e.span)
                return None
            index = self._view_index(e.view, e.index, scope, e.span, e.column)
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
        if name in scope.broken or name in self.refused_vectors:
            self.ok = False
            return
        if name in self.vector_decls:
            self._unwritten(name, span)
            return
        self.error("unknown-name", f"no view named {name} is in scope", span)

    def _unwritten(self, name: str, span: Span) -> None:
        decl = self.vector_decls[name]
        index = decl.index.name if isinstance(decl.index, ast.NatName) else "i"
        self.error("temporary-unwritten", f"{name} is read where it has not been written: "
                   f"`let {name}[{index}]` (line {decl.span.line}) writes it", span,
                   ["a vector temporary is readable after the loop that writes it, in the block that "
                    "holds that loop, and inside the loop at its own index after the `let`"])

    def _pow(self, e: ast.Call, scope: _Scope):
        """pow(x, n), n an integer literal: the left-to-right product of n factors x (its
        reciprocal for n < 0), each a binary64 multiplication in the IR."""
        lit = e.args[1]
        negative = isinstance(lit, ast.Unary) and lit.op == "neg"
        if negative:
            lit = lit.arg
        if not isinstance(lit, ast.IntLit) or lit.value == 0 or lit.value > POW_LIMIT:
            self.error("pow-exponent", f"pow's exponent is an integer literal n with 1 <= |n| <= "
                       f"{POW_LIMIT}; the product x * x * ... * x of n factors is its value",
                       getattr(e.args[1], "span", e.span),
                       ["for a real exponent y write exp(y * log(x)); pow(x, 0) is 1.0"])
            return None
        x = self._expr(e.args[0], scope)
        if x is None:
            return None
        value = x
        for _ in range(lit.value - 1):
            value = ir.Binary("mul", value, x, e.span)
        if negative:
            one = ir.Const(0x3FF0000000000000, e.span)
            value = ir.Binary("div", one, value, e.span)
        return value

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
        if e.name == "pow":
            return self._pow(e, scope)
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
        if e.name in scope.vectors:
            vec = scope.vectors[e.name]
            self.error("type-mismatch", f"{e.name} is a vector temporary of {vec.hi - vec.lo} words; "
                       f"index it as {e.name}[i]", e.span)
            return None
        if e.name in scope.views:
            v = scope.views[e.name]
            if v.length is not None:
                shown = f"{e.name}[i, j]" if v.dims is not None else f"{e.name}[i]"
                self.error("type-mismatch", f"{e.name} is a view of {v.length} slots; index it "
                           f"as {shown}", e.span)
                return None
            return self._read(ir.Index(v.base), scope, e.span, f"the read of {e.name}")
        if e.name in self.refused_vectors:
            self.ok = False
            return None
        if e.name in self.vector_decls:
            self._unwritten(e.name, e.span)
            return None
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
            dims = None
            if s.rows is not None:
                h = self._const(s.rows, scope, "a view's row count")
                d = self._const(s.cols, scope, "a view's column count")
                if h is None or d is None:
                    scope.broken.add(s.name)
                    return None
                if h * d != hi - lo:
                    self.error("view-shape-mismatch", f"view {s.name} covers {hi - lo} slots [{lo}, "
                               f"{hi}), but {h} by {d} is {h * d}", s.span,
                               ["`slot a .. b as h by d` holds h rows of d slots, row after row: "
                                "h * d must be b - a"])
                    scope.broken.add(s.name)
                    return None
                dims = (h, d)
            if hi > lo:
                self._view_fits(s.name, lo, hi, s.span)  # still defined: no cascade of errors
            scope.views[s.name] = _View(lo, None if s.hi is None else hi - lo, dims)
            return None
        if isinstance(s, ast.Let) and s.index is not None:
            return self._vector_let(s, scope)
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
        loop = _Loop(s.var, bounds[0], bounds[1])
        self.loops.append(loop)
        body = self._stmts(s.body, inner)
        self.loops.pop()
        self._loop_carried(loop, s)
        if bounds[1] > bounds[0]:  # an empty loop writes nothing
            outer = self.loops[-1].written if self.loops else self.written
            outer.extend(w.close(s.var, *bounds) for w in loop.written)
        for name in loop.vectors:  # after the loop, readable at every index it wrote
            scope.vectors[name] = replace(inner.vectors[name], writing=None)
        return ir.Loop(s.var, bounds[0], bounds[1], tuple(body), s.span)

    def _vector_let(self, s: ast.Let, scope: _Scope):
        """`let z[i] = e` directly inside `for i in lo .. hi`: element i of z."""
        if scope.taken(s.name) or s.name in self.vector_names:
            where = " (a vector temporary is named once in a program)" if s.name in self.vector_names else ""
            self.error("duplicate-definition", f"{s.name} is already defined here{where}", s.span)
            return None
        loop = self.loops[-1] if self.loops else None
        if loop is None or not (isinstance(s.index, ast.NatName) and s.index.name == loop.var):
            if loop is None:
                message = (f"`let {s.name}[...]` writes a vector temporary, which only a loop does: "
                           f"`let {s.name}[i] = e` directly inside `for i in ...`")
            else:
                message = (f"a vector temporary is written at its loop's own index: `let {s.name}"
                           f"[{loop.var}] = e` directly inside `for {loop.var} in ...`")
            self.error("invalid-index", message, s.index.span)
            self.refused_vectors.add(s.name)
            return None
        value = self._expr(s.value, scope)
        self.vector_names.add(s.name)
        self.temporary_words += loop.hi - loop.lo
        if self.temporary_words > MAX_TEMPORARY_WORDS:
            self.error("size-limit", f"the program's vector temporaries hold {self.temporary_words} "
                       f"words with {s.name}; at most {MAX_TEMPORARY_WORDS} are accepted", s.span,
                       ["the kernels hold them as stack scratch; keep large vectors in slots"])
            self.refused_vectors.add(s.name)
            return None
        scope.vectors[s.name] = _Vector(loop.lo, loop.hi, loop.var, s.span)
        loop.vectors.append(s.name)
        return None if value is None else ir.VectorLet(s.name, loop.var, loop.lo, loop.hi, value, s.span)

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
        if loop.hi - loop.lo <= 1:
            return  # one iteration (or none) carries nothing to another
        outer = {o.var for o in self.loops}
        for read in loop.reads:
            rlo, rhi = read.bounds
            if rhi <= rlo or id(read) in self.carried:
                continue
            for write in loop.writes:
                wlo, whi = write.bounds
                if whi <= wlo or rhi <= wlo or whi <= rlo:
                    continue
                if _separated(read, write, loop.var, outer):
                    continue
                self.error("loop-carried-dependence",
                           f"the loop over {loop.var} writes slot{'s' if whi - wlo > 1 else ''} "
                           f"[{wlo}, {whi}) and reads [{rlo}, {rhi}) at another index", read.span,
                           [f"inside the loop, read what it writes only at the loop's own index "
                            f"({loop.var})"])
                self.carried.add(id(read))  # reported once, at its innermost such loop
                break

    def _assign(self, target, value_e, span: Span, text: str, scope: _Scope):
        if isinstance(target, ast.TargetSlot):
            index = self._slot_index(target.index, scope)
        elif isinstance(target, ast.TargetName):
            if target.name in scope.views:
                v = scope.views[target.name]
                if v.length is not None:
                    shown = f"{target.name}[i, j]" if v.dims is not None else f"{target.name}[i]"
                    self.error("type-mismatch", f"{target.name} is a view of {v.length} slots; "
                               f"assign {shown}", target.span)
                    return None
                index = ir.Index(v.base)
            elif target.name in scope.lets or target.name in scope.vectors:
                self.error("type-mismatch", f"{target.name} is a `let` temporary; only slots are "
                           "assigned", target.span)
                return None
            else:
                self._unknown_view(target.name, scope, target.span)
                return None
        else:
            if target.view in scope.vectors or target.view in self.vector_decls:
                self.error("type-mismatch", f"{target.view} is a `let` temporary; only slots are "
                           "assigned", target.span)
                return None
            if target.view not in scope.views:
                self._unknown_view(target.view, scope, target.span)
                return None
            index = self._view_index(target.view, target.index, scope, target.span, target.column)
        value = self._expr(value_e, scope)
        if index is None:
            return None
        if not self._access(index, scope, target.span, True, text or "the assignment"):
            return None
        self._record_write(index, scope, target.span)
        if value is None:
            return None
        return ir.Assign(index, value, span, text)


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
