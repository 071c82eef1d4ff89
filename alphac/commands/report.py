"""How every command reports: on stderr, located diagnostics, or one line
`alphac: error[CODE]: message` for a stage's coded error, or `alphac: interrupted...`
after Ctrl-C, SIGTERM or SIGHUP; with --json, one envelope on stdout, success and failure
alike (`reported`): {"format": "alphac-<command>-<n>", "ok", "diagnostics", "refusals",
...the command's own keys}, its schema in docs/schemas/<command>.json."""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass, field

from alphac.diagnostics import CompileError, render_all

# The envelope's version per command: alphac-<command>-<n> (plan's first document, without
# the envelope, was alphac-plan-1).
FORMATS = {"check": 1, "plan": 2, "oracle": 1, "build": 1, "launch": 1, "verify": 1,
           "inspect": 1, "qualify": 1, "conform": 1, "explain": 1, "clean": 1}


@dataclass
class Envelope:
    """What a --json command collects instead of printing: its located diagnostics, its
    one-line refusals ({code, message, owner?}) and its own keys."""

    command: str
    diagnostics: list = field(default_factory=list)
    refusals: list = field(default_factory=list)
    suppressed: dict = field(default_factory=dict)
    payload: dict = field(default_factory=dict)

    def document(self, status: int) -> dict:
        doc = {"format": f"alphac-{self.command}-{FORMATS[self.command]}", "ok": status == 0,
               "diagnostics": self.diagnostics, "refusals": self.refusals,
               "suppressed": sum(self.suppressed.values()),
               "suppressed_codes": dict(sorted(self.suppressed.items()))}
        for key, value in self.payload.items():  # the envelope's own keys are never replaced
            doc.setdefault(key, value)
        return doc


_envelope: Envelope | None = None  # set while a --json command runs


def reported(command: str, as_json: bool, run) -> int:
    """Run `run()` (its exit status); with `as_json`, everything it reports through this
    module is collected and printed as one envelope on stdout."""
    global _envelope
    if not as_json:
        return run()
    saved, _envelope = _envelope, Envelope(command)
    try:
        status = run()
        print(json.dumps(_envelope.document(status), indent=2, ensure_ascii=False))
    finally:
        _envelope = saved
    return status


def json_mode() -> bool:
    return _envelope is not None


def result(**keys) -> None:
    """The command's own keys of the envelope (--json only)."""
    if _envelope is not None:
        _envelope.payload.update(keys)


def error(code: str, message: str, owner: int | None = None) -> None:
    if _envelope is not None:
        _envelope.refusals.append({"code": code, "message": message,
                                   **({} if owner is None else {"owner": owner})})
        return
    print(f"alphac: error[{code}]: {message}", file=sys.stderr)


def refused(code: str, detail: str) -> None:
    """A refusal in the executables' own words, `refused: CODE: detail` (the oracle's)."""
    if _envelope is not None:
        error(code, detail)
        return
    print(f"refused: {code}: {detail}", file=sys.stderr)


def internal(what: str, exc: Exception) -> None:
    """A stage's bug, as one line, never a traceback."""
    message = f"internal error while {what}: {type(exc).__name__}: {exc}"
    if _envelope is not None:
        error("internal-error", message)
        return
    print(f"alphac: error: {message}", file=sys.stderr)


def located(found, suppressed: dict | None = None, sources=None) -> None:
    """Located diagnostics (a stage's, capped), rendered with their source lines (from
    `sources`, by default read again from the files)."""
    suppressed = dict(getattr(found, "suppressed", {}) if suppressed is None else suppressed)
    if _envelope is not None:
        _envelope.diagnostics += [d.as_json() for d in found]
        for code, n in suppressed.items():
            _envelope.suppressed[code] = _envelope.suppressed.get(code, 0) + n
        return
    print(render_all(found, suppressed, sources), file=sys.stderr)


def diagnostics(exc: CompileError) -> None:
    located(exc.diagnostics)


def stage_error(exc: Exception) -> int:
    """Print a stage's one-line error (anything with a `code`: targets, image, launch) and
    return exit status 1; anything else is a bug and is raised again."""
    code = getattr(exc, "code", None)
    if code is None:
        raise exc
    error(code, getattr(exc, "message", str(exc)))
    return 1


def staged(work):
    """`(work(), None)`, or `(None, status)` once its failure is reported: a spec's
    diagnostics (1), a stage's one-line error (1; 2 for a usage error)."""
    try:
        return work(), None
    except CompileError as exc:
        diagnostics(exc)
        return None, 1
    except Exception as exc:  # a stage's one-line error (build, targets, launch, checkpoints)
        status = stage_error(exc)
        return None, 2 if getattr(exc, "code", None) == "usage" else status


def interrupted(exc: BaseException | None, after: str = "") -> int:
    """Report an interrupt on stderr, `alphac: interrupted{after}` after Ctrl-C (SIGINT),
    `alphac: interrupted by SIGTERM{after}` (or SIGHUP), and return its exit status, 128 +
    the signal's number (130, 143, 129); a --timeout that ran out (`interrupts.bounded`) is
    `error[launch-timeout]` naming the part that ran out, exit 1. The terminal may be gone (SIGHUP): then nothing
    more is written and nothing is raised."""
    import signal

    from alphac.launch.interrupts import interrupt_signal, interrupt_status, timed_out

    ran_out = timed_out(exc)
    if ran_out is not None:  # the command's --timeout: an error of its own, exit 1
        try:
            error("launch-timeout", f"{ran_out}{after}")
        except OSError:
            pass
        _quiet_if_gone()
        return 1
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
