"""Finite-or-refuse: every non-finite operand or result refuses the update by name, with
the update, program, owner, statement and coordinate, on every engine alike."""

from __future__ import annotations

import numpy as np
import pytest

from alphac.diagnostics import Span
from alphac.ir.nodes import Assign, Index, Let, Local, Loop, Program, Contract, Profile, Star
from alphac.oracle import Refusal, evaluate

from test_oracle_learners import (
    C, GATE_ROWS, GATE_SHARES, GATE_W0, S, add, deployment, div, gate, lsq_learner, mul, sub)

ENGINES = ["scalar", "vector", "numba"]


def refusal(dep, engine, **kw) -> Refusal:
    with pytest.raises(Refusal) as info:
        evaluate(dep, engine=engine, **kw)
    return info.value


def with_programs(dep, contribution=None, update=None):
    from dataclasses import replace
    L = dep.learner
    L = replace(L, contribution=contribution or L.contribution, update=update or L.update)
    return replace(dep, learner=L)


@pytest.mark.parametrize("engine", ENGINES)
def test_overflow_in_a_contribution_names_owner_sample_statement_and_coordinate(engine):
    rows = [list(r) for r in GATE_ROWS]
    rows[4][1] = 1e300  # owner 2's second sample: w1*x1 is fine, r * x1 overflows
    dep = deployment(lsq_learner("plain", "indexed", rows, GATE_SHARES, GATE_W0, 0.1), 4)
    r = refusal(dep, engine)
    assert r.code == "non-finite"
    assert (r.update, r.program, r.owner, r.site.sample) == (0, "contribution", 2, 1)
    assert (r.statement, r.coordinate) == ("c[i]", "i=1")
    assert r.detail == ("update 0: contribution of owner 2 sample 1: `c[i]` at i=1: "
                        "non-finite result of mul")
    assert r.line().startswith("refused: non-finite: update 0: contribution of owner 2")


def test_every_engine_names_the_same_first_failure():
    rows = [list(r) for r in GATE_ROWS]
    rows[2][0] = 1e300  # owner 1, sample 1
    rows[5][0] = 1e300  # owner 2, sample 2: later in sample order
    dep = deployment(lsq_learner("momentum", "slot", rows, GATE_SHARES, GATE_W0, 0.1), 4)
    a, b, c = (refusal(dep, e) for e in ENGINES)
    assert a.detail == b.detail == c.detail
    assert (a.owner, a.site.sample, a.statement, a.coordinate) == (1, 1, "slot 5", "slot 5")


@pytest.mark.parametrize("engine", ENGINES)
def test_a_non_finite_value_refuses_even_if_a_later_assignment_overwrites_it(engine):
    k = 2
    span = Span("lsq.alpha", 7, 3)
    # slot 4 (the first mean word) := rate / 0 is overwritten right after; still refused
    update = Program(2 * k + 1, (
        Assign(Index(4), div(S(4), C(0.0)), span, "slot 4"),
        Assign(Index(4), C(0.5), label="slot 4"),
        Loop("i", 0, k, (Assign(Index(0, "i"), sub(S(0, "i"), mul(S(4), S(k, "i"))),
                                label="w[i]"),)),
    ))
    dep = with_programs(gate("plain"), update=update)
    r = refusal(dep, engine)
    assert (r.program, r.statement, r.coordinate, r.span) == ("update", "slot 4", "slot 4", span)
    assert r.detail == "update 0: update: `slot 4` (lsq.alpha:7:3) at slot 4: non-finite result of div"


@pytest.mark.parametrize("engine", ENGINES)
def test_a_non_finite_input_word_refuses_as_an_operand(engine):
    from dataclasses import replace
    from alphac.ir.nodes import Words
    dep = gate("plain", updates=2)
    inf = 0x7FF0000000000000
    dep = replace(dep, learner=replace(dep.learner, initial=Words((0x3FF0000000000000, inf))))
    r = refusal(dep, engine)
    assert (r.update, r.program, r.owner, r.site.sample) == (0, "contribution", 0, 0)
    assert r.detail.endswith("non-finite operand of mul")


