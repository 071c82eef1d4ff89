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

    python bench/bench_e2e.py [--updates 6] [--repeat 3] [--no-verify] [--peer-python PY]
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT))

import learner_bench as lb  # noqa: E402

SPEC = ROOT / "specs" / "bench" / "lsq64.alpha"
DATA = ROOT / "out" / "data" / "lsq64.npy"


def read_once(rows: np.ndarray) -> float:
    """Seconds of one pass over the samples' bytes (a vectorised integer reduction), best of 3."""
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
    args = lb.options(__doc__)
    kept, fresh = {1: [], args.updates: []}, {1: [], args.updates: []}

    def launches(dep) -> None:
        if not kept[1]:  # the oracle's compiled engine loaded once before anything is timed
            launch_seconds(dep, 1, fresh=True)
        for u in kept:
            kept[u].append(launch_seconds(dep, u))
            fresh[u].append(launch_seconds(dep, u, fresh=True))

    r = lb.Rounds("lsq64", SPEC, DATA, "lsq", args, extra=launches)
    evaluated, again, once = lb.per_update(fresh), lb.per_update(kept), read_once(r.rows)
    r.report("least squares", [
        f"  alphac launch {evaluated * 1e3:8.2f} ms/update (the oracle evaluated beside the owners)  "
        f"launch/owners {evaluated / r.per:.2f}",
        f"  alphac launch {again * 1e3:8.2f} ms/update (again: the oracle's kept words)  launch/owners {again / r.per:.2f}",
        f"  read once     {once * 1e3:8.2f} ms (one pass over the samples, one process)  owners/read-once {r.per / once:.2f}",
    ])


if __name__ == "__main__":
    main()
