"""What the learner benchmarks (bench/bench_logistic.py, bench/bench_e2e.py; the consistency
benchmarks use its runs) share: their
data, alphac's owners timed through the launch session, numpy's full-batch step and the
torch + gloo peer (bench/peer_logistic.py) in the same run, interleaved round by round.

alphac's figure is (T(N) - T(1)) / (N - 1) of the slowest owner's wall time, medians over
the rounds (process start-up, loading the samples and connecting cancel).
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

import peers  # noqa: E402

N, D = 262_144, 64


def make_data(path: Path, model: str) -> None:
    """N rows of D features (scales 0.01 to 1) and a target: a 0/1 label (logistic) or a
    noisy linear response (lsq), written once."""
    if path.is_file() and path.stat().st_size > N * (D + 1) * 8:
        return
    rng = np.random.default_rng(20261202)
    x = rng.standard_normal((N, D)) * (10.0 ** rng.integers(-2, 1, size=D))
    truth = rng.standard_normal(D)
    y = x @ truth + rng.standard_normal(N)
    if model == "logistic":
        y = (y > 0).astype(np.float64)
    path.parent.mkdir(parents=True, exist_ok=True)
    np.save(path, np.concatenate([x, y[:, None]], axis=1).astype("<f8"))
    print(f"wrote {path}: {N} samples of {D + 1} words")


def numpy_step(model: str, X: np.ndarray, y: np.ndarray):
    """numpy's vectorised full-batch step (BLAS, numpy's exp), from w = 0: p = sigmoid(X w)
    with rate 0.5 (logistic) or p = X w with rate 0.01 (lsq); w -= rate X^T (p - y) / N."""
    w, rate = np.zeros(D), 0.5 if model == "logistic" else 0.01

    def step():
        nonlocal w
        p = 1.0 / (1.0 + np.exp(-(X @ w))) if model == "logistic" else X @ w
        w = w - rate * (X.T @ (p - y)) / N
    return step


def options(doc: str) -> argparse.Namespace:
    """--updates, --repeat, --no-verify and the peers' --peer-python."""
    ap = argparse.ArgumentParser(description=doc.splitlines()[0])
    ap.add_argument("--updates", type=int, default=6)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--no-verify", action="store_true", help="skip comparing the last run with the oracle")
    peers.add_option(ap)
    args = ap.parse_args()
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    return args


class Rounds:
    """The learner `name` (SPEC, its samples in DATA, `model` for make_data and the peer),
    timed round by round: alphac's owners at 1 and --updates updates, numpy's step, the torch
    + gloo peer, and each round's `extra(dep)` (what a benchmark adds)."""

    def __init__(self, name: str, spec: Path, data: Path, model: str, args, extra=None,
                 peers_too: bool = True):
        from alphac import driver
        from alphac.testing import session

        make_data(data, model)
        self.name, self.args = name, args
        self.dep = driver.deployment(str(spec))
        exes = session.built(name, self.dep)
        why = peers.missing(args.peer_python, "torch")
        self.walls = {1: [], args.updates: []}
        numpy_s, torch_s = [], []
        rows = np.load(data)
        self.rows = rows
        step = numpy_step(model, rows[:, :D], rows[:, D]) if peers_too else None
        for _ in range(args.repeat):
            for u in self.walls:
                self.run = alphac_run(name, self.dep, exes, u)
                self.walls[u].append(owners_seconds(self.run))
            if extra is not None:
                extra(self.dep)
            if not peers_too:
                continue
            numpy_s.append(timed(step, 3))
            got = torch_gloo(args.peer_python, data, model, why)
            if isinstance(got, str):
                why = got
            else:
                torch_s.append(got)
        self.per = per_update(self.walls)
        self.numpy = statistics.median(numpy_s) if numpy_s else None
        self.torch = statistics.median(torch_s) if torch_s else why

    def report(self, title: str, more=()) -> None:
        u = self.args.updates
        print(f"{title}, {N:,} samples x {D} features, 4 owners on {os.cpu_count()} cores")
        print(f"  alphac owners {self.per * 1e3:8.2f} ms/update (slowest owner, (T({u}) - T(1)) / {u - 1})")
        for line in more:
            print(line)
        print(f"  numpy         {self.numpy * 1e3:8.2f} ms/update (one process, full batch)  "
              f"alphac/numpy {self.per / self.numpy:.2f}")
        if isinstance(self.torch, str):
            print(f"  torch+gloo    not run: {self.torch}")
        else:
            print(f"  torch+gloo    {self.torch * 1e3:8.2f} ms/update (4 processes)  "
                  f"alphac/torch+gloo {self.per / self.torch:.2f}")
        if not self.args.no_verify:
            verify(self.name, self.dep, self.run, u)


def alphac_run(name: str, dep, exes, updates: int, **kw):
    """One run of `updates` updates (`kw`: more of session.run's options, such as the
    transport); every owner must succeed."""
    from alphac.testing import session

    run = session.run(name, dep, exes=exes, updates=updates, timeout_ms=600000, deadline_s=1800, **kw)
    if not run.result.ok:
        sys.exit("bench: owners failed: " + "; ".join(oc.stderr.strip() for oc in run.result.outcomes))
    return run


def owners_seconds(run) -> float:
    return max(oc.seconds for oc in run.result.outcomes)


def per_update(walls: dict) -> float:
    """(median T(N) - median T(1)) / (N - 1) of {updates: [seconds, ...]}."""
    lo, hi = min(walls), max(walls)
    return (statistics.median(walls[hi]) - statistics.median(walls[lo])) / (hi - lo)


def torch_gloo(peer_python: str, data: Path, model: str, why):
    """Per-update seconds of the torch + gloo peer on 4 processes, or its reason not to run."""
    if why is not None:
        return why
    got = peers.run_json([peer_python, str(ROOT / "bench" / "peer_logistic.py"), "--model", model,
                          "--data", str(data), "--owners", "4", "--updates", "5", "--reps", "1"])
    return got if isinstance(got, str) else got["seconds"][0]


def timed(step, updates: int) -> float:
    t0 = time.perf_counter()
    for _ in range(updates):
        step()
    return (time.perf_counter() - t0) / updates


def verify(name: str, dep, run, updates: int) -> None:
    """The run's words against the oracle's, word for word."""
    from alphac.testing import session
    from alphac.launch.report import compare
    from alphac.oracle import evaluate

    t0 = time.perf_counter()
    report = compare(session.plan(name, dep), run, evaluate(dep, updates), updates)
    print(f"  the last run ({updates} updates) equals the oracle: {report.match} "
          f"(the oracle took {time.perf_counter() - t0:.1f} s)")
