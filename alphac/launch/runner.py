"""Starting owner processes on 127.0.0.1 and never leaving one behind.

Owns: free loopback ports, the peers file, the command line of each owner (with the
target's runner, e.g. `qemu-aarch64`, in front), one process group per owner, the overall
deadline, and cleanup (kill and reap every child) on success, failure, timeout and Ctrl-C.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence


def free_ports(n: int, host: str = "127.0.0.1") -> list[int]:
    """n distinct ports the kernel reports free now. All sockets are held open together
    so the kernel cannot hand the same port out twice."""
    socks = []
    try:
        for _ in range(n):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind((host, 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def write_peers(path: str | Path, ports: Sequence[int], host: str = "127.0.0.1") -> Path:
    """The peers file of the executable contract: one `OWNER HOST:PORT` line per owner."""
    p = Path(path)
    p.write_text("".join(f"{o} {host}:{port}\n" for o, port in enumerate(ports)))
    return p


@dataclass(frozen=True)
class OwnerCommand:
    """How to start one owner: `argv` (runner first, if any) and where its output goes."""

    owner: int
    argv: tuple[str, ...]
    out: Path
    label: str = ""  # e.g. "worker/aarch64", for messages


def owner_argv(exe: str | Path, owner: int, peers: str | Path, out: str | Path,
               runner: Sequence[str] = (), updates: int | None = None,
               timeout_ms: int | None = None) -> tuple[str, ...]:
    argv = [*runner, str(exe), "--owner", str(owner), "--peers", str(peers), "--out", str(out)]
    if updates is not None:
        argv += ["--updates", str(updates)]
    if timeout_ms is not None:
        argv += ["--timeout-ms", str(timeout_ms)]
    return tuple(argv)


@dataclass
class OwnerOutcome:
    owner: int
    label: str
    argv: tuple[str, ...]
    out: Path
    returncode: int | None = None  # None: killed at the deadline
    stderr: str = ""
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return self.returncode == 0

    @property
    def timed_out(self) -> bool:
        return self.returncode is None

    def refusal(self) -> str | None:
        """The `refused: CODE: detail` line the owner printed, if any."""
        for line in self.stderr.splitlines():
            if line.startswith("refused: "):
                return line
        return None

    def refusal_code(self) -> str | None:
        line = self.refusal()
        if line is None:
            return None
        return line[len("refused: "):].split(":", 1)[0].strip()


@dataclass
class RunResult:
    outcomes: list[OwnerOutcome]
    seconds: float
    timed_out: bool
    killed: list[int] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.timed_out and all(o.ok for o in self.outcomes)


def _kill_group(proc: subprocess.Popen) -> None:
    # each owner leads its own session/group; killing the group also takes down anything a
    # runner (qemu-user) forked
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def run_owners(commands: Sequence[OwnerCommand], deadline_s: float, log_dir: str | Path,
               poll_s: float = 0.01) -> RunResult:
    """Start every owner, wait until all exit or `deadline_s` passes, then kill and reap
    whatever is left. stderr goes to `log_dir/owner-I.stderr` (a file, not a pipe, so a
    chatty owner can never block on a full pipe). Ctrl-C kills every owner, then re-raises.
    """
    log = Path(log_dir)
    log.mkdir(parents=True, exist_ok=True)
    with _term_as_interrupt():
        return _run_owners(commands, deadline_s, log, poll_s)


@contextlib.contextmanager
def _term_as_interrupt():
    """SIGTERM to the launcher is handled like Ctrl-C, so its owners are killed too (the
    owners live in their own sessions and would not see a signal sent to our group)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def raise_interrupt(signum, frame):
        raise KeyboardInterrupt(f"signal {signum}")

    old = signal.signal(signal.SIGTERM, raise_interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, old)


def _run_owners(commands, deadline_s: float, log: Path, poll_s: float) -> RunResult:
    procs: list[tuple[OwnerCommand, subprocess.Popen, float, Path]] = []
    start = time.monotonic()
    ended: dict[int, tuple[int | None, float]] = {}
    timed_out = False
    killed: list[int] = []
    try:
        for cmd in commands:
            err_path = log / f"owner-{cmd.owner}.stderr"
            with open(err_path, "wb") as err:
                p = subprocess.Popen(cmd.argv, stdin=subprocess.DEVNULL,
                                     stdout=subprocess.DEVNULL, stderr=err,
                                     start_new_session=True)
            procs.append((cmd, p, time.monotonic(), err_path))
        limit = start + deadline_s
        while len(ended) < len(procs):
            for cmd, p, t0, _ in procs:
                if cmd.owner in ended:
                    continue
                rc = p.poll()
                if rc is not None:
                    ended[cmd.owner] = (rc, time.monotonic() - t0)
            if len(ended) == len(procs):
                break
            if time.monotonic() >= limit:
                timed_out = True
                break
            time.sleep(poll_s)
    finally:
        # also on Ctrl-C (KeyboardInterrupt propagates after this)
        _cleanup(procs, ended, killed)
    outcomes = []
    for cmd, p, t0, err_path in procs:
        # an owner that ended between the last poll and the cleanup keeps its exit status
        rc, secs = ended.get(cmd.owner, (p.returncode, time.monotonic() - t0))
        if cmd.owner in killed:
            rc = None
        text = err_path.read_bytes().decode("utf-8", "replace") if err_path.exists() else ""
        outcomes.append(OwnerOutcome(cmd.owner, cmd.label, cmd.argv, cmd.out, rc, text, secs))
    return RunResult(outcomes, time.monotonic() - start, timed_out, killed=killed)


def _cleanup(procs, ended: dict, killed: list[int]) -> None:
    """Kill every owner still running (its whole group) and reap all of them."""
    for cmd, p, _, _ in procs:
        if p.poll() is None:
            _kill_group(p)
            if cmd.owner not in killed:
                killed.append(cmd.owner)
    for _, p, _, _ in procs:
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:  # pragma: no cover - SIGKILL cannot be ignored
            pass
