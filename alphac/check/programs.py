"""Pointwise programs: typing and lowering of both forms to ir.Program.

The slot discipline (indices, views, which slots each access may reach, and the proofs
that reads follow writes and loop iterations stay apart) is access.py's. Vector temporaries
(`let z[i] = e` directly inside `for i`) are readable inside their loop at its own index
after the `let`, and after the loop at any index of its range.
"""

from __future__ import annotations

from dataclasses import replace

from alphac.check.access import AccessChecks
from alphac.check.evaluate import Evaluator
from alphac.check.slots import Layout, _Loop, _Scope, _Vector, _View
from alphac.check.values import VNat, VProgram, VWord
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
# The words of a program's vector temporaries, all together: the kernels hold them as stack
# scratch (docs/language.md "Matrices and vector temporaries").
MAX_TEMPORARY_WORDS = 1 << 16


class ProgramLowering(AccessChecks):
    def __init__(self, ev: Evaluator, prog: VProgram, layout: Layout):
        super().__init__(ev, prog, layout)
        self.vector_decls: dict = {}  # every `let z[i]` of the program, by name
        self.vector_names: set = set()  # the vector temporaries declared so far
        self.refused_vectors: set = set()  # whose declaration was refused: not reported again
        self.temporary_words = 0

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

    # ------------------------------------------------------------------ vector temporaries
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
