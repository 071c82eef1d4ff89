"""Elementary-function benchmark: the kernels' exp, log, log1p, expm1, tanh and sigmoid
(alphac/codegen/elementary/: correctly rounded, or the declared algorithms, no libm) over
1e7 binary64 arguments, next to numpy's ufuncs (glibc's libm, or numpy's own SIMD loops
where the CPU has them) on the same arguments, measured in the same run, interleaved
round by round; nanoseconds per element, the medians of --repeat rounds.

Two kernels of each function, each compiled for this host at the baseline CPU level and at
the host's own (`--cpu baseline,host`):
  * `program`: what a learner's kernels run, the one-statement program
    `for i { y[i] := NAME(x[i]) }` over the 1e7 coordinates, lowered by
    alphac/codegen/program.py (its chunked loop) and compiled as a build compiles it (O2,
    PIC), called through a shared object;
  * `direct`: the `alphac_vNAME` loops (y[i] = NAME(x[i])) of elementary.vector_module,
    JIT-compiled.
Each function is timed on arguments of its common range (exp, sigmoid, tanh: uniform in
[-20, 20]; log: e^u, u uniform in [-20, 20]; log1p: uniform in (-1, 20]; expm1: uniform in
[-20, 20]) and on the whole finite range where its result is finite (exp: [-745, 709];
log: random exponents and mantissas). numpy has no sigmoid: its figure is
1 / (1 + exp(-x)). Also: how many of the kernels' results differ from numpy's (numpy's are
not correctly rounded everywhere); the two kernels give the same words, which is checked.

    python bench/bench_elementary.py [--n 10000000] [--repeat 3] [--cpu baseline,host]
"""

from __future__ import annotations

import argparse
import ctypes
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from llvmlite import ir

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from alphac.codegen import elementary as el  # noqa: E402
from alphac.codegen.program import emit_program  # noqa: E402
from alphac.ir import nodes as n  # noqa: E402
from alphac.ir.builders import S, assign  # noqa: E402
from alphac.targets import compile_object, load_target  # noqa: E402
from alphac.targets.levels import at_level, level_for  # noqa: E402


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


def program_kernel(name: str, cpu: str, size: int, workdir: Path):
    """`for i in 0 .. size { y[i] := NAME(x[i]) }` as a learner's kernel: x the first
    region, y the second; a float64 array of `size` -> a float64 array."""
    target = load_target({"arm64": "aarch64"}.get(platform.machine(), platform.machine()))
    target = at_level(target, level_for(target, cpu))
    program = n.Program(2 * size, (n.Loop("i", 0, size, (assign(size, n.Unary(name, S(0, "i")), "i"),)),))
    module = ir.Module(f"{name}_{cpu}")
    emit_program(module, program, "kern", [(0, size), (size, size)])
    obj = workdir / f"{name}_{cpu}.o"
    obj.write_bytes(compile_object(module, target))
    subprocess.run(["cc", "-shared", "-o", str(obj.with_suffix(".so")), str(obj)], check=True)
    fn = ctypes.CDLL(str(obj.with_suffix(".so"))).kern
    fn.restype = ctypes.c_int64

    def run(x):
        assert x.size == size
        y = np.empty_like(x)
        coord = ctypes.c_int64(-1)
        status = fn(ctypes.c_void_p(x.ctypes.data), ctypes.c_void_p(y.ctypes.data), ctypes.byref(coord))
        if status:
            raise SystemExit(f"{name} refused at coordinate {coord.value}")
        return y

    return run


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
    kernels = {(name, "direct", cpu): el.host(name, cpu=cpu) for cpu in levels for name in el.FUNCTIONS}
    workdir = Path(tempfile.mkdtemp(prefix="bench_elementary."))
    kernels.update({(name, "program", cpu): program_kernel(name, cpu, args.n, workdir)
                    for cpu in levels for name in el.FUNCTIONS})
    kinds = [(kind, cpu) for cpu in levels for kind in ("program", "direct")]
    cases = arguments(args.n)
    print(f"elementary functions over {args.n:,} arguments, ns per element (median of {args.repeat})")
    for name, ranges in cases.items():
        for label, x in ranges.items():
            times = {key: [] for key in ["numpy", *kinds]}
            for _ in range(args.repeat):
                times["numpy"].append(best_of(numpy_of(name), x))
                for kind in kinds:
                    times[kind].append(best_of(kernels[(name, *kind)], x))
            ns = {k: statistics.median(v) / args.n * 1e9 for k, v in times.items()}
            got = {kind: kernels[(name, *kind)](x).view(np.uint64) for kind in kinds}
            first = got[kinds[0]]
            if any(np.any(g != first) for g in got.values()):
                raise SystemExit(f"{name} {label}: the kernels give different words")
            with np.errstate(all="ignore"):
                differ = int(np.count_nonzero(first != numpy_of(name)(x).view(np.uint64)))
            line = "  ".join(f"{kind} {cpu} {ns[(kind, cpu)]:6.2f} ({ns[(kind, cpu)] / ns['numpy']:.2f}x)"
                             for kind, cpu in kinds)
            print(f"{name:<8} {label:<14} numpy {ns['numpy']:6.2f}  {line}  differ from numpy: {differ:,}",
                  flush=True)

if __name__ == "__main__":
    main()
