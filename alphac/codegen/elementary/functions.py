"""The functions themselves: each correctly rounded function's special cases, fast phase and
accurate phase (Ziv's strategy), and the declared algorithms (sigmoid, tanh); `define`
emits one into a module."""

from __future__ import annotations

import math
from dataclasses import dataclass

from llvmlite import ir

from alphac.codegen.types import F64, I1, I64
from alphac.codegen.elementary.constants import (CORRECTLY_ROUNDED, DECLARED, FAST_ERROR, FUNCTIONS, LOG_FAST_TERMS,
                                                 LOG_OFF, P, W, WW, _L1, _L2, _LN2_HI, _LN2_LO, _SIGN,
                                                 _exp2_fast_table, _f64, _log_fast_table, _symbol)
from alphac.codegen.elementary.fixed import _Fx


# ----------------------------------------------------------------------------- functions

def _function(module: ir.Module, name: str):
    fn = ir.Function(module, ir.FunctionType(F64, [F64]), _symbol(name))
    fn.linkage = "internal"
    fn.attributes.add("nounwind")
    fn.attributes.add("alwaysinline" if name in _INLINE else "noinline")
    return fn


_INLINE = FUNCTIONS  # a fast phase (or a few operations around one)


class _Cases:
    """A function body as an ordered list of (condition, result) special cases before the
    general case, each a block returning its value."""

    def __init__(self, module: ir.Module, fn: ir.Function):
        self.fn = fn
        self.b = ir.IRBuilder(fn.append_basic_block("entry"))
        self.fx = _Fx(module, self.b)

    def case(self, cond, value_fn) -> None:
        b = self.b
        then = self.fn.append_basic_block("case")
        rest = self.fn.append_basic_block("rest")
        b.cbranch(cond, then, rest)
        b.position_at_end(then)
        b.ret(value_fn())
        b.position_at_end(rest)

    def done(self, value) -> ir.Function:
        self.b.ret(value)
        return self.fn


def _within(b, x, lo: float, hi: float):
    return b.and_(b.fcmp_ordered(">=", x, _f64(lo)), b.fcmp_ordered("<=", x, _f64(hi)))


def _abs_below(c: _Cases, x, limit: float):
    b = c.b
    mag = b.and_(c.fx.word(x), c.fx.i64(~_SIGN & (2**64 - 1)))
    return b.fcmp_ordered("<", c.fx.double(mag), _f64(limit))


def _exp_fast(c: "_Cases", x):
    """The fast phase of exp for -707 <= x <= 709 (a normal result): x = kd ln2/64 + r with
    r = (x - kd L1) - kd L2 as a double-double (x - kd L1 is exact), k = 64 q + j,
    e^x = 2^q T_j e^r with e^r = 1 + r + r^2 (1/2 + r/6 + ... + r^5/5040) (truncation below
    2^-75 on |r| <= 0.0055); T_j e^r = T_hi + T_hi r_hi (exact, Dekker) + the small rest,
    summed into a double-double whose error is below 2^-66 relative (FAST_ERROR has a
    factor 8 of margin). Branches to `slow` when the rounding test fails; returns the
    result otherwise."""
    b, fx = c.b, c.fx
    red = _exp_reduce(c, x)
    r_hi, r_lo, (t_hi, t_sh, t_sl, t_lo) = red.r_hi, red.r_lo, red.table
    poly = _f64(1.0 / 5040.0)
    for coef in (1.0 / 720.0, 1.0 / 120.0, 1.0 / 24.0, 1.0 / 6.0, 0.5):
        poly = b.fadd(_f64(coef), b.fmul(r_hi, poly))
    q2 = b.fmul(b.fmul(r_hi, r_hi), poly)
    m, me = fx.two_prod(t_hi, t_sh, t_sl, r_hi)                # T_hi r_hi exactly
    s, se = fx.fast_two_sum(t_hi, m)
    rest = b.fadd(b.fmul(t_hi, b.fadd(r_lo, q2)), b.fmul(t_lo, b.fadd(r_hi, q2)))
    lo = b.fadd(b.fadd(b.fadd(se, me), rest), t_lo)
    y_hi, y_lo = fx.fast_two_sum(s, lo)
    ok, y = fx.rounds_alike(y_hi, y_lo, FAST_ERROR)
    return ok, b.fmul(y, red.scale)


