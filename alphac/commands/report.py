"""How every command reports a failure on stderr: located diagnostics, or one line
`alphac: error[CODE]: message` for a stage's coded error, or `alphac: interrupted...`
after Ctrl-C, SIGTERM or SIGHUP."""

from __future__ import annotations

import os
import sys

from alphac.diagnostics import CompileError, render_all


def error(code: str, message: str) -> None:
    print(f"alphac: error[{code}]: {message}", file=sys.stderr)


def diagnostics(exc: CompileError) -> None:
    print(render_all(exc.diagnostics), file=sys.stderr)


def stage_error(exc: Exception) -> int:
    """Print a stage's one-line error (anything with a `code`: targets, image, launch) and
    return exit status 1; anything else is a bug and is raised again."""
    code = getattr(exc, "code", None)
    if code is None:
        raise exc
    error(code, getattr(exc, "message", str(exc)))
    return 1


def interrupted(exc: BaseException | None, after: str = "") -> int:
    """Report an interrupt on stderr, `alphac: interrupted{after}` after Ctrl-C (SIGINT),
    `alphac: interrupted by SIGTERM{after}` (or SIGHUP), and return its exit status, 128 +
    the signal's number (130, 143, 129). The terminal may be gone (SIGHUP): then nothing
    more is written and nothing is raised."""
    import signal

    from alphac.launch.runner import interrupt_signal, interrupt_status

    signum = interrupt_signal(exc)
    by = "" if signum == signal.SIGINT else f" by {signal.Signals(signum).name}"
    try:
        print(f"alphac: interrupted{by}{after}", file=sys.stderr)
    except OSError:
        pass
    _quiet_if_gone()
    return interrupt_status(exc)


def _quiet_if_gone() -> None:
    # a stream whose terminal or pipe has gone is pointed at /dev/null, so that the final
    # flush at exit cannot fail and change the exit status
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            try:
                null = os.open(os.devnull, os.O_WRONLY)
                os.dup2(null, stream.fileno())
                os.close(null)
                stream.flush()
            except (OSError, ValueError):
                pass
