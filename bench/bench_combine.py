"""Combine benchmark: owners on loopback, long contributions, seconds per update, over TCP
and over shared memory.

The learner is the smallest that puts k-word frames on the wire: k parameters in the
indexed form, one sample per owner, c[i] = w[i] * x and w[i] := w[i] - rate * mean[i].
Each update moves k + 1 words per tree edge, up then down (star and hierarchy:2), for
every owner count of --owners (default 4) and every k of --k (default 1e6; --sweep: 2, 4
and 8 owners, k = 1e5, 1e6, 1e7). Each deployment runs with the peers file of every
--transport (default tcp and shm: `shm` lets the owners use shared-memory rings), and,
over shared memory, with `--key` too (every frame tagged with HMAC-SHA-256).
Seconds per update = (T(N) - T(1)) / (N - 1), medians of a few runs, so process start-up and
connection set-up cancel; wall time is the slowest owner's, CPU time (user + system) is that
of all owners together (on a machine with fewer cores than owners, CPU per update
divided by the cores bounds the wall time from below). Peers on this machine (../shared/anchors/README.md, ws 4, 1e6
float64): gloo all_reduce 12.9 ms, Open MPI over TCP 17.5 ms, over shared memory 6.6 ms.

With `--baseline REV` the same deployments are also built from the tree at git revision
REV (checked out into a temporary directory, built by its own code) and both sets of
executables are timed in the same run, interleaved round by round (the baseline over TCP:
a revision before the transport column reads only TCP peers files).

Also: the frame checksum's payload pass, the add on arrival of a received piece (the C
hash then the add kernel, and the one-pass kernel), building every (role, target) of
specs/demo.alpha, and executable sizes.

    python bench/bench_combine.py [--k 1000000[,...]] [--owners 4[,...]] [--transport tcp,shm]
                                  [--sweep] [--updates 21] [--repeat 3] [--baseline REV]
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
# A baseline build imports this file with another tree first on sys.path.
if not os.environ.get("ALPHAC_BENCH_BASELINE"):
    sys.path.insert(0, str(ROOT))

from alphac.ir import nodes as N  # noqa: E402

PEERS_MS = {"gloo all_reduce ws4": 12.9, "Open MPI tcp ws4": 17.5, "Open MPI shm ws4": 6.6}
XS = (0.5, 0.25, 1.0, 2.0)  # each owner's one sample, in turn


def _bits(x: float) -> int:
    return struct.unpack("<Q", struct.pack("<d", x))[0]


def learner(k: int, xs=XS) -> N.Learner:
    i = N.Index(0, "i")
    mul = N.Binary("mul", N.SlotRef(i), N.SlotRef(N.Index(k)))
    contribution = N.Program(2 * k + 1, (N.Loop("i", 0, k, (
        N.Assign(N.Index(k + 1, "i"), mul, label="c[i]"),)),))
    step = N.Binary("sub", N.SlotRef(i), N.Binary("mul", N.SlotRef(N.Index(2 * k)),
                                                  N.SlotRef(N.Index(k, "i"))))
    update = N.Program(2 * k + 1, (N.Loop("i", 0, k, (N.Assign(i, step, label="w[i]"),)),))
    w0 = np.linspace(-1.0, 1.0, k).view(np.uint64)
    rows = np.array([[x] for x in xs]).view(np.uint64)
    return N.Learner("combine_bench", k, 1, 0, contribution, update, N.Words(w0), N.Words(()),
                     _bits(0.01), N.Samples(1, (1,) * len(xs), rows))


def deployment(k: int, topology, owners: int = 4) -> N.Deployment:
    name = f"{'star' if isinstance(topology, N.Star) else 'hierarchy'}{'' if owners == 4 else owners}"
    xs = tuple(XS[o % len(XS)] for o in range(owners))
    return N.Deployment(f"combine_{name}", learner(k, xs), owners, topology, N.Partitioning(),
                        (N.Role("coordinator", (0,)), N.Role("worker", tuple(range(1, owners)))),
                        ("x86_64",) * owners, 1, N.Contract(), N.Checkpoint(),
                        source_file=f"bench/combine_{name}.alpha")


def solo(k: int) -> N.Deployment:
    """One owner alone: the same kernels, local sum and mean, and no frames at all."""
    return N.Deployment("combine_solo", learner(k, (0.5,)), 1, N.Star(), N.Partitioning(),
                        (N.Role("solo", (0,)),), ("x86_64",), 1, N.Contract(), N.Checkpoint(),
                        source_file="bench/combine_solo.alpha")


def _deployments(k: int, owners=(4,)):
    """Star and hierarchy:2 for each owner count, then the solo run."""
    return tuple(deployment(k, t, n) for n in owners for t in (N.Star(), N.Hierarchy(2))) + (solo(k),)


# Run with the baseline tree first on sys.path: builds this file's deployments with that
# tree's own builder and prints {deployment name: {"role target": executable}} as JSON.
_BASELINE_BUILD = """
import importlib, json, sys
sys.path.insert(0, sys.argv[1])
spec = importlib.util.spec_from_file_location("bench_combine", sys.argv[2])
bench = importlib.util.module_from_spec(spec); spec.loader.exec_module(bench)
import os
from alphac.plan import plan
# (look for the file: an installed alphac elsewhere could answer an import of the name)
if os.path.exists(os.path.join(sys.argv[1], "alphac", "driver.py")):
    from alphac.driver import build
