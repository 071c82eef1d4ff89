"""The oracle evaluating beside the owners: `evaluate` gives its words for a run (or the
ones an earlier launch kept), `OracleProgress` says how far it is and stops it once the
command is interrupted, `Beside` runs it in a thread that leaves the signals to the main
one, and `leave` exits without waiting for that thread.
"""

from __future__ import annotations

import os
import signal
import sys
import threading

from alphac.launch.interrupts import INTERRUPT_SIGNALS, TIMEOUT_SIGNAL, Interrupted, stop_mark, stopping


def evaluate(dep, n: int, start, resume, new_contract: bool, mutant: str | None = None, tick=None,
             kept: str | None = None, schedule=None):
    """The oracle's words for the run (or None) and its refusal (or ""); `tick(u)` hears
    each update it finishes. With `kept` (a key of alphac.launch.oracle_cache) the words
    an earlier launch kept under it, else evaluated and kept. `schedule`: the reads a
    bounded-staleness run recorded (never kept: another run reads other versions)."""
    from alphac import driver
    from alphac.launch import oracle_cache
    from alphac.oracle import Refusal

    try:
        if start is None:
            got = oracle_cache.load(kept) if kept and schedule is None else None
            if got is None:
                got = driver.oracle(dep, n, mutant, tick=tick, schedule=schedule)
                if kept and schedule is None:
                    oracle_cache.store(kept, got)
            return got, ""
        # the owners run from the checkpoint's version up to update n, the oracle from the
        # words the launcher verified (read once: the same inputs)
        return driver.oracle(driver.resumed(dep, resume, new_contract), max(0, n - start.version), tick=tick,
                             start=start, schedule=schedule), ""
    except Refusal as exc:
        return None, f"{exc.code}: {exc.detail}"


class OracleProgress:
    """How far an oracle evaluating beside the owners is: for the report of a --timeout
    that runs out while the launcher waits for it. Its tick also ends the evaluation once
    the command is interrupted (interrupts.stopping), so that the cleanup does not wait for the
    interpreter's lock the oracle's thread would otherwise keep taking."""

    def __init__(self, first: int, last: int, what: str = "the oracle") -> None:
        self.first, self.last, self.what, self.at, self.since = first, last, what, None, stop_mark()

    def tick(self, u: int) -> None:
        self.at = u
        if stopping(self.since):
            raise Interrupted(signal.SIGTERM)

    def __call__(self) -> str:
        done = "" if self.at is None else f", {self.at + 1 - self.first:,} done"
        return f"{self.what} evaluated updates {self.first:,} to {self.last:,}{done}"


class Beside:
    """`work()` in a daemon thread, started at once: the launcher's own work (the oracle)
    beside the owners'. The thread blocks SIGINT, SIGTERM and SIGHUP, so the kernel hands
    them to the main thread, whose waits they interrupt; `result()` waits on an event in
    short steps, so a signal interrupts it at once. An interrupted launch leaves the thread
    to die with the process (`busy` says whether one still works: see `leave`)."""

    _running = 0
    _count_lock = threading.Lock()
    _interval = sys.getswitchinterval()
    # While the oracle runs pure Python, the main thread waits for the interpreter's lock
    # after each system call it makes (reaping owners, removing segments, reading /proc in a
    # signal handler) for as long as the switch interval: at the default 5 ms a cleanup of a
    # few hundred calls took seconds. 0.2 ms bounds it; the oracle only yields when asked.
    SWITCH_INTERVAL_S = 0.0002

    def __init__(self, work):
        self._done: list = []
        self._ended = threading.Event()
        with Beside._count_lock:
            if Beside._running == 0:
                Beside._interval = sys.getswitchinterval()
                sys.setswitchinterval(min(Beside._interval, Beside.SWITCH_INTERVAL_S))
            Beside._running += 1
        self._thread = threading.Thread(target=self._run, args=(work,), daemon=True,
                                        name="alphac-oracle")
        self._thread.start()

    def _run(self, work) -> None:
        signal.pthread_sigmask(signal.SIG_BLOCK, INTERRUPT_SIGNALS + (TIMEOUT_SIGNAL,))
        try:
            self._done.append((work(), None))
        except BaseException as exc:  # raised again in the waiting thread
            self._done.append((None, exc))
        finally:
            with Beside._count_lock:
                Beside._running -= 1
                if Beside._running == 0:
                    sys.setswitchinterval(Beside._interval)
            self._ended.set()

    def result(self):
        while not self._ended.wait(0.05):
            pass
        value, exc = self._done[0]
        if exc is not None:
            raise exc
        return value

    @staticmethod
    def busy() -> bool:
        return Beside._running > 0


def leave(status: int) -> None:
    """Exit with `status`. While an interrupted launch's oracle still evaluates in its
    thread, the process ends as soon as its streams are flushed (every owner is stopped
    and every partial file removed by then): the interpreter's shutdown is not left to
    race a thread it cannot stop."""
    if Beside.busy():
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):
                pass
        os._exit(status)
    sys.exit(status)
