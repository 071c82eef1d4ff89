"""The oracle's elementary functions: the real function, computed in arbitrary precision
with mpmath (gmpy2 its backend when installed) and rounded once to binary64.

exp, log, log1p and expm1 are *correctly rounded*: `correctly_rounded(name, x)` is the
binary64 nearest the real value (round to nearest, ties to even; a value beyond the largest
finite one rounds to infinity; a value below 2^-1022 is rounded directly onto the subnormal
grid of 2^-1074, never first to 53 bits and then again). It follows Ziv's strategy: the
real value y is computed at a working precision of p bits, with a relative error below
2^(GUARD - p) (mpmath evaluates these functions with internal guard bits and rounds to p
bits; GUARD leaves it 2^GUARD units of its last place); when y - err and y + err round to
the same binary64 word, that word is the correctly rounded result, otherwise p doubles.
The values are transcendental except at the exact points exp(0) = 1, log(1) = 0,
log1p(+-0) = +-0 and expm1(+-0) = +-0, which are returned exactly, so the loop ends.

This module knows nothing of any kernel's algorithm: it is the reference the kernels
(alphac/codegen/elementary/) are compared with.

sigmoid and tanh are *declared algorithms*, exactly these binary64 steps, in this order
(exp and expm1 the correctly rounded ones, every other operation an IEEE basic operation):

    sigmoid(x): a = abs(x); e = exp(-a); num = 1.0 if x >= 0 else e; d = 1.0 + e; num / d
    tanh(x):    a = min(abs(x), 20.0); t = expm1(-2.0 * a); r = -t / (t + 2.0); copysign(r, x)

`real(name, x, prec)` is the real function's value itself (for every name, sigmoid and tanh
included), as a raw mpf; `alphac conform` measures the kernels' errors against it.
"""

from __future__ import annotations

import math
from collections import OrderedDict

import numpy as np
from mpmath import libmp
from mpmath.libmp import (fone, fzero, from_float, from_man_exp, mpf_add, mpf_div,
                          mpf_exp, mpf_ln, mpf_mul, mpf_neg, mpf_shift, mpf_sub,
                          mpf_tanh, normalize, round_nearest)
from mpmath.libmp.libelefun import mpf_log1p

CORRECTLY_ROUNDED = ("exp", "log", "log1p", "expm1")
DECLARED = ("sigmoid", "tanh")
FUNCTIONS = CORRECTLY_ROUNDED + DECLARED
LEVELS = {**{f: "correctly-rounded" for f in CORRECTLY_ROUNDED},
          **{f: "declared" for f in DECLARED}}

START_PREC = 128      # Ziv's first working precision (bits)
MAX_PREC = 1 << 16    # never reached: no binary64 argument needs more than a few hundred
GUARD = 8             # the error bound allowed at working precision p: 2^(GUARD - p) relative
TANH_CLAMP = 20.0     # the declared tanh's switch point

# |x| beyond which exp and expm1 are certain to overflow (e^800 > 2^1154) or to round to
# 0 / -1 (e^-800 < 2^-1154): no evaluation is needed there.
_FAR = 800.0
# The largest finite binary64, 2^1024 (1 - 2^-53); values at or above 2^1024 - 2^970 round
# to infinity.
_MAX_TOP = 1024

CACHE_LIMIT = 1 << 16  # evaluate_array's in-process cache: (name, argument bits) -> result


class _Undecided(Exception):
    pass


def _check(name: str) -> None:
    if name not in FUNCTIONS:
        raise ValueError(f"unknown elementary function {name!r}; one of {', '.join(FUNCTIONS)}")


# ----------------------------------------------------------------------------- rounding

