"""Learners built directly as IR for the oracle's tests: least squares (k=2, s=3) with plain
steps, heavy-ball momentum and Adam, each in the per-slot and the indexed form; plus
deployments around them. The bottom of the file checks the builders themselves."""

from __future__ import annotations

import numpy as np

from alphac.ir.builders import C, S, add, assign, bits, div, flt, mul, sub  # noqa: F401 (re-exported to the oracle tests)
from alphac.ir.nodes import (
    Checkpoint, Contract, Deployment, Hierarchy, Learner, Let, Local, Loop, Partitioning,
    Program, Role, Samples, Star, Sum, Unary, Words)


BETA = 0.9
B1, B2, EPS = 0.9, 0.999, 1e-8


# ----------------------------------------------------------------------------- contribution

def lsq_contribution(k: int, form: str) -> Program:
    """c[i] = ((Σ_j w[j]*x[j]) - y) * x[i]; slots: w [0,k), x [k,2k), y 2k, c [2k+1, 3k+1)."""
    s = k + 1
    slots = 2 * k + s
    y, c0 = 2 * k, 2 * k + 1
    if form == "slot":
        dot = mul(S(0), S(k))
        for j in range(1, k):
            dot = add(dot, mul(S(j), S(k + j)))
        r = sub(dot, S(y))
        return Program(slots, tuple(assign(c0 + i, mul(r, S(k + i))) for i in range(k)))
    r = sub(Sum("j", 0, k, mul(S(0, "j"), S(k, "j"))), S(y))
    return Program(slots, (
        Let("r", r),
        Loop("i", 0, k, (assign(c0, mul(Local("r"), S(k, "i")), "i", "c[i]"),)),
    ))


# ----------------------------------------------------------------------------- updates

def plain_update(k: int, form: str) -> Program:
    """w[i] := w[i] - rate * g[i]; slots: w [0,k), g [k,2k), rate 2k."""
    rate = 2 * k
    if form == "slot":
        return Program(2 * k + 1, tuple(
            assign(i, sub(S(i), mul(S(rate), S(k + i)))) for i in range(k)))
    return Program(2 * k + 1, (Loop("i", 0, k, (
        assign(0, sub(S(0, "i"), mul(S(rate), S(k, "i"))), "i", "w[i]"),)),))


def momentum_update(k: int, form: str) -> Program:
    """v[i] := beta * v[i] + g[i]; w[i] := w[i] - rate * v[i].
    Slots: w [0,k), v [k,2k), g [2k,3k), rate 3k."""
    rate, g = 3 * k, 2 * k
    def body(i, var=None):
        return (assign(k + i, add(mul(C(BETA), S(k + i, var)), S(g + i, var)), var, "v[i]"),
                assign(i, sub(S(i, var), mul(S(rate), S(k + i, var))), var, "w[i]"))
    if form == "slot":
        return Program(3 * k + 1, tuple(st for i in range(k) for st in body(i)))
    return Program(3 * k + 1, (Loop("i", 0, k, body(0, "i")),))


def adam_update(k: int, form: str) -> Program:
    """Adam with moments m1, m2 (k each) and bias powers p1, p2 (shared).
    Slots: w [0,k), m1 [k,2k), m2 [2k,3k), p1 3k, p2 3k+1, g [3k+2, 4k+2), rate 4k+2."""
    m1, m2, p1, p2, g, rate = k, 2 * k, 3 * k, 3 * k + 1, 3 * k + 2, 4 * k + 2
    powers = (assign(p1, mul(S(p1), C(B1)), label="p1"),
              assign(p2, mul(S(p2), C(B2)), label="p2"))

    def body(i, var=None):
        gi = S(g + i, var)
        return (
            assign(m1 + i, add(mul(C(B1), S(m1 + i, var)), mul(sub(C(1.0), C(B1)), gi)),
                   var, "m1[i]"),
            assign(m2 + i, add(mul(C(B2), S(m2 + i, var)), mul(mul(sub(C(1.0), C(B2)), gi), gi)),
                   var, "m2[i]"),
            Let("mh", div(S(m1 + i, var), sub(C(1.0), S(p1)))),
            Let("vh", div(S(m2 + i, var), sub(C(1.0), S(p2)))),
            assign(i, sub(S(i, var), div(mul(S(rate), Local("mh")),
                                         add(Unary("sqrt", Local("vh")), C(EPS)))), var, "w[i]"),
        )
    if form == "slot":
        return Program(4 * k + 3, powers + tuple(st for i in range(k) for st in body(i)))
    return Program(4 * k + 3, powers + (Loop("i", 0, k, body(0, "i")),))


UPDATES = {"plain": plain_update, "momentum": momentum_update, "adam": adam_update}


def initial_state(kind: str, k: int) -> tuple[float, ...]:
    if kind == "plain":
        return ()
    if kind == "momentum":
        return (0.0,) * k
    return (0.0,) * (2 * k) + (1.0, 1.0)


# ----------------------------------------------------------------------------- learners

def lsq_learner(kind: str, form: str, rows, shares, w0, rate: float,
                state0: tuple[float, ...] | None = None) -> Learner:
    k = len(w0)
    rows = np.asarray(rows, dtype=np.float64).reshape(sum(shares), k + 1)
    state = initial_state(kind, k) if state0 is None else state0
    return Learner(
        name=f"lsq_{kind}_{form}", k=k, s=k + 1, m=len(state),
        contribution=lsq_contribution(k, form), update=UPDATES[kind](k, form),
        initial=Words(tuple(bits(x) for x in w0)),
        initial_state=Words(tuple(bits(x) for x in state)),
        rate=bits(rate),
        samples=Samples(k + 1, tuple(shares), rows.view(np.uint64).copy()))


def deployment(learner: Learner, owners: int, topology=Star(), updates: int = 1,
               partitioning: Partitioning = Partitioning(), name: str = "") -> Deployment:
    return Deployment(
        name=name or learner.name, learner=learner, owners=owners, topology=topology,
        partitioning=partitioning,
        roles=(Role("coordinator", (0,)), Role("worker", tuple(range(1, owners)))),
        placement=tuple("x86_64" if o % 2 == 0 else "aarch64" for o in range(owners)),
        updates=updates, contract=Contract(), checkpoint=Checkpoint())


# the four-owner gate: shares 1, 2, 3, 0 of samples (x0, x1, y)
GATE_ROWS = [
    (0.5, -1.25, 0.3),
    (1.1, 0.7, -0.2),
    (-0.35, 2.5, 1.7),
    (0.9, 0.1, 0.45),
    (2.2, -0.6, 0.05),
    (-1.3, 0.8, -0.9),
]
GATE_SHARES = (1, 2, 3, 0)
GATE_W0 = (0.25, -0.75)
GATE_RATE = 0.1


def gate(kind: str, form: str = "indexed", topology=Star(), updates: int = 1,
         partitioning: Partitioning = Partitioning()) -> Deployment:
    return deployment(lsq_learner(kind, form, GATE_ROWS, GATE_SHARES, GATE_W0, GATE_RATE),
                      4, topology, updates, partitioning)


def test_builders_give_the_declared_slot_counts():
    for kind in UPDATES:
        for form in ("slot", "indexed"):
            L = gate(kind, form).learner
            assert L.contribution.slots == 2 * L.k + L.s == 7
            assert L.update.slots == 2 * L.k + L.m + 1
            assert len(L.initial_state) == L.m


def test_forms_are_different_ir():
    assert gate("adam", "slot").learner.update != gate("adam", "indexed").learner.update
    assert Hierarchy(2) != Star()
