"""The branch-free fast phases (`alphac_NAME_fast`, straight-line code that vectorises), the
module of every kernel (`vector_module`, whose IR's sha256 names what evidence measured),
and those kernels compiled for this host (`host`), for `alphac conform` and the benchmarks."""

from __future__ import annotations

import functools
import hashlib
import math

from llvmlite import ir

from alphac.codegen.types import F64, I64, PTR, VOID
from alphac.codegen.elementary.constants import DECLARED, FUNCTIONS, _f64, _symbol
from alphac.codegen.elementary.functions import (_Cases, _abs_below, _below, _declared_steps, _exp_fast, _expm1_fast,
                                                 _log1p_fast, _log_fast, _within, define)


# ----------------------------------------------------------------------------- branch-free fast phases
# `alphac_NAME_fast`: the fast phase alone, straight-line code (selections, no branch), so
# that a loop of it vectorises: the correctly rounded result where the rounding test
# passes, NaN elsewhere (outside the fast phase's domain, or undecided), which a second,
# rare pass replaces by the whole function's result. An argument outside the domain is
# replaced by a harmless one before any conversion, so no instruction sees it. expm1 below
# -38 is -1 here as in the whole function (its special case): tanh's min(|x|, 20) gives
# expm1 arguments down to -40, so every |x| > 19 would otherwise take the second pass.

def _guarded(c: "_Cases", x, inside, harmless: float, fast):
    b = c.b
    ok, y = fast(c, b.select(inside, x, _f64(harmless)))
    return b.select(b.and_(inside, ok), y, _f64(math.nan))


def _not_tiny(c: "_Cases", x):
    return c.b.not_(_abs_below(c, x, 2.0 ** -54))


_FAST = {
    "exp": lambda c, x: _guarded(c, x, _within(c.b, x, -707.0, 709.0), 0.0, _exp_fast),
    "expm1": lambda c, x: c.b.select(
        _below(-38.0)(c, x), _f64(-1.0),
        _guarded(c, x, c.b.and_(_within(c.b, x, -38.0, 709.0), _not_tiny(c, x)), 0.5, _expm1_fast)),
    "log": lambda c, x: _guarded(c, x, _within(c.b, x, 5e-324, 1.7976931348623157e308), 1.5,
                                 _log_fast),
    "log1p": lambda c, x: _guarded(c, x, c.b.and_(_within(c.b, x, -1.0 + 2.0 ** -53,
                                                           1.7976931348623157e308),
                                                  _not_tiny(c, x)), 0.5, _log1p_fast),
}


def define_fast(module: ir.Module, name: str) -> ir.Function:
    """`double alphac_NAME_fast(double)`: the branch-free fast phase (NaN where it cannot
    give the result); sigmoid and tanh are their declared steps on exp's and expm1's."""
    symbol = _symbol(name) + "_fast"
    got = module.globals.get(symbol)
    if got is not None:
        return got
    fn = ir.Function(module, ir.FunctionType(F64, [F64]), symbol)
    fn.linkage = "internal"
    fn.attributes.add("nounwind")
    fn.attributes.add("alwaysinline")
    c = _Cases(module, fn)
    if name in _FAST:
        return c.done(_FAST[name](c, fn.args[0]))
    if name in DECLARED:
        return c.done(_declared_steps(c, name, fn.args[0], lambda f: define_fast(module, f)))
    raise ValueError(f"unknown elementary function {name!r}")


# ----------------------------------------------------------------------------- host kernels

def _counted_loop(fn, b: ir.IRBuilder, n, body) -> None:
    """for i in 0 .. n: body(i), at the builder's position."""
    head = fn.append_basic_block("head")
    inner = fn.append_basic_block("body")
    done = fn.append_basic_block("done")
    pre = b.block
    b.branch(head)
    b.position_at_end(head)
    i = b.phi(I64, "i")
    i.add_incoming(ir.Constant(I64, 0), pre)
    b.cbranch(b.icmp_signed("<", i, n), inner, done)
    b.position_at_end(inner)
    body(i)
    i.add_incoming(b.add(i, ir.Constant(I64, 1)), b.block)
    b.branch(head)
    b.position_at_end(done)


