"""Update-kernel benchmark: the indexed Adam update program on 1e7 binary64 parameters,
one owner, compiled for the host (x86-64) and called through ctypes on numpy buffers.

Also times `alphac build --all` for the demo and lists the executables' sizes.

Prints seconds per update (median of several) beside the peer, torch.optim.Adam (float64,
foreach, 2 threads), timed in the same run when torch is installed (as
../shared/anchors/bench_optim.py times it); without torch, the figure that script recorded
on this machine (56.3 ms) is printed instead.

    python bench/bench_kernel.py [--k 10000000] [--repeat 7] [--build SPEC]
"""

from __future__ import annotations

import argparse
import ctypes
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
from llvmlite import ir

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from alphac.codegen.program import emit_program, program_regions  # noqa: E402
from alphac.diagnostics import Span  # noqa: E402
from alphac.ir import nodes as n  # noqa: E402
from alphac.ir.builders import C, S  # noqa: E402
from alphac.targets import compile_object, load_target  # noqa: E402

ANCHOR_MS = 56.3  # torch.optim.Adam float64 foreach=True, 1e7 params, 2 threads (anchors/README.md)


def measure_peer(k: int, repeat: int) -> float | None:
    """Median ms of one torch.optim.Adam step (float64, foreach, 2 threads) on k parameters
    in this run, or None when torch is not installed (the anchor figure is printed then)."""
    try:
        import torch
    except ImportError:
        return None
    torch.set_num_threads(2)
    torch.manual_seed(0)
    p = torch.nn.Parameter(torch.randn(k, dtype=torch.float64))
    p.grad = torch.randn(k, dtype=torch.float64)
    opt = torch.optim.Adam([p], lr=1e-3, foreach=True)
    opt.step()
    opt.step()  # warm-up steps create the state
    times = []
    steps = 4  # as ../shared/anchors/bench_optim.py: each rep times consecutive steps
    for _ in range(repeat):
        t0 = time.perf_counter()
        for _ in range(steps):
            opt.step()
        times.append((time.perf_counter() - t0) / steps)
    return statistics.median(times) * 1e3


def adam_update(k: int, b1=0.9, b2=0.999, eps=1e-8) -> n.Program:
    """The indexed Adam update: params [0,k), m [k,2k), v [2k,3k), b1^t, b2^t, mean, rate."""
    B = n.Binary
    m_, v_, p1, p2, g, lr = k, 2 * k, 3 * k, 3 * k + 1, 3 * k + 2, 4 * k + 2
    sp = Span("bench.alpha", 1, 1)
    return n.Program(4 * k + 3, (
        n.Assign(n.Index(p1), B("mul", S(p1), C(b1)), sp, "p1"),
        n.Assign(n.Index(p2), B("mul", S(p2), C(b2)), sp, "p2"),
        n.Let("c1", B("sub", C(1.0), S(p1)), sp),
        n.Let("c2", B("sub", C(1.0), S(p2)), sp),
        n.Loop("i", 0, k, (
            n.Assign(n.Index(m_, "i"), B("add", B("mul", C(b1), S(m_, "i")),
                                         B("mul", C(1 - b1), S(g, "i"))), sp, "m[i]"),
            n.Assign(n.Index(v_, "i"), B("add", B("mul", C(b2), S(v_, "i")),
                                         B("mul", B("mul", C(1 - b2), S(g, "i")), S(g, "i"))),
                     sp, "v[i]"),
            n.Assign(n.Index(0, "i"), B("sub", S(0, "i"), B("div", B("mul", S(lr), B("div", S(m_, "i"), n.Local("c1"))),
                                                           B("add", n.Unary("sqrt", B("div", S(v_, "i"), n.Local("c2"))), C(eps)))),
                     sp, "w[i]"),
        )),
    ))


def load_kernel(k: int, tmp: Path, cpu: str | None = None):
    """The kernel compiled for the x86_64 target (or that target with another `cpu`)."""
    target = load_target("x86_64")
    if cpu:
        target = replace(target, cpu=cpu)
    module = ir.Module("bench")
    emit_program(module, adam_update(k), "adam", program_regions("update", k, 0, 2 * k + 2))
    tag = cpu or "target"
    obj = tmp / f"adam-{tag}.o"
    t0 = time.perf_counter()
    obj.write_bytes(compile_object(module, target))
    compile_s = time.perf_counter() - t0
    so = tmp / f"adam-{tag}.so"
    subprocess.run(["cc", "-shared", "-o", str(so), str(obj)], check=True)
    fn = ctypes.CDLL(str(so)).adam
    fn.restype = ctypes.c_int64
    return fn, compile_s, target.cpu