else:
    from alphac.codegen.build import build_executable as build
out = {}
for dep in bench._deployments(int(sys.argv[3]), tuple(int(n) for n in sys.argv[5].split(","))):
    p = plan(dep)
    pairs = sorted({(dep.role_of(o).name, dep.placement[o]) for o in range(dep.owners)})
    out[dep.name] = {f"{r} {t}": str(build(p, r, t, sys.argv[4] + "/" + dep.name)) for r, t in pairs}
print(json.dumps(out))
"""


def baseline_executables(rev: str, k: int, owners, work: Path) -> dict:
    """Build the bench deployments from the tree at `rev` (its own code); their executables."""
    import json

    tree = work / "tree"
    tree.mkdir()
    archive = subprocess.run(["git", "archive", rev], cwd=ROOT, capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(tree)], input=archive, check=True)
    env = {**os.environ, "ALPHAC_BENCH_BASELINE": "1", "PYTHONPATH": str(tree)}
    done = subprocess.run([sys.executable, "-c", _BASELINE_BUILD, str(tree), __file__, str(k),
                           str(work / "bin"), ",".join(str(n) for n in owners)], env=env,
                          capture_output=True, text=True, cwd=tree)
    if done.returncode != 0:
        sys.exit(f"bench: building the baseline {rev} failed: {done.stderr.strip()[-2000:]}")
    built = json.loads(done.stdout.strip().splitlines()[-1])
    return {name: {tuple(key.split()): Path(p) for key, p in exes.items()} for name, exes in built.items()}


def _time(key, dep, exes, updates, walls, cpus, variant):
    from alphac.launch import session

    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    run = session.run(key, dep, exes=exes, updates=updates, timeout_ms=60000, deadline_s=600,
                      authenticate=variant.key, transport=variant.transport,
                      stats=not variant.baseline)  # a baseline revision may predate --stats
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    if not run.result.ok:
        sys.exit("bench: owners failed: " + "; ".join(oc.stderr.strip() for oc in run.result.outcomes))
    walls[updates].append(max(oc.seconds for oc in run.result.outcomes))
    cpus[updates].append((r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime))
    return run


def _as_published(run, dep, updates) -> None:
    """A baseline revision's owners predate the commit record: take the output of every
    owner that exited 0 as published, as that revision did."""
    from alphac.launch.commit import CommitRecord, Resolution
    from alphac.launch.results import read_result

    run.outputs = {oc.owner: read_result(oc.out) for oc in run.result.outcomes if oc.ok}
    run.output_errors.clear()
    run.resolution = Resolution(CommitRecord(0, updates, dep.owners, {}))


@dataclass(frozen=True)
class Variant:
    """One way of running a deployment: whose executables, over which transport, keyed."""

    name: str
    transport: str
    key: bool = False
    baseline: bool = False


def variants_of(dep, transports, baseline: str | None, old: dict) -> list[Variant]:
    out = [Variant(t, t) for t in transports] if dep.owners > 1 else [Variant("alone", "tcp")]
    if dep.owners > 1 and "shm" in transports:
        out.append(Variant("shm, --key", "shm", key=True))
    if dep.name in old:
        out.append(Variant(f"baseline {baseline}, tcp", "tcp", baseline=True))
    return out


def bench_combine(ks, owners, transports, updates: int, repeat: int, baseline: str | None) -> None:
    from alphac.launch import session
    from alphac.launch.launcher import compare
    from alphac.oracle import evaluate

    print("== combine on 127.0.0.1: seconds per update (T(N) - T(1)) / (N - 1), medians of "
          f"{repeat}; CPU of all owners")
    with tempfile.TemporaryDirectory(prefix="alphac-bench-") as work:
        for k in ks:
            n_updates = updates if k <= 2_000_000 else max(3, updates // 4)
            old = baseline_executables(baseline, k, owners, Path(work) / str(k)) if baseline else {}
            for dep in _deployments(k, owners):
                key = f"{dep.name}-{k}"
                t0 = time.monotonic()
                exes = session.built(key, dep)
                build_s = time.monotonic() - t0
                runs = variants_of(dep, transports, baseline, old)
                walls = {v: {1: [], n_updates: []} for v in runs}
                cpus = {v: {1: [], n_updates: []} for v in runs}
                last = {}
                for _ in range(repeat):  # interleaved: each round runs every variant
                    for v in runs:
                        for n in (1, n_updates):
                            last[v] = _time(key, dep, old[dep.name] if v.baseline else exes, n,
                                            walls[v], cpus[v], v)
                for v in runs:
                    if v.baseline:
                        _as_published(last[v], dep, n_updates)
                want = evaluate(dep, n_updates)
                for v in runs:
                    t1, tn = statistics.median(walls[v][1]), statistics.median(walls[v][n_updates])
                    per = (tn - t1) / (n_updates - 1)
                    cpu = (statistics.median(cpus[v][n_updates]) - statistics.median(cpus[v][1])) / (n_updates - 1)
                    rep = compare(session.plan(key, dep), last[v], want, n_updates)
                    used = "" if v.baseline else f"; frames over {_used(last[v])}"
                    verdict = "bit-identical to the oracle" if rep.match else "MISMATCH: " + "; ".join(rep.failures)
                    print(f"{dep.name:>18} k={k:<8} [{v.name}]: {per * 1e3:8.2f} ms/update wall, {cpu * 1e3:8.2f} ms CPU "
                          f"({dep.owners} owner{'s' if dep.owners > 1 else ''}; T(1) {t1:.3f} s, T({n_updates}) "
                          f"{tn:.3f} s" + (f"; build {build_s:.2f} s" if v == runs[0] else "") + f"{used}; {verdict})")
    for peer, ms in PEERS_MS.items():
        print(f"{peer:>24}: {ms:7.2f} ms  (all_reduce only, unordered, k = 1e6; anchors/README.md)")


def _used(run) -> str:
    """The transports the owners' connections reports name."""
    from alphac.launch.results import transport_summary

    kinds = {transport_summary(c) for c in run.connections.values()} - {"-"}
    return "+".join(sorted(kinds)) or "nothing (one owner)"


