"""What a launch is doing, shown as it happens: builds with their times, owners started,
the run directory, and the updates each owner has completed, read from the owners' status
channel (`--status-fd FD`: one line `update V` after each update; docs/runtime.md).

Shown on stderr when it is a terminal (or when asked), never on stdout, so that a pipe
or `--json` reads only results.
"""

from __future__ import annotations

import os
import sys
import time

REFRESH_S = 0.5  # the least time between two lines of update counts


class Progress:
    """Progress lines on `stream` (`alphac: ...`), or nothing when it is None."""

    def __init__(self, stream=None):
        self.stream = stream
        self._last = 0.0
        self._open = False  # a terminal line of update counts is being rewritten
        self._shown = ""  # the last line of update counts

    @classmethod
    def for_stderr(cls, quiet: bool = False, forced: bool = False) -> "Progress":
        shown = not quiet and (forced or sys.stderr.isatty())
        return cls(sys.stderr if shown else None)

    @property
    def enabled(self) -> bool:
        return self.stream is not None

    def say(self, text: str) -> None:
        if self.stream is None:
            return
        self._close_line()
        print(f"alphac: {text}", file=self.stream, flush=True)

    def built(self, name: str, seconds: float) -> None:
        self.say(f"built {name} in {seconds:.2f} s")

    def started(self, owners: int, run_dir) -> None:
        self.say(f"started {owners} owner{'s' if owners != 1 else ''}; run directory {run_dir}")

    def updates(self, versions: dict[int, int], total: int, final: bool = False) -> None:
        """The updates each owner has completed, at most every REFRESH_S, and at the end
        when they changed since."""
        now = time.monotonic()
        if self.stream is None or not versions or (not final and now - self._last < REFRESH_S):
            return
        text = f"alphac: updates {counts(versions, total)}"
        if text == self._shown:
            return
        self._last, self._shown = now, text
        if self.stream.isatty():
            print("\r\033[K" + text, end="", file=self.stream, flush=True)
            self._open = True
        else:
            print(text, file=self.stream, flush=True)

    def _close_line(self) -> None:
        if self._open:
            print(file=self.stream, flush=True)
            self._open = False


LISTED = 8  # owners whose counts are listed one by one; beyond, the least and the most


def counts(versions: dict[int, int], total: int) -> str:
    """`owner 0 3/5, owner 1 2/5`, or `3 owners: 2 to 3 of 5` for many owners."""
    if len(versions) <= LISTED:
        return ", ".join(f"owner {o} {v}/{total}" for o, v in sorted(versions.items()))
    low, high = min(versions.values()), max(versions.values())
    return f"{len(versions)} owners: {low} to {high} of {total}"


class StatusChannel:
    """One pipe per owner: the owner writes its status lines into the write end (handed to
    it as --status-fd), this side reads them without blocking."""

    def __init__(self, owners, progress: Progress, total: int):
        self.progress = progress
        self.total = total
        self.versions: dict[int, int] = {}
        self._pipes: dict[int, tuple[int, int]] = {}
        self._pending: dict[int, bytes] = {}
        for o in owners:
            r, w = os.pipe()
            os.set_blocking(r, False)
            self._pipes[o] = (r, w)

    def argv(self, owner: int) -> tuple[str, ...]:
        return ("--status-fd", str(self._pipes[owner][1]))

    def child_fds(self, owner: int) -> tuple[int, ...]:
        return (self._pipes[owner][1],)

    def poll(self) -> None:
        for o, (r, _) in self._pipes.items():
            data = self._read(r)
            if data:
                self._take(o, data)
        self.progress.updates(self.versions, self.total)

    def _read(self, fd: int) -> bytes:
        try:
            return os.read(fd, 1 << 16)
        except (BlockingIOError, OSError):
            return b""

    def _take(self, owner: int, data: bytes) -> None:
        *whole, rest = (self._pending.pop(owner, b"") + data).split(b"\n")
        self._pending[owner] = rest
        for line in whole:
            word, _, value = line.decode("ascii", "replace").partition(" ")
            if word == "update" and value.isdigit():
                self.versions[owner] = int(value)

    def close(self) -> None:
        """Read what is left, show the final counts, close both ends of every pipe (this
        side keeps the write ends until then: nothing here waits for an end of file)."""
        self.poll()
        self.progress.updates(self.versions, self.total, final=True)
        self.progress._close_line()
        for r, w in self._pipes.values():
            os.close(r)
            os.close(w)
        self._pipes.clear()
