"""The arguments `alphac conform` measures each elementary function on
(alphac/qualify/conform.py), per function, all finite and in the domain where the result
is finite:
  * `hard-cases`: the arguments of HARD_CASES (hard to round, each with its source);
  * `boundary` (a fifth of the rest): the regions of BOUNDARIES, near the overflow and
    underflow thresholds, zero and the subnormals, 1 for log, -1 for log1p, 20 for tanh;
  * `random-words` (half of what is left): uniformly random 64-bit words (sign, exponent
    and significand), kept where they are arguments of the domain;
  * `linear`: uniform on the ranges of LINEAR.
They depend on the seed and the count alone, not on the number of jobs.
"""

from __future__ import annotations

import sys

import numpy as np

from alphac.oracle.elementary import FUNCTIONS


# The largest x whose exp (and expm1) is finite: e^x < 2^1024 (1 - 2^-54) there and not at
# the next binary64 (tests/e2e/test_conform.py checks both).
EXP_MAX = float.fromhex("0x1.62e42fefa39efp+9")        # 709.782712893384
# The largest x whose exp rounds to 0: e^x < 2^-1075 there, not at the next binary64.
EXP_ZERO = float.fromhex("-0x1.74910d52d3052p+9")      # -745.1332191019412
# The largest x whose exp is subnormal (rounds below 2^-1022).
EXP_SUBNORMAL = float.fromhex("-0x1.6232bdd7abcd3p+9")  # -708.3964185322642
LARGEST = sys.float_info.max

# Arguments whose results are hard to round, with their source. Each value's run of
# identical bits after the rounding position is checked by tests/e2e/test_conform.py.
HARD_CASES: dict[str, tuple[tuple[str, str], ...]] = {
    "exp": (
        # V. Lefevre, J.-M. Muller, "Worst cases for correct rounding of the elementary
        # functions in double precision", ARITH-15 (2001): the worst case of exp for
        # round-to-nearest, e^x = 1.0000000007541752..., 57 identical bits after the
        # rounding bit
        ("0x1.9e9cbbfd6080bp-31", "Lefevre & Muller 2001, exp worst case (nearest)"),
        # e^x = 1 + x + x^2/2 + ...: at x = j 2^-53 (j odd) 1 + x is a midpoint of [1, 2)
        # and e^x exceeds it by j^2 2^-107; at x = -j 2^-54, 1 + x is a midpoint of [1/2, 1)
        ("0x1p-53", "Taylor series: 1 + 2^-53 is a midpoint"),
        ("0x1.8p-52", "Taylor series: 1 + 3 2^-53 is a midpoint"),
        ("0x1.4p-51", "Taylor series: 1 + 5 2^-53 is a midpoint"),
        ("-0x1p-54", "Taylor series: 1 - 2^-54 is a midpoint"),
        ("-0x1.8p-53", "Taylor series: 1 - 3 2^-54 is a midpoint"),
    ),
    "log": (
        # J.-M. Muller, "Elementary Functions: Algorithms and Implementation" (and Lefevre &
        # Muller 2001): log x = 470.2797657541441..., 64 zeros after the last bit: the worst
        # case of log for the directed roundings
        ("0x1.62a88613629b6p+678", "Lefevre & Muller 2001, log worst case (directed)"),
    ),
    "log1p": (
        # log1p(x) = x - x^2/2 + ...: 2^-53 - 2^-107 is a midpoint of [2^-54, 2^-53), and
        # -(2^-52 + 2^-105) one of [2^-52, 2^-51)
        ("0x1p-53", "Taylor series: 2^-53 - 2^-107 is a midpoint"),
        ("-0x1p-52", "Taylor series: -(2^-52 + 2^-105) is a midpoint"),
    ),
    "expm1": (
        # expm1(x) = x + x^2/2 + ...: 2^-52 + 2^-105 is a midpoint of [2^-52, 2^-51), and
        # -(2^-53 - 2^-107) one of [2^-54, 2^-53)
        ("0x1p-52", "Taylor series: 2^-52 + 2^-105 is a midpoint"),
        ("-0x1p-53", "Taylor series: -(2^-53 - 2^-107) is a midpoint"),
    ),
    "sigmoid": (),
    "tanh": (),
}

# Boundary regions: ("ulps", p, k) the binary64 numbers within k steps of p; ("interval",
# lo, hi) uniform on [lo, hi]; ("binades", sign, lo, hi) random words of magnitude in
# [2^lo, 2^hi) (lo = -1074: the subnormals too), sign +1, -1 or 0 (either).
BOUNDARIES: dict[str, tuple] = {
    "exp": (("ulps", EXP_MAX, 4096), ("interval", 700.0, EXP_MAX),
            ("ulps", EXP_ZERO, 4096), ("interval", -745.2, EXP_SUBNORMAL),
            ("ulps", EXP_SUBNORMAL, 4096), ("binades", 0, -1074, -20)),
    "log": (("ulps", 1.0, 4096), ("interval", 1.0 - 2.0 ** -8, 1.0 + 2.0 ** -8),
            ("binades", 1, -1074, -1022), ("ulps", 2.0 ** -1022, 4096),
            ("ulps", LARGEST, 4096), ("interval", 0.5, 2.0)),
    "log1p": (("ulps", -1.0, 4096), ("interval", -1.0, -1.0 + 2.0 ** -10),
              ("binades", 0, -1074, -20), ("ulps", LARGEST, 4096),
              ("interval", -0.5, 1.0)),
    "expm1": (("ulps", EXP_MAX, 4096), ("interval", 700.0, EXP_MAX),
              ("interval", -40.0, -36.0), ("binades", 0, -1074, -20),
              ("interval", -1.0, 1.0)),
    "sigmoid": (("binades", 0, -1074, -20), ("interval", -746.0, -700.0),
                ("interval", 30.0, 40.0), ("interval", -1.0, 1.0)),
    "tanh": (("ulps", 20.0, 4096), ("ulps", -20.0, 4096), ("interval", 19.0, 21.0),
             ("interval", -21.0, -19.0), ("binades", 0, -1074, -20), ("interval", -1.0, 1.0)),
}