@dataclass
class _Reduced:
    """exp's argument reduction: x = k ln2/64 + r_hi + r_lo, k = 64 q + j, the table's
    (T_hi, its Veltkamp halves, T_lo) at j, and 2^q as a double."""
    r_hi: object
    r_lo: object
    table: tuple
    scale: object


def _exp_reduce(c: "_Cases", x) -> _Reduced:
    b, fx = c.b, c.fx
    shifter = _f64(1.5 * 2.0 ** 52)
    kd = b.fsub(b.fadd(b.fmul(x, _f64(64.0 / math.log(2.0))), shifter), shifter)
    k = b.fptosi(kd, I64)
    a = b.fsub(x, b.fmul(kd, _f64(_L1)))                       # exact
    kd_hi, kd_lo = fx.split(kd)
    p, pe = fx.two_prod(kd, kd_hi, kd_lo, _f64(_L2))           # kd L2 exactly
    r_hi, e1 = _two_sum(fx, a, b.fneg(p))
    r_lo = b.fsub(e1, pe)
    j = b.and_(k, fx.i64(63))
    table = tuple(fx.load_f64(f"alphac_exp2_fast{i}", col, j)
                  for i, col in enumerate(_exp2_fast_table()))
    q = b.ashr(k, fx.i64(6))
    scale = fx.double(b.shl(b.add(q, fx.i64(1023)), fx.i64(52)))
    return _Reduced(r_hi, r_lo, table, scale)


def _log_fast(c: "_Cases", x, extra=None):
    """The fast phase of log(x + extra) for x > 0 finite (extra: a double of at most half
    x's last unit, or None): x = 2^k z, z in [0.707, 1.414) (a subnormal x scaled by 2^54
    first), c the cell's constant, r = z c - 1 exactly (Dekker; z c is within 2^-7 of 1)
    plus extra c 2^-k, renormalised; log = k ln2 + (-log c) + log1p(r),
    log1p(r) = r - r^2/2 (exact) + r^3 (1/3 - r/4 + ... - r^7/10), summed into a
    double-double whose error is below 2^-66 relative (the sum never cancels but where
    k = 0 and c = 1, where it is log1p(r) alone, accurate relative to r)."""
    b, fx = c.b, c.fx
    sub = b.fcmp_ordered("<", x, _f64(2.0 ** -1022))
    xs = b.select(sub, b.fmul(x, _f64(2.0 ** 54)), x)
    ix = fx.word(xs)
    tmp = b.sub(ix, fx.i64(LOG_OFF))
    i = b.and_(b.lshr(tmp, fx.i64(45)), fx.i64(127))
    k = b.ashr(tmp, fx.i64(52))
    z = fx.double(b.sub(ix, b.and_(tmp, fx.i64(-(1 << 52)))))
    k = b.select(sub, b.sub(k, fx.i64(54)), k)
    cs, l_hi, l_lo = _log_fast_table()
    cj = fx.load_f64("alphac_log_fast_c", cs, i)
    lh = fx.load_f64("alphac_log_fast_hi", l_hi, i)
    ll = fx.load_f64("alphac_log_fast_lo", l_lo, i)
    z_hi, z_lo = fx.split(z)
    p, pe = fx.two_prod(z, z_hi, z_lo, cj)                    # c has 26 bits: its own halves
    r0 = b.fsub(p, _f64(1.0))                                 # exact (Sterbenz)
    if extra is not None:
        # extra 2^-k: k >= -54 here (log1p's 1 + x >= 2^-53), so 2^-k is a double
        inv = fx.double(b.shl(b.sub(fx.i64(1023), k), fx.i64(52)))
        pe = b.fadd(pe, b.fmul(b.fmul(extra, cj), inv))
    r_hi, r_lo = _two_sum(fx, r0, pe)
    poly = _f64(-1.0 / LOG_FAST_TERMS if LOG_FAST_TERMS % 2 == 0 else 1.0 / LOG_FAST_TERMS)
    for n in range(LOG_FAST_TERMS - 1, 2, -1):
        poly = b.fadd(_f64((1.0 if n % 2 else -1.0) / n), b.fmul(r_hi, poly))
    r_sh, r_sl = fx.split(r_hi)
    s, se = fx.two_prod(r_hi, r_sh, r_sl, r_hi)               # r_hi^2 exactly
    cube = b.fmul(b.fmul(s, r_hi), poly)
    kd = b.sitofp(k, F64)
    h1, e1 = _two_sum(fx, b.fmul(kd, _f64(_LN2_HI)), lh)      # k ln2_hi exact
    h2, e2 = _two_sum(fx, h1, r_hi)
    h3, e3 = _two_sum(fx, h2, b.fmul(s, _f64(-0.5)))
    small = b.fadd(b.fadd(r_lo, b.fneg(b.fmul(r_hi, r_lo))), b.fmul(se, _f64(-0.5)))
    small = b.fadd(b.fadd(small, cube), b.fadd(b.fmul(kd, _f64(_LN2_LO)), ll))
    lo = b.fadd(b.fadd(b.fadd(e1, e2), e3), small)
    y_hi, y_lo = fx.fast_two_sum(h3, lo)
    return fx.rounds_alike(y_hi, y_lo, FAST_ERROR)


