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

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT))

import learner_bench as lb  # noqa: E402

SPEC = ROOT / "specs" / "bench" / "logistic64.alpha"
DATA = ROOT / "out" / "data" / "logistic64.npy"


def main() -> None:
    args = lb.options(__doc__)
    lb.Rounds("logistic64", SPEC, DATA, "logistic", args).report("logistic regression")


if __name__ == "__main__":
    main()
