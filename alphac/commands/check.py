"""`alphac check SPEC [--json]`: one `ok` line and exit 0, or every diagnostic and exit 1.

The diagnostics are the checker's and, when it has none, the planner's for every
deployment of the file (alphac.driver.check), capped (at most 20 of one code, 200 in all)
and followed by one `note: N more diagnostics not shown (...)` line when some were not kept;
`--json` lists the kept ones and counts the rest in `suppressed` (by code in
`suppressed_codes`).
"""

from __future__ import annotations

import json
import sys

import click

from alphac import driver
from alphac.diagnostics import suppressed_note


@click.command("check")
@click.argument("spec", type=str)
@click.option("--json", "as_json", is_flag=True, help="Print the result or diagnostics as JSON.")
def command(spec: str, as_json: bool) -> None:
    """Parse and check SPEC. Exit 0 with one `ok` line, or 1 with every diagnostic."""
    sys.exit(run(spec, as_json))


def run(spec: str, as_json: bool) -> int:
    try:
        result = driver.check(spec)
    except Exception as exc:  # a checker bug must still end in one line, never a traceback
        print(f"alphac: error: internal error while checking {spec}: {type(exc).__name__}: {exc}",
              file=sys.stderr)
        return 1
    checked = result.spec if result.ok else None
    if as_json:
        payload = {"ok": result.ok, "file": spec,
                   "diagnostics": [d.as_json() for d in result.diagnostics],
                   "suppressed": sum(result.suppressed.values()),
                   "suppressed_codes": dict(sorted(result.suppressed.items()))}
        if checked is not None:
            payload.update(module=checked.module, families=len(checked.families),
                           learners=[l.name for l in checked.learners],
                           deployments=[d.name for d in checked.deployments])
        print(json.dumps(payload, indent=2))
        return 0 if result.ok else 1
    if checked is None:
        for d in result.diagnostics:
            print(d.render(result.sources), file=sys.stderr)
        note = suppressed_note(result.suppressed)
        if note:
            print(note, file=sys.stderr)
        return 1
    n = len(checked.families)
    print(f"ok: {spec}: {n} famil{'y' if n == 1 else 'ies'}, {_count(len(checked.learners), 'learner')}, "
          f"{_count(len(checked.deployments), 'deployment')}")
    return 0


def _count(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"
