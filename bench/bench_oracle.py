"""Oracle seconds per update for a least-squares learner with 1e6 parameters and 64 samples
on 4 owners (shares 16, 24, 24, 0), for plain steps, momentum and Adam, on the vector and
numba engines; then the oracle beside the executables on the 1e6-parameter benchmark
learner (specs/bench/big_lsq.alpha, 4 owners, 8 samples, 5 updates; its samples are
written by bench/make_big_data.py), interleaved round by round: the owners' run (every
owner started to every owner done, and the slowest owner's own seconds), each engine in
this process, and the numba engine in a fresh interpreter (its compiled programs loaded
from the cache). Prints figures; asserts nothing about time.

    python bench/bench_oracle.py [--k K] [--samples N] [--updates U] [--rounds R]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from alphac.ir.builders import C, S, add, assign, bits, div, mul, sqrt, sub
from alphac.ir.nodes import (Checkpoint, Contract, Deployment, Learner, Let, Local, Loop, Partitioning, Program,
                             Role, Samples, Star, Sum, Words)
from alphac.oracle import evaluate

ROOT = Path(__file__).resolve().parents[1]
BIG = ROOT / "specs" / "bench" / "big_lsq.alpha"
# Run in a fresh interpreter: the oracle of the big learner on the numba engine, whole.
FRESH = """
import sys, time
t = time.perf_counter()
from alphac import driver
from alphac.oracle import evaluate
dep = driver.deployment(sys.argv[1])
t0 = time.perf_counter()
evaluate(dep, engine="numba")
print(time.perf_counter() - t0, t0 - t)
"""


def contribution(k: int) -> Program:
    # r = (Σ_j w[j] * x[j]) - y ; c[i] = r * x[i]
    r = sub(Sum("j", 0, k, mul(S(0, "j"), S(k, "j"))), S(2 * k))
    return Program(3 * k + 1, (Let("r", r), Loop("i", 0, k, (
        assign(2 * k + 1, mul(Local("r"), S(k, "i")), "i", "c[i]"),)),))


def update(kind: str, k: int) -> tuple[Program, int]:
    if kind == "plain":
        rate = 2 * k
        return Program(2 * k + 1, (Loop("i", 0, k, (
            assign(0, sub(S(0, "i"), mul(S(rate), S(k, "i"))), "i", "w[i]"),)),)), 0
    if kind == "momentum":
        rate = 3 * k
        return Program(3 * k + 1, (Loop("i", 0, k, (
            assign(k, add(mul(C(0.9), S(k, "i")), S(2 * k, "i")), "i", "v[i]"),
            assign(0, sub(S(0, "i"), mul(S(rate), S(k, "i"))), "i", "w[i]"),
        )),)), k
    m1, m2, p1, p2, g, rate = k, 2 * k, 3 * k, 3 * k + 1, 3 * k + 2, 4 * k + 2
    body = (
        assign(m1, add(mul(C(0.9), S(m1, "i")), mul(sub(C(1.0), C(0.9)), S(g, "i"))), "i", "m1[i]"),
        assign(m2, add(mul(C(0.999), S(m2, "i")), mul(mul(sub(C(1.0), C(0.999)), S(g, "i")), S(g, "i"))),
               "i", "m2[i]"),
        Let("mh", div(S(m1, "i"), sub(C(1.0), S(p1)))),
        Let("vh", div(S(m2, "i"), sub(C(1.0), S(p2)))),
        assign(0, sub(S(0, "i"), div(mul(S(rate), Local("mh")), add(sqrt(Local("vh")), C(1e-8)))), "i", "w[i]"),
    )
    return Program(4 * k + 3, (
        assign(p1, mul(S(p1), C(0.9)), label="p1"),
        assign(p2, mul(S(p2), C(0.999)), label="p2"),
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
        initial_state=Words(state.view(np.uint64)), rate=bits(1e-3),
        samples=Samples(k + 1, tuple(shares), samples))
    n = len(shares)
    return Deployment(
        name=L.name, learner=L, owners=n, topology=Star(), partitioning=Partitioning(),
        roles=(Role("coordinator", (0,)), Role("worker", tuple(range(1, n)))),
        placement=("x86_64",) * n, updates=1, contract=Contract(), checkpoint=Checkpoint())


def per_update(dep, updates: int, engine: str) -> tuple[float, float]:
    """(seconds per update, seconds of the words' result) of `updates` updates."""
    t0 = time.perf_counter()
    evaluate(dep, 0, engine=engine)
    base = time.perf_counter() - t0
    t0 = time.perf_counter()
    evaluate(dep, updates, engine=engine)
    return (time.perf_counter() - t0 - base) / updates, base


def bench_kinds(k: int, n: int, updates: int) -> None:
    shares = (n // 4, 3 * n // 8, n - n // 4 - 3 * n // 8, 0)
    t0 = time.perf_counter()
    rng = np.random.default_rng(0)
    rows = rng.standard_normal((n, k + 1)).view(np.uint64)
    print(f"oracle bench: k = {k}, {n} samples (shares {shares}), star of 4 owners; "
          f"data made in {time.perf_counter() - t0:.2f} s")
    for kind in ("plain", "momentum", "adam"):
        dep = deployment(kind, k, rows, shares)
        evaluate(dep, 1, engine="numba")  # compiled (or loaded from the cache) first
        for engine in ("vector", "numba"):
            per, base = per_update(dep, updates, engine)
            print(f"  {kind:<9} {engine:<6} {per:7.3f} s per update ({updates} updates; "
                  f"{base:.2f} s building results)")


def bench_big(rounds: int) -> None:
    from alphac import driver
    from alphac.launch.cache import ensure_built
    from alphac.launch.plan_run import run_plan
    from alphac.launch.runs import new_run_dir

    if not BIG.exists() or not (ROOT / "out" / "data" / "big_samples.npy").exists():
        print(f"{BIG.relative_to(ROOT)}: its samples are missing (python bench/make_big_data.py)")
        return
    dep = driver.deployment(str(BIG))
    plan = driver.plan(dep)
    times: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory(prefix="alphac-bench-") as d:
        exes = ensure_built(plan, d)
        evaluate(dep, 1, engine="numba")
        for _ in range(rounds):
            t0 = time.perf_counter()
            run = run_plan(dep, exes, new_run_dir(d, "big"), authenticate=False, root=plan.tree.owner)
            times.setdefault("owners, all", []).append(time.perf_counter() - t0)
            times.setdefault("owners, slowest own", []).append(max(oc.seconds for oc in run.result.outcomes))
            if not run.committed:
                sys.exit("bench: the owners did not commit: " + "; ".join(oc.stderr for oc in run.result.outcomes))
            for engine in ("vector", "numba"):
                t0 = time.perf_counter()
                evaluate(dep, engine=engine)
                times.setdefault(f"oracle {engine}, in process", []).append(time.perf_counter() - t0)
            done = subprocess.run([sys.executable, "-c", FRESH, str(BIG)], capture_output=True,
                                  text=True, check=True, cwd=ROOT).stdout.split()
            times.setdefault("oracle numba, fresh process", []).append(float(done[0]))
            times.setdefault("  (importing alphac, loading the spec)", []).append(float(done[1]))
    print(f"== {BIG.relative_to(ROOT)}: {dep.owners} owners, k = {dep.learner.k}, "
          f"{sum(dep.learner.samples.shares)} samples, {dep.updates} updates; medians of {rounds} "
          "interleaved rounds")
    for label, ts in times.items():
        print(f"  {label:<40} {statistics.median(ts):6.2f} s   (min {min(ts):.2f}, max {max(ts):.2f})")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--k", type=int, default=1_000_000)
    ap.add_argument("--samples", type=int, default=64)
    ap.add_argument("--updates", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=3, help="interleaved rounds on the big learner")
    args = ap.parse_args()
    bench_kinds(args.k, args.samples, args.updates)
    bench_big(args.rounds)


if __name__ == "__main__":
    main()
