"""The gloo peer: torch.distributed all_reduce(SUM) of float64 tensors on 127.0.0.1, one
process per owner (torch.multiprocessing), one thread each. Prints peer_timing's JSON line.

With --rank, this process is that one rank only, meeting the others at --master HOST:PORT
over the interface --ifname (bench/bench_netns.py starts one in each network namespace).

    bench/.venv/bin/python bench/peer_gloo.py --owners 4 --words 100000,1000000 [--reps 3]
    bench/.venv/bin/python bench/peer_gloo.py --owners 4 --words 10000 --rank R
        --master 10.231.0.1:29500 --ifname ve0
"""

from __future__ import annotations

import os
import socket

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from peer_timing import arguments, measure, report


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rank_main(rank: int, owners: int, port: int, sizes: list[int], reps: int,
              host: str = "127.0.0.1") -> None:
    torch.set_num_threads(1)
    os.environ.update(MASTER_ADDR=host, MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=owners)

    def slowest(x: float) -> float:
        t = torch.tensor([x], dtype=torch.float64)
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        return t.item()

    seconds = {}
    for words in sizes:
        x = torch.ones(words, dtype=torch.float64)
        seconds[words] = measure(lambda: dist.all_reduce(x, op=dist.ReduceOp.SUM), dist.barrier,
                                 slowest, words, reps)
    if rank == 0:
        report("gloo", owners, seconds)
    dist.destroy_process_group()


def main() -> None:
    args = arguments(__doc__.splitlines()[0], owners=True, rank=True)
    if args.rank is not None:
        host, port = args.master.rsplit(":", 1)
        os.environ["GLOO_SOCKET_IFNAME"] = args.ifname
        rank_main(args.rank, args.owners, int(port), args.words, args.reps, host)
        return
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    mp.spawn(rank_main, args=(args.owners, free_port(), args.words, args.reps),
             nprocs=args.owners, join=True)


if __name__ == "__main__":
    main()
