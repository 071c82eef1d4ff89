"""The slot discipline of a pointwise program: indices, views and each slot access.

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
ir/nodes.py); what cannot be proven so is refused (`loop-carried-dependence`).
"""

from __future__ import annotations

from alphac.check.evaluate import Evaluator
from alphac.check.slots import Layout, _Access, _covered, _Loop, _Scope, _separated, _slot_set, _Written
from alphac.check.values import VProgram
from alphac.diagnostics import Span
from alphac.ir import nodes as ir
from alphac.syntax import ast


class AccessChecks:
    """The checks of one program's indices and slot accesses, and what it has written so
    far; ProgramLowering (programs.py) lowers its statements and expressions with them."""

    def __init__(self, ev: Evaluator, prog: VProgram, layout: Layout):
        self.ev = ev
        self.bag = ev.bag
        self.info = prog.module
        self.prog = prog
        self.layout = layout
        self.written: list[_Written] = []  # written outside every loop (or in loops that ended)
        self.loops: list[_Loop] = []
        self.ok = True
        self.carried: set[int] = set()  # the reads reported as loop-carried

    def error(self, code: str, message: str, span: Span, notes=()) -> None:
        self.ok = False
        self.bag.error(code, message, span, notes)

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

    def _read(self, index: ir.Index, scope: _Scope, span: Span, label: str):
        if not self._access(index, scope, span, False, label):
            return None
        self._record_read(index, scope, span)
        return ir.SlotRef(index, span)

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
