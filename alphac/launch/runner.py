"""Starting owner processes on 127.0.0.1 and never leaving one behind.

Owns: the peers file (its ports: alphac.launch.ports) (with the transport the owners may use), the
command line of each owner (with the target's runner, e.g. `qemu-aarch64`, in front) and
its environment, one process group per owner, the overall deadline, and cleanup (kill and
reap every child, then remove any shared-memory segment a killed owner had not unlinked
yet) on success, failure, timeout, Ctrl-C, SIGTERM and SIGHUP (`interruptible`). Every owner also gets a parent-death signal
(`die_with_parent`), so that it is killed even when the launcher itself is killed.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

from alphac import wire
from alphac.launch.ports import free_ports  # noqa: F401 (the launcher's and tests' name for it)


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


# --- signals: SIGINT, SIGTERM and SIGHUP stop the launch the way Ctrl-C does ---------------

INTERRUPT_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


# What a command's --timeout arms (`bounded`): when it fires, the command stops as if
# interrupted, in whatever it was doing, and reports `launch-timeout` naming that part.
TIMEOUT_SIGNAL = signal.SIGALRM


class Interrupted(KeyboardInterrupt):
    """SIGINT, SIGTERM or SIGHUP arrived while `interruptible` was in force, or a
    command's --timeout ran out (TIMEOUT_SIGNAL, under `bounded`)."""

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = int(signum)


def interrupt_signal(exc: BaseException | None) -> int:
    """The signal behind an interrupt; a plain KeyboardInterrupt is SIGINT."""
    return getattr(exc, "signum", int(signal.SIGINT))


def interrupt_status(exc: BaseException | None) -> int:
    """The exit status after an interrupt: 128 + the signal's number (130 for SIGINT, 143
    for SIGTERM, 129 for SIGHUP), as a shell reports a command the signal killed."""
    return 128 + interrupt_signal(exc)


class _Interrupts:
    """What the handlers of `interruptible` share (main thread only)."""

    def __init__(self) -> None:
        self.depth = 0          # nesting of `interruptible` in the main thread
        self.fired: int | None = None  # the signal that was raised as Interrupted
        self.hold = 0           # > 0: a signal now is raised when `held` ends
        self.pending: int | None = None
        self.forward = False    # pass SIGTERM on to children in our own process group
        self.limit: float | None = None  # the --timeout armed by `bounded`, in seconds
        self.doing = None       # what the command does now (`doing`): a text, or a callable
        # set by the first interrupt: work in other threads (an oracle) stops at its next
        # step, so that it no longer holds the interpreter's lock the cleanup needs
        self.stopping = threading.Event()

    def handler(self, signum, frame) -> None:
        self.stopping.set()
        if self.fired is not None:
            # already unwinding: a second signal must not cut the cleanup short (owners
            # also die with the launcher, see die_with_parent)
            return
        if self.forward:
            _terminate_group_descendants()
        if self.hold:
            if self.pending is None:
                self.pending = signum
            return
        self.fired = signum
        raise Interrupted(signum)


_INTERRUPTS = _Interrupts()


def _replaceable(handler) -> bool:
    # only the defaults are replaced: an ignored signal (nohup, a background job's SIGINT)
    # stays ignored, and a handler the caller installed stays in charge
    return handler in (signal.SIG_DFL, signal.default_int_handler)


def _descendants() -> list[int]:
    """Every process below this one (children before their children), from each task's
    /proc/PID/task/TID/children: a few reads, not one per process on the machine (each read
    waits for the interpreter's lock while an oracle thread evaluates). A kernel without
    those files (CONFIG_PROC_CHILDREN) is answered by a scan of every /proc/PID/stat."""
    if not os.path.exists(f"/proc/self/task/{threading.get_native_id()}/children"):
        return _descendants_by_scan()
    found, todo = [], [os.getpid()]
    while todo:
        pid = todo.pop(0)
        try:
            tasks = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        for tid in tasks:
            try:
                with open(f"/proc/{pid}/task/{tid}/children") as f:
                    kids = [int(x) for x in f.read().split()]
            except (OSError, ValueError):
                continue
            found += kids
            todo += kids
    return found


def _descendants_by_scan() -> list[int]:
    below: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        below.setdefault(ppid, []).append(int(name))
    found, todo = [], [os.getpid()]
    while todo:
        for pid in below.get(todo.pop(0), ()):
            found.append(pid)
            todo.append(pid)
    return found


