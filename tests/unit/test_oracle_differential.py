"""Random programs run on both engines: the same words, or the same refusal detail.

Programs mix top-level assignments and lets, loops over the coordinates that read and
write the contribution at the loop index (vectorised), loops that read other indices of
what they write or nest (run in order), and ordered sums."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import HealthCheck, given, settings, strategies as st

from alphac.ir.nodes import (COMPARE_OPS, Assign, Binary, Compare, Const, Index, Let, Local, Loop, Program,
                             Select, SlotRef, Star, Sum, Unary)
from alphac.oracle import Refusal, evaluate

from test_oracle_learners import bits, deployment, lsq_learner

K, S_ = 3, 4          # contribution slots: w [0,3), x [3,6), y 6, c [7,10)
W, X, Y, CB = 0, K, 2 * K, 2 * K + 1
VALUES = [0.5, -1.25, 3.0, 1e-3, 7.5, -0.1, 2.0 ** -30, 1e5, 0.0, -0.0]


def leaves(loop_var: str | None, sum_var: str | None, lets: list[str]):
    opts = [st.sampled_from(VALUES).map(lambda v: Const(bits(v))),
            st.integers(0, 2 * K).map(lambda b: SlotRef(Index(b))),
            st.integers(0, K - 1).map(lambda j: SlotRef(Index(CB + j)))]
    for var in (loop_var, sum_var):
        if var:
            opts.append(st.sampled_from([W, X, CB]).map(lambda b, v=var: SlotRef(Index(b, v))))
    if lets:
        opts.append(st.sampled_from(lets).map(Local))
    return st.one_of(opts)


def exprs(loop_var, lets, depth=3, sum_var=None):
    base = leaves(loop_var, sum_var, lets)
    if depth == 0:
        return base
    sub = exprs(loop_var, lets, depth - 1, sum_var)
    sums = st.nothing() if sum_var else exprs(loop_var, lets, depth - 1, "j").map(
        lambda body: Sum("j", 0, K, body))
    return st.one_of(
        base,
        st.tuples(st.sampled_from(["add", "sub", "mul", "div"]), sub, sub).map(
            lambda t: Binary(*t)),
        st.tuples(st.sampled_from(["neg", "sqrt", "abs"]), sub).map(lambda t: Unary(*t)),
        st.tuples(st.sampled_from(["min", "max", "copysign"]), sub, sub).map(lambda t: Binary(*t)),
        st.tuples(st.sampled_from(COMPARE_OPS), sub, sub, sub, sub).map(
            lambda t: Select(Compare(t[0], t[1], t[2]), t[3], t[4])),
        sums)


@st.composite
def programs(draw):
    body, lets = [], []
    for n in range(draw(st.integers(1, 5))):
        kind = draw(st.sampled_from(["let", "assign", "loop", "shifted", "nested"]))
        if kind == "let":
            name = f"t{n}"
            body.append(Let(name, draw(exprs(None, lets))))
            lets.append(name)
        elif kind == "assign":
            j = draw(st.integers(0, K - 1))
            body.append(Assign(Index(CB + j), draw(exprs(None, lets)), label=f"slot {CB + j}"))
        elif kind == "loop":
            inner = [Let("u", draw(exprs("i", lets)))]
            inner.append(Assign(Index(CB, "i"), draw(exprs("i", lets + ["u"])), label="c[i]"))
            body.append(Loop("i", 0, K, tuple(inner)))
        elif kind == "shifted":  # reads the previous coordinate's new value: runs in order
            body.append(Loop("i", 1, K, (Assign(Index(CB, "i"), Binary(
                "add", SlotRef(Index(CB - 1, "i")), draw(exprs("i", lets))), label="c[i]"),)))
        else:
            body.append(Loop("a", 0, 2, (Loop("i", 0, K, (Assign(
                Index(CB, "i"), draw(exprs("i", lets)), label="c[i]"),)),)))
    return Program(2 * K + S_, tuple(body))


BASE = lsq_learner("plain", "indexed",
                   [(0.5, 1.5, -2.0, 0.25), (1.0, -0.5, 0.75, 3.0), (2.0, 0.125, -1.0, 0.5),
                    (-0.75, 1.25, 0.5, -2.5)], (1, 2, 0, 1), (0.3, -0.2, 0.1), 0.01)


def outcome(dep, engine):
    try:
        r = evaluate(dep, engine=engine)
        return ("ok", r.params, r.state)
    except Refusal as e:
        return ("refused", e.code, e.detail)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(programs())
def test_engines_agree_on_random_contributions(prog):
    dep = deployment(replace(BASE, contribution=prog), 4, Star(), updates=2)
    assert outcome(dep, "scalar") == outcome(dep, "vector")


# numba compiles each program (about a second): a few examples here
@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(programs())
def test_the_compiled_engine_agrees_on_random_contributions(prog):
    dep = deployment(replace(BASE, contribution=prog), 4, Star(), updates=2)
    assert outcome(dep, "scalar") == outcome(dep, "numba")
