"""Lowering of one pointwise program (per-slot or indexed form) to an LLVM function.

    i64 NAME(double* r0, ..., double* r{R-1}, i64* fail_coord)

Region j of `regions` covers slots [start_j, start_j + len_j). The function returns 0, or
the 1-based ordinal of the first statement (Assign or Let, in source order, a loop's body
numbered once) whose arithmetic saw a non-finite operand or result, storing the loop
coordinate (or -1) into *fail_coord. `NAME_labels[ordinal-1]` names that statement.

Two lowerings of a loop share one expression emitter:
  * scalar: statement by statement, in place, branching out at the first failing check;
  * fast (a flat loop whose body only writes views at the loop index, reads them nowhere
    else, and reads a vector temporary it writes only at the loop index): per chunk of
    CHUNK coordinates, compute every statement straight into its destination while OR-ing
    an "any non-finite" mark per coordinate (no branches, so the loop vectorises); a view
    whose old value the body reads (`w[i] := w[i] - ...`) first has that old value saved
    in stack scratch. When a coordinate of the chunk is marked, each marked coordinate, in
    order, has its saved words put back and is rerun through the scalar lowering, which
    finds the first failing statement and coordinate in sequential order: the iterations
    of such a loop are independent, so the unmarked ones need no rerun. Both lowerings
    perform the same IEEE operations on the same operands, so they produce the same words.
Arithmetic carries no fast-math or `contract` flags; sqrt is llvm.sqrt.f64. `abs` and
`copysign` are integer operations on the word's sign bit, comparisons `fcmp` (ordered: the
operands are finite), `min`, `max` and `select` are `select` instructions over them: no
intrinsic a target could lower to a library call, the same bits on every target. The
elementary functions are calls of alphac/codegen/elementary's own functions, defined in
the same module (no libm): the whole function in the scalar lowering, its branch-free fast
phase in the fast one (NaN where its rounding test cannot decide, which marks the
coordinate, so the scalar rerun gives the whole function's word).
"""

from __future__ import annotations

import os

from llvmlite import ir

from alphac.diagnostics import NO_SPAN, Span
from alphac.codegen import elementary
from alphac.codegen.expr import CHUNK, _Checks, _Ctx, _ExprEmitter, _Flag, _Var
from alphac.codegen.types import I1, I64, I8, PTR
from alphac.ir import nodes as n


# ----------------------------------------------------------------------------- statements

def statement_labels(program: n.Program) -> list[str]:
    """`label (file:line:col)` for every numbered statement, in ordinal order."""
    out: list[str] = []

    def walk(stmts):
        for s in stmts:
            if isinstance(s, n.Loop):
                walk(s.body)
            elif isinstance(s, n.Assign):
                out.append(f"{s.label or 'slot ' + str(s.target)} ({_where(s.span)})")
            elif isinstance(s, n.VectorLet):
                out.append(f"let {s.name}[{s.var}] ({_where(s.span)})")
            else:
                out.append(f"let {s.name} ({_where(s.span)})")

    walk(program.body)
    return out


def _where(span: Span) -> str:
    # The file's base name only: the executable must not depend on where the spec lies.
    return f"{os.path.basename(span.file)}:{span.line}:{span.col}"


def _count(stmts) -> int:
    return sum(_count(s.body) if isinstance(s, n.Loop) else 1 for s in stmts)


# ----------------------------------------------------------------------------- fast-loop test


def _refs(expr):
    """Every SlotRef of an expression; Sum bodies included."""
    return (e for e in n.subexpressions(expr) if isinstance(e, n.SlotRef))


def _has_sum(expr) -> bool:
    return any(isinstance(e, n.Sum) for e in n.subexpressions(expr))


def fast_loop_ok(loop: n.Loop) -> bool:
    """Whether the chunked lowering gives the sequential words: the body is flat (no nested
    loop, no sum), writes only views at the loop index, reads written slots only through
    the very view at the loop index, and reads a vector temporary it writes only at the
    loop index, after its `let`."""
    written: dict[int, None] = {}
    lets: set[str] = set()
    seen: set[str] = set()
    for s in loop.body:
        if isinstance(s, n.Loop):
            return False
        if _has_sum(s.value):
            return False
        if isinstance(s, n.Assign):
            if s.target.var != loop.var:
                return False
            written[s.target.base] = None
        if isinstance(s, n.VectorLet):
            if s.var != loop.var:
                return False
            lets.add(s.name)
    for s in loop.body:
        for e in n.subexpressions(s.value):
            if isinstance(e, n.VectorLocal) and e.name in lets and (
                    e.name not in seen or e.index != n.Index(0, loop.var)):
                return False
        if isinstance(s, n.VectorLet):
            seen.add(s.name)
    if not written:
        return False
    lo, hi = loop.lo, loop.hi
    spans = [(b + lo, b + hi) for b in written]
    for i, (a0, a1) in enumerate(spans):  # written views must not overlap each other
        for b0, b1 in spans[i + 1:]:
            if a0 < b1 and b0 < a1:
                return False
    for s in loop.body:
        for ref in _refs(s.value):
            idx = ref.index
            if idx.var == loop.var:
                r0, r1 = idx.base + lo, idx.base + hi
                if idx.base in written:
                    continue
            elif idx.constant:
                r0, r1 = idx.base, idx.base + 1
            else:
                return False
            if any(r0 < w1 and w0 < r1 for w0, w1 in spans):
                return False
    return True


