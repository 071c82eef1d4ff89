"""What the benchmarks share about their peers (torch, Open MPI): the interpreter they run
from (bench/.venv, which `make bench` installs, unless --peer-python names another),
whether it can import a peer, and running a peer script for its one JSON line. A peer that
is not installed is reported as such by the benchmark, never skipped in silence."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

BENCH = Path(__file__).resolve().parent
DEFAULT_PYTHON = BENCH / ".venv" / "bin" / "python"


def add_option(ap) -> None:
    ap.add_argument("--peer-python", default=str(DEFAULT_PYTHON),
                    help="the interpreter with torch and mpi4py (default: bench/.venv's)")


def missing(python: str, module: str, program: str = "") -> str | None:
    """Why a peer needing `module` (and the command `program`) cannot run, or None."""
    if not Path(python).exists():
        return f"{python} does not exist (`make bench` makes bench/.venv)"
    if program and shutil.which(program) is None:
        return f"{program} is not installed (Debian: openmpi-bin libopenmpi-dev)"
    done = subprocess.run([python, "-c", f"import {module}"], capture_output=True, text=True)
    return None if done.returncode == 0 else f"{python} cannot import {module}"


def run_json(command: list[str], timeout: float = 1800) -> dict | str:
    """The last JSON line a peer prints, or why it failed."""
    env = {**os.environ, "GLOO_SOCKET_IFNAME": "lo"}
    if os.geteuid() == 0:  # mpirun refuses root unless told
        env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    done = subprocess.run(command, capture_output=True, text=True, env=env, cwd=BENCH,
                          timeout=timeout)
    lines = [ln for ln in done.stdout.splitlines() if ln.startswith("{")]
    if done.returncode != 0 or not lines:
        tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
        return f"failed (exit {done.returncode}): {tail}"
    return json.loads(lines[-1])
