"""Wall time of `alphac --version`, and of `alphac check` on the demo spec and on a spec
with 10,000 inline samples.

Each figure is the best of a few runs of the whole check (parse, type, lower, plan), in
process and in a fresh interpreter (which adds start-up, the imports and loading the
grammar's cached tables), with the fresh process's CPU time (user + system) beside it.
Targets: --version under 0.2 s, the demo under 0.4 s, 10,000 inline samples under 2 s.
"""

from __future__ import annotations

import contextlib
import io
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from alphac.commands.check import run  # noqa: E402


def inline_spec(samples: int, owners: int = 4) -> str:
    rng = random.Random(7)
    per_owner: list[list[str]] = [[] for _ in range(owners)]
    for i in range(samples):
        row = ", ".join(repr(rng.uniform(-1, 1) * 10.0 ** rng.randint(-3, 3)) for _ in range(3))
        per_owner[i % (owners - 1)].append(f"[{row}]")  # the last owner holds none
    lists = ",\n    ".join("[" + ", ".join(rows) + "]" for rows in per_owner)
    lsq = (ROOT / "specs" / "Gates" / "Lsq.alpha").read_text()
    body = lsq[lsq.index("value lsqGradient"):lsq.index("-- Heavy-ball")]
    return ("module Bench.Inline\nimport Learning.DataParallel\n\n"
            f"value lsqSamples : (family StdList (family StdList (family StdList StdU64))) = [\n"
            f"    {lists},\n]\n\n" + body)


def in_process(path: str, repeat: int = 3) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        with contextlib.redirect_stdout(io.StringIO()):
            rc = run(path, False)
        best = min(best, time.perf_counter() - start)
        assert rc == 0, f"{path} does not check clean"
    return best


def fresh(*argv: str, repeat: int = 5) -> tuple[float, float]:
    """The best wall time of `python -m alphac ARGV` in a new interpreter, and its CPU time."""
    best = (float("inf"), float("inf"))
    for _ in range(repeat):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        subprocess.run([sys.executable, "-m", "alphac", *argv], cwd=ROOT, check=True,
                       stdout=subprocess.DEVNULL)
        wall = time.perf_counter() - start
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        best = min(best, (wall, cpu))
    return best


def shown(figure: tuple[float, float]) -> str:
    return f"{figure[0]:.3f} s (CPU {figure[1]:.3f} s)"


def main() -> None:
    demo = str(ROOT / "specs" / "demo.alpha")
    with tempfile.TemporaryDirectory() as tmp:
        big = Path(tmp) / "inline10k.alpha"
        big.write_text(inline_spec(10_000))
        size = big.stat().st_size
        in_process(demo, 1)  # build the grammar once
        print(f"alphac --version                       fresh process {shown(fresh('--version'))}"
              "   (target < 0.2 s)")
        print(f"alphac check specs/demo.alpha          in process {in_process(demo):.3f} s   "
              f"fresh process {shown(fresh('check', demo))}   (target < 0.4 s)")
        print(f"alphac check 10,000 inline samples     in process {in_process(str(big)):.3f} s   "
              f"fresh process {shown(fresh('check', str(big), repeat=3))}   (target < 2 s; {size} bytes)")


if __name__ == "__main__":
    main()
