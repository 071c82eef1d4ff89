"""Elementary-function benchmark: the kernels' exp, log, log1p, expm1, tanh and sigmoid
(alphac/codegen/elementary.py: correctly rounded, or the declared algorithms, no libm) over
1e7 binary64 arguments, next to numpy's ufuncs (glibc's libm, or numpy's own SIMD loops
where the CPU has them) on the same arguments, measured in the same run, interleaved
round by round; nanoseconds per element, the medians of --repeat rounds.

The kernels are the `alphac_vNAME` loops (y[i] = NAME(x[i])) JIT-compiled for this host
at the baseline CPU level and at the host's own (`--cpu baseline,host`). Each function is
timed on arguments of its common range (exp, sigmoid, tanh: uniform in [-20, 20]; log:
e^u, u uniform in [-20, 20]; log1p: uniform in (-1, 20]; expm1: uniform in [-20, 20]) and
on the whole finite range where its result is finite (exp: [-745, 709]; log: random
exponents and mantissas). numpy has no sigmoid: its figure is 1 / (1 + exp(-x)). Also:
how many of the kernels' results differ from numpy's (numpy's are not correctly rounded
everywhere).

    python bench/bench_elementary.py [--n 10000000] [--repeat 3] [--cpu baseline,host]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from alphac.codegen import elementary as el  # noqa: E402


def arguments(n: int) -> dict[str, dict[str, np.ndarray]]:
    rng = np.random.default_rng(0)
    u = rng.uniform(-20.0, 20.0, n)
    words = (rng.integers(1, 2046, n, dtype=np.uint64) << np.uint64(52)) | rng.integers(0, 1 << 52, n, dtype=np.uint64)
    return {
        "exp": {"[-20, 20]": u, "[-745, 709]": rng.uniform(-745.0, 709.0, n)},
        "log": {"e^[-20, 20]": np.exp(u), "every binade": words.view(np.float64)},
        "log1p": {"(-1, 20]": rng.uniform(-0.999999, 20.0, n)},
        "expm1": {"[-20, 20]": u},
        "tanh": {"[-20, 20]": u},
        "sigmoid": {"[-20, 20]": u},
    }


def numpy_of(name: str):
    if name == "sigmoid":
        return lambda x: 1.0 / (1.0 + np.exp(-x))
    return getattr(np, name)


def best_of(f, x) -> float:
    t0 = time.perf_counter()
    f(x)
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=10_000_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--cpu", default="baseline,host")
    args = ap.parse_args()
    levels = [c for c in args.cpu.split(",") if c]
    kernels = {(name, cpu): el.host(name, cpu=cpu) for cpu in levels for name in el.FUNCTIONS}
    cases = arguments(args.n)
    print(f"elementary functions over {args.n:,} arguments, ns per element (median of {args.repeat})")
    for name, ranges in cases.items():
        for label, x in ranges.items():
            times = {key: [] for key in ["numpy", *levels]}
            for _ in range(args.repeat):
                times["numpy"].append(best_of(numpy_of(name), x))
                for cpu in levels:
                    times[cpu].append(best_of(kernels[(name, cpu)], x))
            ns = {k: statistics.median(v) / args.n * 1e9 for k, v in times.items()}
            with np.errstate(all="ignore"):
                differ = int(np.count_nonzero(kernels[(name, levels[0])](x).view(np.uint64)
                                              != numpy_of(name)(x).view(np.uint64)))
            line = "  ".join(f"alphac {cpu} {ns[cpu]:6.2f} ({ns[cpu] / ns['numpy']:.2f}x)" for cpu in levels)
            print(f"{name:<8} {label:<14} numpy {ns['numpy']:6.2f}  {line}  differ from numpy: {differ:,}",
                  flush=True)


if __name__ == "__main__":
    main()
