"""The Open MPI peer: mpi4py Allreduce(SUM) of float64 arrays, one rank per owner, started
by mpirun (bench_combine.py adds `--mca btl self,vader` for shared memory or
`--mca btl self,tcp` for loopback TCP). Prints peer_timing's JSON line from rank 0.

    mpirun -np 4 bench/.venv/bin/python bench/peer_mpi.py --words 100000,1000000 [--reps 3]
"""

from __future__ import annotations

import numpy as np
from mpi4py import MPI

from peer_timing import arguments, measure, report


def main() -> None:
    args = arguments(__doc__.splitlines()[0])
    comm = MPI.COMM_WORLD
    seconds = {}
    for words in args.words:
        x = np.ones(words, dtype=np.float64)
        y = np.empty_like(x)
        seconds[words] = measure(lambda: comm.Allreduce(x, y, op=MPI.SUM), comm.Barrier,
                                 lambda t: comm.allreduce(t, op=MPI.MAX), words, args.reps)
    if comm.rank == 0:
        report("mpi", comm.size, seconds)


if __name__ == "__main__":
    main()
