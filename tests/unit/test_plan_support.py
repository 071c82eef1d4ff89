"""Deployments built directly as IR for the planner's tests: least squares with plain steps,
momentum and Adam, in the per-slot and the indexed form, over any owner count and topology.
The tests at the bottom check the builders themselves."""

from __future__ import annotations

import numpy as np

from alphac.ir.builders import C, S, add, assign, bits, div, mul, sub
from alphac.ir.nodes import (
    Checkpoint, Contract, Deployment, Learner, Let, Local, Loop, Partitioning, Placement, Program, Role,
    Samples, Shard, Star, Sum, Unary, Words)

B1, B2, EPS, BETA = 0.9, 0.999, 1e-8, 0.9


def contribution(k: int, s: int) -> Program:
    """c[i] = ((sum_j w[j] * x[j]) - y) * x[i]; s = k + 1 (features then the target)."""
    assert s == k + 1
    r = Let("r", sub(Sum("j", 0, k, mul(S(0, "j"), S(k, "j"))), S(2 * k)))
    body = (r, Loop("i", 0, k, (assign(k + s, mul(Local("r"), S(k, "i")), "i"),)))
    return Program(2 * k + s, body)


def update(k: int, kind: str, form: str = "slots") -> tuple[Program, int]:
    """The update program of `kind` ("plain", "momentum", "adam") and its m."""
    m = {"plain": 0, "momentum": k, "adam": 2 * k + 2}[kind]
    mean, rate = k + m, 2 * k + m
    b1p, b2p = k + 2 * k, k + 2 * k + 1

    def step(i, v=None):
        p, g = S(i, v), S(mean + i, v)
        if kind == "plain":
            return [assign(i, sub(p, mul(S(rate), g)), v)]
        if kind == "momentum":
            vel = k + i
            return [assign(vel, add(mul(C(BETA), S(vel, v)), g), v),
                    assign(i, sub(p, mul(S(rate), S(vel, v))), v)]
        m1, m2 = k + i, 2 * k + i
        return [
            assign(m1, add(mul(C(B1), S(m1, v)), mul(C(1 - B1), g)), v),
            assign(m2, add(mul(C(B2), S(m2, v)), mul(mul(C(1 - B2), g), g)), v),
            assign(i, sub(p, div(mul(S(rate), div(S(m1, v), sub(C(1.0), S(b1p)))),
                                 add(Unary("sqrt", div(S(m2, v), sub(C(1.0), S(b2p)))), C(EPS)))), v),
        ]

    body: list = []
    if kind == "adam":
        body += [assign(b1p, mul(S(b1p), C(B1))), assign(b2p, mul(S(b2p), C(B2)))]
    if form == "slots":
        for i in range(k):
            body += step(i)
    else:
        body.append(Loop("i", 0, k, tuple(step(0, "i"))))
    return Program(2 * k + m + 1, tuple(body)), m


def learner(k: int = 2, kind: str = "plain", form: str = "slots", shares=(1, 2, 3, 0)) -> Learner:
    s = k + 1
    upd, m = update(k, kind, form)
    rng = np.random.default_rng(7)
    rows = sum(shares)
    words = np.array([[bits(float(x)) for x in rng.standard_normal(s)] for _ in range(rows)],
                     dtype=np.uint64).reshape(rows, s)
    state = [bits(0.0)] * (m - 2) + [bits(1.0)] * 2 if kind == "adam" else [bits(0.0)] * m
    return Learner(f"lsq_{kind}", k, s, m, contribution(k, s), upd,
                   Words(tuple(bits(0.5 * i) for i in range(k))), Words(tuple(state)), bits(0.125),
                   Samples(s, tuple(shares), words))


def deployment(n: int = 4, topology=None, *, k: int = 2, kind: str = "plain", form: str = "slots",
               partitioning: Partitioning | None = None, contract: Contract | None = None,
               shares=None, placement=None, name: str = "") -> Deployment:
    shares = tuple(shares) if shares is not None else tuple((1, 2, 3, 0)[o % 4] for o in range(n))
    roles = (Role("coordinator", (0,)), Role("worker", tuple(range(1, n)))) if n > 1 else (
        Role("coordinator", (0,)),)
    placement = placement or tuple("x86_64" if o % 2 == 0 else "aarch64" for o in range(n))
    return Deployment(name or f"lsq_{kind}_{n}", learner(k, kind, form, shares), n,
                      topology if topology is not None else Star(), partitioning or Partitioning(),
                      roles, tuple(placement), 3, contract or Contract(), Checkpoint())


ADAM_SHARED = Partitioning(optimizer_state=Shard(), parameters=Shard(), gradients=Shard(),
                           words_per_coordinate=2, shared_state=(4, 5))  # for k = 2


def adam_partitioning(k: int, optimizer_state: Placement = Shard(), parameters: Placement = Shard(),
                      gradients: Placement = Shard()) -> Partitioning:
    return Partitioning(optimizer_state=optimizer_state, parameters=parameters, gradients=gradients,
                        words_per_coordinate=2, shared_state=(2 * k, 2 * k + 1))


# ----------------------------------------------------------------------------- the builders

def test_builders_have_the_declared_shapes():
    for kind, m in (("plain", 0), ("momentum", 3), ("adam", 8)):
        for form in ("slots", "loop"):
            lr = learner(3, kind, form, shares=(2, 0, 1))
            assert (lr.k, lr.s, lr.m) == (3, 4, m)
            assert lr.update.slots == 2 * 3 + m + 1
            assert lr.contribution.slots == 2 * 3 + 4
            assert len(lr.initial_state) == m
            assert lr.samples.words.shape == (3, 4)
    dep = deployment(7)
    assert dep.owners == 7 and dep.role_of(0).name == "coordinator" and dep.role_of(6).name == "worker"
