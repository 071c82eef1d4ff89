"""Starting owner processes on 127.0.0.1 and never leaving one behind.

Owns: the peers file (with the transport the owners may use; its ports are
alphac.launch.ports), the command line of each owner (with the target's runner, e.g.
`qemu-aarch64`, in front) and its environment, one process group per owner, the overall
deadline, and cleanup (kill and reap every child, then remove any shared-memory segment a
killed owner had not unlinked yet) on success, failure, timeout, Ctrl-C, SIGTERM and
SIGHUP (alphac.launch.interrupts). Every owner also gets a parent-death signal
(`die_with_parent`), so that it is killed even when the launcher itself is killed.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

from alphac import wire
from alphac.launch.interrupts import Interrupted, held, interruptible, timed_out


TRANSPORT_ENV = "ALPHAC_TRANSPORT"
TRANSPORTS = wire.TRANSPORTS  # the peers file's third column


def default_transport() -> str:
    """What local runs let owners use: `shm` (shared memory between the owners of this
    host, TCP where it cannot be set up), or $ALPHAC_TRANSPORT (`tcp`, `shm`, `shm-only`)."""
    chosen = os.environ.get(TRANSPORT_ENV, "shm")
    if chosen not in TRANSPORTS:
        raise ValueError(f"{TRANSPORT_ENV}={chosen!r}: expected one of {', '.join(TRANSPORTS)}")
    return chosen


def write_peers(path: str | Path, ports: Sequence[int], host: str = "127.0.0.1",
                transport: str | Sequence[str] | None = None) -> Path:
    """The peers file of the executable contract: one `OWNER HOST:PORT [TRANSPORT]` line per
    owner (the column left out for tcp, the executables' default). `transport`: what every
    owner may use, or one entry per owner; default `default_transport()`."""
    chosen = default_transport() if transport is None else transport
    each = [chosen] * len(ports) if isinstance(chosen, str) else list(chosen)
    p = Path(path)
    p.write_text("".join(f"{o} {host}:{port}{'' if t == 'tcp' else ' ' + t}\n"
                         for o, (port, t) in enumerate(zip(ports, each))))
    return p


SHM_DIR = Path("/dev/shm")


def remove_segments(pids: Sequence[int]) -> list[str]:
    """Remove the shared-memory segments named after these (ended) processes, which an
    owner killed between creating a segment and its peer's unlinking it leaves behind
    (`/dev/shm/alphac-PID-RANDOM`); the names removed."""
    gone = []
    for pid in pids:
        for seg in SHM_DIR.glob(f"{wire.SHM_PREFIX}{pid}-*"):
            with contextlib.suppress(FileNotFoundError):
                seg.unlink()
                gone.append(seg.name)
    return gone


def owner_environment() -> dict[str, str]:
    """This process's environment without an engine's owner index and hosts
    (alphac.wire.ENGINE_VARIABLES): an owner started here is given both on its command
    line, and a launcher run inside a Slurm job or under mpirun must not pass the job's on
    (the owner would refuse `owner-ambiguous`)."""
    from alphac.wire import ENGINE_VARIABLES

    return {k: v for k, v in os.environ.items() if k not in ENGINE_VARIABLES}


def stderr_name(owner: int | str) -> str:
    """The file an owner's stderr goes to in its run directory (this runner's, the emitted
    Slurm files'), which `alphac verify` shows for an owner that published nothing."""
    return f"owner-{owner}.stderr"


@dataclass(frozen=True)
class OwnerCommand:
    """How to start one owner: `argv` (runner first, if any) and where its output goes."""

    owner: int
    argv: tuple[str, ...]
    out: Path
    label: str = ""  # e.g. "worker/aarch64", for messages
    pass_fds: tuple[int, ...] = ()  # descriptors the owner inherits (its status channel)


def owner_argv(exe: str | Path, owner: int, peers: str | Path, out: str | Path,
               runner: Sequence[str] = (), updates: int | None = None,
               timeout_ms: int | None = None, connections: str | Path | None = None,
               key: str | Path | None = None) -> tuple[str, ...]:
    """An owner's command line: with the run's `key` file, or else `--insecure` (an owner
    refuses to run with neither)."""
    argv = [*runner, str(exe), "--owner", str(owner), "--peers", str(peers), "--out", str(out)]
    argv += ["--key", str(key)] if key is not None else ["--insecure"]
    if updates is not None:
        argv += ["--updates", str(updates)]
    if timeout_ms is not None:
        argv += ["--timeout-ms", str(timeout_ms)]
    if connections is not None:
        argv += ["--connections", str(connections)]
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


@dataclass
class RunResult:
    outcomes: list[OwnerOutcome]
    seconds: float
    timed_out: bool
    killed: list[int] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.timed_out and all(o.ok for o in self.outcomes)


# --- parent-death signal --------------------------------------------------------------------

PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
_prctl = None


def _libc_prctl():
    global _prctl
    if _prctl is None:
        fn = ctypes.CDLL(None, use_errno=True).prctl
        fn.restype = ctypes.c_int
        fn.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong,
                       ctypes.c_ulong]
        _prctl = fn
    return _prctl


