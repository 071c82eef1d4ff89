"""The device kernels of an SM86 executable: the role's lowered programs as GPU kernels (PTX
for `nvptx64-nvidia-cuda`), or, for the stand-in driver of the hardware-free tests, the same
kernels built for the host (the "twin"), which reads its thread indices from globals.

    check_supported(image)                     ImageError device-unsupported (the sample tree)
    device_module(image, twin=False) -> (ir.Module, segments)
    device_table(image, segments) -> bytes     what the host runtime launches (alphac_device)

Kernels (every parameter a pointer or an i64, at most MAX_PARAMS):

    alphac_dev_contribution(params, samples, contribs, flags, share)   one thread per sample
    alphac_dev_local(contribs, acc, flags, share)                       one thread per coordinate
    alphac_dev_update_J(params, state, mean, rate, flags, owner)        update segment J

A sample's contribution (its in-sample sums included) is one thread's sequential fold, the
local sum one thread per coordinate adding that coordinate's contributions in sample order
(from +0.0), and the update is cut into segments launched in order: a loop whose iterations
are independent (`program.fast_loop_ok`) gets one thread per coordinate, every other run of
statements one thread. A partitioned (owned) update is one sequential segment. Each thread
performs exactly the CPU kernels' IEEE operations on the same operands (no fast-math, no
`contract`: add/sub/mul `.rn`, `div.rn.f64`, `sqrt.rn.f64`), so the words are the same.

Finite-or-refuse: a thread whose statement meets a non-finite operand or result records it
with an atomic minimum on a flag word whose order is the sequential order of the CPU kernels,
so the host, reading the flags after the kernels ran, names the same first failing statement,
coordinate and sample even when a later assignment overwrote the bad word:
    flags[F_CONTRIBUTION]  the first sample whose contribution failed (its ordinal and
                           coordinate at flags[F_INFO + 2*sample], + 1)
    flags[F_LOCAL]         (sample << 40) | coordinate of the local sum's first failure
    flags[F_UPDATE]        (segment << 56) | ((coordinate + 1) << 20) | ordinal
Every flag word starts as all ones (nothing failed).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from llvmlite import ir

from alphac.codegen.arith import BINARY64, _Fn
from alphac.codegen.owned import _OwnedEmitter
from alphac.codegen.expr import _Checks, _Ctx, _unsupported, _Var
from alphac.codegen.program import _count, _Emitter, fast_loop_ok, program_regions
from alphac.codegen.types import F64, I32, I64, PTR, VOID
from alphac.image.image import ImageError
from alphac.ir import nodes as n
from alphac.plan.device import FLAG_WORDS, device_bytes
from alphac.plan.protocol import OP_CODE

CONTRIBUTION = "alphac_dev_contribution"
LOCAL = "alphac_dev_local"
UPDATE = "alphac_dev_update_{}"
F_CONTRIBUTION, F_LOCAL, F_UPDATE = 0, 1, 2
F_INFO = FLAG_WORDS
MAX_PARAMS = 8
ORDINAL_BITS, COORD_BITS, SEGMENT_SHIFT = 20, 36, 56
DEVICE_MAGIC = 0x3156454448504C41  # "ALPHDEV1"
DEVICE_FORMAT = 1
TWIN_INDEX = ("alphac_twin_tid", "alphac_twin_ntid", "alphac_twin_ctaid", "alphac_twin_nctaid")
_SREG = ("tid.x", "ntid.x", "ctaid.x", "nctaid.x")


@dataclass(frozen=True)
class Segment:
    """A run of update statements launched as one kernel: `loop` set, one thread per
    coordinate of that loop; else one thread runs `stmts` in order."""

    first: int                   # ordinal of its first statement
    stmts: tuple
    loop: n.Loop | None = None

    @property
    def threads(self) -> int:
        return self.loop.hi - self.loop.lo if self.loop is not None else 1


def _locals_read(stmts) -> set[str]:
    out: set[str] = set()
    for s in stmts:
        if isinstance(s, n.Loop):
            out |= _locals_read(s.body)
        else:
            out |= {e.name for e in n.subexpressions(s.value) if isinstance(e, n.Local)}
    return out


def _lets(stmts) -> set[str]:
    return {s.name for s in stmts if isinstance(s, n.Let)}


def segments(program: n.Program, owned: bool) -> tuple[Segment, ...]:
    """The update cut into kernels (see the module docstring). A temporary cannot live from
    one kernel to the next: a program where one segment reads another's `let` is one
    sequential segment, as is an owned update and one with vector temporaries (stack
    scratch of the thread that runs it)."""
    whole = (Segment(1, tuple(program.body)),)
    if owned or n.vector_lets(program.body):  # a vector temporary lives in one thread's scratch
        return whole
    out: list[Segment] = []
    run: list = []
    first = ordinal = 1
    for s in program.body:
        if isinstance(s, n.Loop) and fast_loop_ok(s):
            if run:
                out.append(Segment(first, tuple(run)))
            out.append(Segment(ordinal, (s,), s))
            run, first = [], ordinal + _count(s.body)
        else:
            if not run:
                first = ordinal
            run.append(s)
        ordinal += _count(s.body) if isinstance(s, n.Loop) else 1
    if run:
        out.append(Segment(first, tuple(run)))
    if any(_locals_read(seg.stmts) - _lets(seg.stmts) for seg in out):
        return whole
    return tuple(out)


class _Index:
    """Where a thread learns its place: the PTX special registers on the device, the
    globals TWIN_INDEX (set by the stand-in driver before each thread) in the twin."""

    def __init__(self, module: ir.Module, twin: bool):
        if twin:
            self.sources = []
            for name in TWIN_INDEX:
                g = ir.GlobalVariable(module, I32, name)
                g.initializer = ir.Constant(I32, 0)
                self.sources.append(g)
        else:
            self.sources = [module.globals.get(f"llvm.nvvm.read.ptx.sreg.{r}")
                            or ir.Function(module, ir.FunctionType(I32, []), f"llvm.nvvm.read.ptx.sreg.{r}")
                            for r in _SREG]
        self.twin = twin

    def _read(self, b: ir.IRBuilder, j: int) -> ir.Value:
        src = self.sources[j]
        return b.zext(b.load(src, typ=I32) if self.twin else b.call(src, []), I64)

    def gid(self, b: ir.IRBuilder) -> ir.Value:
        return b.add(b.mul(self._read(b, 2), self._read(b, 1)), self._read(b, 0))

    def stride(self, b: ir.IRBuilder) -> ir.Value:
        return b.mul(self._read(b, 3), self._read(b, 1))


class _Kernel(_Fn):
    """A kernel under construction: a void function (ptx_kernel on the device)."""

    def __init__(self, module: ir.Module, name: str, args: tuple, names: tuple, index: _Index):
        assert len(args) <= MAX_PARAMS
        self.fn = ir.Function(module, ir.FunctionType(VOID, args), name)
        self.fn.attributes.add("nounwind")
        if not index.twin:
            self.fn.calling_convention = "ptx_kernel"
        for a, nm in zip(self.fn.args, names):
            a.name = nm
        self.b = ir.IRBuilder(self.fn.append_basic_block("entry"))
        self.el = BINARY64  # SM86 owners hold binary64 words (binary32 storage refuses them)
        self.index = index
        self.fail = self.b.alloca(I64)

    def threads(self, count: ir.Value, body) -> None:
        """body(j) for this thread's j of [0, count) (a grid-stride loop)."""
        self.loop(self.index.gid(self.b), count, lambda j, _: body(j), step=self.index.stride(self.b))

    def record(self, flags: ir.Value, word: int, key: ir.Value) -> None:
        self.b.atomic_rmw("umin", self.b.gep(flags, [ir.Constant(I64, word)], source_etype=I64), key,
                          "monotonic")

    def call_program(self, fn: ir.Function, args) -> tuple[ir.Value, ir.Value]:
        """status, fail coordinate of a program function."""
        self.b.store(ir.Constant(I64, -1), self.fail)
        status = self.b.call(fn, [*args, self.fail])
        return status, self.b.load(self.fail, typ=I64)


