"""The oracle's elementary functions (alphac/oracle/elementary.py): correctly rounded exp,
log, log1p and expm1 (known values, signed zeros, subnormal results rounded once, overflow,
Ziv's loop), the declared sigmoid and tanh, and evaluate_array."""

from __future__ import annotations

import math
import random

import mpmath
import numpy as np
import pytest
from mpmath.libmp import from_man_exp

from alphac.oracle import elementary as E
from alphac.oracle.elementary import correctly_rounded as cr


def same(a: float, b: float) -> bool:
    """The same binary64 word (signed zeros apart, NaNs alike)."""
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    return a == b and math.copysign(1.0, a) == math.copysign(1.0, b)


def ulps_apart(a: float, b: float) -> int:
    def ordered(x):
        n = int(np.float64(x).view(np.int64))
        return n if n >= 0 else -(n & 0x7FFFFFFFFFFFFFFF)
    return abs(ordered(a) - ordered(b))


# ----------------------------------------------------------------------------- known values

def test_known_values():
    assert cr("exp", 1.0) == 2.718281828459045
    assert cr("log", 2.0) == 0.6931471805599453
    assert cr("log", 10.0) == 2.302585092994046
    assert cr("exp", -1.0) == 0.36787944117144233
    assert cr("expm1", 1.0) == 1.7182818284590453  # e - 1 = 1.71828182845904523536...
    assert cr("log1p", 1.0) == 0.6931471805599453
    assert cr("log", math.e) == 1.0
    # the hardest case of exp for round-to-nearest (Lefevre & Muller 2001): e^x lies 2^-58
    # of an ulp above the midpoint between ...397 and ...398
    assert cr("exp", float.fromhex("0x1.9e9cbbfd6080bp-31")) == float.fromhex("0x1.000000033d398p+0")


def test_overflow_and_the_largest_finite_result():
    assert math.isfinite(cr("exp", 709.78))
    assert cr("exp", 709.78) == 1.7928227943945155e+308
    assert cr("exp", 710.0) == math.inf
    top = float.fromhex("0x1.62e42fefa39efp+9")
    for name in ("exp", "expm1"):
        assert math.isfinite(cr(name, top))
        assert cr(name, math.nextafter(top, math.inf)) == math.inf
    assert cr("exp", 1e308) == math.inf and cr("expm1", 1e308) == math.inf
    assert cr("log", sys_max()) == 709.782712893384
    assert cr("log1p", sys_max()) == 709.782712893384


def sys_max() -> float:
    import sys

    return sys.float_info.max


def test_subnormal_results_of_exp():
    assert cr("exp", -745.0) == 5e-324                 # e^-745 = 0.57 * 2^-1074
    zero_at = float.fromhex("-0x1.74910d52d3052p+9")    # just below log(2^-1075)
    assert same(cr("exp", zero_at), 0.0)
    assert cr("exp", math.nextafter(zero_at, 0.0)) == 5e-324
    assert same(cr("exp", -1000.0), 0.0) and same(cr("exp", -1e308), 0.0)
    rng = random.Random(7)
    for _ in range(300):
        x = rng.uniform(-745.0, -708.4)
        y = cr("exp", x)
        assert 0.0 < y < 2.0 ** -1022
        assert ulps_apart(y, math.exp(x)) <= 1
        # the subnormal grid: a whole multiple of 2^-1074
        assert math.ldexp(y, 1074) == int(math.ldexp(y, 1074))


def test_tiny_arguments_return_themselves():
    for x in (1e-300, -1e-300, 5e-324, -5e-324, 2.0 ** -60, -(2.0 ** -60), 2.2250738585072014e-308):
        assert same(cr("expm1", x), x)
        assert same(cr("log1p", x), x)
        assert cr("exp", x) == 1.0