def die_with_parent(parent: int | None = None, sig: int = signal.SIGKILL):
    """A `preexec_fn` for subprocess.Popen: the child asks the kernel (Linux
    prctl(PR_SET_PDEATHSIG)) for `sig` when its parent dies, then checks that its parent is
    still `parent` (default: the calling process) and kills itself if not, so a launcher
    that dies between fork and prctl leaves nothing either. It runs between fork and exec,
    so with a runner (`qemu-aarch64 EXE`) the signal is set on the runner's process.

    The kernel sends the signal when the *thread* that forked exits. Popen forks from the
    thread calling it, and `run_owners` starts, waits for and reaps its owners in that one
    call, so that thread outlives every owner whichever thread it is."""
    parent = os.getpid() if parent is None else parent
    prctl = _libc_prctl()  # resolved before the fork: the child only calls it

    def preexec() -> None:
        if prctl(PR_SET_PDEATHSIG, int(sig), 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG) failed")
        if os.getppid() != parent:
            os.kill(os.getpid(), signal.SIGKILL)

    return preexec


def _kill_group(proc: subprocess.Popen) -> None:
    # each owner leads its own session/group; killing the group also takes down anything a
    # runner (qemu-user) forked
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def run_owners(commands: Sequence[OwnerCommand], deadline_s: float, log_dir: str | Path,
               poll_s: float = 0.01, tick=None) -> RunResult:
    """Start every owner, wait until all exit or `deadline_s` passes, then kill and reap
    whatever is left. stderr goes to `log_dir/owner-I.stderr` (a file, not a pipe, so a
    chatty owner can never block on a full pipe). Ctrl-C, SIGTERM and SIGHUP kill every
    owner, then `Interrupted` is raised again (see `interruptible`); an owner also dies when
    the launcher does (`die_with_parent`). A failure to start an owner is an OSError.
    `tick`, if given, is called at every poll (to read the owners' status channels).
    """
    log = Path(log_dir)
    log.mkdir(parents=True, exist_ok=True)
    with interruptible():
        return _run_owners(commands, deadline_s, log, poll_s, tick)


def _run_owners(commands, deadline_s: float, log: Path, poll_s: float, tick=None) -> RunResult:
    procs: list[tuple[OwnerCommand, subprocess.Popen, float, Path]] = []
    start = time.monotonic()
    ended: dict[int, tuple[int | None, float]] = {}
    timed_out = False
    killed: list[int] = []
    preexec = die_with_parent()
    env = owner_environment()
    try:
        for cmd in commands:
            err_path = log / stderr_name(cmd.owner)
            # a signal while an owner is forked is raised once it is in `procs`
            with held(), open(err_path, "wb") as err:
                try:
                    p = subprocess.Popen(cmd.argv, stdin=subprocess.DEVNULL,
                                         stdout=subprocess.DEVNULL, stderr=err, env=env,
                                         start_new_session=True, preexec_fn=preexec,
                                         pass_fds=cmd.pass_fds)
                except subprocess.SubprocessError as exc:  # the preexec_fn failed
                    raise OSError(f"{cmd.argv[0]}: {exc}") from None
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
            if tick is not None:
                tick()
            time.sleep(poll_s)
    finally:
        # also on Ctrl-C, SIGTERM, SIGHUP (Interrupted propagates after this); a signal
        # during the cleanup itself is raised only once every owner is reaped
        with held():
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
    """Kill every owner still running (its whole group), reap all of them, and remove the
    shared-memory segments they left."""
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
    remove_segments([p.pid for _, p, _, _ in procs])