class _NoLabels:
    """Device functions carry no label tables: the host names statements from its own."""

    def emit_labels(self) -> None:
        pass


class _DeviceProgram(_NoLabels, _Emitter):
    pass


class _DeviceOwned(_NoLabels, _OwnedEmitter):
    pass


class _Segment(_NoLabels, _Emitter):
    def __init__(self, module, program, name, regions, segment: Segment, index: _Index):
        super().__init__(module, program, name, regions)
        self.segment = segment
        self.index = index

    def body(self, ctx: _Ctx) -> None:
        seg = self.segment
        if seg.loop is None:
            self.stmts(seg.stmts, seg.first, ctx)
            return
        loop, b = seg.loop, self.b
        start = b.add(ir.Constant(I64, loop.lo), self.index.gid(b))
        i, _, close = self._loop(loop.var, start, ir.Constant(I64, loop.hi), "thread")
        vars_ = dict(ctx.vars)
        vars_[loop.var] = _Var(i, loop.lo, loop.hi)
        self.stmts(loop.body, seg.first, _Ctx(vars=vars_, env=dict(ctx.env), checks=_Checks(self), coord=i))
        close(self.index.stride(b))


def _internal(fn: ir.Function) -> ir.Function:
    fn.linkage = "internal"
    return fn


def _contribution_kernel(module: ir.Module, image, index: _Index) -> None:
    k, s, m = image.k, image.s, image.m
    program = _internal(_DeviceProgram(module, image.contribution, f"{CONTRIBUTION}_program",
                                       program_regions("contribution", k, s, m)).emit())
    f = _Kernel(module, CONTRIBUTION, (PTR, PTR, PTR, PTR, I64),
                ("params", "samples", "contribs", "flags", "share"), index)
    params, samples, contribs, flags, share = f.fn.args
    b = f.b

    def one(i):
        sample = b.gep(samples, [b.mul(i, ir.Constant(I64, s))], source_etype=F64)
        out = b.gep(contribs, [b.mul(i, ir.Constant(I64, k))], source_etype=F64)
        status, coord = f.call_program(program, [params, sample, out])
        with b.if_then(b.icmp_signed("!=", status, ir.Constant(I64, 0)), likely=False):
            info = b.add(b.mul(i, ir.Constant(I64, 2)), ir.Constant(I64, F_INFO))
            b.store(status, b.gep(flags, [info], source_etype=I64))
            b.store(coord, b.gep(flags, [b.add(info, ir.Constant(I64, 1))], source_etype=I64))
            f.record(flags, F_CONTRIBUTION, i)
        return None

    f.threads(share, one)
    b.ret_void()