def _best(f, times: int = 20) -> float:
    ts = []
    for _ in range(times):
        t0 = time.perf_counter()
        f()
        ts.append(time.perf_counter() - t0)
    return min(ts)


def _library(d: str):
    """The runtime and kernels of a small learner as a shared library, with the
    signatures these benchmarks call."""
    import ctypes

    from alphac import driver

    lib = ctypes.CDLL(str(driver.build(driver.plan(solo(16)), "solo", "x86_64", d, shared=True)))
    p, i64, u64 = ctypes.c_void_p, ctypes.c_int64, ctypes.c_uint64
    for name, res, args in (("rt_fnv", u64, [p, i64, u64]), ("rt_lanes", None, [p, i64, i64, p]),
                            ("alphac_add_range", i64, [p, p, p, i64, i64]),
                            ("alphac_add_lanes", i64, [p, p, p, p, i64, i64, p])):
        getattr(lib, name).restype, getattr(lib, name).argtypes = res, args
    return lib


def bench_checksum(k: int) -> None:
    """The frame checksum's payload pass alone, in the runtime's C code, on this machine."""
    with tempfile.TemporaryDirectory() as d:
        lib = _library(d)
        words = np.arange(k, dtype=np.uint64)
        state = np.zeros(4, dtype=np.uint64)
        serial = _best(lambda: lib.rt_fnv(words.ctypes.data, k, 0xCBF29CE484222325))
        laned = _best(lambda: lib.rt_lanes(words.ctypes.data, 0, k, state.ctypes.data))
    print(f"== checksum of {k} words: serial FNV-1a {serial * 1e3:.3f} ms, 4 lanes {laned * 1e3:.3f} ms")


