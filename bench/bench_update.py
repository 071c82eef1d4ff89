"""Update-kernel benchmark: the executables' Adam update kernel on 1e7 binary64 parameters
next to the memory rate of `a += b` on arrays of the same size and torch.optim.Adam,
measured in the same run, interleaved round by round.

The kernel is `alphac_update` of a one-owner learner with the indexed Adam update, built by
alphac (`alphac.driver.build(..., shared=True, cpu=LEVEL)`: the shared-library build of the
executable, kernels, runtime and image as linked into it) for each CPU level asked for, and
called through ctypes on numpy buffers. Its memory traffic is 7 words per parameter (reads
w, m, v and the mean, writes w, m, v); `a += b` moves 3 (reads a and b, writes a), built as
an llvmlite loop for the same CPU level (the rate a kernel streaming its arrays could reach)
and as numpy's in-place add. GB/s = bytes moved / seconds; the kernel's share is its GB/s
over the fastest `a += b` measured (the machine's rate: the loop at any level, or numpy). The peer, torch.optim.Adam float64 with
foreach=True and False, runs from the benchmark peers' virtual environment (bench/.venv,
`--peer-python`) on the same k, with 1 and 2 threads (as ../shared/anchors/bench_optim.py).
Both levels' kernels must leave the same words.

    python bench/bench_update.py [--k 10000000] [--repeat 3] [--calls 5]
        [--cpu baseline,host] [--torch-threads 1,2] [--peer-python PY]
"""

from __future__ import annotations

import argparse
import ctypes
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from llvmlite import ir

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT))

import peers  # noqa: E402
from alphac import driver  # noqa: E402
from alphac.diagnostics import Span  # noqa: E402
from alphac.ir import nodes as n  # noqa: E402
from alphac.ir.builders import C, S, assign, bits, mul  # noqa: E402
from alphac.targets import compile_object, levels, load_target  # noqa: E402

KERNEL_WORDS = 7  # per parameter: reads w, m, v, mean; writes w, m, v
ADD_WORDS = 3  # per word: reads a, b; writes a
F64P = ctypes.POINTER(ctypes.c_double)


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


def deployment(k: int) -> n.Deployment:
    """One owner with one sample (c[i] = w[i] * x) and the Adam update."""
    contribution = n.Program(2 * k + 1, (n.Loop("i", 0, k, (assign(k + 1, mul(S(0, "i"), S(k)), "i", "c[i]"),)),))
    state = np.zeros(2 * k + 2)
    state[-2:] = 1.0
    rate = bits(1e-3)
    learner = n.Learner("update_bench", k, 1, 2 * k + 2, contribution, adam_update(k),
                        n.Words(np.zeros(k, dtype=np.uint64)), n.Words(state.view(np.uint64)),
                        rate, n.Samples(1, (1,), np.array([[0.5]]).view(np.uint64)))
    return n.Deployment("update_bench", learner, 1, n.Star(), n.Partitioning(),
                        (n.Role("solo", (0,)),), ("x86_64",), 1, n.Contract(), n.Checkpoint(),
                        source_file="bench/update_bench.alpha")


def load_kernel(plan, level: str, tmp: Path):
    """`alphac_update` of the shared-library build for `level`, and the build's seconds."""
    t0 = time.perf_counter()
    so = driver.build(plan, "solo", "x86_64", tmp / level, shared=True, cpu=level)
    seconds = time.perf_counter() - t0
    fn = ctypes.CDLL(str(so)).alphac_update
    fn.restype = ctypes.c_int64
    fn.argtypes = [F64P, F64P, F64P, F64P, ctypes.POINTER(ctypes.c_int64)]
    return fn, seconds


def load_add(level: str, tmp: Path):
    """`void add(double *a, const double *b, i64 n)`: a[i] = a[i] + b[i], an llvmlite loop
    built as the kernels are, for the same CPU level (O2, no fast-math)."""
    f64, i64 = ir.DoubleType(), ir.IntType(64)
    module = ir.Module("add")
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [f64.as_pointer(), f64.as_pointer(), i64]), "add")
    for arg in fn.args[:2]:
        arg.add_attribute("noalias")
    a, b, count = fn.args
    entry, body, done = (fn.append_basic_block(x) for x in ("entry", "body", "done"))
    bld = ir.IRBuilder(entry)
    bld.cbranch(bld.icmp_signed(">", count, ir.Constant(i64, 0)), body, done)
    bld.position_at_end(body)
    j = bld.phi(i64)
    j.add_incoming(ir.Constant(i64, 0), entry)
    pa = bld.gep(a, [j], inbounds=True, source_etype=f64)
    pb = bld.gep(b, [j], inbounds=True, source_etype=f64)
    bld.store(bld.fadd(bld.load(pa, typ=f64), bld.load(pb, typ=f64)), pa)
    nxt = bld.add(j, ir.Constant(i64, 1))
    j.add_incoming(nxt, body)
    bld.cbranch(bld.icmp_signed("<", nxt, count), body, done)
    bld.position_at_end(done)
    bld.ret_void()
    obj, so = tmp / f"add-{level}.o", tmp / f"add-{level}.so"
    obj.write_bytes(compile_object(module, levels.at_level(load_target("x86_64"), level)))
    subprocess.run(["cc", "-shared", "-o", str(so), str(obj)], check=True)
    add = ctypes.CDLL(str(so)).add
    add.restype = None
    add.argtypes = [F64P, F64P, ctypes.c_int64]
    return add


