"""Local steps benchmark: traffic and time per local update with local steps H against the
synchronous learner and against torch + gloo all_reduce every step, measured in the same
run, interleaved round by round.

The learner is bench/bench_combine.py's (k parameters in the indexed form, one sample per
owner: the contribution is cheap and the combine of k words is what costs), on --owners
owners of this host in a star over TCP, authenticated as `alphac launch` runs it. Under
`ConsistencyLocalSteps { localSteps = H }` an update is a round of H local updates on
each owner and one combine of the weighted parameter deltas (docs/learners.md), so its
traffic per local update is the synchronous learner's divided by H: the plan's words sent
per update say so, and the table prints both. Seconds per local update = (T(N) - T(1)) /
(N - 1) of the slowest owner's wall time, divided by H for local steps, medians over
--repeat rounds; gloo's figure is the median seconds of one all_reduce(SUM) of k float64
words on as many processes (bench/peer_gloo.py, from bench/.venv: `make bench-peers`), the
cost of a peer that combines every step. The last local-steps run's words are compared
with the oracle's, word for word.

    python bench/bench_local_steps.py [--words 1000000] [--owners 4] [--local-steps 8]
                                      [--updates 5] [--repeat 3] [--peer-python PY]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT))

import bench_combine as bc  # noqa: E402
import learner_bench as lb  # noqa: E402
import peers  # noqa: E402

from alphac.ir import nodes as N  # noqa: E402


def seconds(dep, exes, updates: int):
    """The slowest owner's wall seconds of one run over TCP; and the run."""
    run = lb.alphac_run(dep.name, dep, exes, updates, transport="tcp")
    return lb.owners_seconds(run), run


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], allow_abbrev=False)
    ap.add_argument("--words", type=int, default=1_000_000, help="k, the words every combine moves")
    ap.add_argument("--owners", type=int, default=4)
    ap.add_argument("--local-steps", type=int, default=8, help="H")
    ap.add_argument("--updates", type=int, default=5, help="N: rounds (local steps) and updates (synchronous)")
    ap.add_argument("--repeat", type=int, default=3)
    peers.add_option(ap)
    args = ap.parse_args()
    from alphac.launch.report import compare
    from alphac.oracle import evaluate
    from alphac.plan.registers import sent_words
    from alphac.plan.storage import word_counts
    from alphac.testing import session

    H = args.local_steps
    base = bc.deployment(args.words, args.owners, N.Star())
    deps = {"synchronous": base,
            f"local steps {H}": replace(base, name=f"{base.name}_h{H}", source_file=f"bench/{base.name}_h{H}.alpha",
                                        consistency=N.Consistency(N.ConsistencyKind.LOCAL_STEPS, H))}
    steps = {label: (H if d.consistency.local_steps else 1) for label, d in deps.items()}
    exes = {label: session.built(d.name, d) for label, d in deps.items()}
    walls = {label: {1: [], args.updates: []} for label in deps}
    gloo, why = [], bc.PEERS["gloo"].missing(args.peer_python)
    for _ in range(args.repeat):
        for label, d in deps.items():
            for u in (1, args.updates):
                walls[label][u].append(seconds(d, exes[label], u)[0])
        if why is None:
            got = bc.PEERS["gloo"].run(args.peer_python, args.owners, [args.words], 5)
            if isinstance(got, str):
                why = got
            else:
                gloo.append(got[args.words])
    print(f"local steps: {args.words:,} words, {args.owners} owners on {os.cpu_count()} cores, star, TCP, "
          f"authenticated; {args.updates} updates, medians of {args.repeat} rounds")
    per = {}
    for label, d in deps.items():
        w = walls[label]
        per[label] = (statistics.median(w[args.updates]) - statistics.median(w[1])) / (args.updates - 1) / steps[label]
        plan = session.plan(d.name, d)
        sent = max(sent_words(o.protocol, word_counts(d)[0]) for o in plan.owners)
        print(f"  {label:<22} {per[label] * 1e3:8.2f} ms per local update; the busiest owner sends "
              f"{sent / steps[label]:>12,.0f} words per local update")
    sync, local = per["synchronous"], per[f"local steps {H}"]
    print(f"  synchronous / local steps {H}: {sync / local:.2f}x")
    if why is not None:
        print(f"  torch+gloo all_reduce  not run: {why}")
    else:
        g = statistics.median(gloo)
        print(f"  torch+gloo all_reduce  {g * 1e3:8.2f} ms per call (every step); "
              f"gloo / local steps {H}: {g / local:.2f}x")
    d = deps[f"local steps {H}"]
    _, run = seconds(d, exes[f"local steps {H}"], args.updates)
    report = compare(session.plan(d.name, d), run, evaluate(d, args.updates), args.updates)
    print(f"  the last local-steps run ({args.updates} rounds) equals the oracle: {report.match}")


if __name__ == "__main__":
    main()