def vector_module(names=FUNCTIONS) -> ir.Module:
    """A module of `void alphac_vNAME(double* x, double* y, i64 n)`: y[i] = NAME(x[i]), in
    two passes: the branch-free fast phase over every element (a loop that vectorises),
    then the whole function where that left NaN (the few undecided elements, arguments
    outside the fast domain, and NaN arguments, whose result is NaN anyway)."""
    module = ir.Module("alphac_elementary")
    for name in names:
        fn = ir.Function(module, ir.FunctionType(VOID, [PTR, PTR, I64]), f"alphac_v{name}")
        for arg in fn.args[:2]:
            arg.add_attribute("noalias")
        b = ir.IRBuilder(fn.append_basic_block("entry"))
        xs, ys, n = fn.args

        def at(ptr, i):
            return b.gep(ptr, [i], inbounds=True, source_etype=F64)

        def fast(i):
            b.store(b.call(define_fast(module, name), [b.load(at(xs, i), typ=F64)]), at(ys, i))

        def fix(i):
            y = b.load(at(ys, i), typ=F64)
            redo = fn.append_basic_block("redo")
            next_ = fn.append_basic_block("next")
            b.cbranch(b.fcmp_unordered("uno", y, y), redo, next_)
            b.position_at_end(redo)
            b.store(b.call(define(module, name), [b.load(at(xs, i), typ=F64)]), at(ys, i))
            b.branch(next_)
            b.position_at_end(next_)

        _counted_loop(fn, b, n, fast)
        _counted_loop(fn, b, n, fix)
        b.ret_void()
    return module


@functools.lru_cache(maxsize=None)
def _host_engine(cpu: str = "baseline"):
    """The kernels JIT-compiled for this host: at the baseline level of its instruction set
    (`baseline`) or with the host CPU's own name and features (`host`)."""
    import llvmlite.binding as llvm

    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    target = llvm.Target.from_default_triple()
    if cpu == "host":
        tm = target.create_target_machine(cpu=llvm.get_host_cpu_name(),
                                          features=llvm.get_host_cpu_features().flatten(), opt=2)
    elif cpu == "baseline":
        tm = target.create_target_machine(opt=2)
    else:
        raise ValueError(f"cpu must be baseline or host, not {cpu!r}")
    module = vector_module()
    module.triple = tm.triple
    module.data_layout = str(tm.target_data)
    mod = llvm.parse_assembly(str(module))
    mod.verify()
    # the pipeline of every build (alphac.targets.llvm.prepare): O2, no fast-math flags
    pb = llvm.create_pass_builder(tm, llvm.create_pipeline_tuning_options(2))
    pb.getModulePassManager().run(mod, pb)
    mod.verify()
    engine = llvm.create_mcjit_compiler(mod, tm)
    engine.finalize_object()
    return engine, mod


@functools.cache
def ir_sha256() -> str:
    """The sha256 of the kernels' LLVM IR (vector_module's text): what an evidence record
    of `alphac conform` measured, and what a bounded contract's evidence must name for the
    executables built from this tree (alphac.driver.build)."""
    return hashlib.sha256(str(vector_module()).encode()).hexdigest()


def host(name: str, cpu: str = "baseline"):
    """The kernel of `name` compiled for this host (`cpu`: baseline or host, see
    _host_engine): a float64 array -> a float64 array."""
    import ctypes

    import numpy as np

    if name not in FUNCTIONS:
        raise ValueError(f"unknown elementary function {name!r}")
    engine, _ = _host_engine(cpu)
    addr = engine.get_function_address(f"alphac_v{name}")
    cfn = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64)(addr)

    def run(xs):
        x = np.ascontiguousarray(xs, dtype=np.float64)
        y = np.empty_like(x)
        cfn(x.ctypes.data, y.ctypes.data, x.size)
        return y

    return run
