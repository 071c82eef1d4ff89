"""One update of least squares on four owners holding 1, 2, 3 and 0 samples, worked out
independently: exact rational arithmetic per operation, each result rounded to binary64
(float(Fraction) rounds correctly), square roots by integer square roots."""

from __future__ import annotations

import math
from fractions import Fraction

import pytest

from alphac.ir.nodes import Hierarchy, Star
from alphac.oracle import evaluate

from test_oracle_learners import (
    B1, B2, BETA, EPS, GATE_RATE, GATE_ROWS, GATE_SHARES, GATE_W0, bits, gate)

F = Fraction


def R(q: Fraction) -> Fraction:
    """Round an exact rational to the nearest binary64 (ties to even)."""
    x = float(q)
    assert math.isfinite(x)
    return F(x)


def sqrt_rn(q: Fraction) -> Fraction:
    """The correctly rounded square root of a binary64 value q >= 0."""
    num, den = q.numerator, q.denominator
    assert den & (den - 1) == 0, "a binary64 value has a power-of-two denominator"
    e = den.bit_length() - 1  # q = num / 2**e
    if e % 2:
        num, e = num * 2, e + 1
    p = 200
    scaled = num << (2 * p)
    r = math.isqrt(scaled)
    # the root lies in [r, r+1); any point strictly inside rounds like it (no binary64
    # rounding boundary at this scale falls strictly between two integers)
    exact = F(r) if r * r == scaled else F(2 * r + 1, 2)
    return R(exact / 2 ** (p + e // 2))


def leaf_sums(w):
    """Each owner's (Σ contribution, n), samples in order, sums from +0.0."""
    out, row = [], 0
    for share in GATE_SHARES:
        acc = [F(0), F(0)]
        for _ in range(share):
            x0, x1, y = (F(v) for v in GATE_ROWS[row])
            row += 1
            r = R(R(R(w[0] * x0) + R(w[1] * x1)) - y)
            acc = [R(acc[0] + R(r * x0)), R(acc[1] + R(r * x1))]
        out.append((acc, share))
    return out


def plus(a, b):
    return ([R(a[0][0] + b[0][0]), R(a[0][1] + b[0][1])], a[1] + b[1])


def star_total(leaves):
    t = leaves[0]
    for leaf in leaves[1:]:
        t = plus(t, leaf)
    return t


def hierarchy2_total(leaves):
    # fan-out 2 over owners 0..3: owner 1's child is 3; owner 0's children are 1 and 2
    return plus(plus(leaves[0], plus(leaves[1], leaves[3])), leaves[2])


def reference(kind: str, total_of, rounds: int):
    w = [F(x) for x in GATE_W0]
    rate = F(GATE_RATE)
    if kind == "plain":
        state = []
    elif kind == "momentum":
        state = [F(0), F(0)]
    else:
        state = [F(0), F(0), F(0), F(0), F(1), F(1)]
    for _ in range(rounds):
        g, n = total_of(leaf_sums(w))
        mean = [R(gi / n) for gi in g]
        if kind == "plain":
            w = [R(w[i] - R(rate * mean[i])) for i in range(2)]
        elif kind == "momentum":
            state = [R(R(F(BETA) * state[i]) + mean[i]) for i in range(2)]
            w = [R(w[i] - R(rate * state[i])) for i in range(2)]
        else:
            b1, b2, eps = F(B1), F(B2), F(EPS)
            m1, m2, p1, p2 = state[0:2], state[2:4], state[4], state[5]
            p1, p2 = R(p1 * b1), R(p2 * b2)
            for i in range(2):
                m1[i] = R(R(b1 * m1[i]) + R(R(1 - b1) * mean[i]))
                m2[i] = R(R(b2 * m2[i]) + R(R(R(1 - b2) * mean[i]) * mean[i]))
                mh = R(m1[i] / R(1 - p1))
                vh = R(m2[i] / R(1 - p2))
                w[i] = R(w[i] - R(R(rate * mh) / R(sqrt_rn(vh) + eps)))
            state = m1 + m2 + [p1, p2]
    return [bits(float(x)) for x in w], [bits(float(x)) for x in state]


def test_sqrt_rn_is_correctly_rounded():
    for x in (2.0, 3.0, 0.5, 1e-300, 5e-324, 1.7976931348623157e308, 0.1, 12345.678):
        assert float(sqrt_rn(F(x))) == math.sqrt(x)
    assert sqrt_rn(F(1, 4)) == F(1, 2)


@pytest.mark.parametrize("kind", ["plain", "momentum", "adam"])
@pytest.mark.parametrize("form", ["slot", "indexed"])
@pytest.mark.parametrize("engine", ["scalar", "vector"])
def test_one_update_on_the_star_matches_exact_arithmetic(kind, form, engine):
    want_p, want_s = reference(kind, star_total, 1)
    res = evaluate(gate(kind, form), engine=engine)
    assert list(res.params) == want_p
    assert list(res.state) == want_s
    assert res.rounds == 1
    assert [o.version for o in res.owners] == [1, 1, 1, 1]
    assert all(list(o.params) == want_p and list(o.state) == want_s for o in res.owners)


@pytest.mark.parametrize("kind", ["plain", "momentum", "adam"])
def test_three_updates_on_the_hierarchy_match_exact_arithmetic(kind):
    want_p, want_s = reference(kind, hierarchy2_total, 3)
    res = evaluate(gate(kind, topology=Hierarchy(2), updates=3))
    assert (list(res.params), list(res.state)) == (want_p, want_s)
    assert res.owners[3].version == 3


def test_the_reference_distinguishes_the_momentum_step_from_the_plain_one():
    # a guard that the exact reference is not vacuous: different rules, different words
    assert reference("plain", star_total, 1)[0] != reference("momentum", star_total, 2)[0]
    assert evaluate(gate("plain"), 0).params == tuple(bits(x) for x in GATE_W0)
    assert Star() == Star()
