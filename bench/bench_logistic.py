"""Logistic-regression benchmark: specs/bench/logistic64.alpha (64 features, 262,144
samples, 65,536 on each of 4 owners on this host, star, x86-64) against numpy's vectorised
full-batch step (one process) and torch + gloo on 4 processes (bench/peer_logistic.py),
measured in the same run, interleaved round by round: seconds per update.

alphac's figure is (T(N) - T(1)) / (N - 1) of the slowest owner's wall time, medians over
--repeat rounds (process start-up, loading the samples and connecting cancel); every owner
runs the compiled contribution kernel (the ordered dot product, the correctly rounded exp
of sigmoid, 64 products) over its 65,536 samples, the ordered combine and the update. numpy:
p = 1 / (1 + exp(-X w)), w -= rate X^T (p - y) / n (BLAS, numpy's exp). torch + gloo: the
same step per rank on its share, all_reduce(SUM) of the 64-word gradient. The peers' orders
and exp are their own. The last alphac run is compared with the oracle word for word (the
oracle's mpmath exp takes a while: --no-verify skips it).

    python bench/bench_logistic.py [--updates 6] [--repeat 3] [--no-verify] [--peer-python PY]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT))

import learner_bench as lb  # noqa: E402
import peers  # noqa: E402

SPEC = ROOT / "specs" / "bench" / "logistic64.alpha"
DATA = ROOT / "out" / "data" / "logistic64.npy"
N, D = lb.N, lb.D


def numpy_step(X, y):
    w = np.zeros(D)

    def step():
        nonlocal w
        p = 1.0 / (1.0 + np.exp(-(X @ w)))
        w = w - 0.5 * (X.T @ (p - y)) / N
    return step


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--updates", type=int, default=6)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--no-verify", action="store_true")
    peers.add_option(ap)
    args = ap.parse_args()
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    lb.make_data(DATA, "logistic")
    from alphac import driver
    from alphac.launch import session

    dep = driver.deployment(str(SPEC))
    exes = session.built("logistic64", dep)
    why = peers.missing(args.peer_python, "torch")
    walls = {1: [], args.updates: []}
    np_s, torch_s = [], []
    rows = np.load(DATA)
    X, y = rows[:, :D], rows[:, D]
    for _ in range(args.repeat):
        for u in walls:
            run = lb.alphac_run("logistic64", dep, exes, u)
            walls[u].append(lb.owners_seconds(run))
        np_s.append(lb.timed(numpy_step(X, y), 3))
        got = lb.torch_gloo(args.peer_python, DATA, "logistic", why)
        if isinstance(got, str):
            why = got
        else:
            torch_s.append(got)
    per = lb.per_update(walls)
    npy = statistics.median(np_s)
    print(f"logistic regression, {N:,} samples x {D} features, 4 owners on {os.cpu_count()} cores")
    print(f"  alphac      {per * 1e3:8.2f} ms/update (slowest owner, (T({args.updates}) - T(1)) / {args.updates - 1})")
    print(f"  numpy       {npy * 1e3:8.2f} ms/update (one process, full batch)  alphac/numpy {per / npy:.2f}")
    if torch_s:
        tg = statistics.median(torch_s)
        print(f"  torch+gloo  {tg * 1e3:8.2f} ms/update (4 processes)  alphac/torch+gloo {per / tg:.2f}")
    else:
        print(f"  torch+gloo  not run: {why}")
    if not args.no_verify:
        lb.verify("logistic64", dep, run, args.updates)


if __name__ == "__main__":
    main()
