"""Cross-host benchmark on one machine: every owner in its own network namespace, the
namespaces joined by veth pairs to a bridge in a namespace of their own, each link shaped
to a rate (tc tbf, default 10 Gbit/s each way) and, where the kernel has sch_netem, a delay
(default 0.5 ms each way); alphac's owners over TCP (with the run's key, as across hosts
every frame is tagged) against gloo's all_reduce with its ranks placed in the same
namespaces, rounds interleaved. Needs root (ip netns, tc). Only the namespaces, links and
addresses (10.231.0.0/24) it creates are touched, and all are removed at the end, on an
error or Ctrl-C too.

alphac's figure is (T(N) - T(1)) / (N - 1) of the slowest owner's wall time (medians over
--repeat rounds), for the bench learner of bench/bench_combine.py (k words, one sample per
owner) on the hierarchy of fan-out 2 and the star; gloo's the median per-call time of
back-to-back all_reduce(SUM) of k float64 words, the slowest rank's. Every alphac run is
compared with the oracle word for word.

    python bench/bench_netns.py [--owners 4,8] [--k 10000,1000000] [--rate 10gbit]
        [--delay 0.5ms] [--updates 21] [--repeat 3] [--peer-python PY]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT))

import bench_combine as bc  # noqa: E402
import peers  # noqa: E402

PREFIX = "alphac-bn"
SWITCH = f"{PREFIX}-switch"
NET = "10.231.0"
PORT = 29000
GLOO_PORT = 29500


def ns(o: int) -> str:
    return f"{PREFIX}{o}"


def address(o: int) -> str:
    return f"{NET}.{o + 1}"


def sh(*argv: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(argv, capture_output=True, text=True, check=check)


def namespaces() -> list[str]:
    out = sh("ip", "netns", "list", check=False).stdout
    return [line.split()[0] for line in out.splitlines() if line.startswith(PREFIX)]


def teardown() -> None:
    """Remove every namespace this benchmark creates (their links go with them)."""
    for name in namespaces():
        sh("ip", "netns", "del", name, check=False)


def has_netem() -> bool:
    """Whether the kernel offers sch_netem (probed on a veth pair in a scratch namespace)."""
    probe = f"{PREFIX}-probe"
    try:
        sh("ip", "netns", "add", probe)
        sh("ip", "-n", probe, "link", "add", "p0", "type", "veth", "peer", "name", "p1")
        return sh("ip", "netns", "exec", probe, "tc", "qdisc", "add", "dev", "p0", "root", "netem",
                  "delay", "1ms", check=False).returncode == 0
    finally:
        sh("ip", "netns", "del", probe, check=False)


def shape(namespace: str, dev: str, rate: str, delay: str | None) -> None:
    """Egress of `dev`: netem's delay (if any) with tbf's rate under it, or tbf alone."""
    tc = ("ip", "netns", "exec", namespace, "tc", "qdisc", "add", "dev", dev)
    tbf = ("tbf", "rate", rate, "burst", "4mb", "latency", "50ms")
    if delay:
        sh(*tc, "root", "handle", "1:", "netem", "delay", delay)
        sh(*tc, "parent", "1:1", "handle", "10:", *tbf)
    else:
        sh(*tc, "root", *tbf)


def setup(n: int, rate: str, delay: str | None) -> None:
    teardown()
    sh("ip", "netns", "add", SWITCH)
    sh("ip", "-n", SWITCH, "link", "add", "br0", "type", "bridge")
    sh("ip", "-n", SWITCH, "link", "set", "br0", "up")
    for o in range(n):
        name = ns(o)
        sh("ip", "netns", "add", name)
        sh("ip", "link", "add", f"{PREFIX}v{o}", "type", "veth", "peer", "name", f"{PREFIX}s{o}")
        sh("ip", "link", "set", f"{PREFIX}v{o}", "netns", name, "name", f"ve{o}")
        sh("ip", "link", "set", f"{PREFIX}s{o}", "netns", SWITCH, "name", f"vs{o}")
        sh("ip", "-n", SWITCH, "link", "set", f"vs{o}", "master", "br0")
        sh("ip", "-n", SWITCH, "link", "set", f"vs{o}", "up")
        sh("ip", "-n", name, "addr", "add", f"{address(o)}/24", "dev", f"ve{o}")
        sh("ip", "-n", name, "link", "set", f"ve{o}", "up")
        sh("ip", "-n", name, "link", "set", "lo", "up")
        shape(name, f"ve{o}", rate, delay)
        shape(SWITCH, f"vs{o}", rate, delay)


# ----------------------------------------------------------------------------- alphac

def alphac_seconds(dep, exes, updates: int) -> tuple[float, object]:
    """The slowest owner's wall seconds of one keyed run over the namespaces, and the run."""
    from alphac.launch.plan_run import KEY_NAME, PlanRun, run_outputs, settled, write_key
    from alphac.launch.roles import role_table
    from alphac.launch.runner import OwnerCommand, owner_argv, run_owners
    from alphac.testing.session import new_run_dir, root

    run_dir = new_run_dir(root(), f"{dep.name}-netns")
    peers_file = run_dir / "netns.peers"
    peers_file.write_text("".join(f"{o} {address(o)}:{PORT}\n" for o in range(dep.owners)))
    key = write_key(run_dir / KEY_NAME)
    outs = run_outputs(run_dir, dep.owners)
    table = role_table(dep, exes)
    cmds = [OwnerCommand(o, ("ip", "netns", "exec", ns(o),
                             *owner_argv(table[o].exe, o, peers_file, outs[o], (), updates, 60000, None, key)),
                         outs[o]) for o in range(dep.owners)]
    result = run_owners(cmds, 600.0, run_dir)
    if not result.ok:
        sys.exit("bench: owners failed: " + "; ".join(oc.stderr.strip() for oc in result.outcomes))
    from alphac import driver

    run = settled(PlanRun(run_dir, peers_file, result), outs, driver.plan(dep).tree.owner)
    return max(oc.seconds for oc in result.outcomes), run


