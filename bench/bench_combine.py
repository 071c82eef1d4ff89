"""Combine benchmark: 4 owners on loopback, 1e6-word contributions, seconds per update.

The learner is the smallest that puts 1e6-word frames on the wire: k = 1e6 parameters in
the indexed form, one sample per owner, c[i] = w[i] * x and w[i] := w[i] - rate * mean[i].
Each update moves 1e6 + 1 words per tree edge, up then down (star and hierarchy:2). Runs
are timed without a key, and with `--key` (every frame tagged with HMAC-SHA-256).
Seconds per update = (T(N) - T(1)) / (N - 1), medians of a few runs, so process start-up and
connection set-up cancel; wall time is the slowest owner's, CPU time (user + system) is that
of all four owners together (on a machine with fewer cores than owners, CPU per update
divided by the cores bounds the wall time from below). Peers on this machine (../shared/anchors/README.md, ws 4, 1e6
float64): gloo all_reduce 12.9 ms, Open MPI over TCP 17.5 ms.

With `--baseline REV` the same deployments are also built from the tree at git revision
REV (checked out into a temporary directory, built by its own code) and both sets of
executables are timed in the same run, interleaved round by round.

Also: wall time of building every (role, target) of specs/demo.alpha, and executable sizes.

    python bench/bench_combine.py [--k 1000000] [--updates 21] [--repeat 3] [--baseline REV]
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
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
# A baseline build imports this file with another tree first on sys.path.
if not os.environ.get("ALPHAC_BENCH_BASELINE"):
    sys.path.insert(0, str(ROOT))

from alphac.ir import nodes as N  # noqa: E402

PEERS_MS = {"gloo all_reduce ws4": 12.9, "Open MPI tcp ws4": 17.5}


def _bits(x: float) -> int:
    return struct.unpack("<Q", struct.pack("<d", x))[0]


def learner(k: int, xs=(0.5, 0.25, 1.0, 2.0)) -> N.Learner:
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


def deployment(k: int, topology) -> N.Deployment:
    name = "star" if isinstance(topology, N.Star) else "hierarchy"
    return N.Deployment(f"combine_{name}", learner(k), 4, topology, N.Partitioning(),
                        (N.Role("coordinator", (0,)), N.Role("worker", (1, 2, 3))),
                        ("x86_64",) * 4, 1, N.Contract(), N.Checkpoint(),
                        source_file=f"bench/combine_{name}.alpha")


def solo(k: int) -> N.Deployment:
    """One owner alone: the same kernels, local sum and mean, and no frames at all."""
    return N.Deployment("combine_solo", learner(k, (0.5,)), 1, N.Star(), N.Partitioning(),
                        (N.Role("solo", (0,)),), ("x86_64",), 1, N.Contract(), N.Checkpoint(),
                        source_file="bench/combine_solo.alpha")


def _deployments(k: int):
    return (deployment(k, N.Star()), deployment(k, N.Hierarchy(2)), solo(k))


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
for dep in bench._deployments(int(sys.argv[3])):
    p = plan(dep)
    pairs = sorted({(dep.role_of(o).name, dep.placement[o]) for o in range(dep.owners)})
    out[dep.name] = {f"{r} {t}": str(build(p, r, t, sys.argv[4] + "/" + dep.name)) for r, t in pairs}
print(json.dumps(out))
"""


def baseline_executables(rev: str, k: int, work: Path) -> dict:
    """Build the bench deployments from the tree at `rev` (its own code); their executables."""
    import json

    tree = work / "tree"
    tree.mkdir()
    archive = subprocess.run(["git", "archive", rev], cwd=ROOT, capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(tree)], input=archive, check=True)
    env = {**os.environ, "ALPHAC_BENCH_BASELINE": "1", "PYTHONPATH": str(tree)}
    done = subprocess.run([sys.executable, "-c", _BASELINE_BUILD, str(tree), __file__, str(k),
                           str(work / "bin")], env=env, capture_output=True, text=True, cwd=tree)
    if done.returncode != 0:
        sys.exit(f"bench: building the baseline {rev} failed: {done.stderr.strip()[-2000:]}")
    built = json.loads(done.stdout.strip().splitlines()[-1])
    return {name: {tuple(key.split()): Path(p) for key, p in exes.items()} for name, exes in built.items()}


def _time(key, dep, exes, updates, walls, cpus, authenticate=False, stats=True):
    from alphac.launch import session

    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    run = session.run(key, dep, exes=exes, updates=updates, timeout_ms=30000, deadline_s=300,
                      authenticate=authenticate, stats=stats)
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


