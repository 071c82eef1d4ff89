"""The contribution program over LANES samples at once, added to the local sum.

    i64 alphac_contribution_lanes(double* params, double* rows, double* acc, double* out)
    i64 alphac_contribution_lanes_width

`rows` holds LANES consecutive samples. Every value is a vector of LANES binary64 values,
lane l sample l's, so `sum j of w[j] * x[j]` runs LANES independent chains of adds, each in
its declared order. Each contribution word is added to acc's as the sequential loop adds
it, samples in order: out[i] = ((acc[i] + c_0[i]) + c_1[i]) + ... The same IEEE operations
on the same operands: the same words (an elementary function is its whole function, lane
by lane). It returns 0, or 1 where a check of the sequential kernels would fail (the fast
loop's `_Flag`, program.py); acc is only read, and the runtime then runs those samples one
at a time from it, which finds the first failure of the sequential order, or the words.

Lowered so: a contribution `alphac.ir.lanes.lanes_ok` admits (one that assigns each
contribution word exactly once) that reads no view across regions and never reads the
contribution; its vector temporaries hold LANES values a word (the memory laws count LANES
times their words). Under binary32 storage each value is widened on load, and each lane's
narrowed contribution added in binary32, as alphac_local_add adds it. Otherwise the width
is 0, and the runtime calls alphac_contribution once per sample.
"""

from __future__ import annotations

from llvmlite import ir

from alphac.codegen import elementary
from alphac.codegen.expr import _Ctx, _Flag
from alphac.codegen.program import _Emitter
from alphac.codegen.types import F32, F64, I1, I64, PTR
from alphac.ir import nodes as n
from alphac.ir.lanes import LANES, lanes_ok
from alphac.plan import storage

NAME = "alphac_contribution_lanes"
WIDTH = f"{NAME}_width"


class _NoLanes(Exception):
    """What the lanes lowering does not take; the width is then 0."""


class _LaneFlag(_Flag):
    """The fast loop's flag over vectors of checks, kept in a stack word between statements
    (loops carry it through memory, which LLVM promotes to registers)."""

    def add(self, cond: ir.Value) -> None:
        if isinstance(cond.type, ir.VectorType):
            cond = self.em.b.icmp_unsigned("!=", self.em.b.bitcast(cond, ir.IntType(LANES)),
                                           ir.Constant(ir.IntType(LANES), 0))
        super().add(cond)

    def function(self, op: str) -> ir.Function:
        """The whole function, lane by lane (an undecided fast phase would decline the group)."""
        return elementary.define(self.em.module, op)

    def flush(self, ordinal: int = 0, coord: ir.Value = None) -> None:
        b = self.em.b
        b.store(b.or_(b.load(self.em.bad, typ=I1), self.value), self.em.bad)
        self.value = ir.Constant(I1, 0)