def test_signed_zeros_and_exact_points():
    assert same(cr("log1p", 0.0), 0.0) and same(cr("log1p", -0.0), -0.0)
    assert same(cr("expm1", 0.0), 0.0) and same(cr("expm1", -0.0), -0.0)
    assert same(cr("exp", 0.0), 1.0) and same(cr("exp", -0.0), 1.0)
    assert same(cr("log", 1.0), 0.0)
    assert cr("log", 0.0) == -math.inf and cr("log", -0.0) == -math.inf
    assert math.isnan(cr("log", -1.0)) and math.isnan(cr("log", -5e-324))
    assert cr("log1p", -1.0) == -math.inf
    assert math.isnan(cr("log1p", -1.5))
    assert same(E.evaluate("tanh", -0.0), -0.0) and same(E.evaluate("tanh", 0.0), 0.0)
    assert E.evaluate("sigmoid", -0.0) == 0.5 and E.evaluate("sigmoid", 0.0) == 0.5
    assert math.isnan(cr("exp", math.nan)) and math.isnan(E.evaluate("tanh", math.nan))


def test_non_finite_arguments():
    assert cr("exp", math.inf) == math.inf and same(cr("exp", -math.inf), 0.0)
    assert cr("expm1", -math.inf) == -1.0 and cr("log", math.inf) == math.inf
    assert cr("log1p", math.inf) == math.inf
    assert E.evaluate("sigmoid", math.inf) == 1.0 and same(E.evaluate("sigmoid", -math.inf), 0.0)
    assert E.evaluate("tanh", math.inf) == 1.0 and E.evaluate("tanh", -math.inf) == -1.0


# ----------------------------------------------------------------------------- rounding once

def test_subnormal_rounding_is_not_double_rounding():
    # (1.5 - 2^-60) * 2^-1074: once onto the subnormal grid it is 1 * 2^-1074; first to 53
    # bits (1.5 exactly) and then to the grid (a tie, to even) it would be 2 * 2^-1074
    v = from_man_exp((3 << 59) - 1, -1074 - 60)
    assert E.to_binary64(v) == 5e-324
    # (2.5 + 2^-60) * 2^-1074 rounds up, 2.5 * 2^-1074 ties to even (2)
    assert E.to_binary64(from_man_exp((5 << 60) + 2, -1074 - 61)) == 3 * 5e-324
    assert E.to_binary64(from_man_exp(5, -1075)) == 2 * 5e-324
    # below half the smallest subnormal: 0; exactly half: the even 0; above: 2^-1074
    assert same(E.to_binary64(from_man_exp(1, -1076)), 0.0)
    assert same(E.to_binary64(from_man_exp(1, -1075)), 0.0)
    assert E.to_binary64(from_man_exp(3, -1076)) == 5e-324
    assert same(E.to_binary64(from_man_exp(-1, -1076)), -0.0)
    # the largest subnormal rounding up to the smallest normal
    assert E.to_binary64(from_man_exp((1 << 60) - 1, -1022 - 60)) == 2.0 ** -1022


def test_ties_to_even_and_overflow():
    assert E.to_binary64(from_man_exp((1 << 53) + 1, -53)) == 1.0
    assert E.to_binary64(from_man_exp((1 << 53) + 3, -53)) == 1.0 + 2.0 ** -51
    top = (1 << 54) - 1                              # 2^1024 - 2^970: between max and 2^1024
    assert E.to_binary64(from_man_exp(top, 970)) == math.inf
    assert E.to_binary64(from_man_exp((top << 8) - 1, 962)) == sys_max()
    assert E.to_binary64(from_man_exp(-top, 970)) == -math.inf


def test_zivs_loop_retries_at_a_higher_precision():
    # at 60 bits the hard case is undecided (err 2^-52 of e^x); the loop doubles and decides
    x = float.fromhex("0x1.9e9cbbfd6080bp-31")
    assert E.rounded_from("exp", x, E.real("exp", x, 60), 60) == cr("exp", x)
    for name, x in (("log", 3.0), ("log1p", 1e-5), ("expm1", -0.3)):
        assert E.rounded_from(name, x, E.real(name, x, 40), 40) == cr(name, x)


# ----------------------------------------------------------------------------- libm