def _local_kernel(module: ir.Module, k: int, index: _Index) -> None:
    """acc[j] = ((+0.0 + c_0[j]) + c_1[j]) + ...: the CPU's alphac_local_first, then
    alphac_local_add per sample; a failure at sample i records (i << 40) | j. A thread goes
    on after a failure: its later keys are larger, so the minimum stays the first."""
    f = _Kernel(module, LOCAL, (PTR, PTR, PTR, I64), ("contribs", "acc", "flags", "share"), index)
    contribs, acc, flags, share = f.fn.args
    b = f.b
    kk = ir.Constant(I64, k)

    def coordinate(j):
        x = f.load(contribs, j)
        with b.if_then(f.bad(x), likely=False):
            f.record(flags, F_LOCAL, j)
        first = b.fadd(ir.Constant(F64, 0.0), x)

        def sample(i, a):
            y = f.load(contribs, b.add(b.mul(i, kk), j))
            r = b.fadd(a, y)
            with b.if_then(b.or_(f.bad(y), f.bad(r)), likely=False):
                f.record(flags, F_LOCAL, b.or_(b.shl(i, ir.Constant(I64, 40)), j))
            return r

        total = f.loop(ir.Constant(I64, 1), share, sample, first)
        b.store(total, f.at(acc, j))
        return None

    f.threads(kk, coordinate)
    b.ret_void()