def _terminate_group_descendants() -> None:
    """SIGTERM to every process below this one in its own process group: a build's `cc`
    and what it runs (cc1, as, collect2, ld), which a terminal's Ctrl-C or hangup would
    have reached too. Owners lead their own groups and are left to the runner's cleanup."""
    group = os.getpgrp()
    for pid in _descendants():
        try:
            if os.getpgid(pid) == group:
                os.kill(pid, signal.SIGTERM)
        except OSError:
            pass


@contextlib.contextmanager
def interruptible(forward: bool = False):
    """While in force (in the main thread), SIGINT, SIGTERM and SIGHUP each raise
    `Interrupted` (a KeyboardInterrupt) once, so `finally` clauses stop owners and remove
    partial files; later signals are ignored until it ends. The previous handlers are
    restored afterwards, so library callers keep theirs. Nested uses share the outermost
    one; in another thread it does nothing (Python runs handlers in the main thread only).
    With `forward` (a command's own process, whose children are all its own), the signal
    is also passed on, as SIGTERM, to the processes below this one in its process group
    (a build's `cc` and what it runs), as a terminal passes Ctrl-C or a hangup to the
    whole group: they remove their temporary files while subprocess waits for them (for
    a KeyboardInterrupt it waits a moment before it kills).
    Yields the shared state: `.fired` is the signal raised, or None."""
    st = _INTERRUPTS
    if threading.current_thread() is not threading.main_thread():
        yield _Interrupts()  # nothing fires here
        return
    if st.depth:
        st.depth += 1
        try:
            yield st
        finally:
            st.depth -= 1
        return
    st.fired, st.pending, st.hold, st.forward = None, None, 0, forward
    st.stopping.clear()
    saved = {}
    for sig in INTERRUPT_SIGNALS:
        old = signal.getsignal(sig)
        if _replaceable(old):
            saved[sig] = old
            signal.signal(sig, st.handler)
    st.depth = 1
    try:
        yield st
    finally:
        st.depth, st.forward = 0, False
        for sig, old in saved.items():
            signal.signal(sig, old)


@contextlib.contextmanager
def bounded(seconds: float | None):
    """A command's --timeout: `seconds` from now, TIMEOUT_SIGNAL raises `Interrupted` in
    whatever the command is doing then (planning, building, the owners, the oracle), and
    the usual cleanup runs: every owner is stopped, every partial file removed. Inside
    `interruptible`, in the main thread; None (or another thread) bounds nothing. What the
    command does is told by `doing`, so the report names the part that ran out
    (`timed_out`)."""
    st = _INTERRUPTS
    if seconds is None or threading.current_thread() is not threading.main_thread() or not st.depth:
        yield
        return
    old = signal.signal(TIMEOUT_SIGNAL, st.handler)
    st.limit, st.doing = seconds, None
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(TIMEOUT_SIGNAL, old)


def stopping() -> bool:
    """Whether an interrupt (or the --timeout) has fired: a thread working for the command
    (the oracle beside the owners) gives up at its next step."""
    return _INTERRUPTS.stopping.is_set()


def doing(what) -> None:
    """Say what the command does now (a text, or a callable giving one when asked), for the
    report of a --timeout that runs out during it."""
    _INTERRUPTS.doing = what


def timed_out(exc: BaseException | None) -> str | None:
    """For the interrupt a --timeout raised: `--timeout S s ran out while PART`; else None."""
    if interrupt_signal(exc) != TIMEOUT_SIGNAL:
        return None
    st = _INTERRUPTS
    part = st.doing() if callable(st.doing) else st.doing
    return f"--timeout {st.limit:g} s ran out" + (f" while {part}" if part else "")


@contextlib.contextmanager
def _held():
    """Signals that arrive inside are raised when it ends, not inside it (used while an
    owner is started, so that none can be forked and then lost before it is recorded)."""
    st = _INTERRUPTS
    if threading.current_thread() is not threading.main_thread() or not st.depth:
        yield
        return
    st.hold += 1
    try:
        yield
    finally:
        st.hold -= 1
        if not st.hold and st.pending is not None and st.fired is None:
            st.fired, st.pending = st.pending, None
            raise Interrupted(st.fired)


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
            with _held(), open(err_path, "wb") as err:
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
        with _held():
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
