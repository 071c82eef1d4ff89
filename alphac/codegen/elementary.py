"""The elementary functions of programs, emitted from alphac's own algorithms: no libm, no
`__nv_*`, no intrinsic a target lowers to a library call.

    double alphac_exp(double)    double alphac_log(double)    double alphac_log1p(double)
    double alphac_expm1(double)  double alphac_sigmoid(double) double alphac_tanh(double)

exp, log, log1p and expm1 are *correctly rounded*: the result is the binary64 nearest the
real function's value (ties cannot occur: the values are transcendental but at the exact
points exp(0), log(1), log1p(0), expm1(0), which are handled exactly), subnormal results
rounded once onto the subnormal grid. Every target therefore gives the same word, and the
oracle computes the real function in arbitrary precision and rounds once.

Each is Ziv's strategy in two phases:
  * the fast phase, in binary64 arithmetic (IEEE add, sub, mul, exact products by Dekker's
    splitting, never a fused multiply-add), gives a double-double y_hi + y_lo with a known
    relative error bound e; when rounding y_hi + y_lo*(1 + e) and y_hi + y_lo*(1 - e) gives
    the same word, that word is the correctly rounded result;
  * otherwise the accurate phase computes in two's-complement fixed point with P = 240
    fraction bits (i256 values, i512 products, every step an integer operation, so exact
    and the same on every target): an argument reduction against a constant of 2^-240
    accuracy, a Taylor polynomial truncated far below 2^-200, a 64- or 128-entry table, and
    a final rounding by integer shifts and compares. Its relative error is below 2^-230,
    far beyond the 2^-120 the hardest binary64 cases of exp and log need (Lefevre and
    Muller's worst cases need at most about 2^-118), so its rounding is the correct one.

sigmoid and tanh are *declared algorithms* (docs/language.md "Elementary functions"), each a
fixed sequence of the correctly rounded functions and IEEE basic operations:
    sigmoid(x): a = |x|; e = exp(-a); num = (x >= 0 ? 1 : e); result = num / (1 + e)
    tanh(x):    a = min(|x|, 20); t = expm1(-2 a); r = -t / (t + 2); result = copysign(r, x)
The oracle evaluates the same steps; their error against the real functions is measured by
`alphac conform`.

The functions take finite arguments (programs refuse a non-finite operand before calling
them) and may return a non-finite result (exp(710) is +inf, log(-1) NaN), which the
program's finite-or-refuse check then refuses.
"""

from __future__ import annotations

import functools
import hashlib
import math
from dataclasses import dataclass
from fractions import Fraction

from llvmlite import ir

from alphac.codegen.types import F64, I1, I64, PTR, VOID
from alphac.ir.words import to_float

# The functions and their level, as the numerical contract names them.
CORRECTLY_ROUNDED = ("exp", "log", "log1p", "expm1")
DECLARED = ("sigmoid", "tanh")
LEVELS = {**{f: "correctly-rounded" for f in CORRECTLY_ROUNDED},
          **{f: "declared" for f in DECLARED}}
FUNCTIONS = CORRECTLY_ROUNDED + DECLARED

P = 240                      # fraction bits of the accurate phase
W = ir.IntType(256)          # its values
WW = ir.IntType(512)         # its products
EXP_TERMS = 14               # Taylor degree of exp on |r| <= ln2/128 (remainder < 2^-150)
LOG_TERMS = 24               # degree of log(1 + z) on |z| <= 2^-8 (remainder < 2^-200)
LOG_TABLE = 128              # log's table: m in [1 + j/128, 1 + (j+1)/128)

_SIGN = 1 << 63
_INF_BITS = 0x7FF0000000000000


def _symbol(name: str) -> str:
    return f"alphac_{name}"


# ----------------------------------------------------------------------------- constants
# Computed here with exact rational arithmetic and a few series in integers, so the code
# generator needs no floating-point library either: each constant is round(c * 2^P).

def _fixed(q: Fraction) -> int:
    return round(q * (1 << P))


@functools.lru_cache(maxsize=None)
def _ln2_fixed(bits: int) -> int:
    """round(ln 2 * 2^bits), from ln 2 = sum_{n>=1} 1 / (n 2^n), in integers with 64 guard
    bits (the tail after the last term is below 2^-(bits+64))."""
    g = bits + 64
    total, n = 0, 1
    while (1 << g) >> n:  # terms until 2^(g-n)/n vanishes
        total += ((1 << g) >> n) // n
        n += 1
    return (total + (1 << 63)) >> 64


def _exp_fixed(r: Fraction, bits: int) -> int:
    """round(e^r * 2^bits) for |r| <= 1, by its Taylor series in rationals."""
    total, term, n = Fraction(0), Fraction(1), 0
    bound = Fraction(1, 1 << (bits + 8))
    while abs(term) > bound:
        total += term
        n += 1
        term = term * r / n
    return round(total * (1 << bits))