# Uniform ranges of the `linear` arguments, the count split evenly between them.
LINEAR: dict[str, tuple[tuple[float, float], ...]] = {
    "exp": ((-745.2, EXP_MAX),),
    "log": ((0.0, 4.0), (0.0, 1e6)),
    "log1p": ((-1.0, 4.0),),
    "expm1": ((-40.0, 40.0), (-40.0, EXP_MAX)),
    "sigmoid": ((-40.0, 40.0),),
    "tanh": ((-40.0, 40.0),),
}

REGIONS = ("hard-cases", "boundary", "random-words", "linear")



# ----------------------------------------------------------------------------- arguments

def in_domain(name: str, x: np.ndarray) -> np.ndarray:
    """Where x is finite and the function's result is finite."""
    ok = np.isfinite(x)
    if name in ("exp", "expm1"):
        ok &= x <= EXP_MAX
    elif name == "log":
        ok &= x > 0.0
    elif name == "log1p":
        ok &= x > -1.0
    return ok


_SIGN = np.uint64(1 << 63)


def _ordered(x: np.ndarray) -> np.ndarray:
    """binary64 numbers as integers in their order (-0.0 and +0.0 both 0)."""
    bits = x.view(np.uint64)
    mag = (bits & ~_SIGN).astype(np.int64)
    return np.where(bits & _SIGN, -mag, mag)


def _from_ordered(n: np.ndarray) -> np.ndarray:
    mag = np.abs(n).astype(np.uint64)
    return np.where(n < 0, mag | _SIGN, mag).view(np.float64)


def _region(kind: tuple, n: int, rng: np.random.Generator) -> np.ndarray:
    if n <= 0:
        return np.empty(0)
    if kind[0] == "ulps":
        p, k = kind[1], kind[2]
        steps = np.arange(1, n + 1) // 2 * np.where(np.arange(1, n + 1) % 2, -1, 1)  # 0, 1, -1, 2, ...
        steps = steps[np.abs(steps) <= k] if n > 2 * k + 1 else steps
        return _from_ordered(_ordered(np.array([p]))[0] + steps.astype(np.int64))
    if kind[0] == "interval":
        return rng.uniform(kind[1], kind[2], n)
    _, sign, lo, hi = kind
    # magnitudes 2^e (1 + f), e uniform in [lo, hi), as words: the subnormals (lo = -1074)
    # are the exponent field 0, one word range among the binades
    lo_field, hi_field = max(lo + 1023, 0), hi + 1023
    fields = rng.integers(lo_field, hi_field, n, dtype=np.int64).astype(np.uint64)
    mantissa = rng.integers(0, 1 << 52, n, dtype=np.int64).astype(np.uint64)
    words = (fields << np.uint64(52)) | mantissa
    signs = rng.integers(0, 2, n).astype(bool) if sign == 0 else np.full(n, sign < 0)
    words = np.where(signs, words | _SIGN, words)
    return words.view(np.float64)


def _words(name: str, n: int, rng: np.random.Generator) -> np.ndarray:
    out, have = [], 0
    while have < n:
        words = rng.integers(0, np.iinfo(np.uint64).max, max(2 * (n - have), 1024),
                             dtype=np.uint64, endpoint=True)
        x = words.view(np.float64)
        x = x[in_domain(name, x)]
        out.append(x)
        have += len(x)
    return np.concatenate(out)[:n] if out else np.empty(0)


def _filled(name: str, parts: list[np.ndarray], n: int, rng: np.random.Generator,
            fallback: tuple) -> np.ndarray:
    """The parts' arguments in the domain, topped up to n from `fallback` (an interval)."""
    x = np.concatenate(parts) if parts else np.empty(0)
    x = x[in_domain(name, x)]
    while len(x) < n:
        more = rng.uniform(fallback[0], fallback[1], n - len(x))
        x = np.concatenate([x, more[in_domain(name, more)]])
    return x[:n]


def arguments(name: str, count: int, seed: int) -> dict[str, np.ndarray]:
    """The `count` arguments of `name`, by region (module docstring)."""
    rng = np.random.default_rng([seed, FUNCTIONS.index(name)])
    hard = np.array([float.fromhex(h) for h, _ in HARD_CASES[name]], dtype=np.float64)[:count]
    rest = count - len(hard)
    n_boundary = rest // 5
    n_words = (rest - n_boundary) // 2
    n_linear = rest - n_boundary - n_words
    kinds = BOUNDARIES[name]
    share = [n_boundary // len(kinds) + (i < n_boundary % len(kinds)) for i in range(len(kinds))]
    boundary = _filled(name, [_region(k, s, rng) for k, s in zip(kinds, share)], n_boundary, rng,
                       LINEAR[name][0])
    ranges = LINEAR[name]
    split = [n_linear // len(ranges) + (i < n_linear % len(ranges)) for i in range(len(ranges))]
    linear = _filled(name, [rng.uniform(lo, hi, s) for (lo, hi), s in zip(ranges, split)],
                     n_linear, rng, ranges[0])
    return {"hard-cases": hard, "boundary": boundary, "random-words": _words(name, n_words, rng),
            "linear": linear}
