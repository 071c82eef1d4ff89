"""The gate specs under specs/: the oracle on each, against the spec's formulas worked out
with exact rational arithmetic rounded per operation, for all five updates."""

from __future__ import annotations

import os
from fractions import Fraction as F

import pytest

from alphac.ir.nodes import Hierarchy, Star
from alphac.oracle import MUTANTS, evaluate

from test_oracle_exact import R, sqrt_rn
from test_oracle_learners import bits, flt

SPECS = os.path.join(os.path.dirname(__file__), os.pardir, os.pardir, "specs")


def load(name: str):
    path = os.path.join(SPECS, name)
    if not os.path.exists(path):
        pytest.skip(f"{name} is not written yet")
    from alphac.check import load_deployment
    return load_deployment(path)


def leaf_sums(L, w):
    rows = [[F(flt(int(v))) for v in row] for row in L.samples.words]
    out, i = [], 0
    for share in L.samples.shares:
        acc = [F(0), F(0)]
        for _ in range(share):
            x0, x1, y = rows[i]
            i += 1
            r = R(R(R(w[0] * x0) + R(w[1] * x1)) - y)  # ((w0 x0 + w1 x1) - y)
            acc = [R(acc[0] + R(r * x0)), R(acc[1] + R(r * x1))]
        out.append((acc, share))
    return out


def total(leaves, topology):
    def plus(a, b):
        return ([R(a[0][0] + b[0][0]), R(a[0][1] + b[0][1])], a[1] + b[1])

    def sub(o):
        t = leaves[o]
        for c in (2 * o + 1, 2 * o + 2):
            if c < len(leaves):
                t = plus(t, sub(c))
        return t
    if isinstance(topology, Hierarchy):
        assert topology.fanout == 2
        return sub(0)
    t = leaves[0]
    for leaf in leaves[1:]:
        t = plus(t, leaf)
    return t


def reference(dep, kind):
    """The gate's update programs as written in specs/Gates/Lsq.alpha."""
    L = dep.learner
    w = [F(flt(int(v))) for v in L.initial.data]
    st = [F(flt(int(v))) for v in L.initial_state.data]
    rate = F(flt(L.rate))
    for _ in range(dep.updates):
        g, n = total(leaf_sums(L, w), dep.topology)
        mean = [R(x / n) for x in g]
        if kind == "plain":
            w = [R(w[i] - R(rate * mean[i])) for i in range(2)]
        elif kind == "momentum":
            st = [R(R(F(0.9) * st[i]) + mean[i]) for i in range(2)]
            w = [R(w[i] - R(rate * st[i])) for i in range(2)]
        else:
            m, v, p1, p2 = st[0:2], st[2:4], st[4], st[5]
            p1, p2 = R(p1 * F(0.9)), R(p2 * F(0.999))
            m = [R(R(F(0.9) * m[i]) + R(F(0.1) * mean[i])) for i in range(2)]
            v = [R(R(F(0.999) * v[i]) + R(F(0.001) * R(mean[i] * mean[i]))) for i in range(2)]
            w = [R(w[i] - R(R(rate * R(m[i] / R(1 - p1)))
                            / R(sqrt_rn(R(v[i] / R(1 - p2))) + F(1e-8)))) for i in range(2)]
            st = m + v + [p1, p2]
    return [bits(float(x)) for x in w], [bits(float(x)) for x in st]


@pytest.mark.parametrize("kind", ["plain", "momentum", "adam"])
@pytest.mark.parametrize("topology", ["star", "hierarchy"])
def test_gate_spec_matches_exact_arithmetic(kind, topology):
    dep = load(f"lsq_{kind}_{topology}.alpha")
    assert dep.owners == 4 and dep.learner.samples.shares == (1, 2, 3, 0)
    assert isinstance(dep.topology, Star if topology == "star" else Hierarchy)
    got = evaluate(dep)
    want_p, want_s = reference(dep, kind)
    assert (list(got.params), list(got.state)) == (want_p, want_s)
    assert all(o.version == dep.updates for o in got.owners)
    assert evaluate(dep, engine="vector").params == got.params


def test_order10_star_and_hierarchy_differ_and_each_matches_exact_arithmetic():
    star = load("order10_star.alpha")
    tree = load("order10_hierarchy.alpha")
    assert star.owners == tree.owners == 10
    assert star.learner == tree.learner and star.learner.m == 0
    a, b = evaluate(star), evaluate(tree)
    assert a.params != b.params
    assert (list(a.params), list(a.state)) == reference(star, "plain")
    assert (list(b.params), list(b.state)) == reference(tree, "plain")
    # one update is enough to tell the orders apart
    assert evaluate(star, 1).params != evaluate(tree, 1).params


@pytest.mark.parametrize("name", ["order10_star.alpha", "order10_hierarchy.alpha"])
def test_every_mutant_changes_the_bits_of_the_order_gate(name):
    dep = load(name)
    declared = evaluate(dep)
    for m in MUTANTS:
        # partitioned parameters; independent state; one partitioned accumulator per
        # coordinate; a fixed staleness (tests/e2e/test_fixed_staleness.py)
        if m in ("stale-replica", "foreign-inputs", "foreign-accumulator", "fresher-read",
                 "fewer-local-steps", "looser-bound"):
            continue
        r = evaluate(dep, mutant=m)
        assert (r.params, r.state) != (declared.params, declared.state), m


@pytest.mark.parametrize("name", ["lsq_plain_star.alpha", "lsq_adam_hierarchy.alpha"])
def test_weight_mutants_change_the_bits_of_the_four_owner_gates(name):
    # four owners' small contributions: another branch order happens to round alike here,
    # which is why the order gate above uses ten owners and a wide dynamic range
    dep = load(name)
    declared = evaluate(dep)
    for m in ("duplicate-mass", "unweighted-mean", "deliver-to-next"):
        r = evaluate(dep, mutant=m)
        assert (r.params, r.state) != (declared.params, declared.state), m
