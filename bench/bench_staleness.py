"""Fixed and bounded staleness benchmark: does S = 1 hide the combine? The synchronous
learner (S = 0), fixed staleness S = 1 and bounded staleness S = 1 on the same deployment,
measured in the same run, interleaved round by round: seconds per update.

The learner is bench/bench_combine.py's (k parameters in the indexed form, one sample per
owner), on --owners owners of this host in a star over TCP, authenticated as `alphac launch`
runs it. Every owner's contribution is slowed by a declared delay (a test build's runtime:
ALPHAC_DELAY_AT names the local sum's op, ALPHAC_DELAY_MS=D, docs/runtime.md "Fault
injection"), so that the contribution takes D plus its own small work; the combine's time C
is the synchronous learner's per update without the delay. D defaults to C rounded up to a
millisecond (the case where overlap gains most: the sum 2C against C); --delay-ms sets it.

Under S = 1 each owner computes update u + 1's contributions on a thread while update u
combines (docs/runtime.md "Fixed staleness"), so the aim is a time per update of at most
1.1 x max(D, C), where the synchronous learner takes about D + C. Under bounded staleness
S = 1 the same thread reads the newest version when its delay ends (docs/runtime.md
"Bounded staleness"): the bench says how many of its reads were one version behind. Each
line gives ms per update = (T(N) - T(1)) / (N - 1) of the slowest owner's wall time, medians
over --repeat rounds; the last S = 1 runs' words are compared with the oracle's (bounded:
its replay of the run's schedule), word for word.

    python bench/bench_staleness.py [--words 1000000] [--owners 4] [--updates 11]
                                    [--repeat 3] [--delay-ms D]
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import sys
from dataclasses import replace
from unittest.mock import patch
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT))

import bench_combine as bc  # noqa: E402
import learner_bench as lb  # noqa: E402

from alphac.ir import nodes as N  # noqa: E402
from alphac.plan.protocol import OP_CODE  # noqa: E402


def staleness(dep: N.Deployment, S: int, kind=N.ConsistencyKind.FIXED_STALENESS) -> N.Deployment:
    kind = kind if S else N.ConsistencyKind.SYNCHRONOUS
    tag = "b" if kind is N.ConsistencyKind.BOUNDED_STALENESS else "s"
    return replace(dep, name=f"{dep.name}_{tag}{S}", source_file=f"bench/{dep.name}_{tag}{S}.alpha",
                   consistency=N.Consistency(kind, S))


def seconds(dep, exes, updates: int, delay_ms: int):
    """The slowest owner's wall seconds of one run over TCP, each owner's contribution
    slowed by `delay_ms` (the owners inherit the environment); and the run."""
    delay = {"ALPHAC_DELAY_AT": str(OP_CODE["local"]), "ALPHAC_DELAY_MS": str(delay_ms)}
    with patch.dict(os.environ, delay):
        run = lb.alphac_run(dep.name, dep, exes, updates, transport="tcp")
    return lb.owners_seconds(run), run


def per_update(walls: dict, updates: int) -> float:
    return (statistics.median(walls[updates]) - statistics.median(walls[1])) / (updates - 1)


def timed(cases: dict, updates: int, repeat: int, delay_ms: dict) -> dict:
    """ms per update of each case {label: (dep, exes)}, interleaved round by round."""
    walls = {label: {1: [], updates: []} for label in cases}
    for _ in range(repeat):
        for label, (dep, exes) in cases.items():
            for u in (1, updates):
                walls[label][u].append(seconds(dep, exes, u, delay_ms[label])[0])
    return {label: per_update(w, updates) * 1e3 for label, w in walls.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], allow_abbrev=False)
    ap.add_argument("--words", type=int, default=1_000_000, help="k, the words every combine moves")
    ap.add_argument("--owners", type=int, default=4)
    ap.add_argument("--updates", type=int, default=11)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--delay-ms", type=int, default=None, help="D (default: the combine's time, rounded up)")
    args = ap.parse_args()
    from alphac.launch.report import compare
    from alphac.oracle import evaluate
    from alphac.testing import session

    from alphac.launch.results import recorded_schedule

    base = bc.deployment(args.words, args.owners, N.Star())
    deps = {S: staleness(base, S) for S in (0, 1)}
    deps["b1"] = staleness(base, 1, N.ConsistencyKind.BOUNDED_STALENESS)
    exes = {S: session.built(d.name, d, faults=True) for S, d in deps.items()}
    combine = timed({"combine": (deps[0], exes[0])}, args.updates, args.repeat, {"combine": 0})["combine"]
    delay = args.delay_ms if args.delay_ms is not None else max(1, math.ceil(combine))
    cases = {"synchronous": (deps[0], exes[0]), "S = 1": (deps[1], exes[1]),
             "bounded S = 1": (deps["b1"], exes["b1"]), "S = 1, no delay": (deps[1], exes[1])}
    got = timed(cases, args.updates, args.repeat, {"synchronous": delay, "S = 1": delay, "bounded S = 1": delay,
                                                   "S = 1, no delay": 0})
    aim = 1.1 * max(delay, combine)
    print(f"fixed and bounded staleness: {args.words:,} words, {args.owners} owners on {os.cpu_count()} cores, "
          f"star, TCP, authenticated; {args.updates} updates, medians of {args.repeat} rounds")
    print(f"  combine C (synchronous, no delay)   {combine:8.2f} ms/update")
    print(f"  contribution delay D (every owner)  {delay:8d} ms (plus the contribution's own work)")
    print(f"  synchronous, delayed                {got['synchronous']:8.2f} ms/update  (about D + C)")
    print(f"  S = 1, delayed                      {got['S = 1']:8.2f} ms/update  "
          f"aim <= 1.1 x max(D, C) = {aim:.2f}: {'met' if got['S = 1'] <= aim else 'not met'}; "
          f"synchronous / S = 1 {got['synchronous'] / got['S = 1']:.2f}x")
    print(f"  bounded S = 1, delayed              {got['bounded S = 1']:8.2f} ms/update  "
          f"synchronous / bounded {got['synchronous'] / got['bounded S = 1']:.2f}x")
    print(f"  S = 1, no delay                     {got['S = 1, no delay']:8.2f} ms/update  "
          f"(its cost over C: the sum's copy into the register, the thread)")
    _, run = seconds(deps[1], exes[1], args.updates, delay)
    report = compare(session.plan(deps[1].name, deps[1]), run, evaluate(deps[1], args.updates), args.updates)
    print(f"  the last S = 1 run ({args.updates} updates) equals the oracle: {report.match}")
    _, run = seconds(deps["b1"], exes["b1"], args.updates, delay)
    reads = recorded_schedule(run.outputs, args.owners)
    behind = sum(u - r for o in reads for u, r in enumerate(o))
    oracle = evaluate(deps["b1"], args.updates, schedule=reads)
    report = compare(session.plan(deps["b1"].name, deps["b1"]), run, oracle, args.updates)
    print(f"  the last bounded S = 1 run: {behind} of its {args.owners * args.updates} reads one version "
          f"behind; it equals the oracle's replay of its schedule: {report.match}")


if __name__ == "__main__":
    main()
