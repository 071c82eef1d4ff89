"""The owned update kernel of a partitioned learner: the update program restricted to one
owner's coordinates (i = owner mod n) and the shared words.

    i64 NAME(double* params, double* state, double* mean, double* rate, i64* fail_coord)
    i64 NAME_owner                    (exported global: the owner the next call runs for)

The regions are those of the replicated update kernel, full length (k, m, k, 1): an owner
keeps its words at their logical positions and never reads the others' (see
docs/runtime.md, "Partitioned learners"). Which coordinate a statement belongs to comes from
the separability analysis (`alphac.plan.separable.layout_of`): a per-slot assignment runs
only at the owner of its target's coordinate, a `let` at the owner of the one coordinate it
reads (everywhere when it reads only shared words), and an indexed loop whose targets are
the loop's coordinate becomes a strided loop `for i = first owned >= lo; i < hi; i += n`.
Each executed statement performs the replicated kernel's operations on the same operands,
so every owned word has the replicated kernel's bits, and finite-or-refuse checks exactly
the statements this owner executes (the first failing one in sequential order).
"""

from __future__ import annotations

import numpy as np
from llvmlite import ir

from alphac.codegen.program import _Ctx, _Checks, _count, _Emitter, _Var, program_regions
from alphac.codegen.types import I64
from alphac.diagnostics import CompileError, Diagnostic
from alphac.ir import nodes as n
from alphac.plan import separable
from alphac.plan.separable import SHARED, UNCLAIMED


def _unsupported(message: str, span) -> CompileError:
    return CompileError(Diagnostic("program-unsupported", message, span))


class _OwnedEmitter(_Emitter):
    def __init__(self, module: ir.Module, update: n.Program, k: int, s: int, m: int,
                 layout: separable.Layout, owners: int, name: str):
        super().__init__(module, update, name, program_regions("update", k, s, m))
        self.n = owners
        self.layout = layout
        self.owner_g = ir.GlobalVariable(module, I64, f"{name}_owner")
        self.owner_g.initializer = ir.Constant(I64, 0)
        self.let_reads: dict[str, tuple] = {}

    # -- classes ---------------------------------------------------------------------------

    def _coords_read(self, expr) -> set[int]:
        classes = self.layout.classes
        out: set[int] = set()
        for r in separable._reads(expr, {}, self.let_reads):
            lo, hi = r.lo, (r.hi if r.hi >= 0 else r.lo + 1)
            cls = classes[max(lo, 0):min(hi, len(classes))]
            out.update(int(c) for c in cls if c >= 0)
        return out

    def _class(self, s) -> int:
        """The coordinate a top-level statement belongs to, or SHARED."""
        if isinstance(s, n.Let):
            coords = self._coords_read(s.value)
            self.let_reads[s.name] = tuple(separable._reads(s.value, {}, self.let_reads))
            if len(coords) > 1:
                raise _unsupported(f"let {s.name} reads words of coordinates {sorted(coords)[:4]}: "
                                   "it belongs to no single owner", s.span)
            return coords.pop() if coords else SHARED
        if s.target.var is not None:
            raise _unsupported(f"index variable {s.target.var!r} is not bound", s.span)
        c = int(self.layout.classes[s.target.base])
        if c == UNCLAIMED:
            raise _unsupported(f"{self.layout.describe(s.target.base)} belongs to no owner", s.span)
        return c

    def _loop_kind(self, loop: n.Loop) -> str:
        """'coordinate' (every target is the loop's coordinate) or 'shared'."""
        classes = self.layout.classes
        targets = [s for s in loop.body if isinstance(s, n.Assign)]
        if any(isinstance(s, n.Loop) for s in loop.body):
            raise _unsupported("a nested loop in a partitioned update is not lowered yet", loop.span)
        if targets and all(t.target.var == loop.var for t in targets):
            want = np.arange(loop.lo, loop.hi, dtype=np.int64)
            for t in targets:
                got = classes[t.target.base + loop.lo:t.target.base + loop.hi]
                if len(got) != len(want) or not np.array_equal(got, want):
                    raise _unsupported(f"loop {loop.var}: slots {t.target.base} + {loop.var} are not "
                                       f"coordinate {loop.var}'s words", t.span)
            return "coordinate"
        if all(t.target.var is None and int(classes[t.target.base]) == SHARED for t in targets):
            return "shared"
        raise _unsupported(f"loop {loop.var} writes both coordinate and shared words", loop.span)

    # -- statements ------------------------------------------------------------------------

    def stmts(self, stmts, ordinal: int, ctx: _Ctx) -> int:
        if ctx.coord is not self.minus_one:  # inside a loop: the loop chose the coordinates
            return super().stmts(stmts, ordinal, ctx)
        b = self.b
        for s in stmts:
            if isinstance(s, n.Loop):
                if self._loop_kind(s) == "shared":
                    super().stmts([s], ordinal, ctx)
                else:
                    self._strided_loop(s, ordinal, ctx)
                ordinal += _count(s.body)
                continue
            c = self._class(s)
            if c == SHARED:
                ordinal = super().stmts([s], ordinal, ctx)
                continue
            owner = b.load(self.owner_g, typ=I64)
            self.uid += 1
            run = b.append_basic_block(f"own{self.uid}.run")
            join = b.append_basic_block(f"own{self.uid}.join")
            before = b.block
            b.cbranch(b.icmp_signed("==", owner, ir.Constant(I64, c % self.n)), run, join)
            b.position_at_end(run)
            ordinal = super().stmts([s], ordinal, ctx)
            ran = b.block
            b.branch(join)
            b.position_at_end(join)
            if isinstance(s, n.Let):
                # Only statements of the same coordinate (run under the same condition) read
                # the temporary, so the other edge's value is never used.
                value, ok = ctx.env[s.name]
                phi = b.phi(value.type)
                phi.add_incoming(value, ran)
                phi.add_incoming(ir.Constant(value.type, ir.Undefined), before)
                ctx.env[s.name] = (phi, ok)
        return ordinal

    def _strided_loop(self, loop: n.Loop, ordinal: int, ctx: _Ctx) -> None:
        b, nn = self.b, self.n
        owner = b.load(self.owner_g, typ=I64)
        # the first coordinate >= lo that is owner's: lo + ((owner - lo) mod n)
        shift = b.urem(b.add(owner, ir.Constant(I64, nn - loop.lo % nn)), ir.Constant(I64, nn))
        start = b.add(ir.Constant(I64, loop.lo), shift)
        i, _, close = self._loop(loop.var, start, ir.Constant(I64, loop.hi), "owned")
        vars_ = dict(ctx.vars)
        vars_[loop.var] = _Var(i, loop.lo, loop.hi)
        inner = _Ctx(vars=vars_, env=dict(ctx.env), checks=_Checks(self), coord=i)
        self.stmts(loop.body, ordinal, inner)
        close(ir.Constant(I64, nn))


def emit_owned_update(module: ir.Module, update: n.Program, k: int, s: int, m: int,
                      layout: separable.Layout, owners: int,
                      name: str) -> tuple[ir.Function, ir.GlobalVariable]:
    """Add the owned update kernel `NAME` (with `NAME_labels`) and its owner global; `layout`
    is the separability analysis of the update (`alphac.plan.separable.layout_of`)."""
    em = _OwnedEmitter(module, update, k, s, m, layout, owners, name)
    return em.emit(), em.owner_g

