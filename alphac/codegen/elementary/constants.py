"""The elementary functions' names and levels, and their constants: the fixed-point
constants and tables of the accurate phases (exact rational arithmetic and integer series,
no floating-point library) and the binary64 tables of the fast phases."""

from __future__ import annotations

import functools
import math
from fractions import Fraction

from llvmlite import ir

from alphac.codegen.types import F64
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
