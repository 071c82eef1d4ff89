"""The owned update kernel of a partitioned learner: the update program restricted to one
owner's coordinates (block b of B coordinates belongs to owner b mod n) and the shared
words, over the owner's compact storage.

    i64 NAME(double* params, double* state, double* mean, double* rate, i64* fail_coord)
    i64 NAME_owner                    (exported global: the owner the next call runs for)

The regions are the owner's own (alphac/image/image.py, "Compact storage"): its parameters
(its coordinates', ascending, when parameters are partitioned, else all k), its state (the
shared words in offset order, then block 0's word of each of its coordinates, then block
1's, ..., when the optimizer state is partitioned, else all m), the mean of its coordinates
(its j-th word is the mean of its j-th coordinate) and the rate. A slot of coordinate c is
at the owner's position of c, (c // (nB)) * B + c % B, in its region; a state word of block
b at S + b * kc + that position (S shared words, kc the owner's coordinates); a shared
state word at its rank among the shared words. Which coordinate a statement belongs to
comes from the separability analysis (`alphac.plan.separable.layout_of`): a per-slot
assignment runs only at the owner of its target's coordinate, a `let` at the owner of the
one coordinate it reads (everywhere when it reads only shared words), and an indexed loop
whose targets are the loop's coordinate runs over the owner's coordinates in [lo, hi): its
positions j from L(lo) to L(hi) (L(x): how many of them lie below x), coordinate
i = (j // B) * nB + owner * B + j % B. Each executed statement performs the replicated
kernel's operations on the same operands, so every owned word has the replicated kernel's
bits, and finite-or-refuse checks exactly the statements this owner executes (the first
failing one in sequential order).
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass

import numpy as np
from llvmlite import ir

from alphac.codegen.expr import _Checks, _Ctx, _Var
from alphac.codegen.program import _count, _Emitter, program_regions
from alphac.codegen.types import I64
from alphac.diagnostics import CompileError, Diagnostic
from alphac.ir import nodes as n
from alphac.plan import separable
from alphac.plan.separable import SHARED, UNCLAIMED

PARAMS, STATE, MEAN, RATE = range(4)  # the update kernel's regions, in argument order


@dataclass(frozen=True)
class _OwnedVar(_Var):
    """A loop over the owner's coordinates: `value` is the coordinate, `local` its position."""

    local: ir.Value | None = None


def _unsupported(message: str, span) -> CompileError:
    return CompileError(Diagnostic("program-unsupported", message, span))