def to_binary64(t) -> float:
    """The binary64 nearest the raw mpf `t` (ties to even), rounded once: onto 53 bits for a
    normal result, directly onto the 2^-1074 grid for a subnormal one; +-inf beyond the
    largest finite number."""
    sign, man, exp, bc = t
    if not man:
        if t == fzero:
            return 0.0
        return libmp.to_float(t)  # inf, -inf, nan
    top = exp + bc  # 2^(top-1) <= |t| < 2^top
    neg = bool(sign)
    if top > _MAX_TOP:
        return -math.inf if neg else math.inf
    if top <= -1074:
        # |t| < 2^-1074, the smallest subnormal: below 2^-1075 it rounds to 0; exactly
        # 2^-1075 is a tie, to the even 0; above it, 2^-1074
        if top < -1074 or (man == 1 and exp == -1075):
            return -0.0 if neg else 0.0
        return -5e-324 if neg else 5e-324
    bits = min(53, top + 1074)  # a subnormal keeps the bits down to 2^-1074
    sign, man, exp, bc = normalize(sign, man, exp, bc, bits, round_nearest)
    if exp + bc > _MAX_TOP:
        return -math.inf if neg else math.inf
    value = math.ldexp(int(man), exp)  # exact: at most 53 bits, on the binary64 grid
    return -value if neg else value


def _rounded(y, prec: int) -> float:
    """Ziv's test: the binary64 word both y - err and y + err round to, err = 2^(GUARD -
    prec) |y|; _Undecided where they differ."""
    sign, man, exp, bc = y
    if not man:
        return to_binary64(y)
    err = from_man_exp(1, exp + bc - prec + GUARD)
    lo = to_binary64(mpf_sub(y, err))  # exact: prec 0
    hi = to_binary64(mpf_add(y, err))
    if lo != hi or math.copysign(1.0, lo) != math.copysign(1.0, hi):
        raise _Undecided
    return lo


# ----------------------------------------------------------------------------- real values

def _expm1(t, prec: int):
    sign, man, exp, bc = t
    mag = exp + bc  # |x| < 2^mag
    if mag < -(prec + 4):
        # e^x - 1 = x + x^2/2 + x^3/6 + ...: the terms left out are below 2^-(2 prec) |x|
        return mpf_add(t, mpf_shift(mpf_mul(t, t), -1), prec + 4, round_nearest)
    # e^x - 1 cancels about -mag bits for |x| < 1: compute e^x with that many more
    wp = prec + max(0, -mag) + 10
    return mpf_sub(mpf_exp(t, wp, round_nearest), fone, prec, round_nearest)


def _sigmoid(t, prec: int):
    wp = prec + 10
    e = mpf_exp(mpf_neg(t), wp, round_nearest)
    return mpf_div(fone, mpf_add(fone, e, wp, round_nearest), prec, round_nearest)


def real(name: str, x: float, prec: int = START_PREC):
    """The real function at the finite binary64 x, as a raw mpf of `prec` bits with a
    relative error below 2^(GUARD - prec); None where it is not a finite real number (log of
    0 or a negative number, log1p at or below -1). Exact at the exact points."""
    _check(name)
    if not math.isfinite(x):
        raise ValueError(f"real({name}, {x!r}): the argument is not finite")
    t = from_float(x)
    if x == 0.0:
        if name == "exp":
            return fone
        if name == "sigmoid":
            return from_man_exp(1, -1)
        if name == "log":
            return None
        return fzero
    if name == "exp":
        return mpf_exp(t, prec, round_nearest)
    if name == "log":
        return None if x < 0.0 else mpf_ln(t, prec, round_nearest)
    if name == "log1p":
        return None if x <= -1.0 else mpf_log1p(t, prec, round_nearest)
    if name == "expm1":
        return _expm1(t, prec)
    if name == "sigmoid":
        return _sigmoid(t, prec)
    return mpf_tanh(t, prec, round_nearest)


# ----------------------------------------------------------------------------- correctly rounded

