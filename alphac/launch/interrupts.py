"""Interrupts of a command: SIGINT, SIGTERM and SIGHUP stop it the way Ctrl-C does
(`interruptible`), its --timeout (`bounded`) too, as `Interrupted` raised in whatever it
was doing then, so that `finally` clauses stop owners and remove partial files; a thread
working for it (the oracle beside the owners) stops at its next step (`stopping`).
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading

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
        # the outermost `interruptible`s entered so far, and the one the first interrupt came
        # in: work in other threads for it (an oracle) stops at its next step, so that it no
        # longer holds the interpreter's lock the cleanup needs (`stopping`)
        self.generation, self.stopped = 0, -1

    def handler(self, signum, frame) -> None:
        self.stopped = self.generation
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
    st.fired, st.pending, st.hold, st.forward, st.generation = None, None, 0, forward, st.generation + 1
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


def stop_mark() -> int:
    """For `stopping`: the `interruptible` in force now, or else the next one entered."""
    return _INTERRUPTS.generation + (0 if _INTERRUPTS.depth else 1)


def stopping(since: int) -> bool:
    """Whether an interrupt (or the --timeout) has fired in the `interruptible` of
    `stop_mark()` (or a later one): a thread working for the command (the oracle beside the
    owners) gives up at its next step; one of an interrupted launch before it does not."""
    return _INTERRUPTS.stopped >= since


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
def held():
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
