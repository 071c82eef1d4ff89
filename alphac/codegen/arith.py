"""The arithmetic between the program kernels: the local ordered sum of contributions, the
element-wise combine, and the mean before the update. The C runtime moves words and calls
these; every floating-point operation of an executable is emitted here or in program.py.

    i64 alphac_local_first(double* acc, i64 k)                  -> -1 or the first bad j
    i64 alphac_local_add(double* acc, double* c, i64 k)         -> -1 or the first bad j
    i64 alphac_add_range(double* dst, double* a, double* b, i64 lo, i64 hi) -> 1 if any bad
    i64 alphac_first_nonfinite(double* p, i64 lo, i64 hi)       -> -1 or the first such j
    i64 alphac_mean(double* g, i64 count, i64 k)                -> -1 or the first bad j
    i64 alphac_mean_owned(double* mean, double* src, i64 count, i64 at, i64 first, i64 step,
                          i64 cnt, i64 sliced)                  -> -1 or the bad coordinate

"Bad": a non-finite operand or result. Element loops only OR a flag, so they vectorise;
when it is set a second pass finds the first failing coordinate (the caller refuses, so
what the first pass wrote is never used). No fast-math or `contract` flags anywhere.
"""

from __future__ import annotations

from llvmlite import ir

from alphac.codegen.types import F64, I1, I64, PTR

EXP = 0x7FF0000000000000


def _c(v: int) -> ir.Constant:
    return ir.Constant(I64, v)


class _Fn:
    """One exported kernel under construction: its builder and counted loops."""

    def __init__(self, module: ir.Module, name: str, args: tuple, names: tuple):
        self.fn = ir.Function(module, ir.FunctionType(I64, args), name)
        self.fn.attributes.add("nounwind")
        for a, nm in zip(self.fn.args, names):
            a.name = nm
        self.b = ir.IRBuilder(self.fn.append_basic_block("entry"))

    def at(self, base: ir.Value, j: ir.Value) -> ir.Value:
        return self.b.gep(base, [j], inbounds=True, source_etype=F64)

    def load(self, base: ir.Value, j: ir.Value) -> ir.Value:
        return self.b.load(self.at(base, j), typ=F64)

    def bad(self, *xs: ir.Value) -> ir.Value:
        """1 when any of xs is an infinity or a NaN (all exponent bits set)."""
        b = self.b
        out = None
        for x in xs:
            hit = b.icmp_unsigned("==", b.and_(b.bitcast(x, I64), _c(EXP)), _c(EXP))
            out = hit if out is None else b.or_(out, hit)
        return out

    def loop(self, lo: ir.Value, hi: ir.Value, body, carry: ir.Value | None = None,
             step: ir.Value | None = None):
        """for (j = lo; j < hi; j += step (1)) carry = body(j, carry); returns the final carry."""
        b = self.b
        pre = b.block
        head = b.append_basic_block("head")
        blk = b.append_basic_block("body")
        end = b.append_basic_block("end")
        b.branch(head)
        b.position_at_end(head)
        j = b.phi(I64, "j")
        j.add_incoming(lo, pre)
        acc = None
        if carry is not None:
            acc = b.phi(carry.type, "carry")
            acc.add_incoming(carry, pre)
        b.cbranch(b.icmp_signed("<", j, hi), blk, end)
        b.position_at_end(blk)
        nxt = body(j, acc)
        j.add_incoming(b.add(j, step if step is not None else _c(1)), b.block)
        if acc is not None:
            acc.add_incoming(nxt, b.block)
        b.branch(head)
        b.position_at_end(end)
        return acc

    def first(self, lo: ir.Value, hi: ir.Value, found) -> None:
        """Return the first j in [lo, hi) where found(j) holds, else fall through."""
        def body(j, _):
            b = self.b
            with b.if_then(found(j), likely=False):
                b.ret(j)
            return None
        self.loop(lo, hi, body)

    def flagged(self, k: ir.Value, body, rescan) -> None:
        """A branch-free pass `flag |= body(j)` over [0, k); if the flag is set, return the
        first j where rescan(j) holds (it must see the failure in what the pass left)."""
        b = self.b
        flag = self.loop(_c(0), k, lambda j, f: b.or_(f, body(j)), ir.Constant(I1, 0))
        with b.if_then(flag, likely=False):
            self.first(_c(0), k, rescan)
            b.ret(_c(-1))


def _add_range(module: ir.Module) -> None:
    f = _Fn(module, "alphac_add_range", (PTR, PTR, PTR, I64, I64), ("dst", "a", "b", "lo", "hi"))
    dst, a, bb, lo, hi = f.fn.args

    def body(j, flag):
        x, y = f.load(a, j), f.load(bb, j)
        r = f.b.fadd(x, y)
        f.b.store(r, f.at(dst, j))
        return f.b.or_(flag, f.bad(x, y, r))

    flag = f.loop(lo, hi, body, ir.Constant(I1, 0))
    f.b.ret(f.b.zext(flag, I64))


def _first_nonfinite(module: ir.Module) -> None:
    f = _Fn(module, "alphac_first_nonfinite", (PTR, I64, I64), ("p", "lo", "hi"))
    p, lo, hi = f.fn.args
    f.first(lo, hi, lambda j: f.bad(f.load(p, j)))
    f.b.ret(_c(-1))