@pytest.mark.parametrize("engine", ENGINES)
def test_sqrt_of_a_negative_and_a_let_are_named(engine):
    k = 2
    update = Program(2 * k + 1, (
        Let("t", sub(C(0.0), C(1.0))),
        Loop("i", 0, k, (Assign(Index(0, "i"), Local("t"), label="w[i]"),)),
        Let("q", __import__("alphac.ir.nodes", fromlist=["Unary"]).Unary("sqrt", Local("t"))),
    ))
    r = refusal(with_programs(gate("plain"), update=update), engine)
    assert (r.statement, r.coordinate) == ("let q", "")
    assert r.detail.endswith("`let q`: non-finite result of sqrt")


def test_zero_total_mass_refuses_at_the_mean():
    dep = deployment(lsq_learner("plain", "indexed", [], (0, 0, 0), GATE_W0, 0.1), 3)
    r = refusal(dep, "auto")
    assert (r.code, r.program, r.update) == ("non-finite", "mean", 0)
    assert "combined sample count is 0" in r.detail
    assert evaluate(dep, 0).rounds == 0  # no update, nothing to refuse


@pytest.mark.parametrize("engine", ENGINES)
def test_accumulation_and_combine_overflow_are_named(engine):
    big = 1e308
    # owner 1's two samples each contribute ~ +1.2e308 in coordinate 0: the sum overflows
    w0 = (1.0, 0.0)
    rows = [(0.0, 0.0, 0.0), (1.0, 0.0, 1.0 - 1.2 * big), (1.0, 0.0, 1.0 - 1.2 * big)]
    dep = deployment(lsq_learner("plain", "indexed", rows, (1, 2), w0, 0.1), 2)
    r = refusal(dep, engine)
    assert (r.program, r.owner, r.site.sample, r.statement, r.coordinate) == (
        "contribution", 1, 1, "accumulate", "coordinate 0")
    # one such sample at each of two owners: each sum is finite, the combine add is not
    rows = [(1.0, 0.0, 1.0 - 1.2 * big), (1.0, 0.0, 1.0 - 1.2 * big)]
    dep = deployment(lsq_learner("plain", "indexed", rows, (1, 1), w0, 0.1), 2)
    r = refusal(dep, engine)
    assert (r.program, r.owner, r.statement, r.coordinate) == (
        "combine", 0, "branch", "coordinate 0")


def test_other_profiles_and_inconsistent_shapes_are_refused():
    from dataclasses import replace
    dep = gate("plain")
    bad = replace(dep, contract=Contract(Profile(exceptional="propagate")))
    with pytest.raises(Refusal) as info:
        evaluate(bad)
    assert info.value.code == "oracle-profile"
    with pytest.raises(Refusal) as info:
        evaluate(replace(dep, owners=3, placement=dep.placement[:3]))
    assert info.value.code == "oracle-inconsistent"
    assert "samples are listed for 4 owners, the deployment has 3" in info.value.detail
    with pytest.raises(ValueError):
        evaluate(dep, -1)
    assert np.isfinite(evaluate(dep).params[0])


def test_a_tree_that_does_not_cover_every_owner_once_is_refused():
    from dataclasses import replace
    from alphac.ir.nodes import ExplicitTree, TreeBranch, TreeLeaf
    twice = ExplicitTree(TreeBranch(0, TreeLeaf(0), TreeLeaf(0)), "members", (0, 0))
    with pytest.raises(Refusal) as info:
        evaluate(replace(gate("plain"), topology=twice))
    assert info.value.line() == ("refused: oracle-inconsistent: the combine tree's leaves "
                                 "[0, 0] do not cover owners 0..3 exactly once")
