"""What the all-reduce peers share: the sizes' call counts and the timing protocol.

Run in the benchmark peers' virtual environment (bench/.venv, made by `make bench`), never
imported by alphac. Each repetition is a barrier, then `iters` back-to-back calls; the
repetition's figure is the slowest rank's seconds per call. Rank 0 prints one JSON line:
{"peer": NAME, "owners": N, "seconds": {WORDS: [per-call seconds of each repetition]}}.
"""

from __future__ import annotations

import argparse
import json
import time


def iterations(words: int) -> int:
    """Calls per repetition: about 1e7 words moved, at least 2 calls, at most 50."""
    return max(2, min(50, 10_000_000 // max(1, words)))


def arguments(description: str, owners: bool = False, rank: bool = False) -> argparse.Namespace:
    """--words W,W,... and --reps R (and --owners N for a peer that starts its own ranks;
    with `rank`, --rank R, --master HOST:PORT and --ifname IF for one rank of them)."""
    ap = argparse.ArgumentParser(description=description)
    if owners:
        ap.add_argument("--owners", type=int, required=True)
    if rank:
        ap.add_argument("--rank", type=int, help="be this rank only")
        ap.add_argument("--master", default="127.0.0.1:29500", help="rank 0's HOST:PORT (with --rank)")
        ap.add_argument("--ifname", default="lo", help="the interface gloo uses (with --rank)")
    ap.add_argument("--words", required=True, help="comma-separated sizes in float64 words")
    ap.add_argument("--reps", type=int, default=3)
    args = ap.parse_args()
    args.words = [int(float(w)) for w in args.words.split(",")]
    return args


def measure(call, barrier, slowest, words: int, reps: int) -> list[float]:
    """Seconds per call of each repetition, the slowest rank's (`slowest` reduces a float
    by MAX over ranks), after two warm-up calls."""
    for _ in range(2):
        call()
    out = []
    iters = iterations(words)
    for _ in range(reps):
        barrier()
        t0 = time.perf_counter()
        for _ in range(iters):
            call()
        out.append(slowest((time.perf_counter() - t0) / iters))
    return out


def report(peer: str, owners: int, seconds: dict[int, list[float]]) -> None:
    print(json.dumps({"peer": peer, "owners": owners, "seconds": seconds}), flush=True)