class _LanesEmitter(_Emitter):
    """Word `off` of region j is (j, off) in every lane: region 0's (a parameter) one word for
    all lanes, region 1's (the sample) row l's for lane l, region 2's the contribution."""

    ftype = ir.VectorType(F64, LANES)
    itype = ir.VectorType(I64, LANES)

    def __init__(self, module: ir.Module, program: n.Program, k: int, s: int, fmt: str):
        # the signature's four pointers, params, rows, acc and out, stand where the three
        # regions and fail_coord do; a row is s values, in whole words
        super().__init__(module, program, NAME, [(0, k), (k, s), (k + s, k)], fmt)
        self.k, self.s = k, storage.words(s, fmt) * storage.FORMATS[fmt]
        name = f"llvm.sqrt.v{LANES}f64"
        self.sqrt = module.globals.get(name) or ir.Function(module, ir.FunctionType(self.ftype, [self.ftype]), name)
        self.bad = self.alloca_builder.alloca(I1, name="bad")
        self.alloca_builder.store(ir.Constant(I1, 0), self.bad)
        self.flag = _LaneFlag(self, ir.Constant(I1, 0))

    def lanes(self, value: ir.Value) -> list[ir.Value]:
        return [self.b.extract_element(value, ir.Constant(I64, lane)) for lane in range(LANES)]

    def vector(self, values: list[ir.Value]) -> ir.Value:
        v = ir.Constant(self.ftype, ir.Undefined)
        for lane, x in enumerate(values):
            v = self.b.insert_element(v, x, ir.Constant(I64, lane))
        return v

    def call_function(self, fn: ir.Function, value: ir.Value) -> ir.Value:
        return self.vector([self.b.call(fn, [x]) for x in self.lanes(value)])

    def round32(self, value: ir.Value) -> ir.Value:
        return self.b.fpext(self.b.fptrunc(value, ir.VectorType(F32, LANES)), self.ftype)

    def region_pointer(self, j: int, off: ir.Value) -> tuple:
        return (j, off)

    def _across(self, slot, lo, hi, span):
        raise _NoLanes("a view across regions")

    def word(self, arg: int, off: ir.Value, row: int = 0) -> ir.Value:
        return self.b.gep(self.fn.args[arg], [self.b.add(off, ir.Constant(I64, row * self.s)) if row else off],
                          inbounds=True, source_etype=self.elem)

    def load_slot(self, ptr) -> ir.Value:
        if not isinstance(ptr, tuple):  # a never-executed read (an empty loop's)
            return ir.Constant(self.ftype, 0.0)
        j, off = ptr
        if j == 2:
            raise _NoLanes("a read of the contribution")
        return self.vector([self.widen(self.b.load(self.word(j, off, lane if j == 1 else 0), typ=self.elem))
                            for lane in range(LANES)])

    def widen(self, value: ir.Value) -> ir.Value:
        return value if self.elem is F64 else self.b.fpext(value, F64)

    def store_slot(self, value: ir.Value, ptr) -> None:
        """Contribution word `off` of every lane added to acc's, in sample order, into out."""
        if not isinstance(ptr, tuple):
            return  # never executed
        if ptr[0] != 2:
            raise _NoLanes("a write outside the contribution")
        total = self.b.load(self.word(2, ptr[1]), typ=self.elem)
        for x in self.lanes(value):  # a binary32 slot holds the narrowed word, added in binary32
            total = self.b.fadd(total, x if self.elem is F64 else self.b.fptrunc(x, F32))
        # acc is finite, and a non-finite operand of an add leaves the sum non-finite: one
        # test of the sum is local_add's tests of each operand and result (settled here:
        # the statement's own flush came before)
        self.flag.add(self.nonfinite(self.widen(total)))
        self.flag.flush()
        self.b.store(total, self.word(3, ptr[1]))

    def loop_checks(self):
        return self.flag

    def fast_loop(self, loop: n.Loop, ordinal: int, ctx: _Ctx) -> None:
        self.scalar_loop(loop, ordinal, ctx)

    def emit(self) -> ir.Function:
        self.stmts(self.program.body, 1, _Ctx(vars={}, env={}, checks=self.flag, coord=self.minus_one))
        if self.k % 2 and self.elem is F32:  # the last word's padding value, as it was
            pad = ir.Constant(I64, self.k)
            self.b.store(self.b.load(self.word(2, pad), typ=F32), self.word(3, pad))
        self.flag.flush()
        self.b.ret(self.b.zext(self.b.load(self.bad, typ=I1), I64))
        self.alloca_builder.branch(self.fn.blocks[1])
        ir.IRBuilder(self.fail_block).unreachable()
        return self.fn


def emit_lanes(module: ir.Module, program: n.Program, k: int, s: int, fmt: str) -> int:
    """Add alphac_contribution_lanes and its width (LANES, or 0 where the program is not
    lowered so: the kernel then returns 1, and is never called) to `module`."""
    try:  # a dry run first: a refusal must leave nothing behind in `module`
        width = LANES if lanes_ok(program, k, s, fmt) and _LanesEmitter(ir.Module("probe"), program, k, s, fmt).emit() else 0
    except _NoLanes:
        width = 0
    if width:
        _LanesEmitter(module, program, k, s, fmt).emit()
    else:
        fn = ir.Function(module, ir.FunctionType(I64, [PTR] * 4), NAME)
        ir.IRBuilder(fn.append_basic_block("entry")).ret(ir.Constant(I64, 1))
    g = ir.GlobalVariable(module, I64, WIDTH)
    g.global_constant, g.initializer = True, ir.Constant(I64, width)
    return width
