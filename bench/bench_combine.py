"""Combine benchmark: alphac's owners on one host, over TCP and over shared memory, next to
the all-reduce peers, measured in the same run, interleaved round by round: seconds per
update against seconds per all_reduce(SUM) of float64 arrays of the same size.

The learner is the smallest that puts k-word frames on the wire: k parameters in the
indexed form, one sample per owner, c[i] = w[i] * x and w[i] := w[i] - rate * mean[i].
Each update moves k + 1 words per tree edge, up then down (star, hierarchy:2 and the sample
tree), or, for the star at the block owners (CombineAtBlockOwners), 2(n - 1)k/n sums from
every owner at once (the ordered reduce-scatter, then the gather), on 2, 4 and 8 owners by default (--sweep: k = 1e5, 1e6 and 1e7 too). Each tree runs
with the peers file of every --transport (default tcp and shm: `shm` lets the owners use
shared-memory rings), without and with a key (over TCP every frame tagged with HMAC-SHA-256
over its header and its payload's AES-256-GMAC; over shared memory the segment authenticated
once, its frames untagged: docs/security.md); each line names what the owners' connections reports say their frames went
over. Seconds per update = (T(N) - T(1)) / (N - 1), medians over the rounds, so process
start-up and connection set-up cancel (N: --updates, default 21, and 5 where k > 2e6);
wall time is the slowest owner's, CPU time (user + system) that of all owners together (on
a machine with fewer cores than owners, CPU per update divided by the cores bounds the wall
time from below). A solo owner (the same kernels, no frames) is timed for each size too.

The peers, each in a subprocess from the benchmark peers' virtual environment
(bench/.venv, which `make bench` installs; `--peer-python` names another interpreter):
torch.distributed gloo all_reduce (bench/peer_gloo.py) and Open MPI Allreduce through
mpi4py, over shared memory (`--mca btl self,vader`) and over loopback TCP
(`--mca btl self,tcp`) (bench/peer_mpi.py); each round runs every peer once per owner
count, its figure the median of a few repetitions of back-to-back calls, the slowest
rank's. A peer that is not installed is printed as such. Beside them, the bench learner
itself as plain C over loopback TCP in the star's schedule and in the block placement's
(bench/plain_schedule.c: the same order of additions, no frames, checks or tags; owner 0's
final words checked against the oracle's), ms per update. Each peer's line gives
alphac/peer for every alphac variant. The peers sum in an order of their own choosing
(unordered, and different across world sizes); alphac's update does the declared combine
plus the contribution and update kernels, so alphac/peer overstates what the combine alone
costs.

With `--baseline REV` the same deployments are also built from the tree at git revision
REV (checked out into a temporary directory, built by its own code) and both sets of
executables are timed in the same run, interleaved round by round (the baseline over TCP:
a revision before the transport column reads only TCP peers files).

Also: the frame checksum's payload pass, the add on arrival of a received piece (the C
hash then the add kernel, and the one-pass kernel, per piece), the wall time of building
every (role, target) of specs/demo.alpha, and executable sizes.

    python bench/bench_combine.py [--owners 2,4,8] [--k 100000,1000000] [--sweep]
        [--transport tcp,shm] [--updates N] [--repeat 3] [--peers gloo,mpi-shm,mpi-tcp]
        [--peer-python PY] [--baseline REV] [--trees star,hierarchy,sample-tree,block-owners]
    python bench/bench_combine.py --scale    # 2 to 64 owners at k = 1e4: ms per update by owners
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
# A baseline build imports this file with another tree first on sys.path.
if not os.environ.get("ALPHAC_BENCH_BASELINE"):
    sys.path.insert(0, str(ROOT))

import peers  # noqa: E402

# What a peers file's transport column may say that this benchmark times (the launcher's
# TRANSPORTS adds shm-only, which refuses instead of falling back to TCP).
TRANSPORTS = ("tcp", "shm")

from alphac.ir import nodes as N  # noqa: E402
from alphac.ir.builders import S, assign, bits, mul, sub  # noqa: E402


def learner(k: int, owners: int) -> N.Learner:
    """One sample per owner: x = 0.5, 0.25, 1.0, 2.0, 0.5, ..."""
    contribution = N.Program(2 * k + 1, (N.Loop("i", 0, k, (
        assign(k + 1, mul(S(0, "i"), S(k)), "i", "c[i]"),)),))
    step = sub(S(0, "i"), mul(S(2 * k), S(k, "i")))
    update = N.Program(2 * k + 1, (N.Loop("i", 0, k, (assign(0, step, "i", "w[i]"),)),))
    w0 = np.linspace(-1.0, 1.0, k).view(np.uint64)
    xs = [(0.5, 0.25, 1.0, 2.0)[o % 4] for o in range(owners)]
    rows = np.array([[x] for x in xs]).view(np.uint64)
    return N.Learner("combine_bench", k, 1, 0, contribution, update, N.Words(w0), N.Words(()),
                     bits(0.01), N.Samples(1, (1,) * owners, rows))


def deployment(k: int, owners: int, topology, blocks: bool = False) -> N.Deployment:
    """The bench deployment of `topology`; with `blocks`, its tree at the block owners
    (CombineAtBlockOwners: the ordered reduce-scatter and gather)."""
    tree = {"Star": "star", "Hierarchy": "hierarchy", "SampleTree": "sampletree"}[type(topology).__name__]
    name = f"combine_{tree}{owners}" + ("_blocks" if blocks else "")
    dep = N.Deployment(name, learner(k, owners), owners, topology, N.Partitioning(),
                       (N.Role("coordinator", (0,)), N.Role("worker", tuple(range(1, owners)))),
                       ("x86_64",) * owners, 1, N.Contract(), N.Checkpoint(),
                       source_file=f"bench/{name}.alpha")
    return replace(dep, combine_placement=N.CombinePlacement.BLOCK_OWNERS) if blocks else dep


def solo(k: int) -> N.Deployment:
    """One owner alone: the same kernels, local sum and mean, and no frames at all."""
    return N.Deployment("combine_solo", learner(k, 1), 1, N.Star(), N.Partitioning(),
                        (N.Role("solo", (0,)),), ("x86_64",), 1, N.Contract(), N.Checkpoint(),
                        source_file="bench/combine_solo.alpha")


TREES = ("star", "hierarchy", "sample-tree", "block-owners")  # what --trees may name


def _deployments(k: int, owners: int, sample_tree: bool = True, trees=TREES):
    """The timed deployments of `trees` (a baseline revision builds them without the sample
    tree and the star at the block owners, which older trees do not have)."""
    if not sample_tree:
        trees = [t for t in trees if t in ("star", "hierarchy")]
    made = {"star": lambda: deployment(k, owners, N.Star()),
            "hierarchy": lambda: deployment(k, owners, N.Hierarchy(2)),
            "sample-tree": lambda: deployment(k, owners, N.SampleTree()),
            "block-owners": lambda: deployment(k, owners, N.Star(), blocks=True)}
    return tuple(made[t]() for t in TREES if t in trees)


def topology_name(dep) -> str:
    if isinstance(dep.topology, N.SampleTree):
        return "sample tree"
    if dep.combine_placement is N.CombinePlacement.BLOCK_OWNERS:
        return "star at block owners"
    return "star" if isinstance(dep.topology, N.Star) else f"hierarchy:{dep.topology.fanout}"


# Run with the baseline tree first on sys.path: builds this file's deployments with that
# tree's own builder and prints {deployment name: {"role target": executable}} as JSON.
_BASELINE_BUILD = """
import importlib, json, sys
sys.path.insert(0, sys.argv[1])
spec = importlib.util.spec_from_file_location("bench_combine", sys.argv[2])
bench = importlib.util.module_from_spec(spec)
sys.modules["bench_combine"] = bench  # (its dataclasses look their module up)
spec.loader.exec_module(bench)
import os
from alphac.plan import plan
# (look for the file: an installed alphac elsewhere could answer an import of the name)
if os.path.exists(os.path.join(sys.argv[1], "alphac", "driver.py")):
    from alphac.driver import build
