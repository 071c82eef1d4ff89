"""Checkpoint benchmark: write and restore of k binary64 parameters and their Adam state on
4 owners, in GB/s, beside torch.save and torch.distributed.checkpoint on the same disk.

The learner is Adam in the indexed form (the update of specs/lsq_adam_partitioned_hierarchy7
.alpha), k = 1e7 by default: m = 2k + 2 state words (two moments per coordinate, then the two
shared bias-correction powers), one sample of one word per owner (g[i] = w[i] * x), zero
moments and a linspace initial vector. Four owners on 127.0.0.1 under a hierarchy of fan-out
2 (or a star), in two layouts: everything partitioned (each owner writes the quarter it
holds) and replicated (each owner holds every word and writes a quarter of each region, its
block of consecutive words). Every shard byte is hashed (sha256) and
every shard, manifest and directory fsynced by the executables; a restore verifies every
hash before any owner selects its words.

    write   = T(1 update, checkpoint at version 1) - T(1 update, a deployment that never
              checkpoints)
    restore = T(--resume ckpt-1 --updates 1: restores, runs no update, publishes)
              - T(--updates 0 from scratch)

T is the wall time of the slowest owner; medians over interleaved rounds. GB/s = the bytes
of the shard files / time (1 GB = 1e9 bytes).

The peer runs in the interpreter `--torch-python` (it must have torch) as a subprocess that
stays up between rounds, on tensors of the same size (float64: a k-element parameter and
two k-element moments), in the same directory's filesystem, rounds interleaved with ours:
torch.save to one file with os.fsync (and without, separately), torch.load;
torch.distributed.checkpoint (DCP: FileSystemWriter / FileSystemReader, their defaults,
which fsync each file) in one process without a process group, and with `--dcp-ranks` ranks
over gloo (torch.multiprocessing.spawn), each holding a 1/ranks slice of every tensor as a
DTensor. Nothing drops the page cache: it is warm for both.

    python bench/bench_checkpoint.py [--k 10000000] [--rounds 3] [--topology hierarchy]
        [--torch-python python3] [--dcp-ranks 4] [--dir DIR]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OWNERS = 4
GB = 1e9


# ----------------------------------------------------------------------------- the learner

def learner(k: int):
    """Adam over k coordinates, m = 2k + 2; contribution g[i] = w[i] * x (sample width 1).

    Contribution slots (2k + 1): w[0..k) | x | g[0..k).
    Update slots (4k + 3): w | m1 | v | p1 p2 | mean | rate."""
    import numpy as np

    from alphac.ir import nodes as N
    from alphac.ir.builders import C, S, add, assign, bits, div, mul, sqrt, sub

    contribution = N.Program(2 * k + 1, (N.Loop("i", 0, k, (
        assign(k + 1, mul(S(0, "i"), S(k)), "i", "g[i]"),)),))
    w, m1, v, p1, p2, mean, rate = 0, k, 2 * k, 3 * k, 3 * k + 1, 3 * k + 2, 4 * k + 2
    new_m1 = add(mul(C(0.9), S(m1, "i")), mul(C(0.1), S(mean, "i")))
    new_v = add(mul(C(0.999), S(v, "i")), mul(C(0.001), mul(S(mean, "i"), S(mean, "i"))))
    m_hat = div(S(m1, "i"), sub(C(1.0), S(p1)))
    v_hat = div(S(v, "i"), sub(C(1.0), S(p2)))
    step = div(mul(S(rate), m_hat), add(sqrt(v_hat), C(1e-8)))
    update = N.Program(4 * k + 3, (
        assign(p1, mul(S(p1), C(0.9)), label="p1"),
        assign(p2, mul(S(p2), C(0.999)), label="p2"),
        N.Loop("i", 0, k, (
            assign(m1, new_m1, "i", "m1[i]"),
            assign(v, new_v, "i", "v[i]"),
            assign(w, sub(S(w, "i"), step), "i", "w[i]"),
        )),
    ))
    w0 = np.linspace(-1.0, 1.0, k).view(np.uint64)
    state0 = np.zeros(2 * k + 2, dtype=np.float64)
    state0[2 * k:] = 1.0  # the bias-correction powers start at 1
    rows = np.array([[x] for x in (0.5, 0.25, 1.0, 2.0)]).view(np.uint64)
    return N.Learner("checkpoint_bench", k, 1, 2 * k + 2, contribution, update, N.Words(w0),
                     N.Words(state0.view(np.uint64)), bits(0.001),
                     N.Samples(1, (1,) * OWNERS, rows))


def deployment(lrn, layout: str, checkpoint: bool, topology: str):
    from alphac.ir import nodes as N

    k = lrn.k
    part = (N.Partitioning(optimizer_state=N.Shard(), parameters=N.Shard(), gradients=N.Shard(),
                           words_per_coordinate=2, shared_state=(2 * k, 2 * k + 1))
            if layout == "partitioned" else N.Partitioning())
    topo = N.Hierarchy(2) if topology == "hierarchy" else N.Star()
    ck = N.Checkpoint(1, "") if checkpoint else N.Checkpoint(0, "")
    name = f"ckbench_{layout}_{'ckpt' if checkpoint else 'nockpt'}"
    return N.Deployment(name, lrn, OWNERS, topo, part,
                        (N.Role("coordinator", (0,)), N.Role("worker", (1, 2, 3))),
                        ("x86_64",) * OWNERS, 1, N.Contract(), ck,
                        source_file=f"bench/{name}.alpha")


# ----------------------------------------------------------------------------- our runs

def run_owners_once(dep, exes, work: Path, updates: int, extra: tuple[str, ...]) -> float:
    """Every owner of `dep` once: the slowest owner's wall seconds. The owners' output files
    are checked committed but not read back into Python (they hold every word)."""
    from alphac.launch.commit import resolve
    from alphac.launch.roles import runner_for
    from alphac.launch.ports import free_ports
    from alphac.launch.runner import OwnerCommand, owner_argv, run_owners, write_peers
    from alphac.testing import session
    from alphac.testing.session import owner_exes

    run_dir = Path(tempfile.mkdtemp(prefix="run-", dir=work))
    try:
        per_owner = owner_exes(dep, exes)
        peers = write_peers(run_dir / "owners.peers", free_ports(dep.owners))
        outs = {o: run_dir / f"owner-{o}.out" for o in range(dep.owners)}
        cmds = [OwnerCommand(o, owner_argv(per_owner[o], o, peers, outs[o], runner_for(dep.placement[o]),
                                           updates, 120000) + extra, outs[o], dep.role_of(o).name)
                for o in range(dep.owners)]
        result = run_owners(cmds, 900.0, run_dir)
        bad = [f"owner {oc.owner}: rc {oc.returncode}: {oc.stderr.strip()[-400:]}"
               for oc in result.outcomes if not oc.ok]
        if bad:
            sys.exit("bench: owners failed: " + "; ".join(bad))
        if not resolve(outs, session.plan(dep.name, dep).tree.owner).committed:
            sys.exit("bench: the run did not commit")
        return max(oc.seconds for oc in result.outcomes)
    finally:
        shutil.rmtree(run_dir, ignore_errors=True)


def _run_args(ckpt_dir: Path | None = None, resume: Path | None = None) -> tuple[str, ...]:
    from alphac.launch.checkpoints import run_arguments

    return run_arguments(ckpt_dir, resume)


def shard_bytes(ckpt: Path) -> int:
    return sum(p.stat().st_size for p in ckpt.glob("shard-*.bin"))


# ----------------------------------------------------------------------------- the peer

def peer_serve(k: int, where: str, ranks: int) -> None:
    """In the torch interpreter: set up the tensors, then one round of every peer
    measurement per `round` line on stdin, one JSON line on stdout each."""
    import warnings

    import torch
    import torch.distributed.checkpoint as dcp

    # DCP without a process group says, every call, that it assumes one process
    warnings.filterwarnings("ignore", message="torch.distributed is disabled")
    torch.manual_seed(0)
    sd = {"param": torch.linspace(-1.0, 1.0, k, dtype=torch.float64),
          "exp_avg": torch.randn(k, dtype=torch.float64),
          "exp_avg_sq": torch.rand(k, dtype=torch.float64)}
    base = Path(where)
    print(json.dumps({"ready": torch.__version__, "threads": torch.get_num_threads()}), flush=True)
    r = 0
    for line in sys.stdin:
        if line.strip() != "round":
            break
        r += 1
        out: dict[str, float | int | str] = {}
        # torch.save to one file, then os.fsync of that file
        path = base / f"torch-{r}.pt"
        t0 = time.perf_counter()
        with open(path, "wb") as f:
            torch.save(sd, f)
            f.flush()
            os.fsync(f.fileno())
        out["save_fsync"] = time.perf_counter() - t0
        out["save_bytes"] = path.stat().st_size
        t0 = time.perf_counter()
        back = torch.load(path)
        out["load"] = time.perf_counter() - t0
        assert all(torch.equal(back[n], sd[n]) for n in sd)
        del back
        path.unlink()
        # the same without fsync
        path = base / f"torch-nosync-{r}.pt"
        t0 = time.perf_counter()
        with open(path, "wb") as f:
            torch.save(sd, f)
        out["save_nofsync"] = time.perf_counter() - t0
        path.unlink()
        # DCP in this process, no process group
        d = base / f"dcp1-{r}"
        t0 = time.perf_counter()
        dcp.save(sd, checkpoint_id=str(d))
        out["dcp1_save"] = time.perf_counter() - t0
        out["dcp1_bytes"] = sum(p.stat().st_size for p in d.rglob("*") if p.is_file())
        target = {n: torch.empty_like(t) for n, t in sd.items()}
        t0 = time.perf_counter()
        dcp.load(target, checkpoint_id=str(d))
        out["dcp1_load"] = time.perf_counter() - t0
        assert all(torch.equal(target[n], sd[n]) for n in sd)
        del target
        shutil.rmtree(d)
        # DCP over gloo, each rank holding a slice of every tensor
        if ranks > 1:
            try:
                out.update(_dcp_ranks(k, base / f"dcpn-{r}", ranks))
            except Exception as exc:  # reported, not fatal: the other figures stand
                out["dcpn_error"] = f"{type(exc).__name__}: {exc}"[:300]
            shutil.rmtree(base / f"dcpn-{r}", ignore_errors=True)
        print(json.dumps(out), flush=True)


def _dcp_ranks(k: int, d: Path, ranks: int) -> dict:
    import socket

    import torch.multiprocessing as mp

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    result = d.parent / (d.name + ".json")
    mp.spawn(_dcp_rank, args=(ranks, k, str(d), port, str(result)), nprocs=ranks, join=True)
    out = json.loads(result.read_text())
    result.unlink()
    return out


def _dcp_rank(rank: int, ranks: int, k: int, d: str, port: int, result: str) -> None:
    import torch
    import torch.distributed as dist
    import torch.distributed.checkpoint as dcp
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import DTensor, Shard

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=ranks)
    try:
        mesh = init_device_mesh("cpu", (ranks,))
        chunk = -(-k // ranks)  # N.Shard(0) splits as torch.chunk does
        lo, hi = min(rank * chunk, k), min((rank + 1) * chunk, k)
        g = torch.Generator().manual_seed(rank)

        def dt(local):
            return DTensor.from_local(local, mesh, [N.Shard(0)], run_check=False, shape=(k,), stride=(1,))

        sd = {"param": dt(torch.linspace(-1.0, 1.0, k, dtype=torch.float64)[lo:hi].clone()),
              "exp_avg": dt(torch.randn(hi - lo, dtype=torch.float64, generator=g)),
              "exp_avg_sq": dt(torch.rand(hi - lo, dtype=torch.float64, generator=g))}
        dist.barrier()
        t0 = time.perf_counter()
        dcp.save(sd, checkpoint_id=d)
        dist.barrier()
        save = time.perf_counter() - t0
        target = {n: dt(torch.empty(hi - lo, dtype=torch.float64)) for n in sd}
        dist.barrier()
        t0 = time.perf_counter()
        dcp.load(target, checkpoint_id=d)
        dist.barrier()
        load = time.perf_counter() - t0
        assert all(torch.equal(target[n].to_local(), sd[n].to_local()) for n in sd)
        if rank == 0:
            size = sum(p.stat().st_size for p in Path(d).rglob("*") if p.is_file())
            Path(result).write_text(json.dumps({"dcpn_save": save, "dcpn_load": load,
                                                "dcpn_bytes": size, "dcpn_ranks": ranks}))
    finally:
        dist.destroy_process_group()


class Peer:
    """The peer process in the torch interpreter, or why there is none."""

    def __init__(self, python: str, k: int, where: Path, ranks: int):
        self.proc = None
        self.why = ""
        try:
            has = subprocess.run([python, "-c", "import torch, torch.distributed.checkpoint"],
                                 capture_output=True, timeout=300)
        except (OSError, subprocess.TimeoutExpired) as exc:
            self.why = f"cannot run {python}: {exc}"
            return
        if has.returncode != 0:
            self.why = f"torch is not installed in {python}"
            return
        self.proc = subprocess.Popen([python, str(Path(__file__).resolve()), "--peer-serve",
                                      "--k", str(k), "--dir", str(where), "--dcp-ranks", str(ranks)],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        hello = self._line()
        self.version = hello["ready"] if hello else ""

    def _line(self):
        line = self.proc.stdout.readline()
        if not line:
            self.why = f"the peer process ended (rc {self.proc.wait()})"
            self.proc = None
            return None
        return json.loads(line)

    def round(self):
        if self.proc is None:
            return None
        self.proc.stdin.write("round\n")
        self.proc.stdin.flush()
        return self._line()

    def close(self):
        if self.proc is not None:
            self.proc.stdin.close()
            self.proc.wait(timeout=60)


# ----------------------------------------------------------------------------- the benchmark

def _filesystem(path: Path) -> str:
    best = ("?", "?", "")
    try:
        for line in Path("/proc/mounts").read_text().splitlines():
            dev, mnt, fstype = line.split()[:3]
            if str(path.resolve()).startswith(mnt) and len(mnt) >= len(best[2]):
                best = (dev, fstype, mnt)
    except OSError:
        pass
    return f"{best[1]} on {best[0]} (mounted at {best[2]})"


def runtime_sha256(words: int = 30_000_000) -> float:
    """GB/s of the executables' sha256 (libcrypto's, SHA instructions where the processor
    has them) on one core, best of 3."""
    import ctypes

    import numpy as np

    from alphac import driver
    from alphac.ir import nodes as N

    tiny = learner(4)
    dep = N.Deployment("ckbench_sha", tiny, 1, N.Star(), N.Partitioning(), (N.Role("solo", (0,)),),
                       ("x86_64",), 1, N.Contract(), N.Checkpoint(), source_file="bench/ckbench_sha.alpha")
    dep = dataclasses.replace(dep, learner=dataclasses.replace(
        tiny, samples=N.Samples(1, (1,), tiny.samples.words[:1])))
    with tempfile.TemporaryDirectory() as d:
        lib = ctypes.CDLL(str(driver.build(driver.plan(dep), "solo", "x86_64", d, shared=True)))
        lib.rt_sha256_bytes.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p]
        data = np.arange(words, dtype=np.uint64)
        out = ctypes.create_string_buffer(32)
        best = float("inf")
        for _ in range(3):
            t0 = time.perf_counter()
            lib.rt_sha256_bytes(data.ctypes.data, words * 8, out)
            best = min(best, time.perf_counter() - t0)
    return words * 8 / GB / best


def rate(size: float, seconds: float) -> float:
    """GB/s; nan where the difference of medians is not positive (lost in the noise)."""
    return size / GB / seconds if seconds > 0 else float("nan")


def bench(args) -> None:
    from alphac.checkpoint import verify
    from alphac.testing import session

    base = Path(args.dir) if args.dir else Path(tempfile.mkdtemp(prefix="alphac-ckbench-"))
    base.mkdir(parents=True, exist_ok=True)
    base = base.resolve()
    work = Path(tempfile.mkdtemp(prefix="work-", dir=base))
    k = args.k
    words = 3 * k + 2
    print(f"== checkpoint: Adam, k = {k} binary64 parameters, m = 2k + 2 state words "
          f"({words * 8 / GB:.3f} GB of words), {OWNERS} owners on 127.0.0.1, "
          f"{args.topology}{' fan-out 2' if args.topology == 'hierarchy' else ''}")
    print(f"   directory {base}: {_filesystem(base)}; page cache warm for every writer and "
          f"reader (nothing dropped)")
    try:
        t0 = time.monotonic()
        lrn = learner(k)
        print(f"   learner made in {time.monotonic() - t0:.2f} s")
        layouts = ("partitioned", "replicated")
        deps, exes = {}, {}
        for layout in layouts:
            for ck in (True, False):
                dep = deployment(lrn, layout, ck, args.topology)
                t0 = time.monotonic()
                exes[(layout, ck)] = session.built(dep.name, dep)
                deps[(layout, ck)] = dep
                size = sum(p.stat().st_size for p in exes[(layout, ck)].values())
                print(f"   build {dep.name}: {time.monotonic() - t0:.2f} s (plan and 2 executables, "
                      f"{size / 1e6:.0f} MB together)")

        peer = Peer(args.torch_python, k, work, args.dcp_ranks)
        if peer.proc is not None:
            print(f"   peer: torch {peer.version} in {args.torch_python}")
        times = {layout: {"ck": [], "no": [], "res": [], "zero": []} for layout in layouts}
        sizes, verified = {}, {}
        peers = []
        for r in range(1, args.rounds + 1):
            t_round = time.monotonic()
            for layout in layouts:
                dep_ck, dep_no = deps[(layout, True)], deps[(layout, False)]
                ex_ck, ex_no = exes[(layout, True)], exes[(layout, False)]
                ckdir = work / f"{layout}-{r}"
                times[layout]["ck"].append(run_owners_once(dep_ck, ex_ck, work, 1, _run_args(ckdir)))
                times[layout]["no"].append(run_owners_once(dep_no, ex_no, work, 1, _run_args()))
                ckpt = ckdir / "ckpt-1"
                written = sorted(p.name for p in ckdir.iterdir())
                if written != ["ckpt-1"]:
                    sys.exit(f"bench: {ckdir} holds {written}, expected ckpt-1")
                sizes[layout] = shard_bytes(ckpt)
                if r == 1:
                    manifest = verify(ckpt)  # every hash, in Python, once
                    verified[layout] = len({f.owner for f in manifest.fragments})
                scratch = work / f"{layout}-{r}-scratch"
                times[layout]["res"].append(run_owners_once(dep_ck, ex_ck, work, 1,
                                                            _run_args(scratch, ckpt)))
                times[layout]["zero"].append(run_owners_once(dep_ck, ex_ck, work, 0, _run_args(scratch)))
                if scratch.exists() and any(scratch.iterdir()):
                    sys.exit(f"bench: a run that updated nothing wrote {sorted(os.listdir(scratch))}")
                shutil.rmtree(ckdir)
                shutil.rmtree(scratch, ignore_errors=True)
            t_ours = time.monotonic() - t_round
            t0 = time.monotonic()
            got = peer.round()
            if got is not None:
                peers.append(got)
            print(f"   round {r}/{args.rounds}: alphac {t_ours:.1f} s"
                  + (f", peer {time.monotonic() - t0:.1f} s" if got is not None else ""), flush=True)
        peer.close()
    finally:
        shutil.rmtree(work, ignore_errors=True)
        if not args.dir:
            shutil.rmtree(base, ignore_errors=True)

    med = statistics.median
    rows = []
    for layout in layouts:
        t = times[layout]
        w = med(t["ck"]) - med(t["no"])
        rs = med(t["res"]) - med(t["zero"])
        label = ("alphac, partitioned, 4 owners write" if layout == "partitioned"
                 else "alphac, replicated, 4 owners write")
        rows.append((label, rate(sizes[layout], w), rate(sizes[layout], rs), sizes[layout]))
        print(f"   {layout}: T(1, ckpt) {med(t['ck']):.3f} s, T(1, none) {med(t['no']):.3f} s -> write "
              f"{w:.3f} s; T(resume, no update) {med(t['res']):.3f} s, T(0) {med(t['zero']):.3f} s -> "
              f"restore {rs:.3f} s; {verified[layout]} shard(s) with words, checkpoint verified whole "
              f"in Python")
    if peers:
        def p(key):
            return med([x[key] for x in peers])

        rows.append(("torch.save + fsync, torch.load", rate(p("save_bytes"), p("save_fsync")),
                     rate(p("save_bytes"), p("load")), int(p("save_bytes"))))
        rows.append(("torch.save, no fsync", rate(p("save_bytes"), p("save_nofsync")), None,
                     int(p("save_bytes"))))
        rows.append(("DCP, 1 process", rate(p("dcp1_bytes"), p("dcp1_save")),
                     rate(p("dcp1_bytes"), p("dcp1_load")), int(p("dcp1_bytes"))))
        errors = [x["dcpn_error"] for x in peers if "dcpn_error" in x]
        if all("dcpn_save" in x for x in peers) and args.dcp_ranks > 1:
            rows.append((f"DCP, {args.dcp_ranks} ranks over gloo", rate(p("dcpn_bytes"), p("dcpn_save")),
                         rate(p("dcpn_bytes"), p("dcpn_load")), int(p("dcpn_bytes"))))
        for key, what in (("save_fsync", "torch.save+fsync"), ("save_nofsync", "torch.save"),
                          ("load", "torch.load"), ("dcp1_save", "DCP save"), ("dcp1_load", "DCP load"),
                          ("dcpn_save", f"DCP {args.dcp_ranks} ranks save"),
                          ("dcpn_load", f"DCP {args.dcp_ranks} ranks load")):
            if all(key in x for x in peers):
                print(f"   peer {what}: {p(key):.3f} s")
        if errors:
            print(f"   DCP over {args.dcp_ranks} ranks not measured: {errors[0]}")

    print(f"\n{'':38} {'write GB/s':>11} {'restore GB/s':>13} {'bytes':>12}")
    for label, wr, rs, size in rows:
        rs_s = f"{rs:13.3f}" if rs is not None else f"{'-':>13}"
        print(f"{label:38} {wr:11.3f} {rs_s} {size:12d}")
    print(f"   the executables' sha256 on one core: {runtime_sha256():.2f} GB/s (each shard byte is "
          f"hashed once: a fragment's words by its digest, the shard's digest over its header and those)")
    print(f"(medians of {args.rounds} interleaved rounds; alphac: sha256 of every byte, fsync of "
          f"every shard, manifest and directory, restores verify every hash; DCP: its default "
          f"FileSystemWriter, which fsyncs each file; page cache warm for all)")
    if not peers:
        print(f"peer not measured: {peer.why}")
        print("aim (alphac write >= DCP write, hashing and fsyncing): not judged, no peer")
        return
    ours = rows[0][1]
    dcps = [(label, wr) for label, wr, _, _ in rows if label.startswith("DCP")]
    best_label, best = max(dcps, key=lambda x: x[1])
    met = ours >= best
    print(f"aim (alphac write >= DCP write while hashing and fsyncing): "
          f"{'met' if met else 'NOT met'} - alphac partitioned {ours:.3f} GB/s vs {best_label} "
          f"{best:.3f} GB/s" + "".join(f", {lab} {v:.3f} GB/s" for lab, v in dcps if lab != best_label))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--k", type=int, default=10_000_000, help="parameters (default 1e7)")
    ap.add_argument("--rounds", type=int, default=3, help="interleaved rounds (median of these)")
    ap.add_argument("--topology", choices=("hierarchy", "star"), default="hierarchy")
    ap.add_argument("--torch-python", default="python3", metavar="PATH",
                    help="the interpreter with torch that runs the peer (default python3)")
    ap.add_argument("--dcp-ranks", type=int, default=4, help="DCP over gloo ranks (0: skip)")
    ap.add_argument("--dir", help="where checkpoints are written (default: a fresh temporary "
                                  "directory, removed afterwards)")
    ap.add_argument("--peer-serve", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.peer_serve:
        peer_serve(args.k, args.dir, args.dcp_ranks)
        return
    sys.path.insert(0, str(ROOT))
    os.chdir(ROOT)
    bench(args)


if __name__ == "__main__":
    main()
