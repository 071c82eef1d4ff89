"""The optimizer peer: torch.optim.Adam steps on float64 parameters, foreach=True and False,
as a user would run them (as ../shared/anchors/bench_optim.py times them). Run from the
benchmark peers' virtual environment (bench/.venv); prints one JSON line:
{"threads": T, "seconds": {"True": [per-step seconds of each repetition], "False": [...]}}.

    bench/.venv/bin/python bench/peer_adam.py --k 10000000 [--threads 1] [--reps 5]
"""

from __future__ import annotations

import argparse
import json
import time

import torch


def steps_per_rep(k: int) -> int:
    return max(2, min(20, 40_000_000 // max(1, k)))


def time_adam(k: int, foreach: bool, reps: int) -> list[float]:
    """Seconds per step of each repetition of consecutive steps, after two warm-up steps
    (which create the optimizer's state)."""
    torch.manual_seed(0)
    p = torch.nn.Parameter(torch.randn(k, dtype=torch.float64))
    p.grad = torch.randn(k, dtype=torch.float64)
    opt = torch.optim.Adam([p], lr=1e-3, foreach=foreach)
    out = []
    with torch.no_grad():
        opt.step()
        opt.step()
        steps = steps_per_rep(k)
        for _ in range(reps):
            t0 = time.perf_counter()
            for _ in range(steps):
                opt.step()
            out.append((time.perf_counter() - t0) / steps)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--k", type=int, required=True)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--reps", type=int, default=5)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    seconds = {str(fe): time_adam(args.k, fe, args.reps) for fe in (True, False)}
    print(json.dumps({"threads": torch.get_num_threads(), "seconds": seconds}), flush=True)


if __name__ == "__main__":
    main()