def _local_first(module: ir.Module) -> None:
    """After the first sample's contribution was written straight into acc: acc = +0.0 + acc.

    +0.0 + c equals c bit for bit unless c is -0.0 (the sum is +0.0), and is finite exactly
    when c is. So a read-only integer scan (it vectorises) looks for "non-finite or -0.0",
    and only then does a second pass return the first non-finite word or rewrite each word
    as +0.0 + x. Bit 63 of (bits & EXP) + 2^52 is set exactly for an all-ones exponent;
    with d = bits ^ -0.0, bit 63 of ~d & (d - 1) is set exactly for d = 0."""
    f = _Fn(module, "alphac_local_first", (PTR, I64), ("acc", "k"))
    acc, k = f.fn.args
    b = f.b

    def scan(j, special):
        bits = b.bitcast(f.load(acc, j), I64)
        nonfinite = b.add(b.and_(bits, _c(EXP)), _c(1 << 52))
        d = b.xor(bits, _c(1 << 63))
        negzero = b.and_(b.not_(d), b.sub(d, _c(1)))
        return b.or_(special, b.or_(nonfinite, negzero))

    special = f.loop(_c(0), k, scan, _c(0))
    with b.if_then(b.icmp_signed("<", special, _c(0)), likely=False):
        def fix(j, _):
            x = f.load(acc, j)
            with b.if_then(f.bad(x), likely=False):
                b.ret(j)
            b.store(b.fadd(ir.Constant(F64, 0.0), x), f.at(acc, j))
            return None
        f.loop(_c(0), k, fix)
    b.ret(_c(-1))


def _local_add(module: ir.Module) -> None:
    f = _Fn(module, "alphac_local_add", (PTR, PTR, I64), ("acc", "c", "k"))
    acc, c, k = f.fn.args

    def body(j):
        x, y = f.load(acc, j), f.load(c, j)
        r = f.b.fadd(x, y)
        f.b.store(r, f.at(acc, j))
        return f.bad(x, y, r)

    # acc was finite before this pass (checked results), so a failure shows in c or in the
    # stored result
    f.flagged(k, body, lambda j: f.bad(f.load(c, j), f.load(acc, j)))
    f.b.ret(_c(-1))


def _mean(module: ir.Module) -> None:
    """g[j] = g[j] / (double) count in place. When (double) count is a power of two, x / c
    and x * (1 / c) are the same word for every x: 1 / c is exact, so both are the exact
    quotient rounded once (subnormals included; c >= 1 cannot overflow). A multiply is
    several times cheaper than a divide. count is a u64, so c is finite, and a non-finite
    x gives a non-finite quotient: the first failing j is the first non-finite word left."""
    f = _Fn(module, "alphac_mean", (PTR, I64, I64), ("g", "count", "k"))
    g, count, k = f.fn.args
    b = f.b
    c = b.uitofp(count, F64)
    cbits = b.bitcast(c, I64)
    pow2 = b.and_(b.icmp_unsigned("==", b.and_(cbits, _c((1 << 52) - 1)), _c(0)),
                  b.icmp_unsigned("!=", cbits, _c(0)))
    inv = b.fdiv(ir.Constant(F64, 1.0), c)

    def body(op):
        def one(j):
            x = f.load(g, j)
            r = b.fmul(x, inv) if op == "mul" else b.fdiv(x, c)
            b.store(r, f.at(g, j))
            return f.bad(x, c, r)
        return one

    with b.if_else(pow2) as (exact, divide):
        with exact:
            f.flagged(k, body("mul"), lambda j: f.bad(f.load(g, j)))
        with divide:
            f.flagged(k, body("div"), lambda j: f.bad(f.load(g, j)))
    b.ret(_c(-1))


def _mean_owned(module: ir.Module) -> None:
    """mean[at + j] = x / (double) count for the cnt coordinates i = first + j*step of one
    run of an owner's coordinates (the run's first being the owner's at-th coordinate),
    x = src[at + j] (its slice, `sliced`) or src[i] (the full vector); the first coordinate
    whose operand or quotient is non-finite is returned. mean may be src: each word is read
    before any word at or above its position is written (coordinates ascend, so i >= at + j).
    (The replicated mean's word: its x * (1/c) is used only when exact, so a division gives
    the same bits.)"""
    f = _Fn(module, "alphac_mean_owned", (PTR, PTR, I64, I64, I64, I64, I64, I64),
            ("mean", "src", "count", "at", "first", "step", "cnt", "sliced"))
    mean, src, count, at, first, step, cnt, sliced = f.fn.args
    b = f.b
    c = b.uitofp(count, F64)
    whole = b.icmp_signed("==", sliced, _c(0))

    def body(j, _):
        i = b.add(first, b.mul(j, step))
        here = b.add(at, j)
        x = f.load(src, b.select(whole, i, here))
        r = b.fdiv(x, c)
        with b.if_then(f.bad(x, r), likely=False):
            b.ret(i)
        b.store(r, f.at(mean, here))
        return None

    f.loop(_c(0), cnt, body)
    b.ret(_c(-1))


def emit_arith(module: ir.Module) -> None:
    """Add every kernel of this module's docstring to `module`."""
    for emit in (_add_range, _first_nonfinite, _local_first, _local_add, _mean, _mean_owned):
        emit(module)
