"""Oracle seconds per update for a least-squares learner with 1e6 parameters and 64 samples
on 4 owners (shares 16, 24, 24, 0), for plain steps, momentum and Adam, on the vector
engine. Prints figures; asserts nothing about time.

    python bench/bench_oracle.py [--k K] [--samples N] [--updates U]
"""

from __future__ import annotations

import argparse
import struct
import time

import numpy as np

from alphac.ir.nodes import (
    Assign, Binary, Checkpoint, Const, Contract, Deployment, Index, Learner, Let, Local, Loop,
    Partitioning, Program, Role, Samples, SlotRef, Star, Sum, Unary, Words)
from alphac.oracle import evaluate


def word(x: float) -> int:
    return struct.unpack("<Q", struct.pack("<d", x))[0]


def c(x: float) -> Const:
    return Const(word(x))


def s(base: int, var: str | None = None) -> SlotRef:
    return SlotRef(Index(base, var))


def b(op: str, lhs, rhs) -> Binary:
    return Binary(op, lhs, rhs)


def contribution(k: int) -> Program:
    # r = (Σ_j w[j] * x[j]) - y ; c[i] = r * x[i]
    r = b("sub", Sum("j", 0, k, b("mul", s(0, "j"), s(k, "j"))), s(2 * k))
    return Program(3 * k + 1, (Let("r", r), Loop("i", 0, k, (
        Assign(Index(2 * k + 1, "i"), b("mul", Local("r"), s(k, "i")), label="c[i]"),)),))


def update(kind: str, k: int) -> tuple[Program, int]:
    if kind == "plain":
        rate = 2 * k
        return Program(2 * k + 1, (Loop("i", 0, k, (Assign(
            Index(0, "i"), b("sub", s(0, "i"), b("mul", s(rate), s(k, "i"))), label="w[i]"),)),)), 0
    if kind == "momentum":
        rate = 3 * k
        return Program(3 * k + 1, (Loop("i", 0, k, (
            Assign(Index(k, "i"), b("add", b("mul", c(0.9), s(k, "i")), s(2 * k, "i")), label="v[i]"),
            Assign(Index(0, "i"), b("sub", s(0, "i"), b("mul", s(rate), s(k, "i"))), label="w[i]"),
        )),)), k
    m1, m2, p1, p2, g, rate = k, 2 * k, 3 * k, 3 * k + 1, 3 * k + 2, 4 * k + 2
    body = (
        Assign(Index(m1, "i"), b("add", b("mul", c(0.9), s(m1, "i")),
                                 b("mul", b("sub", c(1.0), c(0.9)), s(g, "i"))), label="m1[i]"),
        Assign(Index(m2, "i"), b("add", b("mul", c(0.999), s(m2, "i")), b("mul", b(
            "mul", b("sub", c(1.0), c(0.999)), s(g, "i")), s(g, "i"))), label="m2[i]"),
        Let("mh", b("div", s(m1, "i"), b("sub", c(1.0), s(p1)))),
        Let("vh", b("div", s(m2, "i"), b("sub", c(1.0), s(p2)))),
        Assign(Index(0, "i"), b("sub", s(0, "i"), b("div", b("mul", s(rate), Local("mh")), b(
            "add", Unary("sqrt", Local("vh")), c(1e-8)))), label="w[i]"),
    )
    return Program(4 * k + 3, (
        Assign(Index(p1), b("mul", s(p1), c(0.9)), label="p1"),
        Assign(Index(p2), b("mul", s(p2), c(0.999)), label="p2"),
        Loop("i", 0, k, body))), 2 * k + 2


def deployment(kind: str, k: int, samples: np.ndarray, shares) -> Deployment:
    prog, m = update(kind, k)
    state = np.zeros(m)
    if kind == "adam":
        state[-2:] = 1.0
    rng = np.random.default_rng(1)
    L = Learner(
        name=f"bench_{kind}", k=k, s=k + 1, m=m, contribution=contribution(k), update=prog,
        initial=Words((rng.standard_normal(k) * 1e-3).view(np.uint64)),
        initial_state=Words(state.view(np.uint64)), rate=word(1e-3),
        samples=Samples(k + 1, tuple(shares), samples))
    n = len(shares)
    return Deployment(
        name=L.name, learner=L, owners=n, topology=Star(), partitioning=Partitioning(),
        roles=(Role("coordinator", (0,)), Role("worker", tuple(range(1, n)))),
        placement=("x86_64",) * n, updates=1, contract=Contract(), checkpoint=Checkpoint())


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--k", type=int, default=1_000_000)
    ap.add_argument("--samples", type=int, default=64)
    ap.add_argument("--updates", type=int, default=2)
    args = ap.parse_args()
    k, n = args.k, args.samples
    shares = (n // 4, 3 * n // 8, n - n // 4 - 3 * n // 8, 0)
    t0 = time.perf_counter()
    rng = np.random.default_rng(0)
    rows = rng.standard_normal((n, k + 1)).view(np.uint64)
    print(f"oracle bench: k = {k}, {n} samples (shares {shares}), star of 4 owners; "
          f"data made in {time.perf_counter() - t0:.2f} s")
    for kind in ("plain", "momentum", "adam"):
        dep = deployment(kind, k, rows, shares)
        t0 = time.perf_counter()
        evaluate(dep, 0, engine="vector")
        base = time.perf_counter() - t0
        t0 = time.perf_counter()
        evaluate(dep, args.updates, engine="vector")
        total = time.perf_counter() - t0
        print(f"  {kind:<9} {(total - base) / args.updates:7.3f} s per update "
              f"({args.updates} updates in {total:.2f} s, of which {base:.2f} s building results)")


if __name__ == "__main__":
    main()