def bench_arrival(k: int) -> None:
    """A received frame of k words added on arrival, piece by piece as it arrives: the C
    hash (rt_lanes) then the add kernel (alphac_add_range) per piece, against the one-pass
    kernel (alphac_add_lanes) per piece. Best of 20."""
    with tempfile.TemporaryDirectory() as d:
        lib = _library(d)
        rng = np.random.default_rng(1)
        a, b, dst = rng.standard_normal(k), rng.standard_normal(k), np.zeros(k)
        lanes = np.zeros(4, dtype=np.uint64)
        pa, pb, pd, pl = (x.ctypes.data for x in (a, b, dst, lanes))

        def two(piece):
            for lo in range(0, k, piece):
                hi = min(k, lo + piece)
                lib.rt_lanes(pb, lo, hi, pl)
                lib.alphac_add_range(pd, pa, pb, lo, hi)

        def one(piece):
            for lo in range(0, k, piece):
                hi = min(k, lo + piece)
                lib.alphac_add_lanes(pd + 8 * lo, pa + 8 * lo, pb + 8 * lo, pb + 8 * lo, hi - lo, lo % 4, pl)

        print(f"== add on arrival of {k} words, per piece: C hash + add kernel | one-pass kernel")
        for piece in (4096, 32768, 262144, k):
            print(f"   pieces of {piece:>8} words: {_best(lambda: two(piece)) * 1e3:7.3f} ms | "
                  f"{_best(lambda: one(piece)) * 1e3:7.3f} ms")


def bench_build(spec: str) -> None:
    print(f"== build: alphac build {spec} --all")
    with tempfile.TemporaryDirectory() as d:
        t0 = time.monotonic()
        p = subprocess.run([sys.executable, "-m", "alphac", "build", spec, "--all", "-o", d],
                           cwd=ROOT, capture_output=True, text=True)
        wall = time.monotonic() - t0
        if p.returncode != 0:
            print(f"build failed ({p.returncode}): {p.stderr.strip()}")
            return
        files = sorted(Path(d).iterdir())
        print(f"wall {wall:.2f} s for {len(files)} executables (includes interpreter start-up)")
        for f in files:
            print(f"  {f.name:<40} {f.stat().st_size:>9} bytes")


def _ints(text: str) -> list[int]:
    return [int(float(x)) for x in text.split(",")]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--k", type=_ints, default=[1_000_000], help="words per contribution (comma-separated)")
    ap.add_argument("--owners", type=_ints, default=[4], help="owner counts (comma-separated)")
    ap.add_argument("--transport", type=lambda t: t.split(","), default=["tcp", "shm"],
                    help="peers-file transports to time (comma-separated: tcp, shm)")
    ap.add_argument("--sweep", action="store_true", help="2, 4 and 8 owners, k = 1e5, 1e6 and 1e7")
    ap.add_argument("--updates", type=int, default=21)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--spec", default="specs/demo.alpha")
    ap.add_argument("--baseline", metavar="REV",
                    help="also build and time the executables of git revision REV, in the same run")
    args = ap.parse_args()
    if args.sweep:
        args.k, args.owners = [100_000, 1_000_000, 10_000_000], [2, 4, 8]
    bench_checksum(max(args.k))
    bench_arrival(min(max(args.k), 1_000_000))
    bench_combine(args.k, args.owners, args.transport, args.updates, args.repeat, args.baseline)
    bench_build(args.spec)


if __name__ == "__main__":
    os.chdir(ROOT)
    main()
