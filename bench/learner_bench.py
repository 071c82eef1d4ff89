"""What the learner benchmarks (bench/bench_logistic.py, bench/bench_e2e.py) share: their
data, alphac's owners timed through the launch session, numpy's full-batch step and the
torch + gloo peer (bench/peer_logistic.py) in the same run, interleaved round by round.

alphac's figure is (T(N) - T(1)) / (N - 1) of the slowest owner's wall time, medians over
the rounds (process start-up, loading the samples and connecting cancel).
"""

from __future__ import annotations

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


def alphac_run(name: str, dep, exes, updates: int):
    from alphac.launch import session

    run = session.run(name, dep, exes=exes, updates=updates, timeout_ms=600000, deadline_s=1800)
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
    from alphac.launch import session
    from alphac.launch.launcher import compare
    from alphac.oracle import evaluate

    t0 = time.perf_counter()
    report = compare(session.plan(name, dep), run, evaluate(dep, updates), updates)
    print(f"  the last run ({updates} updates) equals the oracle: {report.match} "
          f"(the oracle took {time.perf_counter() - t0:.1f} s)")