def gloo_seconds(python: str, n: int, k: int, reps: int) -> float | str:
    """gloo's median seconds per all_reduce of k words, its ranks in the namespaces."""
    cmds = [["ip", "netns", "exec", ns(r), python, str(ROOT / "bench" / "peer_gloo.py"), "--owners",
             str(n), "--words", str(k), "--reps", str(reps), "--rank", str(r), "--master",
             f"{address(0)}:{GLOO_PORT}", "--ifname", f"ve{r}"] for r in range(n)]
    procs = [subprocess.Popen(c, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for c in cmds]
    outs = [p.communicate(timeout=600) for p in procs]
    if any(p.returncode for p in procs):
        return "gloo failed: " + next(e for (_, e), p in zip(outs, procs) if p.returncode).strip()[-300:]
    import json

    got = json.loads(outs[0][0].strip().splitlines()[-1])
    return statistics.median(got["seconds"][str(k)])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--owners", default="4,8")
    ap.add_argument("--k", default="10000,1000000")
    ap.add_argument("--rate", default="10gbit", help="tc tbf rate of every link, each way")
    ap.add_argument("--delay", default="0.5ms", help="netem delay of every link, each way ('' for none)")
    ap.add_argument("--updates", type=int, default=21)
    ap.add_argument("--repeat", type=int, default=3)
    peers.add_option(ap)
    args = ap.parse_args()
    if os.geteuid() != 0 or not shutil.which("ip") or not shutil.which("tc"):
        # said, not failed: `make bench` runs every benchmark, and this one needs what
        # another user may not have
        print("bench_netns: not run: it needs root and iproute2 (ip, tc)")
        return
    owners = [int(x) for x in args.owners.split(",")]
    words = [int(float(x)) for x in args.k.split(",")]
    delay = args.delay or None
    if delay and not has_netem():
        print(f"bench_netns: this kernel has no sch_netem: the links are rate-shaped only, "
              f"without the {delay} delay")
        delay = None
    why = peers.missing(args.peer_python, "torch.distributed")
    from alphac.testing import session
    from alphac.launch.report import compare
    from alphac.ir import nodes as N
    from alphac.oracle import evaluate

    try:
        for n in owners:
            setup(n, args.rate, delay)
            print(f"== {n} owners, one network namespace each, links {args.rate}"
                  f"{', ' + delay + ' delay' if delay else ''} each way; TCP, keyed")
            for k in words:
                deps = [bc.deployment(k, n, N.Hierarchy(2)), bc.deployment(k, n, N.Star())]
                exes = {d.name: session.built(f"{d.name}-k{k}", d) for d in deps}
                walls = {d.name: {1: [], args.updates: []} for d in deps}
                last = {}
                gloo = []
                for _ in range(args.repeat):
                    for d in deps:
                        for u in (1, args.updates):
                            seconds, last[d.name] = alphac_seconds(d, exes[d.name], u)
                            walls[d.name][u].append(seconds)
                    if why is None:
                        got = gloo_seconds(args.peer_python, n, k, 3)
                        if isinstance(got, str):
                            why = got
                        else:
                            gloo.append(got)
                for d in deps:
                    w = walls[d.name]
                    per = (statistics.median(w[args.updates]) - statistics.median(w[1])) / (args.updates - 1)
                    rep = compare(session.plan(f"{d.name}-k{k}", d), last[d.name],
                                  evaluate(d, args.updates), args.updates)
                    ratio = f"  alphac/gloo {per / statistics.median(gloo):.2f}" if gloo else ""
                    print(f"  k {k:>8}  alphac {bc.topology_name(d):<12} {per * 1e3:8.2f} ms/update"
                          f"{ratio}  ({'bit-identical to the oracle' if rep.match else 'MISMATCH'})")
                if gloo:
                    print(f"  k {k:>8}  gloo all_reduce        {statistics.median(gloo) * 1e3:8.2f} ms/call")
                else:
                    print(f"  k {k:>8}  gloo not run: {why}")
    finally:
        teardown()
        with contextlib.suppress(Exception):
            sh("ip", "netns", "del", SWITCH, check=False)


if __name__ == "__main__":
    os.chdir(ROOT)
    main()