def _log1p_fast(c: "_Cases", x):
    """log1p(x) = log(u_hi + u_lo), 1 + x = u_hi + u_lo exactly (a two-sum)."""
    u_hi, u_lo = _two_sum(c.fx, _f64(1.0), x)
    return _log_fast(c, u_hi, u_lo)


def _expm1_fast(c: "_Cases", x):
    """The fast phase of expm1 for -38 <= x <= 709, |x| >= 2^-54: with exp's reduction,
    e^x - 1 = (2^q T - 1) + 2^q T p,  p = e^r - 1 = r + r^2/2 + r^3 (1/6 + ... + r^4/5040),
    r^2/2 exact (Dekker) so that p keeps its relative accuracy where k = 0 (|x| <= ln2/128,
    T = 1, r = x: the result is p itself); 2^q T - 1 is a double-double (T_hi's part by an
    exact two-sum). The two parts never cancel by more than a factor 2 (the result is at
    least |x|/2 where k != 0), so the error stays below 2^-66 relative."""
    b, fx = c.b, c.fx
    red = _exp_reduce(c, x)
    r_hi, r_lo, (t_hi, t_sh, t_sl, t_lo) = red.r_hi, red.r_lo, red.table
    poly = _f64(1.0 / 5040.0)
    for coef in (1.0 / 720.0, 1.0 / 120.0, 1.0 / 24.0, 1.0 / 6.0):
        poly = b.fadd(_f64(coef), b.fmul(r_hi, poly))
    r_sh, r_sl = fx.split(r_hi)
    s, se = fx.two_prod(r_hi, r_sh, r_sl, r_hi)                # r_hi^2 exactly
    half, half_e = b.fmul(s, _f64(0.5)), b.fmul(se, _f64(0.5))
    p1, p1e = fx.fast_two_sum(r_hi, half)
    cube = b.fmul(b.fmul(s, r_hi), poly)
    p_lo = b.fadd(b.fadd(b.fadd(p1e, r_lo), b.fadd(half_e, b.fmul(r_hi, r_lo))), cube)
    m, me = fx.two_prod(t_hi, t_sh, t_sl, p1)                  # T_hi p1 exactly
    tp_lo = b.fadd(b.fadd(me, b.fmul(t_hi, p_lo)), b.fmul(t_lo, p1))
    a, ae = _two_sum(fx, b.fmul(red.scale, t_hi), _f64(-1.0))
    a_lo = b.fadd(ae, b.fmul(red.scale, t_lo))
    h, he = _two_sum(fx, a, b.fmul(red.scale, m))
    lo = b.fadd(b.fadd(he, a_lo), b.fmul(red.scale, tp_lo))
    y_hi, y_lo = fx.fast_two_sum(h, lo)
    return fx.rounds_alike(y_hi, y_lo, FAST_ERROR)


def _two_sum(fx: "_Fx", a, c):
    """(s, e) with s + e = a + c exactly, for any a, c (Knuth)."""
    b = fx.b
    s = b.fadd(a, c)
    a2 = b.fsub(s, c)
    c2 = b.fsub(s, a2)
    return s, b.fadd(b.fsub(a, a2), b.fsub(c, c2))