def _reads_old(loop: n.Loop, bases) -> list[int]:
    """The written views (of a loop `fast_loop_ok` accepts) whose value from before the
    iteration the body reads: a read of the view at the loop index before the first
    statement that assigns it, in body order (its own assignment included)."""
    assigned: set[int] = set()
    old: set[int] = set()
    for s in loop.body:
        for ref in _refs(s.value):
            if ref.index.var == loop.var and ref.index.base in bases and ref.index.base not in assigned:
                old.add(ref.index.base)
        if isinstance(s, n.Assign):
            assigned.add(s.target.base)
    return sorted(old)


class _Emitter(_ExprEmitter):
    """A program's function: its statements and loops, scalar and fast, and its labels."""

    # -- statements -------------------------------------------------------------------------

    def stmts(self, stmts, ordinal: int, ctx: "_Ctx") -> int:
        for s in stmts:
            if isinstance(s, n.Loop):
                if fast_loop_ok(s):
                    self.fast_loop(s, ordinal, ctx)
                else:
                    self.scalar_loop(s, ordinal, ctx)
                ordinal += _count(s.body)
                continue
            sctx = ctx.at(ordinal)
            value, ok = self.expr(s.value, sctx)
            ctx.checks.root(value, isinstance(s.value, (n.Unary, n.Binary, n.Sum, n.Select)))
            if isinstance(s, n.Let):
                ctx.env[s.name] = (value, ok)
            ctx.checks.flush(ordinal, ctx.coord)
            if isinstance(s, n.Assign):
                if ctx.written is not None:
                    self.fast_store(s, value, ok, ctx)
                else:
                    self.store_slot(value, self.address(s.target, ctx.vars, s.span))
            elif isinstance(s, n.VectorLet):
                self.b.store(value, self.vector_address(s.name, n.Index(0, s.var), ctx.vars, s.span))
            ordinal += 1
        return ordinal

    def loop_checks(self):
        """The checks a loop's body is lowered under."""
        return _Checks(self)

    def scalar_loop(self, loop: n.Loop, ordinal: int, ctx: "_Ctx") -> None:
        i, _, close = self._loop(loop.var, ir.Constant(I64, loop.lo), ir.Constant(I64, loop.hi), "loop")
        vars_ = dict(ctx.vars)
        vars_[loop.var] = _Var(i, loop.lo, loop.hi)
        inner = _Ctx(vars=vars_, env=dict(ctx.env), checks=self.loop_checks(), coord=i)
        self.stmts(loop.body, ordinal, inner)
        close()

    def fast_loop(self, loop: n.Loop, ordinal: int, ctx: "_Ctx") -> None:
        b = self.b
        bases = sorted({s.target.base for s in loop.body if isinstance(s, n.Assign)})
        saved = _reads_old(loop, bases)
        chunk = min(CHUNK, max(1, loop.hi - loop.lo))
        scratch = {base: self.alloca_builder.alloca(self.elem, size=chunk, name=f"saved{base}")
                   for base in saved}
        marks = self.alloca_builder.alloca(I8, size=chunk, name="marks")
        hi = ir.Constant(I64, loop.hi)
        c0, _, close_chunk = self._loop(loop.var, ir.Constant(I64, loop.lo), hi, "chunk")
        c_end = b.add(c0, ir.Constant(I64, chunk))
        c_end = b.select(b.icmp_signed("<", c_end, hi), c_end, hi)

        def at(base: int, coord: ir.Value) -> ir.Value:
            return self.address(n.Index(base, loop.var), {loop.var: _Var(coord, loop.lo, loop.hi)},
                                NO_SPAN)

        # Fast pass: save the old words the body reads, compute straight into place, OR the
        # checks of each coordinate into its mark and the chunk's flag, no branches.
        i, (flag,), close_fast = self._loop(loop.var, c0, c_end, "fast", [("bad", I1, ir.Constant(I1, 0))])
        off = b.sub(i, c0)
        for base in saved:
            b.store(b.load(at(base, i), typ=self.elem),
                    b.gep(scratch[base], [off], inbounds=True, source_etype=self.elem))
        vars_ = dict(ctx.vars)
        vars_[loop.var] = _Var(i, loop.lo, loop.hi)
        checks = _Flag(self, ir.Constant(I1, 0))
        written: dict = {base: None for base in bases}
        fctx = _Ctx(vars=vars_, env=dict(ctx.env), checks=checks, coord=i, written=written,
                    loop_var=loop.var)
        self.stmts(loop.body, ordinal, fctx)
        b.store(b.zext(checks.value, I8), b.gep(marks, [off], inbounds=True, source_etype=I8))
        close_fast(carried=[b.or_(flag, checks.value)])

        slow = b.append_basic_block(f"fast{self.uid}.slow")
        joined = b.append_basic_block(f"fast{self.uid}.next")
        b.cbranch(flag, slow, joined)

        # Slow pass (rare): each marked coordinate, in order, has its saved old words put
        # back and is rerun in place with branching checks, which return from the function
        # at the first failure. The body's iterations are independent (`fast_loop_ok`): an
        # unmarked coordinate's words are final, and rerunning only the marked ones gives
        # the words and the first failure of the sequential order. Views whose old value
        # is never read need nothing put back: every read of them in the body comes after
        # the statement that rewrites them.
        b.position_at_end(slow)
        j, _, close_redo = self._loop("j", ir.Constant(I64, 0), b.sub(c_end, c0), "redo")
        redo = b.append_basic_block(f"fast{self.uid}.redo")
        kept = b.append_basic_block(f"fast{self.uid}.kept")
        mark = b.load(b.gep(marks, [j], inbounds=True, source_etype=I8), typ=I8)
        b.cbranch(b.icmp_unsigned("!=", mark, ir.Constant(I8, 0)), redo, kept)
        b.position_at_end(redo)
        coord = b.add(c0, j)
        for base in saved:
            src = b.gep(scratch[base], [j], inbounds=True, source_etype=self.elem)
            b.store(b.load(src, typ=self.elem), at(base, coord))
        vars_ = dict(ctx.vars)
        vars_[loop.var] = _Var(coord, loop.lo, loop.hi)
        self.stmts(loop.body, ordinal, _Ctx(vars=vars_, env=dict(ctx.env), checks=_Checks(self),
                                            coord=coord))
        b.branch(kept)
        b.position_at_end(kept)
        close_redo()
        b.branch(joined)
        b.position_at_end(joined)
        close_chunk(ir.Constant(I64, chunk))

    def fast_store(self, s: n.Assign, value: ir.Value, ok: bool, ctx: "_Ctx") -> None:
        ctx.written[s.target.base] = (value, ok)
        self.store_slot(value, self.address(s.target, ctx.vars, s.span))

    # -- function ---------------------------------------------------------------------------

    def emit(self) -> ir.Function:
        self.body(_Ctx(vars={}, env={}, checks=_Checks(self), coord=self.minus_one))
        if not self.b.block.is_terminated:
            self.b.ret(ir.Constant(I64, 0))
        self.alloca_builder.branch(self.fn.blocks[1])
        fb = ir.IRBuilder(self.fail_block)
        if self.fail_edges:
            ordinal = fb.phi(I64, "ordinal")
            coord = fb.phi(I64, "coord")
            for block, o, c in self.fail_edges:
                ordinal.add_incoming(ir.Constant(I64, o), block)
                coord.add_incoming(c, block)
            fb.store(coord, self.fail_coord)
            fb.ret(ordinal)
        else:
            fb.unreachable()
        self.emit_labels()
        return self.fn

    def body(self, ctx: "_Ctx") -> None:
        """The function's statements (the whole program; a device segment emits part)."""
        self.stmts(self.program.body, 1, ctx)

    def emit_labels(self) -> None:
        labels = statement_labels(self.program)
        ptrs = []
        for k, text in enumerate(labels):
            data = bytearray(text.encode("utf-8") + b"\0")
            arr = ir.ArrayType(I8, len(data))
            g = ir.GlobalVariable(self.module, arr, f"{self.name}_label_{k + 1}")
            g.global_constant = True
            g.linkage = "private"
            g.unnamed_addr = True
            g.initializer = ir.Constant(arr, data)
            ptrs.append(g.bitcast(PTR))
        table_t = ir.ArrayType(PTR, len(ptrs))
        table = ir.GlobalVariable(self.module, table_t, f"{self.name}_labels")
        table.global_constant = True
        table.initializer = ir.Constant(table_t, ptrs)


def emit_program(module: ir.Module, program: n.Program, name: str,
                 regions: list[tuple[int, int]], fmt: str = "binary64") -> ir.Function:
    """Add `i64 NAME(double* r0, ..., i64* fail_coord)` (`float*` regions for a binary32
    learner) and `NAME_labels` to `module`."""
    return _Emitter(module, program, name, regions, fmt).emit()


def program_regions(kind: str, k: int, s: int, m: int, r: int = 0) -> list[tuple[int, int]]:
    """The region layout of the contract: contribution (params, sample, contribution),
    update (params, state, mean, rate), or an independent-state rule over a region of r
    words (region, pair, scale)."""
    if kind == "rule":
        return [(0, r), (r, s), (r + s, 1)]
    if kind == "contribution":
        return [(0, k), (k, s), (k + s, k)]
    if kind == "update":
        return [(0, k), (k, m), (k + m, k), (2 * k + m, 1)]
    raise ValueError(kind)