class _OwnedEmitter(_Emitter):
    def __init__(self, module: ir.Module, update: n.Program, k: int, s: int, m: int,
                 layout: separable.Layout, owners: int, part: n.Partitioning, name: str,
                 fmt: str = "binary64"):
        super().__init__(module, update, name, program_regions("update", k, s, m), fmt)
        self.k, self.m, self.n, self.B = k, m, owners, part.block_words
        self.layout = layout
        self.compact = (part.parameters.sharded, part.optimizer_state.sharded, True, False)  # by region
        self.shared = sorted(layout.shared) if part.optimizer_state.sharded else []
        self.owner_g = ir.GlobalVariable(module, I64, f"{name}_owner")
        self.owner_g.initializer = ir.Constant(I64, 0)
        self.let_reads: dict[str, tuple] = {}
        # read once, before any statement: every use below is dominated by these
        self.owner = self.b.load(self.owner_g, typ=I64)
        self.kc = self._below(k)
        vectors = n.vector_lets(update.body)
        if vectors:
            raise _unsupported(f"a partitioned update's vector temporaries (let {vectors[0].name}[...]) "
                               "are not lowered yet", vectors[0].span)

    # -- the owner's coordinates -------------------------------------------------------------

    def _c(self, v: int) -> ir.Constant:
        return ir.Constant(I64, v)

    def _below(self, x: int) -> ir.Value:
        """L(x): how many of the owner's coordinates lie below x (a constant)."""
        b, B, nB = self.b, self.B, self.n * self.B
        partial = b.sub(self._c(x % nB), b.mul(self.owner, self._c(B)))
        partial = b.select(b.icmp_signed("<", partial, self._c(0)), self._c(0), partial)
        partial = b.select(b.icmp_signed(">", partial, self._c(B)), self._c(B), partial)
        return b.add(self._c(x // nB * B), partial)

    def _coordinate(self, j: ir.Value) -> ir.Value:
        """The owner's j-th coordinate: (j // B) * nB + owner * B + j % B."""
        b, B = self.b, self._c(self.B)
        return b.add(b.add(b.mul(b.udiv(j, B), self._c(self.n * self.B)), b.mul(self.owner, B)), b.urem(j, B))

    def _position(self, c: int) -> int:
        """Where coordinate c is among its owner's coordinates."""
        return c // (self.n * self.B) * self.B + c % self.B

    # -- addressing in the compact regions -----------------------------------------------------

    def _state_block(self, offset: int) -> tuple[int, int]:
        """(block, coordinate) of the non-shared state word at `offset`."""
        rank = offset - bisect.bisect_left(self.shared, offset)
        return divmod(rank, self.k)

    def _block_start(self, region: int, slot: int) -> ir.Value:
        """Where, in a compact region, the block holding `slot` starts: 0 for parameters and
        means, S + b * kc for a state word of block b."""
        if region != STATE:
            return self._c(0)
        block, _ = self._state_block(slot - self.k)
        return self.b.add(self._c(len(self.shared)), self.b.mul(self._c(block), self.kc))

    def _at(self, region: int, offset: ir.Value) -> ir.Value:
        return self.b.gep(self.fn.args[region], [offset], inbounds=True, source_etype=self.elem)

    def _fixed(self, slot: int, span) -> ir.Value:
        region = self._region_of(slot, slot + 1)
        if region is None or not self.compact[region]:
            return super().address(n.Index(slot), {}, span)
        if region == STATE and slot - self.k in self.shared:
            return self._at(region, self._c(self.shared.index(slot - self.k)))
        c = int(self.layout.classes[slot])
        if c < 0:
            raise _unsupported(f"{self.layout.describe(slot)} belongs to no owner", span)
        return self._at(region, self.b.add(self._block_start(region, slot), self._c(self._position(c))))

    def address(self, index: n.Index, vars_: dict, span) -> ir.Value:
        if index.terms:
            raise _unsupported(f"slot {index} (a 2-D view's element) in a partitioned update is not "
                               "lowered yet", span)
        if index.var is None:
            return self._fixed(index.base, span)
        var = vars_.get(index.var)
        if var is None or var.hi <= var.lo:
            return super().address(index, vars_, span)
        lo, hi = index.base + var.lo, index.base + var.hi
        region = self._region_of(lo, hi)
        if region is None:
            if any(self.compact[r] and lo < start + size and start < hi
                   for r, (start, size) in enumerate(self.regions)):
                raise _unsupported(f"slots {lo}..{hi - 1} span a partitioned region and another", span)
            return super().address(index, vars_, span)
        if not self.compact[region]:
            return super().address(index, vars_, span)
        classes = self.layout.classes[lo:hi]
        if isinstance(var, _OwnedVar) and np.array_equal(classes, np.arange(var.lo, var.hi)):
            return self._at(region, self.b.add(self._block_start(region, lo), var.local))
        if region == STATE and np.all(classes == SHARED):
            first = self.shared.index(lo - self.k)  # consecutive shared slots: consecutive ranks
            return self._at(region, self.b.add(var.value, self._c(first - var.lo)))
        raise _unsupported(f"slots {lo}..{hi - 1} are not one word of each of the loop's coordinates "
                           "nor only shared words", span)

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
        if s.target.terms:
            raise _unsupported(f"index variables {', '.join(s.target.variables())} are not bound", s.span)
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
        if all(t.target.constant and int(classes[t.target.base]) == SHARED for t in targets):
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
                    self._owned_loop(s, ordinal, ctx)
                ordinal += _count(s.body)
                continue
            c = self._class(s)
            if c == SHARED:
                ordinal = super().stmts([s], ordinal, ctx)
                continue
            self.uid += 1
            run = b.append_basic_block(f"own{self.uid}.run")
            join = b.append_basic_block(f"own{self.uid}.join")
            before = b.block
            b.cbranch(b.icmp_signed("==", self.owner, self._c(c // self.B % self.n)), run, join)
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

    def _owned_loop(self, loop: n.Loop, ordinal: int, ctx: _Ctx) -> None:
        """The loop over the owner's coordinates in [lo, hi), by position."""
        j, _, close = self._loop(f"{loop.var}.at", self._below(loop.lo), self._below(loop.hi), "owned")
        i = self._coordinate(j)
        vars_ = dict(ctx.vars)
        vars_[loop.var] = _OwnedVar(i, loop.lo, loop.hi, j)
        inner = _Ctx(vars=vars_, env=dict(ctx.env), checks=_Checks(self), coord=i)
        self.stmts(loop.body, ordinal, inner)
        close()


def emit_owned_update(module: ir.Module, update: n.Program, k: int, s: int, m: int,
                      layout: separable.Layout, owners: int, part: n.Partitioning,
                      name: str, fmt: str = "binary64") -> tuple[ir.Function, ir.GlobalVariable]:
    """Add the owned update kernel `NAME` (with `NAME_labels`) and its owner global; `layout`
    is the separability analysis of the update (`alphac.plan.separable.layout_of`), `part`
    the partitioning (which regions are compact, the block words). A binary32 learner's
    compact regions are `float`s at the same positions: its blocks hold an even number of
    coordinates (alphac/plan/storage.py), so a word never holds two owners' values."""
    em = _OwnedEmitter(module, update, k, s, m, layout, owners, part, name, fmt)
    return em.emit(), em.owner_g

