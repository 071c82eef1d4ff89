"""How every command reports a failure on stderr: located diagnostics, or one line
`alphac: error[CODE]: message` for a stage's coded error."""

from __future__ import annotations

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