def bench_combine(k: int, updates: int, repeat: int, baseline: str | None) -> None:
    from alphac.launch import session
    from alphac.launch.launcher import compare
    from alphac.oracle import evaluate

    print(f"== combine: 4 owners on 127.0.0.1, contributions of {k} words "
          f"({(k + 1) * 8 / 2**20:.2f} MiB frames)")
    with tempfile.TemporaryDirectory(prefix="alphac-bench-") as work:
        old = baseline_executables(baseline, k, Path(work)) if baseline else {}
        for dep in _deployments(k):
            key = dep.name
            t0 = time.monotonic()
            variants = {"this tree": session.built(key, dep)}
            build_s = time.monotonic() - t0
            if dep.owners > 1:
                variants["this tree, --key"] = variants["this tree"]
            if dep.name in old:
                variants[f"baseline {baseline}"] = old[dep.name]
            walls = {v: {1: [], updates: []} for v in variants}
            cpus = {v: {1: [], updates: []} for v in variants}
            last = {}
            for _ in range(repeat):  # interleaved: each round runs every variant
                for v, exes in variants.items():
                    for n in (1, updates):
                        # a baseline revision's executables may predate --stats
                        last[v] = _time(key, dep, exes, n, walls[v], cpus[v], v.endswith("--key"),
                                        not v.startswith("baseline"))
            for v in variants:
                if v.startswith("baseline"):
                    _as_published(last[v], dep, updates)
            want = evaluate(dep, updates)
            for v in variants:
                t1, tn = statistics.median(walls[v][1]), statistics.median(walls[v][updates])
                per = (tn - t1) / (updates - 1)
                cpu = (statistics.median(cpus[v][updates]) - statistics.median(cpus[v][1])) / (updates - 1)
                rep = compare(session.plan(key, dep), last[v], want, updates)
                verdict = "bit-identical to the oracle" if rep.match else "MISMATCH: " + "; ".join(rep.failures)
                print(f"{dep.name:>17} [{v}]: {per * 1e3:7.2f} ms/update wall, {cpu * 1e3:7.2f} ms CPU "
                      f"({dep.owners} owner{'s' if dep.owners > 1 else ''})  (T(1) {t1:.3f} s, "
                      f"T({updates}) {tn:.3f} s, median of {repeat}"
                      + (f"; build {build_s:.2f} s" if v == "this tree" else "") + f"; {verdict})")
    for peer, ms in PEERS_MS.items():
        print(f"{peer:>24}: {ms:7.2f} ms  (all_reduce only, unordered; anchors/README.md)")


def bench_checksum(k: int) -> None:
    """The frame checksum's payload pass alone, in the runtime's C code, on this machine."""
    import ctypes

    from alphac import driver

    with tempfile.TemporaryDirectory() as d:
        dep = solo(16)
        so = driver.build(driver.plan(dep), "solo", "x86_64", d, shared=True)
        lib = ctypes.CDLL(str(so))
        words = np.arange(k, dtype=np.uint64)
        state = np.zeros(4, dtype=np.uint64)
        p, st = words.ctypes.data_as(ctypes.c_void_p), state.ctypes.data_as(ctypes.c_void_p)
        lib.rt_fnv.restype = ctypes.c_uint64
        lib.rt_fnv.argtypes = [ctypes.c_void_p, ctypes.c_int64, ctypes.c_uint64]
        lib.rt_lanes.argtypes = [ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64, ctypes.c_void_p]

        def best(f):
            ts = []
            for _ in range(20):
                t0 = time.perf_counter()
                f()
                ts.append(time.perf_counter() - t0)
            return min(ts)

        serial = best(lambda: lib.rt_fnv(p, k, 0xCBF29CE484222325))
        laned = best(lambda: lib.rt_lanes(p, 0, k, st))
    print(f"== checksum of {k} words: serial FNV-1a {serial * 1e3:.3f} ms, 4 lanes {laned * 1e3:.3f} ms")


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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--k", type=int, default=1_000_000)
    ap.add_argument("--updates", type=int, default=21)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--spec", default="specs/demo.alpha")
    ap.add_argument("--baseline", metavar="REV",
                    help="also build and time the executables of git revision REV, in the same run")
    args = ap.parse_args()
    bench_checksum(args.k)
    bench_combine(args.k, args.updates, args.repeat, args.baseline)
    bench_build(args.spec)


if __name__ == "__main__":
    os.chdir(ROOT)
    main()