def special(name: str, x: float):
    """The result where no evaluation is needed (non-finite arguments, the exact points,
    results certain to overflow or to round to a constant); None elsewhere."""
    if math.isnan(x):
        return x
    if name == "exp":
        if x == 0.0:
            return 1.0
        if x > _FAR:
            return math.inf
        if x < -_FAR:
            return 0.0
    elif name == "expm1":
        if x == 0.0:
            return x  # keeps its sign
        if x > _FAR:
            return math.inf
        if x < -_FAR:
            return -1.0
    elif name == "log":
        if x == 0.0:
            return -math.inf  # log(+-0)
        if x < 0.0:
            return math.nan
        if x == 1.0:
            return 0.0
        if x == math.inf:
            return math.inf
    elif name == "log1p":
        if x == 0.0:
            return x  # keeps its sign
        if x == -1.0:
            return -math.inf
        if x < -1.0:
            return math.nan
        if x == math.inf:
            return math.inf
    return None


def correctly_rounded(name: str, x: float) -> float:
    """exp, log, log1p or expm1 of the binary64 x, correctly rounded (module docstring)."""
    if name not in CORRECTLY_ROUNDED:
        raise ValueError(f"{name!r} is not correctly rounded; one of {', '.join(CORRECTLY_ROUNDED)}")
    x = float(x)
    fixed = special(name, x)
    if fixed is not None:
        return fixed
    return rounded_from(name, x, real(name, x, START_PREC), START_PREC)


def rounded_from(name: str, x: float, y, prec: int) -> float:
    """The correctly rounded result, starting Ziv's loop from y = real(name, x, prec)."""
    while True:
        try:
            return _rounded(y, prec)
        except _Undecided:
            prec *= 2
            if prec > MAX_PREC:
                raise ArithmeticError(f"{name}({x.hex()}) is not decided at {MAX_PREC} bits")
            y = real(name, x, prec)


# ----------------------------------------------------------------------------- the oracle

def _declared(name: str, x: float) -> float:
    if name == "sigmoid":
        a = abs(x)
        e = correctly_rounded("exp", -a)
        num = 1.0 if x >= 0.0 else e
        d = 1.0 + e
        return num / d
    a = min(abs(x), TANH_CLAMP)
    t = correctly_rounded("expm1", -2.0 * a)
    r = -t / (t + 2.0)
    return math.copysign(r, x)


def evaluate(name: str, x: float) -> float:
    """The oracle's value of `name` at x: correctly rounded for exp, log, log1p, expm1; the
    declared algorithm for sigmoid and tanh."""
    _check(name)
    x = float(x)
    if name in DECLARED:
        if math.isnan(x):
            return x
        return _declared(name, x)
    return correctly_rounded(name, x)


_cache: OrderedDict = OrderedDict()


def evaluate_array(name: str, xs) -> np.ndarray:
    """`evaluate` element-wise over a float64 array (any shape): each distinct argument is
    evaluated once, and recent results are kept in a bounded in-process cache."""
    _check(name)
    x = np.asarray(xs, dtype=np.float64)
    flat = np.ascontiguousarray(x).reshape(-1)
    # unique by bit pattern, so -0.0 and +0.0 (and NaN payloads) stay apart
    words, inverse = np.unique(flat.view(np.uint64), return_inverse=True)
    values = np.empty(words.shape, dtype=np.float64)
    for i, (w, v) in enumerate(zip(words.tolist(), words.view(np.float64).tolist())):
        key = (name, w)
        got = _cache.get(key)
        if got is None:
            got = evaluate(name, v)
            _cache[key] = got
            if len(_cache) > CACHE_LIMIT:
                _cache.popitem(last=False)
        else:
            _cache.move_to_end(key)
        values[i] = got
    return values[inverse.reshape(-1)].reshape(x.shape)


def clear_cache() -> None:
    _cache.clear()


__all__ = ["CORRECTLY_ROUNDED", "DECLARED", "FUNCTIONS", "LEVELS", "correctly_rounded",
           "evaluate", "evaluate_array", "real", "rounded_from", "special", "to_binary64",
           "clear_cache"]