else:
    from alphac.codegen.build import build_executable as build
out = {}
for dep in bench._deployments(int(sys.argv[3]), int(sys.argv[5]), sample_tree=False):
    p = plan(dep)
    pairs = sorted({(dep.role_of(o).name, dep.placement[o]) for o in range(dep.owners)})
    out[dep.name] = {f"{r} {t}": str(build(p, r, t, sys.argv[4] + "/" + dep.name)) for r, t in pairs}
print(json.dumps(out))
"""


def baseline_executables(rev: str, k: int, owners: int, work: Path) -> dict:
    """Build the bench deployments from the tree at `rev` (its own code); their executables."""
    tree = work / "tree"
    if not tree.exists():
        tree.mkdir()
        archive = subprocess.run(["git", "archive", rev], cwd=ROOT, capture_output=True,
                                 check=True).stdout
        subprocess.run(["tar", "-x", "-C", str(tree)], input=archive, check=True)
    env = {**os.environ, "ALPHAC_BENCH_BASELINE": "1", "PYTHONPATH": str(tree)}
    done = subprocess.run([sys.executable, "-c", _BASELINE_BUILD, str(tree), __file__, str(k),
                           str(work / f"bin-{owners}-{k}"), str(owners)],
                          env=env, capture_output=True, text=True, cwd=tree)
    if done.returncode != 0:
        sys.exit(f"bench: building the baseline {rev} failed: {done.stderr.strip()[-2000:]}")
    built = json.loads(done.stdout.strip().splitlines()[-1])
    return {name: {tuple(key.split()): Path(p) for key, p in exes.items()} for name, exes in built.items()}


# ----------------------------------------------------------------------------- alphac

@dataclass
class Case:
    """One alphac variant timed at T(1) and T(updates): its deployment and executables, the
    transport its peers file lets the owners use, and whether frames carry a key."""

    label: str
    key: str  # the launch session's name for the deployment (k included)
    dep: N.Deployment
    exes: dict
    updates: int
    transport: str = "tcp"
    authenticate: bool = False
    baseline: bool = False
    build_s: float | None = None
    walls: dict = field(default_factory=lambda: {})
    cpus: dict = field(default_factory=lambda: {})
    last: object = None
    checked: str = "not run"  # the last run's verdict against the oracle
    over: str = "nothing"     # what its frames went over

    def time(self, updates: int) -> None:
        from alphac.testing import session

        r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        run = session.run(self.key, self.dep, exes=self.exes, updates=updates,
                          timeout_ms=60000, deadline_s=600, authenticate=self.authenticate,
                          transport=self.transport)
        r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        if not run.result.ok:
            sys.exit("bench: owners failed: " + "; ".join(oc.stderr.strip() for oc in run.result.outcomes))
        self.walls.setdefault(updates, []).append(max(oc.seconds for oc in run.result.outcomes))
        self.cpus.setdefault(updates, []).append((r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime))
        if updates == self.updates:  # the last run judged now: its outputs are not kept (at 1e7
            self.last = run          # words each run's are gigabytes of Python ints)
            self.checked, self.over, self.last = verdict(self), self.used(), None

    def per_update(self) -> tuple[float, float]:
        """(wall, CPU) seconds per update from the medians of T(1) and T(updates)."""
        def slope(d):
            return (statistics.median(d[self.updates]) - statistics.median(d[1])) / (self.updates - 1)

        return slope(self.walls), slope(self.cpus)

    def used(self) -> str:
        """What the last run's connections reports say the owners' frames went over."""
        from alphac.launch.results import transport_summary

        kinds = {transport_summary(c) for c in self.last.connections.values()} - {"-"}
        return "+".join(sorted(kinds)) or "nothing"


def _as_published(run, dep, updates) -> None:
    """A baseline revision's owners predate the commit record: take the output of every
    owner that exited 0 as published, as that revision did."""
    from alphac.launch.commit import CommitRecord, Resolution
    from alphac.launch.results import read_result

    run.outputs = {oc.owner: read_result(oc.out) for oc in run.result.outcomes if oc.ok}
    run.output_errors.clear()
    run.resolution = Resolution(CommitRecord(0, updates, dep.owners, {}))


def cases_for(k: int, owners: int, transports: list[str], updates: int, baseline: dict,
              trees=TREES) -> list[Case]:
    """The variants timed at (owners, k): each tree over each transport, without and with a
    key, and the baseline revision's executables of each tree over TCP; at 1
    owner, the solo deployment."""
    from alphac.testing import session

    if owners == 1:
        dep, t0 = solo(k), time.monotonic()
        exes = session.built(f"{dep.name}-k{k}", dep)
        return [Case("solo", f"{dep.name}-k{k}", dep, exes, updates, build_s=time.monotonic() - t0)]
    out = []
    for dep in _deployments(k, owners, trees=trees):
        key, tree = f"{dep.name}-k{k}", topology_name(dep)
        t0 = time.monotonic()
        exes = session.built(key, dep)
        built = [Case(f"{tree}, {t}", key, dep, exes, updates, t) for t in transports]
        for t in transports:  # with a key: over TCP every frame tagged; over shm the segment
            built.append(Case(f"{tree}, {t}, --key", key, dep, exes, updates, t, authenticate=True))
        built[0].build_s = time.monotonic() - t0
        out += built
        if dep.name in baseline:
            out.append(Case(f"{tree}, baseline, tcp", key, dep, baseline[dep.name], updates,
                            baseline=True))
    return out


_EXPECTED: dict[tuple[str, int], object] = {}  # the oracle's result per (deployment, updates)


def verdict(case: Case) -> str:
    from alphac.testing import session
    from alphac.launch.report import compare
    from alphac.oracle import evaluate

    if case.baseline:
        _as_published(case.last, case.dep, case.updates)
    at = (case.key, case.updates)
    if at not in _EXPECTED:  # (the variants of one deployment share it)
        _EXPECTED[at] = evaluate(case.dep, case.updates)
    rep = compare(session.plan(case.key, case.dep), case.last, _EXPECTED[at], case.updates)
    return "bit-identical to the oracle" if rep.match else "MISMATCH: " + "; ".join(rep.failures)


# ----------------------------------------------------------------------------- peers

@dataclass(frozen=True)
class Peer:
    """An all-reduce peer: how to start it for n owners, and whether it is installed."""

    name: str
    label: str
    module: str  # what the peers' interpreter must import
    btl: str = ""  # Open MPI's transport; empty for gloo

    def command(self, python: str, owners: int, words: list[int], reps: int) -> list[str]:
        sizes = ["--words", ",".join(map(str, words)), "--reps", str(reps)]
        if not self.btl:
            return [python, str(ROOT / "bench" / "peer_gloo.py"), "--owners", str(owners), *sizes]
        return ["mpirun", "--oversubscribe", "--bind-to", "none", "--mca", "btl", self.btl,
                "-np", str(owners), python, str(ROOT / "bench" / "peer_mpi.py"), *sizes]

    def missing(self, python: str) -> str | None:
        """Why this peer cannot run here, or None."""
        return peers.missing(python, self.module, "mpirun" if self.btl else "")

    def run(self, python: str, owners: int, words: list[int], reps: int) -> dict[int, float] | str:
        """{words: median seconds per call} of one start, or why it failed."""
        got = peers.run_json(self.command(python, owners, words, reps))
        if isinstance(got, str):
            return got
        return {int(w): statistics.median(ts) for w, ts in got["seconds"].items()}


@dataclass(frozen=True)
class PlainC:
    """The bench learner as plain C over loopback TCP, one schedule of the same order
    (bench/plain_schedule.c: the star, or the ordered reduce-scatter and gather), with
    nothing alphac adds; owner 0's final words checked against the oracle's."""

    name: str
    label: str
    schedule: str

    def missing(self, python: str) -> str | None:
        return None if _plain_exe() else "no C compiler (cc)"

    def run(self, python: str, owners: int, words: list[int], reps: int) -> dict[int, float] | str:
        """{words: median seconds per update over `reps` starts}, or why it failed."""
        from alphac.oracle import evaluate

        out: dict[int, float] = {}
        for k in words:
            updates, got = updates_for(k, None), []
            with tempfile.TemporaryDirectory(prefix="alphac-plain-") as tmp:
                final = Path(tmp) / "w"
                for _ in range(reps):
                    done = subprocess.run([_plain_exe(), self.schedule, str(owners), str(k), str(updates),
                                           str(final)], capture_output=True, text=True, timeout=600)
                    if done.returncode != 0:
                        return f"failed: {done.stderr.strip() or done.returncode}"
                    got.append(float(done.stdout.split()[0]) / updates)
                words_out = tuple(int(w) for w in np.frombuffer(final.read_bytes(), dtype=np.uint64))
            at = (f"plain-{owners}-{k}", updates + 1)
            if at not in _EXPECTED:
                _EXPECTED[at] = evaluate(deployment(k, owners, N.Star()), updates + 1).params
            if words_out != _EXPECTED[at]:
                return "MISMATCH: owner 0's final words are not the oracle's"
            out[k] = statistics.median(got)
        return out


_PLAIN: list[str] = []


def _plain_exe() -> str:
    """bench/plain_schedule.c compiled once per run (-O2, no contraction), or ''."""
    if not _PLAIN:
        exe = Path(tempfile.mkdtemp(prefix="alphac-plain-")) / "plain_schedule"
        done = subprocess.run(["cc", "-O2", "-ffp-contract=off", "-o", str(exe),
                               str(ROOT / "bench" / "plain_schedule.c")], capture_output=True)
        _PLAIN.append(str(exe) if done.returncode == 0 else "")
    return _PLAIN[0]


PEERS = {
    "plain-star": PlainC("plain-star", "plain C star, tcp", "star"),
    "plain-rs": PlainC("plain-rs", "plain C reduce-scatter, tcp", "rs"),
    "gloo": Peer("gloo", "gloo all_reduce", "torch.distributed"),
    "mpi-shm": Peer("mpi-shm", "Open MPI Allreduce, shared memory", "mpi4py.MPI", "self,vader"),
    "mpi-tcp": Peer("mpi-tcp", "Open MPI Allreduce, TCP", "mpi4py.MPI", "self,tcp"),
}


# ----------------------------------------------------------------------------- the run

def updates_for(k: int, updates: int | None) -> int:
    """The updates of a timed run: --updates, else 21 (5 where k > 2e6)."""
    return updates or (21 if k <= 2_000_000 else 5)


def bench_combine(owners: list[int], words: list[int], transports: list[str], updates: int | None,
                  repeat: int, chosen: list[Peer], python: str, baseline: str | None,
                  trees=TREES, table: bool = False) -> None:
    print(f"== combine: {', '.join(map(str, owners))} owners on one host over "
          f"{' and '.join(transports)}, contributions of {', '.join(map(str, words))} words; "
          f"{repeat} interleaved rounds")
    missing = {p.name: p.missing(python) for p in chosen}
    with tempfile.TemporaryDirectory(prefix="alphac-bench-") as work:
        cases: dict[tuple[int, int], list[Case]] = {}
        for n in [*owners, 1]:
            for k in words:
                old = baseline_executables(baseline, k, n, Path(work)) if baseline and n > 1 else {}
                cases[(n, k)] = cases_for(k, n, transports, updates_for(k, updates), old, trees)
        peer_s: dict[tuple[str, int, int], list] = {}
        for _ in range(repeat):  # interleaved: each round runs every variant and every peer
            for n in [*owners, 1]:
                for k in words:
                    for case in cases[(n, k)]:
                        for u in (1, case.updates):
                            case.time(u)
                for p in chosen:
                    if n == 1 or missing[p.name]:
                        continue
                    got = p.run(python, n, words, 3)
                    for k in words:
                        peer_s.setdefault((p.name, n, k), []).append(got if isinstance(got, str) else got[k])
        for (n, k), group in cases.items():
            report(n, k, group, repeat, chosen, missing, peer_s)
        if table:
            scale_table(owners, words, cases, chosen, missing, peer_s)


def scale_table(owners: list[int], words: list[int], cases: dict, chosen: list[Peer], missing: dict,
                peer_s: dict) -> None:
    """ms per update against owner count: one column per alphac variant and per peer."""
    for k in words:
        labels = [c.label for c in cases[(owners[0], k)]]
        ready = [p for p in chosen if not missing[p.name]]
        print(f"== scale: ms per update (wall) against owners, {k} words")
        print("  owners  " + "  ".join(f"{label:>22}" for label in labels)
              + "".join(f"  {p.name:>10}" for p in ready))
        for n in owners:
            walls = [c.per_update()[0] * 1e3 for c in cases[(n, k)]]
            row = [f"{w:22.2f}" for w in walls]
            for p in ready:
                got = [g for g in peer_s.get((p.name, n, k), []) if not isinstance(g, str)]
                row.append(f"{statistics.median(got) * 1e3:10.2f}" if got else f"{'failed':>10}")
            print(f"  {n:>6}  " + "  ".join(row))


def report(n: int, k: int, group: list[Case], repeat: int, chosen: list[Peer],
           missing: dict, peer_s: dict) -> None:
    print(f"-- {n} owner{'s' if n > 1 else ''}, {k} words ({(k + 1) * 8 / 2**20:.2f} MiB frames)"
          + ("" if n > 1 else ": no frames, the kernels alone"))
    per = {}
    for case in group:
        wall, cpu = case.per_update()
        per[case.label] = wall
        t1, tn = statistics.median(case.walls[1]), statistics.median(case.walls[case.updates])
        built = f"; build {case.build_s:.2f} s" if case.build_s is not None else ""
        over = "" if case.baseline or n == 1 else f"; frames over {case.over}"
        print(f"  alphac {case.label:<30} {wall * 1e3:8.2f} ms/update wall, {cpu * 1e3:8.2f} ms CPU  "
              f"(T(1) {t1:.3f} s, T({case.updates}) {tn:.3f} s, median of {repeat}{built}{over}; "
              f"{case.checked})")
    if n == 1:
        return
    for p in chosen:
        if missing[p.name]:
            print(f"  {p.label:<37} not installed: {missing[p.name]}")
            continue
        got = peer_s[(p.name, n, k)]
        failed = [g for g in got if isinstance(g, str)]
        if failed:
            print(f"  {p.label:<37} {failed[0]}")
            continue
        sec = statistics.median(got)
        ratios = "; ".join(f"{label} {wall / sec:.2f}" for label, wall in per.items())
        unit = "update, bit-identical to the oracle" if isinstance(p, PlainC) else "call"
        print(f"  {p.label:<37} {sec * 1e3:8.2f} ms/{unit} (median of {repeat} rounds)   "
              f"alphac/peer: {ratios}")


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
        for piece in sorted({p for p in (4096, 32768, 262144) if p < k} | {k}):
            print(f"   pieces of {piece:>8} words: {_best(lambda: two(piece)) * 1e3:7.3f} ms | "
                  f"{_best(lambda: one(piece)) * 1e3:7.3f} ms")


def bench_build(spec: str) -> None:
    if not spec:
        return
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
    ap.add_argument("--owners", default="2,4,8", help="owner counts, comma-separated")
    ap.add_argument("--k", default="100000,1000000",
                    help="contribution sizes in words, comma-separated (1e7 is accepted)")
    ap.add_argument("--sweep", action="store_true",
                    help="2, 4 and 8 owners, k = 1e5, 1e6 and 1e7 (replaces --owners and --k)")
    ap.add_argument("--transport", default="tcp,shm",
                    help=f"peers-file transports to time, comma-separated, of {', '.join(TRANSPORTS)}")
    ap.add_argument("--updates", type=int, help="updates of a timed run (default 21; 5 where k > 2e6)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--spec", default="specs/demo.alpha", help="time `alphac build SPEC --all` ('': skip)")
    ap.add_argument("--peers", default=",".join(PEERS), help=f"of {', '.join(PEERS)}; '' for none")
    peers.add_option(ap)
    ap.add_argument("--baseline", metavar="REV",
                    help="also build and time the executables of git revision REV, in the same run")
    ap.add_argument("--trees", default=",".join(TREES), help=f"of {', '.join(TREES)}, comma-separated")
    ap.add_argument("--scale", action="store_true",
                    help="the scale sweep: 2 to 64 owners, k = 1e4, the hierarchy over tcp and shm, "
                         "201 updates a run, gloo beside it, a table of ms per update against owners (replaces "
                         "--owners, --k, --trees and --peers; skips the kernel timings and the build)")
    args = ap.parse_args()
    if args.sweep:
        args.owners, args.k = "2,4,8", "100000,1000000,10000000"
    if args.scale:
        args.owners, args.k, args.trees, args.peers, args.spec = "2,4,8,16,32,64", "10000", "hierarchy", "gloo", ""
        args.updates = args.updates or 201  # a 1e4-word update is well under a millisecond
    trees = [t for t in args.trees.split(",") if t]
    owners = [int(x) for x in args.owners.split(",")]
    words = [int(float(x)) for x in args.k.split(",")]
    transports = args.transport.split(",")
    unknown = [p for p in args.peers.split(",") if p and p not in PEERS]
    unknown += [t for t in transports if t not in TRANSPORTS]
    unknown += [t for t in trees if t not in TREES]
    if unknown or min(owners) < 2 or (args.updates is not None and args.updates < 2):
        ap.error(f"unknown peers or transports {unknown}" if unknown
                 else "owners must be >= 2 and updates >= 2")
    chosen = [PEERS[p] for p in args.peers.split(",") if p]
    if not args.scale:
        bench_checksum(max(words))
        bench_arrival(min(max(words), 1_000_000))
    bench_combine(owners, words, transports, args.updates, args.repeat, chosen, args.peer_python,
                  args.baseline, trees, table=args.scale)
    bench_build(args.spec)


if __name__ == "__main__":
    os.chdir(ROOT)
    main()