def measure(fn, k: int, repeat: int) -> tuple[list[float], np.ndarray]:
    """Seconds per call over `repeat` updates on fresh buffers (after one warm-up call)."""
    rng = np.random.default_rng(0)
    params = rng.standard_normal(k)
    state = np.zeros(2 * k + 2)
    state[2 * k:] = 1.0
    mean = rng.standard_normal(k)
    rate = np.array([1e-3])
    coord = ctypes.c_int64(-1)
    ptrs = [a.ctypes.data_as(ctypes.c_void_p) for a in (params, state, mean, rate)]
    times = []
    for _ in range(repeat + 1):
        t0 = time.perf_counter()
        status = fn(*ptrs, ctypes.byref(coord))
        times.append(time.perf_counter() - t0)
        if status != 0:
            raise SystemExit(f"refused: statement {status} at {coord.value}")
    return times[1:], params


def bench_build(spec: str) -> None:
    """Wall time of `alphac build SPEC --all` in a fresh process, and the executables' sizes."""
    if not Path(spec).exists():
        print(f"build: {spec} not found; skipped")
        return
    walls = []
    with tempfile.TemporaryDirectory() as tmp:
        for trial in range(3):
            out = Path(tmp) / str(trial)
            t0 = time.perf_counter()
            done = subprocess.run([sys.executable, "-m", "alphac", "build", spec, "--all", "-o", str(out)],
                                  capture_output=True, text=True, cwd=ROOT)
            walls.append(time.perf_counter() - t0)
            if done.returncode != 0:
                print(f"build: failed: {done.stderr.strip()}")
                return
        sizes = {p.name: p.stat().st_size for p in sorted(out.iterdir())}
        same = all((Path(tmp) / "0" / name).read_bytes() == (out / name).read_bytes() for name in sizes)
    print(f"alphac build {Path(spec).name} --all: median {statistics.median(walls):.2f} s wall "
          f"(3 runs, fresh process each; byte-identical across runs: {same})")
    for name, size in sizes.items():
        print(f"  {name}: {size} bytes")


def _host_has_avx2() -> bool:
    try:
        return " avx2 " in Path("/proc/cpuinfo").read_text().replace("\n", " ")
    except OSError:
        return False


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--k", type=int, default=10_000_000)
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--no-variant", action="store_true",
                    help="skip the x86-64-v3 (AVX2) variant of the same kernel")
    ap.add_argument("--build", default=str(ROOT / "specs" / "demo.alpha"), metavar="SPEC",
                    help="also time `alphac build SPEC --all` (default: the demo; '' to skip)")
    args = ap.parse_args()
    if args.build:
        bench_build(args.build)
    k = args.k
    print(f"adam update kernel, k={k:.0e} binary64 parameters, 1 owner, 1 thread, via ctypes")
    runs = [None] + ([] if args.no_variant or not _host_has_avx2() else ["x86-64-v3"])
    peer = measure_peer(k, args.repeat)
    peer_ms = ANCHOR_MS if peer is None else peer
    words = []
    with tempfile.TemporaryDirectory() as tmp:
        for cpu in runs:
            fn, compile_s, cpu_name = load_kernel(k, Path(tmp), cpu)
            times, params = measure(fn, k, args.repeat)
            words.append(params.view(np.uint64).copy())
            med = statistics.median(times)
            label = "alphac/targets/x86_64.toml" if cpu is None else "variant, not the shipped target"
            print(f"  cpu {cpu_name:<10} ({label})")
            print(f"    per update: median {med * 1e3:.1f} ms  min {min(times) * 1e3:.1f} ms  "
                  f"max {max(times) * 1e3:.1f} ms  ({args.repeat} runs; emit_object "
                  f"{compile_s * 1e3:.0f} ms)")
            print(f"    throughput {k / med / 1e6:.0f} M params/s; "
                  f"peer/alphac = {peer_ms / (med * 1e3):.2f}x" if k == 10_000_000 or peer else
                  f"    throughput {k / med / 1e6:.0f} M params/s")
    if len(words) == 2:
        same = bool((words[0] == words[1]).all())
        print(f"  both builds give the same {args.repeat + 1}-update words: {same}")
    if peer is None:
        print(f"  peer: torch.optim.Adam float64 foreach=True, 1e7 params, 2 threads: {ANCHOR_MS} ms "
              f"(figure from ../shared/anchors/README.md; torch is not installed here)")
    else:
        print(f"  peer: torch.optim.Adam float64 foreach=True, k={k:.0e}, 2 threads: "
              f"{peer:.1f} ms per step, measured in this run")


if __name__ == "__main__":
    main()
