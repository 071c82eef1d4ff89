"""`alphac check SPEC [--json]`: one `ok` line and exit 0, or every diagnostic and exit 1."""

from __future__ import annotations

import json
import sys

from alphac.check.api import check_file


def run(spec: str, as_json: bool) -> int:
    try:
        result, diagnostics, sources = check_file(spec)
    except Exception as exc:  # a checker bug must still end in one line, never a traceback
        print(f"alphac: error: internal error while checking {spec}: {type(exc).__name__}: {exc}",
              file=sys.stderr)
        return 1
    if as_json:
        payload = {"ok": result is not None, "file": spec,
                   "diagnostics": [d.as_json() for d in diagnostics]}
        if result is not None:
            payload.update(module=result.module, families=len(result.families),
                           learners=[l.name for l in result.learners],
                           deployments=[d.name for d in result.deployments])
        print(json.dumps(payload, indent=2))
        return 0 if result is not None else 1
    if result is None:
        for d in diagnostics:
            print(d.render(sources), file=sys.stderr)
        return 1
    n = len(result.families)
    print(f"ok: {spec}: {n} famil{'y' if n == 1 else 'ies'}, {_count(len(result.learners), 'learner')}, "
          f"{_count(len(result.deployments), 'deployment')}")
    return 0


def _count(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"