@functools.lru_cache(maxsize=None)
def _exp2_table() -> tuple[int, ...]:
    """round(2^(j/64) * 2^P), j = 0..63: 2^(j/64) = e^(j ln2 / 64), ln 2 to P+40 bits."""
    ln2 = Fraction(_ln2_fixed(P + 40), 1 << (P + 40))
    return tuple(_exp_fixed(ln2 * j / 64, P) for j in range(64))


def _log_fixed(q: Fraction, bits: int) -> int:
    """round(log(q) * 2^bits) for q in [1/2, 2], by log q = 2 atanh((q-1)/(q+1))."""
    t = (q - 1) / (q + 1)
    total, power, n = Fraction(0), t, 1
    bound = Fraction(1, 1 << (bits + 8))
    while abs(power) > bound:
        total += power / n
        power *= t * t
        n += 2
    return round(2 * total * (1 << bits))


@functools.lru_cache(maxsize=None)
def _log_tables() -> tuple[tuple[int, ...], tuple[int, ...]]:
    """c_j = round(2^P / (1 + (j + 1/2)/128)) and round(-log(c_j / 2^P) * 2^P)."""
    cs, logs = [], []
    for j in range(LOG_TABLE):
        c = round(Fraction(1 << P) / (1 + Fraction(2 * j + 1, 2 * LOG_TABLE)))
        cs.append(c)
        logs.append(-_log_fixed(Fraction(c, 1 << P), P))
    return tuple(cs), tuple(logs)


def _f64(x: float) -> ir.Constant:
    return ir.Constant(F64, x)


def _nearest(q: Fraction) -> float:
    """The binary64 nearest q (Python's Fraction -> float conversion is correctly
    rounded)."""
    return float(q)


def _split(a: float) -> tuple[float, float]:
    """Veltkamp's split of a: a = hi + lo exactly, each of at most 26 significant bits."""
    c = 134217729.0 * a
    hi = c - (c - a)
    return hi, a - hi


@functools.lru_cache(maxsize=None)
def _exp2_fast_table() -> tuple[tuple[float, ...], ...]:
    """For j = 0..63: T_hi (2^(j/64) rounded), its Veltkamp halves, and T_lo = the rest."""
    hi, split_hi, split_lo, lo = [], [], [], []
    for t in _exp2_table():
        q = Fraction(t, 1 << P)
        h = _nearest(q)
        hi.append(h)
        sh, sl = _split(h)
        split_hi.append(sh)
        split_lo.append(sl)
        lo.append(_nearest(q - Fraction(h)))
    return tuple(hi), tuple(split_hi), tuple(split_lo), tuple(lo)


# log's fast phase: z in [LOG_OFF, 2 LOG_OFF) (bit patterns), 128 cells of 2^45 patterns
LOG_OFF = 0x3FE6955500000000  # about 0.7071
LOG_FAST_TERMS = 10  # log1p(r) to r^10/10 on |r| <= 2^-7 (the next term below 2^-73 r)


@functools.lru_cache(maxsize=None)
def _log_fast_table() -> tuple[tuple[float, ...], ...]:
    """For each cell i: c_i (1 / the cell's centre, rounded to 26 significant bits, so that
    it is its own Veltkamp high half; exactly 1 for the cell holding 1.0, so that near 1
    r = z - 1 is exact), and -log(c_i) as a double-double."""
    one = (0x3FF0000000000000 - LOG_OFF) >> 45
    cs, hi, lo = [], [], []
    for i in range(128):
        z0 = Fraction(to_float(LOG_OFF + (i << 45)))
        z1 = Fraction(to_float(LOG_OFF + ((i + 1) << 45)))
        if i == one:
            c = Fraction(1)
        else:
            inv = 2 / (z0 + z1)
            e = math.floor(math.log2(inv))
            c = Fraction(round(inv * 2 ** (25 - e))) * Fraction(2) ** (e - 25)
        cs.append(float(c))
        minus_log = Fraction(-_log_fixed(c, P), 1 << P) if c != 1 else Fraction(0)
        h = float(minus_log)
        hi.append(h)
        lo.append(float(minus_log - Fraction(h)))
    return tuple(cs), tuple(hi), tuple(lo)


_LN2 = Fraction(_ln2_fixed(P), 1 << P)
_LN2_HI = float(Fraction(round(_LN2 * (1 << 42)), 1 << 42))  # k ln2_hi exact for |k| < 2^11
_LN2_LO = float(_LN2 - Fraction(_LN2_HI))


# exp's fast phase: ln2/64 = L1 + L2 (+ < 2^-96), L1 with 35 significant bits so that k L1
# is exact for |k| < 2^18
_LN2_64 = Fraction(_ln2_fixed(P + 40), 1 << (P + 46))
_L1 = float(Fraction(round(_LN2_64 * (1 << 42)), 1 << 42))
_L2 = float(_LN2_64 - Fraction(_L1))
# the rounding test's relative error of every fast phase (exp, expm1, log, log1p): their
# bound, 2^-66, with a factor 8 of margin
FAST_ERROR = 2.0 ** -63


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


def _within(b, x, lo: float, hi: float):
    return b.and_(b.fcmp_ordered(">=", x, _f64(lo)), b.fcmp_ordered("<=", x, _f64(hi)))


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

