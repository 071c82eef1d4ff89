"""`alphac check SPEC [--json]`: one `ok` line and exit 0, or every diagnostic and exit 1.

SPEC `-` reads the spec from stdin. The diagnostics are the checker's and, when it has
none, the planner's for every deployment of the file (alphac.driver.check), capped (at
most 20 of one code, 200 in all) and followed by one `note: N more diagnostics not shown
(...)` line when some were not kept; `--json` lists the kept ones and counts the rest in
`suppressed` (by code in `suppressed_codes`).
"""

from __future__ import annotations

import sys

import click

from alphac import driver
from alphac.commands import report


@click.command("check")
@click.argument("spec", type=str)
@click.option("--deployment", "deployment", default=None, metavar="NAME",
              help="Plan this deployment alone (it must exist), where SPEC declares several; "
                   "the whole file is checked either way.")
@click.option("--json", "as_json", is_flag=True, help="Print the result or diagnostics as JSON.")
def command(spec: str, deployment: str | None, as_json: bool) -> None:
    """Parse and check SPEC (`-`: read it from stdin). Exit 0 with one `ok` line, or 1 with
    every diagnostic."""
    sys.exit(run(spec, as_json, deployment))


def run(spec: str, as_json: bool = False, deployment: str | None = None) -> int:
    return report.reported("check", as_json, lambda: _run(spec, deployment))


def _run(spec: str, deployment: str | None = None) -> int:
    try:
        result = driver.check(driver.spec_path(spec), deployment)
    except Exception as exc:  # a checker bug must still end in one line, never a traceback
        report.internal(f"checking {spec}", exc)
        return 1
    name = driver.spec_path(spec)
    report.result(file=name)
    if not result.ok:
        report.located(result.diagnostics, result.suppressed, result.sources)
        return 1
    checked = result.spec
    report.result(module=checked.module, families=len(checked.families),
                  learners=[l.name for l in checked.learners],
                  deployments=[d.name for d in checked.deployments])
    if not report.json_mode():
        n = len(checked.families)
        print(f"ok: {name}: {n} famil{'y' if n == 1 else 'ies'}, "
              f"{_count(len(checked.learners), 'learner')}, "
              f"{_count(len(checked.deployments), 'deployment')}")
    return 0


def _count(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"
