"""The torch + gloo peer of bench/bench_logistic.py and bench/bench_e2e.py: full-batch
logistic regression (--model logistic) or least squares (--model lsq) in float64, one
process per owner (torch.multiprocessing), one thread each, each holding its share of the
samples; per update: p = sigmoid(X w) (logistic) or p = X w (lsq), g = X^T (p - y),
all_reduce(g, SUM) over gloo on 127.0.0.1, w -= rate g / n. Prints one JSON line {"peer": "torch+gloo",
"owners": N, "seconds": [per-update seconds of each repetition, the slowest rank's]}.

    bench/.venv/bin/python bench/peer_logistic.py --data out/data/logistic64.npy --owners 4
        [--model logistic|lsq] [--updates 10] [--reps 3]
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import time

import numpy as np
import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rank_main(rank: int, owners: int, port: int, data: str, updates: int, reps: int, model: str) -> None:
    torch.set_num_threads(1)
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=owners)
    rows = np.load(data, mmap_mode="r")
    n, d = rows.shape[0], rows.shape[1] - 1
    share = n // owners
    mine = torch.from_numpy(np.ascontiguousarray(rows[rank * share:(rank + 1) * share]))
    X, y = mine[:, :d].contiguous(), mine[:, d].contiguous()
    w = torch.zeros(d, dtype=torch.float64)

    rate = 0.5 if model == "logistic" else 0.01

    def step() -> None:
        p = torch.sigmoid(X @ w) if model == "logistic" else X @ w
        g = X.T @ (p - y)
        dist.all_reduce(g, op=dist.ReduceOp.SUM)
        w.sub_(rate * g / n)

    step()
    out = []
    for _ in range(reps):
        dist.barrier()
        t0 = time.perf_counter()
        for _ in range(updates):
            step()
        t = torch.tensor([(time.perf_counter() - t0) / updates], dtype=torch.float64)
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        out.append(t.item())
    if rank == 0:
        print(json.dumps({"peer": "torch+gloo", "owners": owners, "seconds": out}), flush=True)
    dist.destroy_process_group()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", required=True)
    ap.add_argument("--owners", type=int, default=4)
    ap.add_argument("--updates", type=int, default=10)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--model", choices=["logistic", "lsq"], default="logistic")
    args = ap.parse_args()
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    mp.spawn(rank_main, args=(args.owners, free_port(), args.data, args.updates, args.reps, args.model),
             nprocs=args.owners, join=True)


if __name__ == "__main__":
    main()