class Buffers:
    """One kernel's words: parameters, optimizer state (m, v, b1^t, b2^t), mean and rate."""

    def __init__(self, k: int):
        rng = np.random.default_rng(0)
        self.params = rng.standard_normal(k)
        self.state = np.zeros(2 * k + 2)
        self.state[2 * k:] = 1.0
        self.mean = rng.standard_normal(k)
        self.rate = np.array([1e-3])
        self.coord = ctypes.c_int64(-1)

    def call(self, fn) -> None:
        ptr = [a.ctypes.data_as(F64P) for a in (self.params, self.state, self.mean, self.rate)]
        status = fn(*ptr, ctypes.byref(self.coord))
        if status != 0:
            raise SystemExit(f"bench: the kernel refused statement {status} at {self.coord.value}")


def timed(f, calls: int) -> list[float]:
    out = []
    for _ in range(calls):
        t0 = time.perf_counter()
        f()
        out.append(time.perf_counter() - t0)
    return out


def torch_steps(python: str, k: int, threads: int, reps: int) -> dict[str, float] | str:
    """{foreach: median seconds per step} from one start of bench/peer_adam.py, or why not."""
    got = peers.run_json([python, str(ROOT / "bench" / "peer_adam.py"), "--k", str(k),
                          "--threads", str(threads), "--reps", str(reps)])
    if isinstance(got, str):
        return got
    return {fe: statistics.median(ts) for fe, ts in got["seconds"].items()}


def gbps(words_per: int, k: int, seconds: float) -> float:
    return words_per * 8 * k / seconds / 1e9


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--k", type=lambda x: int(float(x)), default=10_000_000)
    ap.add_argument("--repeat", type=int, default=3, help="interleaved rounds")
    ap.add_argument("--calls", type=int, default=5, help="timed calls of each per round")
    ap.add_argument("--cpu", default="baseline,host", help="CPU levels of the kernel, comma-separated")
    ap.add_argument("--torch-threads", default="1,2", help="torch thread counts; '' for none")
    peers.add_option(ap)
    args = ap.parse_args()
    k, cpus = args.k, args.cpu.split(",")
    threads = [int(t) for t in args.torch_threads.split(",") if t]
    print(f"== update kernel: Adam on k = {k} binary64 parameters, one owner, one thread; "
          f"{args.repeat} interleaved rounds of {args.calls} calls")
    t0 = time.perf_counter()
    plan = driver.plan(deployment(k))
    print(f"  planned in {time.perf_counter() - t0:.2f} s")
    missing = peers.missing(args.peer_python, "torch") if threads else None
    with tempfile.TemporaryDirectory(prefix="alphac-bench-") as d:
        tmp = Path(d)
        kernels, adds, bufs = {}, {}, {}
        for level in cpus:
            kernels[level], seconds = load_kernel(plan, level, tmp)
            adds[level] = load_add(level, tmp)
            bufs[level] = Buffers(k)
            print(f"  built the {level} kernel (shared library) in {seconds:.2f} s")
        a, b = np.random.default_rng(1).standard_normal((2, k))
        times: dict[str, list[float]] = {}
        for _ in range(args.repeat):
            for level in cpus:
                bufs[level].call(kernels[level])  # warm: the buffers' pages are touched
                times.setdefault(f"kernel {level}", []).extend(
                    timed(lambda: bufs[level].call(kernels[level]), args.calls))
                pa, pb = a.ctypes.data_as(F64P), b.ctypes.data_as(F64P)
                times.setdefault(f"add {level}", []).extend(timed(lambda: adds[level](pa, pb, k), args.calls))
            times.setdefault("numpy", []).extend(timed(lambda: np.add(a, b, out=a), args.calls))
            for t in threads if not missing else ():
                got = torch_steps(args.peer_python, k, t, args.calls)
                for fe in ("True", "False"):
                    times.setdefault(f"torch {fe} {t}", []).append(got if isinstance(got, str) else got[fe])
        same = len({bufs[lv].params.tobytes() + bufs[lv].state.tobytes() for lv in cpus}) == 1
    report(k, cpus, threads, times, missing, same, args.repeat * args.calls)


def report(k: int, cpus: list[str], threads: list[int], times: dict, missing: str | None,
           same: bool, calls: int) -> None:
    med = {key: statistics.median(v) for key, v in times.items() if not any(isinstance(x, str) for x in v)}
    print(f"  {'':<34} {'ms':>8} {'GB/s':>7}   (medians of {calls} calls)")
    adds = {f"a += b, llvmlite loop, {lv}": med[f"add {lv}"] for lv in cpus}
    adds["a += b, numpy"] = med["numpy"]
    rate = max(gbps(ADD_WORDS, k, t) for t in adds.values())
    for label, t in adds.items():
        print(f"  {label:<34} {t * 1e3:8.2f} {gbps(ADD_WORDS, k, t):7.2f}")
    for level in cpus:
        kern = med[f"kernel {level}"]
        print(f"  {'alphac_update, ' + level:<34} {kern * 1e3:8.2f} {gbps(KERNEL_WORDS, k, kern):7.2f}"
              f"   {gbps(KERNEL_WORDS, k, kern) / rate * 100:.0f} % of the a += b rate ({rate:.2f} GB/s)")
    if missing:
        print(f"  torch.optim.Adam: not installed: {missing}")
    for t in threads if not missing else ():
        for fe in ("True", "False"):
            key = f"torch {fe} {t}"
            label = f"torch Adam foreach={fe}, {t} thr"
            if key not in med:
                print(f"  {label:<34} {times[key][0]}")
                continue
            ratios = ", ".join(f"{lv} {med[key] / med[f'kernel {lv}']:.2f}x" for lv in cpus)
            print(f"  {label:<34} {med[key] * 1e3:8.2f} {gbps(KERNEL_WORDS, k, med[key]):7.2f}"
                  f"   torch/alphac: {ratios}")
    print(f"  every level's kernel left the same words: {same}")


if __name__ == "__main__":
    main()