def _exp_accurate(c: "_Cases", x):
    Y, q = c.fx.exp_fixed(x)
    return c.fx.round_to_double(Y, c.b.sub(q, c.fx.i64(P)), ir.Constant(I1, 0))


def _accurate(module: ir.Module, name: str, body) -> ir.Function:
    """`alphac_NAME_accurate`: the accurate phase as a function of its own, never inlined
    (it is rare), so that the fast phase stays small enough to inline."""
    got = module.globals.get(_symbol(name) + "_accurate")
    if got is not None:
        return got
    fn = ir.Function(module, ir.FunctionType(F64, [F64]), _symbol(name) + "_accurate")
    fn.linkage = "internal"
    fn.attributes.add("nounwind")
    fn.attributes.add("noinline")
    fn.attributes.add("cold")
    c = _Cases(module, fn)
    return c.done(body(c, fn.args[0]))


def _fast_then_accurate(c: "_Cases", module, name: str, inside, fast, accurate) -> ir.Function:
    """The rest of the body: where `inside` (i1, or None for everywhere), the fast phase;
    its result when the rounding test passes, else (and outside) the accurate phase."""
    b = c.b
    slow = c.fn.append_basic_block("slow")
    if inside is not None:
        fast_block = c.fn.append_basic_block("fast")
        b.cbranch(inside, fast_block, slow)
        b.position_at_end(fast_block)
    ok, y = fast(c, c.fn.args[0])
    done = c.fn.append_basic_block("fast.done")
    b.cbranch(ok, done, slow)
    b.position_at_end(done)
    b.ret(y)
    b.position_at_end(slow)
    return c.done(b.call(_accurate(module, name, accurate), [c.fn.args[0]]))


def _expm1_accurate(c: "_Cases", x):
    b, fx = c.b, c.fx
    Y, q = fx.exp_fixed(x)
    # e^x - 1 = (Y - 2^(P-q)) * 2^(q-P), in i512 (for q < 0, 2^(P-q) exceeds i256); for
    # q > P the one lies below the last unit: leaving it out errs by < 2^-240 relative
    one_shift = fx.clamp(b.sub(fx.i64(P), q), 0, 511)
    one = b.shl(ir.Constant(WW, 1), b.zext(one_shift, WW))
    one = b.select(b.icmp_signed(">", q, fx.i64(P)), ir.Constant(WW, 0), one)
    D = b.sub(b.zext(Y, WW), one)
    return fx.signed_round(D, b.sub(q, fx.i64(P)), WW)


def _log_accurate(c: "_Cases", x):
    fx = c.fx
    m, e = fx.decompose(x)
    v = fx.log_fixed(c.b.zext(m, W), e)
    return fx.signed_round(v, fx.i64(-P))


def _log1p_accurate(c: "_Cases", x):
    b, fx = c.b, c.fx
    m, e = fx.decompose(x)
    M = b.zext(m, W)
    neg = b.fcmp_ordered("<", x, _f64(0.0))
    # 1 + x as mag * 2^e': e >= 0: M 2^e + 1 at 2^0 (beyond 2^180 the one is dropped, a
    # relative 2^-180 change of 1 + x, 2^-187 of its log); e < 0 (|x| < 2^53): 2^-e +- M
    # at 2^e, exact (-e <= 106 here)
    up = b.shl(M, b.zext(fx.clamp(e, 0, 180), W))
    big = b.add(up, fx.w(1))
    big = b.select(b.icmp_signed(">", e, fx.i64(180)), M, big)
    big_e = b.select(b.icmp_signed(">", e, fx.i64(180)), e, fx.i64(0))
    one = b.shl(fx.w(1), b.zext(fx.clamp(b.sub(fx.i64(0), e), 0, 255), W))
    small = b.select(neg, b.sub(one, M), b.add(one, M))
    nonneg_e = b.icmp_signed(">=", e, fx.i64(0))
    mag = b.select(nonneg_e, big, small)
    e1 = b.select(nonneg_e, big_e, e)
    v = fx.log_fixed(mag, e1)
    return fx.signed_round(v, fx.i64(-P))


