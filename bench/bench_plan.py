"""Plan time for 10, 1,000 and 10,000 owners (star, hierarchy of fan-out 4, and a declared
left-deep tree), replicated and with optimizer-state partitioning; prints one row each.

    python bench/bench_plan.py [--repeat N]
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np

from alphac.ir.builders import S, add, assign, bits, mul, sub
from alphac.ir.nodes import (Checkpoint, Contract, Deployment, ExplicitTree, Hierarchy, Learner, Loop, Partitioning,
                             Program, Role, Samples, Shard, Star, TreeBranch, TreeLeaf, Words)
from alphac.plan import plan


def _learner(n: int, k: int) -> Learner:
    """Momentum least squares in the indexed form, one sample per owner."""
    s = k + 1
    contribution = Program(2 * k + s, (Loop("i", 0, k, (assign(k + s, mul(S(2 * k), S(k, "i")), "i"),)),))
    m, mean, rate = k, 2 * k, 3 * k
    update = Program(3 * k + 1, (Loop("i", 0, k, (
        assign(k, add(S(k, "i"), S(mean, "i")), "i"),
        assign(0, sub(S(0, "i"), mul(S(rate), S(k, "i"))), "i"))),))
    words = np.zeros((n, s), dtype=np.uint64)
    return Learner("bench", k, s, m, contribution, update, Words((0,) * k), Words((0,) * m),
                   bits(0.01), Samples(s, (1,) * n, words))


def _chain(n: int) -> ExplicitTree:
    node = TreeLeaf(0)
    for o in range(1, n):
        node = TreeBranch(0, node, TreeLeaf(o))
    return ExplicitTree(node, "members", tuple(range(n)))


def deployment(n: int, topology, partitioned: bool, k: int = 64) -> Deployment:
    part = Partitioning(optimizer_state=Shard(), words_per_coordinate=1) if partitioned else Partitioning()
    roles = (Role("coordinator", (0,)), Role("worker", tuple(range(1, n))))
    return Deployment(f"bench{n}", _learner(n, k), n, topology, part, roles, ("x86_64",) * n, 1,
                      Contract(), Checkpoint())


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    print(f"{'owners':>7} {'topology':<12} {'state':<12} {'best s':>8} {'ops':>9}")
    worst = 0.0
    for n in (10, 1_000, 10_000):
        for name, topo in (("star", Star()), ("hierarchy 4", Hierarchy(4)), ("declared", _chain(n))):
            for partitioned in (False, True):
                dep = deployment(n, topo, partitioned)
                best = float("inf")
                for _ in range(args.repeat):
                    start = time.perf_counter()
                    p = plan(dep)
                    best = min(best, time.perf_counter() - start)
                ops = sum(len(o.protocol.update_ops) + len(o.protocol.finish_ops) for o in p.owners)
                worst = max(worst, best) if n == 10_000 else worst
                print(f"{n:>7} {name:<12} {'partitioned' if partitioned else 'replicated':<12} "
                      f"{best:>8.3f} {ops:>9}")
    print(f"slowest 10,000-owner plan: {worst:.3f} s (aim: under 2 s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