def _update_kernels(module: ir.Module, image, index: _Index) -> tuple[Segment, ...]:
    k, s, m = image.k, image.s, image.m
    regions = program_regions("update", k, s, m)
    segs = segments(image.update, image.owned)
    if len(segs) >= 1 << (64 - SEGMENT_SHIFT) or k + 1 >= 1 << COORD_BITS \
            or _count(image.update.body) >= 1 << ORDINAL_BITS:
        raise _unsupported(f"the update of {_count(image.update.body)} statements over {k} coordinates "
                           "does not fit the device's refusal keys", image.update.span)
    for j, seg in enumerate(segs):
        name = UPDATE.format(j)
        if image.owned:
            em = _DeviceOwned(module, image.update, k, s, m, image.update_layout, image.n, image.partitioning,
                              f"{name}_program")
        else:
            em = _Segment(module, image.update, f"{name}_program", regions, seg, index)
        program = _internal(em.emit())
        f = _Kernel(module, name, (PTR, PTR, PTR, PTR, PTR, I64),
                    ("params", "state", "mean", "rate", "flags", "owner"), index)
        params, state, mean, rate, flags, owner = f.fn.args
        b = f.b
        if image.owned:
            b.store(owner, em.owner_g)
        if seg.loop is None:  # one thread runs it
            with b.if_then(b.icmp_unsigned("!=", index.gid(b), ir.Constant(I64, 0))):
                b.ret_void()
        status, coord = f.call_program(program, [params, state, mean, rate])
        with b.if_then(b.icmp_signed("!=", status, ir.Constant(I64, 0)), likely=False):
            key = b.or_(b.shl(b.add(coord, ir.Constant(I64, 1)), ir.Constant(I64, ORDINAL_BITS)), status)
            f.record(flags, F_UPDATE, b.or_(key, ir.Constant(I64, j << SEGMENT_SHIFT)))
        b.ret_void()
    return segs


def check_supported(image) -> None:
    """ImageError `device-unsupported` when the image's owners run what these kernels do not:
    the sample tree folds an owner's samples in its own shape, not in sample order."""
    blocks = [o.owner for o in image.owners if any(op[0] == OP_CODE["sample-block"] for op in o.ops)]
    if blocks:
        raise ImageError("device-unsupported", f"owners {', '.join(map(str, blocks))} of role {image.role} "
                         "fold their samples as blocks of the sample tree, which SM86 owners do not run yet")


def device_module(image, twin: bool = False) -> tuple[ir.Module, tuple[Segment, ...]]:
    """Every kernel of the module docstring for `image` (not yet stamped with a triple)."""
    module = ir.Module(name=f"{image.spec}-{image.role}-{image.target}-{'twin' if twin else 'device'}")
    index = _Index(module, twin)
    _contribution_kernel(module, image, index)
    _local_kernel(module, image.k, index)
    segs = _update_kernels(module, image, index)
    return module, segs


def kernel_names(segs) -> tuple[str, ...]:
    return (CONTRIBUTION, LOCAL, *(UPDATE.format(j) for j in range(len(segs))))


def device_table(image, segs, placement) -> bytes:
    """The words the host runtime reads (`alphac_device`): magic, format, segment count,
    role size, each segment's thread count, then per role owner its device index (how many
    owners before it `placement` puts on a GPU too) and its device bytes (alphac.plan.device)."""
    part_params = image.partitioning.parameters.sharded
    per_owner = []
    for o in image.owners:
        per_owner += [sum(1 for t in placement[:o.owner] if t == image.target),
                      device_bytes(o.params_count, o.state_count, image.k, image.s, o.share, part_params)]
    words = [DEVICE_MAGIC, DEVICE_FORMAT, len(segs), len(image.owners),
             *(seg.threads for seg in segs), *per_owner]
    return struct.pack(f"<{len(words)}Q", *words)