def _declared_steps(c: "_Cases", name: str, x, inner) -> ir.Value:
    """sigmoid's or tanh's declared steps at x (module docstring), `inner(f)` the exp or
    expm1 they call (the whole function, or its branch-free fast phase)."""
    b, fx = c.b, c.fx
    a = fx.double(b.and_(fx.word(x), fx.i64(~_SIGN & (2**64 - 1))))
    if name == "sigmoid":
        e = b.call(inner("exp"), [b.fneg(a)])
        num = b.select(b.fcmp_ordered(">=", x, _f64(0.0)), _f64(1.0), e)
        return b.fdiv(num, b.fadd(_f64(1.0), e))
    a = b.select(b.fcmp_ordered("<", _f64(20.0), a), _f64(20.0), a)  # min(|x|, 20)
    t = b.call(inner("expm1"), [b.fmul(_f64(-2.0), a)])
    r = b.fdiv(b.fneg(t), b.fadd(t, _f64(2.0)))
    mag = b.and_(fx.word(r), fx.i64(~_SIGN & (2**64 - 1)))
    return fx.double(b.or_(mag, b.and_(fx.word(x), fx.i64(_SIGN))))


def _declared(name: str):
    def build(module: ir.Module) -> ir.Function:
        c = _Cases(module, _function(module, name))
        return c.done(_declared_steps(c, name, c.fn.args[0], lambda f: define(module, f)))

    return build


def _below(v: float):
    return lambda c, x: c.b.fcmp_ordered("<", x, _f64(v))


def _at_least(v: float):
    return lambda c, x: c.b.fcmp_ordered(">=", x, _f64(v))


def _equal(v: float):
    return lambda c, x: c.b.fcmp_ordered("==", x, _f64(v))


def _tiny(c: "_Cases", x):
    return _abs_below(c, x, 2.0 ** -54)


def _value(v: float):
    return lambda c, x: _f64(v)


def _same(c: "_Cases", x):
    return x


def _nan(c: "_Cases", x):
    return c.b.fcmp_unordered("uno", x, x)


# The correctly rounded functions: their special cases in order (condition, result), the
# fast phase's domain (None: whatever the special cases leave), the fast and the accurate
# phase. A tiny argument (|x| < 2^-54) rounds to 1 (exp) or to itself (expm1: x + x^2/2 +
# ..., log1p: x - x^2/2 + ...); exp(x) < 2^-54 rounds expm1 to -1 below -38.
_CORRECTLY_ROUNDED = {
    "exp": ([(_nan, _same), (_at_least(710.0), _value(math.inf)), (_below(-746.0), _value(0.0)),
             (_tiny, _value(1.0))],
            lambda c, x: _within(c.b, x, -707.0, 709.0), _exp_fast, _exp_accurate),
    "expm1": ([(_nan, _same), (_at_least(710.0), _value(math.inf)), (_below(-38.0), _value(-1.0)),
               (_tiny, _same)], None, _expm1_fast, _expm1_accurate),
    "log": ([(_nan, _same), (_below(0.0), _value(math.nan)), (_equal(0.0), _value(-math.inf)),
             (_equal(1.0), _value(0.0)), (_equal(math.inf), _same)], None, _log_fast, _log_accurate),
    "log1p": ([(_nan, _same), (_below(-1.0), _value(math.nan)), (_equal(-1.0), _value(-math.inf)),
               (_equal(math.inf), _same), (_tiny, _same)], None, _log1p_fast, _log1p_accurate),
}


def _correctly_rounded(name: str):
    cases, inside, fast, accurate = _CORRECTLY_ROUNDED[name]

    def build(module: ir.Module) -> ir.Function:
        c = _Cases(module, _function(module, name))
        x = c.fn.args[0]
        for cond, result in cases:
            c.case(cond(c, x), lambda result=result: result(c, x))
        return _fast_then_accurate(c, module, name, None if inside is None else inside(c, x),
                                   fast, accurate)

    return build


_BUILDERS = {**{name: _correctly_rounded(name) for name in CORRECTLY_ROUNDED},
             **{name: _declared(name) for name in DECLARED}}


def define(module: ir.Module, name: str) -> ir.Function:
    """`double alphac_NAME(double)` in `module` (internal; defined once per module)."""
    got = module.globals.get(_symbol(name))
    if got is not None:
        return got
    if name not in _BUILDERS:
        raise ValueError(f"unknown elementary function {name!r}")
    return _BUILDERS[name](module)
