"""Emission helpers over one builder: two's-complement fixed point on i256 with i512
products (the accurate phases), and word manipulation of doubles."""

from __future__ import annotations

import math
from fractions import Fraction

from llvmlite import ir

from alphac.codegen.types import F64, I1, I64
from alphac.codegen.elementary.constants import (EXP_TERMS, LOG_TABLE, LOG_TERMS, P, W, WW, _INF_BITS, _SIGN,
                                                 _exp2_table, _f64, _fixed, _ln2_fixed, _log_tables)


# ----------------------------------------------------------------------------- emission

class _Fx:
    """Emission helpers over one builder: fixed-point arithmetic on i256 with i512
    products, word manipulation of doubles."""

    def __init__(self, module: ir.Module, b: ir.IRBuilder):
        self.module = module
        self.b = b

    def w(self, v: int, t=W) -> ir.Constant:
        return ir.Constant(t, v)

    def i64(self, v: int) -> ir.Constant:
        return ir.Constant(I64, v)

    def mulshift(self, x, y):
        """floor(x * y / 2^P) of signed i256 values whose product fits in i512."""
        b = self.b
        p = b.mul(b.sext(x, WW), b.sext(y, WW))
        return b.trunc(b.ashr(p, ir.Constant(WW, P)), W)

    def ctlz(self, x, t):
        name = f"llvm.ctlz.i{t.width}"
        fn = self.module.globals.get(name)
        if fn is None:
            fn = ir.Function(self.module, ir.FunctionType(t, [t, I1]), name)
        return self.b.call(fn, [x, ir.Constant(I1, 0)])

    def table(self, name: str, values, t=W):
        g = self.module.globals.get(name)
        if g is None:
            arr = ir.ArrayType(t, len(values))
            g = ir.GlobalVariable(self.module, arr, name)
            g.global_constant = True
            g.linkage = "internal"
            g.initializer = ir.Constant(arr, [ir.Constant(t, v) for v in values])
        return g

    def load(self, table, index64, t=W):
        ptr = self.b.gep(table, [self.i64(0), index64], inbounds=True,
                         source_etype=table.value_type)
        return self.b.load(ptr, typ=t)

    def clamp(self, v, lo: int, hi: int):
        """v (i64) clamped into [lo, hi]: shift amounts must stay below the width."""
        b = self.b
        v = b.select(b.icmp_signed("<", v, self.i64(lo)), self.i64(lo), v)
        return b.select(b.icmp_signed(">", v, self.i64(hi)), self.i64(hi), v)

    # -- binary64 helpers of the fast phases: IEEE operations only, in this order ----------

    def fast_two_sum(self, a, b):
        """(s, e) with s + e = a + b exactly, for |a| >= |b| (or a = 0)."""
        b_ = self.b
        s = b_.fadd(a, b)
        return s, b_.fsub(b, b_.fsub(s, a))

    def split(self, a):
        b = self.b
        c = b.fmul(_f64(134217729.0), a)
        hi = b.fsub(c, b.fsub(c, a))
        return hi, b.fsub(a, hi)

    def two_prod(self, a, a_hi, a_lo, c):
        """(p, e) with p + e = a * c exactly (Dekker), a given with its Veltkamp halves."""
        b = self.b
        c_hi, c_lo = self.split(c)
        p = b.fmul(a, c)
        e = b.fadd(b.fadd(b.fsub(b.fmul(a_hi, c_hi), p), b.fmul(a_hi, c_lo)), b.fmul(a_lo, c_hi))
        return p, b.fadd(e, b.fmul(a_lo, c_lo))

    def rounds_alike(self, hi, lo, error: float):
        """(ok, word): whether every value within |hi| * error of hi + lo rounds to the same
        binary64, and that word (meaningful when ok)."""
        b = self.b
        mag = self.double(b.and_(self.word(hi), self.i64(~_SIGN & (2**64 - 1))))
        eps = b.fmul(mag, _f64(error))
        up = b.fadd(hi, b.fadd(lo, eps))
        down = b.fadd(hi, b.fsub(lo, eps))
        return b.fcmp_ordered("==", up, down), up

    def load_f64(self, name, values, index64):
        return self.load(self.table(name, values, F64), index64, F64)

    def word(self, x):
        return self.b.bitcast(x, I64)

    def double(self, bits):
        return self.b.bitcast(bits, F64)

    def decompose(self, x):
        """(M, E) with |x| = M * 2^E, M < 2^53 (i64 values): the word's integer view."""
        b = self.b
        bits = self.word(x)
        be = b.and_(b.lshr(bits, self.i64(52)), self.i64(0x7FF))
        frac = b.and_(bits, self.i64((1 << 52) - 1))
        normal = b.icmp_unsigned("!=", be, self.i64(0))
        m = b.select(normal, b.or_(frac, self.i64(1 << 52)), frac)
        e = b.select(normal, b.sub(be, self.i64(1075)), self.i64(-1074))
        return m, e

    def round_to_double(self, mag, e, negative, t=W):
        """The binary64 nearest mag * 2^e (mag > 0, of type t, its top bit at most at
        t.width - 6), rounded to nearest even onto the normal or the subnormal grid,
        +-inf beyond the largest finite; negated when `negative` (i1)."""
        b = self.b
        wt = t.width
        top = b.sub(self.i64(wt - 1), b.trunc(self.ctlz(mag, t), I64))
        expo = b.add(top, e)  # the exponent of the leading bit
        normal = b.icmp_signed(">=", expo, self.i64(-1022))
        shift = b.select(normal, b.sub(top, self.i64(52)), b.sub(self.i64(-1074), e))
        shift = self.clamp(shift, 0, wt - 1)
        sh = b.zext(shift, t)
        mant = b.lshr(mag, sh)
        rem = b.and_(mag, b.sub(b.shl(ir.Constant(t, 1), sh), ir.Constant(t, 1)))
        half = b.shl(ir.Constant(t, 1), b.zext(self.clamp(b.sub(shift, self.i64(1)), 0, wt - 1), t))
        half = b.select(b.icmp_unsigned("==", shift, self.i64(0)), ir.Constant(t, 0), half)
        odd = b.icmp_unsigned("!=", b.and_(mant, ir.Constant(t, 1)), ir.Constant(t, 0))
        above = b.icmp_unsigned(">", rem, half)
        tie = b.and_(b.icmp_unsigned("==", rem, half), b.icmp_unsigned("!=", half, ir.Constant(t, 0)))
        up = b.or_(above, b.and_(tie, odd))
        m64 = b.add(b.trunc(mant, I64), b.zext(up, I64))
        # normal: (expo + 1022) << 52 plus the mantissa with its hidden bit (a carry to
        # 2^53 moves into the exponent); subnormal: the mantissa is the word
        expo_c = self.clamp(expo, -1022, 1024)
        normal_bits = b.add(b.shl(b.add(expo_c, self.i64(1022)), self.i64(52)), m64)
        bits = b.select(normal, normal_bits, m64)
        over = b.or_(b.icmp_signed(">", expo, self.i64(1023)),
                     b.icmp_unsigned(">=", bits, self.i64(_INF_BITS)))
        bits = b.select(over, self.i64(_INF_BITS), bits)
        bits = b.or_(bits, b.shl(b.zext(negative, I64), self.i64(63)))
        return self.double(bits)

    # -- exp in fixed point -----------------------------------------------------------------

    def exp_fixed(self, x):
        """(Y, q) with e^x = Y * 2^(q - P) to a relative 2^-235, for 2^-54 <= |x| < 746:
        x = k ln2/64 + r, |r| <= ln2/128 (about), k = 64 q + j, e^x = 2^q 2^(j/64) e^r."""
        b = self.b
        m, e = self.decompose(x)
        # x * 2^P exactly: e >= -106 here, so e + P >= 134, and |x| < 2^10
        mag = b.shl(b.zext(m, W), b.zext(b.add(e, self.i64(P)), W))
        neg = b.fcmp_ordered("<", x, _f64(0.0))
        X = b.select(neg, b.sub(self.w(0), mag), mag)
        t = b.fmul(x, _f64(64.0 / math.log(2.0)))
        half = b.select(b.fcmp_ordered("<", t, _f64(0.0)), _f64(-0.5), _f64(0.5))
        k = b.fptosi(b.fadd(t, half), I64)
        ln2_64 = (_ln2_fixed(P) + 32) >> 6  # round(ln2/64 * 2^P) within one unit
        R = b.sub(X, b.mul(b.sext(k, W), self.w(ln2_64)))
        inv = [Fraction(1, math.factorial(n)) for n in range(EXP_TERMS + 1)]
        Q = self.w(_fixed(inv[EXP_TERMS]))
        for c in reversed(inv[:EXP_TERMS]):
            Q = b.add(self.w(_fixed(c)), self.mulshift(Q, R))
        j = b.and_(k, self.i64(63))
        q = b.ashr(k, self.i64(6))
        T = self.load(self.table("alphac_exp2_table", _exp2_table()), j)
        return self.mulshift(T, Q), q

    # -- log in fixed point -----------------------------------------------------------------

    def log_fixed(self, mag, e):
        """log(mag * 2^e) * 2^P (signed i256, to 2^-230 absolute) for mag > 0 of type W."""
        b = self.b
        top = b.sub(self.i64(255), b.trunc(self.ctlz(mag, W), I64))
        right = self.clamp(b.sub(top, self.i64(P)), 0, 255)
        left = self.clamp(b.sub(self.i64(P), top), 0, 255)
        mfix = b.shl(b.lshr(mag, b.zext(right, W)), b.zext(left, W))  # m in [1, 2) at 2^P
        E = b.add(top, e)
        j = b.trunc(b.and_(b.lshr(mfix, self.w(P - 7)), self.w(LOG_TABLE - 1)), I64)
        cs, logs = _log_tables()
        c = self.load(self.table("alphac_log_c", cs), j)
        lc = self.load(self.table("alphac_log_logc", logs), j)
        z = b.sub(self.mulshift(mfix, c), self.w(1 << P))
        coef = [Fraction((-1) ** (n + 1), n) for n in range(1, LOG_TERMS + 1)]
        Q = self.w(_fixed(coef[-1]))
        for a in reversed(coef[:-1]):
            Q = b.add(self.w(_fixed(a)), self.mulshift(Q, z))
        L1 = self.mulshift(Q, z)
        ln2 = self.w(_ln2_fixed(P))
        return b.add(b.add(b.mul(b.sext(E, W), ln2), L1), lc)

    def signed_round(self, v, e, t=W):
        b = self.b
        neg = b.icmp_signed("<", v, ir.Constant(t, 0))
        mag = b.select(neg, b.sub(ir.Constant(t, 0), v), v)
        return self.round_to_double(mag, e, neg, t)