@pytest.mark.parametrize("name, f, lo, hi, most", [
    ("exp", math.exp, -700.0, 700.0, 0.99),
    ("log", math.log, 1e-300, 1e300, 0.99),
    ("log1p", math.log1p, -0.999, 10.0, 0.8),
    ("expm1", math.expm1, -40.0, 40.0, 0.8),
])
def test_agreement_with_libm_within_one_ulp(name, f, lo, hi, most):
    """libm is not required to round correctly: within 1 ulp everywhere, exactly on most."""
    rng = random.Random(name)
    n, exact = 3000, 0
    for _ in range(n):
        x = math.exp(rng.uniform(math.log(lo), math.log(hi))) if name == "log" else rng.uniform(lo, hi)
        got, lib = cr(name, x), f(x)
        assert ulps_apart(got, lib) <= 1, (name, x.hex(), got, lib)
        exact += got == lib
    assert exact >= most * n


def test_correctly_rounded_against_mpmath_at_high_precision():
    rng = random.Random(3)
    with mpmath.workprec(400):
        for _ in range(400):
            x = rng.uniform(-30.0, 30.0)
            for name, f in (("exp", mpmath.exp), ("expm1", mpmath.expm1)):
                assert cr(name, x) == float(f(mpmath.mpf(x)))
            ax = abs(x) + 1e-9
            assert cr("log", ax) == float(mpmath.log(mpmath.mpf(ax)))
            assert cr("log1p", ax) == float(mpmath.log1p(mpmath.mpf(ax)))


# ----------------------------------------------------------------------------- declared algorithms

def test_declared_algorithms_follow_their_steps():
    rng = random.Random(11)
    for _ in range(500):
        x = rng.uniform(-40.0, 40.0)
        a = abs(x)
        e = cr("exp", -a)
        assert same(E.evaluate("sigmoid", x), (1.0 if x >= 0 else e) / (1.0 + e))
        t = cr("expm1", -2.0 * min(a, 20.0))
        assert same(E.evaluate("tanh", x), math.copysign(-t / (t + 2.0), x))
    assert E.evaluate("tanh", 25.0) == E.evaluate("tanh", 20.0) == 1.0
    assert E.evaluate("sigmoid", -745.0) == 5e-324


def test_declared_algorithms_are_close_to_the_real_functions():
    rng = random.Random(5)
    for _ in range(500):
        x = rng.uniform(-20.0, 20.0)
        for name, f in (("sigmoid", lambda v: 1 / (1 + mpmath.exp(-v))), ("tanh", mpmath.tanh)):
            with mpmath.workprec(200):
                true = float(f(mpmath.mpf(x)))
            assert ulps_apart(E.evaluate(name, x), true) <= 3


# ----------------------------------------------------------------------------- arrays

def test_evaluate_array_keeps_shape_signs_and_agrees_with_evaluate():
    x = np.array([[0.0, -0.0, 1.0], [1.0, -2.5, 1e-300]])
    for name in E.FUNCTIONS:
        got = E.evaluate_array(name, x)
        assert got.shape == x.shape and got.dtype == np.float64
        for g, v in zip(got.ravel().tolist(), x.ravel().tolist()):
            assert same(g, E.evaluate(name, v))
    assert same(E.evaluate_array("expm1", np.array([-0.0]))[0], -0.0)
    assert E.evaluate_array("exp", np.array([])).shape == (0,)


def test_evaluate_array_cache_is_bounded(monkeypatch):
    monkeypatch.setattr(E, "CACHE_LIMIT", 16)
    E.clear_cache()
    xs = np.linspace(-3.0, 3.0, 100)
    first = E.evaluate_array("exp", xs)
    assert len(E._cache) == 16
    assert np.array_equal(E.evaluate_array("exp", xs), first)
    E.clear_cache()


def test_unknown_names_are_refused():
    with pytest.raises(ValueError):
        E.evaluate("sin", 1.0)
    with pytest.raises(ValueError):
        cr("tanh", 1.0)
