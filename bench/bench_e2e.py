"""End-to-end benchmark: least squares, specs/bench/lsq64.alpha (64 features, 262,144
samples, 65,536 on each of 4 owners on this host, star, x86-64), against numpy's vectorised
full-batch step (one process, one BLAS thread) and torch + gloo on 4 processes
(bench/peer_logistic.py --model lsq), measured in the same run, interleaved round by round:
seconds per update. Also: the time of reading the samples once (one pass over their 136 MB,
one process), the contribution kernel's floor; and the whole `alphac launch` per update
(building excluded: the executables are built before the first round), once evaluating the
oracle beside the owners (--fresh-oracle) and once comparing with its kept words.

alphac's owners: (T(N) - T(1)) / (N - 1) of the slowest owner's wall time, medians over
--repeat rounds (start-up, loading the samples and connecting cancel). launch: the same
difference of `alphac launch`'s wall times (its oracle evaluates beside the owners).

    python bench/bench_e2e.py [--updates 6] [--repeat 3] [--peer-python PY]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT))

import learner_bench as lb  # noqa: E402
import peers  # noqa: E402

SPEC = ROOT / "specs" / "bench" / "lsq64.alpha"
DATA = ROOT / "out" / "data" / "lsq64.npy"
N, D = lb.N, lb.D


def numpy_step(X, y):
    w = np.zeros(D)

    def step():
        nonlocal w
        w = w - 0.01 * (X.T @ (X @ w - y)) / N
    return step


def read_once(rows: np.ndarray) -> float:
    """Seconds of one pass over the samples' bytes (a vectorised integer sum), best of 3."""
    words = rows.reshape(-1).view(np.uint64)
    best = float("inf")
    for _ in range(3):
        t0 = time.perf_counter()
        np.bitwise_xor.reduce(words)
        best = min(best, time.perf_counter() - t0)
    return best


def launch_seconds(dep, updates: int, fresh: bool = False) -> float:
    """Seconds of a whole `alphac launch`: comparing with the oracle's kept words (an
    earlier launch of the same plan left them), or with `fresh`, evaluating it again."""
    from alphac.launch.launcher import launch

    t0 = time.perf_counter()
    report = launch(dep, rounds=updates, deadline_s=1800, oracle_cache=not fresh)
    if not report.match:
        sys.exit(f"bench: alphac launch did not match the oracle: {report.failures[:1]}")
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--updates", type=int, default=6)
    ap.add_argument("--repeat", type=int, default=3)
    peers.add_option(ap)
    args = ap.parse_args()
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    lb.make_data(DATA, "lsq")
    from alphac import driver
    from alphac.launch import session

    dep = driver.deployment(str(SPEC))
    exes = session.built("lsq64", dep)
    why = peers.missing(args.peer_python, "torch")
    walls = {1: [], args.updates: []}
    launches = {1: [], args.updates: []}
    fresh = {1: [], args.updates: []}
    np_s, torch_s = [], []
    rows = np.load(DATA)
    X, y = rows[:, :D], rows[:, D]
    launch_seconds(dep, 1)  # builds what launch builds
    for _ in range(args.repeat):
        for u in walls:
            run = lb.alphac_run("lsq64", dep, exes, u)
            walls[u].append(lb.owners_seconds(run))
        for u in launches:
            launches[u].append(launch_seconds(dep, u))
            fresh[u].append(launch_seconds(dep, u, fresh=True))
        np_s.append(lb.timed(numpy_step(X, y), 3))
        got = lb.torch_gloo(args.peer_python, DATA, "lsq", why)
        if isinstance(got, str):
            why = got
        else:
            torch_s.append(got)
    per, whole, evaluated = lb.per_update(walls), lb.per_update(launches), lb.per_update(fresh)
    npy, once = statistics.median(np_s), read_once(rows)
    print(f"least squares, {N:,} samples x {D} features, 4 owners on {os.cpu_count()} cores")
    print(f"  alphac owners {per * 1e3:8.2f} ms/update (slowest owner, (T({args.updates}) - T(1)) / "
          f"{args.updates - 1})  owners/read-once {per / once:.2f}")
    print(f"  alphac launch {evaluated * 1e3:8.2f} ms/update (the oracle evaluated beside the owners)  "
          f"launch/owners {evaluated / per:.2f}")
    print(f"  alphac launch {whole * 1e3:8.2f} ms/update (again: the oracle's kept words)  launch/owners {whole / per:.2f}")
    print(f"  read once     {once * 1e3:8.2f} ms (one pass over the samples, one process)")
    print(f"  numpy         {npy * 1e3:8.2f} ms/update (one process, full batch)  alphac/numpy {per / npy:.2f}")
    if torch_s:
        tg = statistics.median(torch_s)
        print(f"  torch+gloo    {tg * 1e3:8.2f} ms/update (4 processes)  alphac/torch+gloo {per / tg:.2f}")
    else:
        print(f"  torch+gloo    not run: {why}")
    lb.verify("lsq64", dep, run, args.updates)


if __name__ == "__main__":
    main()
