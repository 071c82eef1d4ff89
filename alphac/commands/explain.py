"""`alphac explain [CODE] [--json]`: what a diagnostic or refusal code means, how to fix it,
and its example bad spec with the diagnostic it gives; without CODE, every code by stage.
An unknown code is one line, with the nearest codes."""

from __future__ import annotations

import sys

import click

from alphac import driver
from alphac.commands import report
from alphac.diagnostics import did_you_mean


@click.command("explain")
@click.argument("code", required=False)
@click.option("--json", "as_json", is_flag=True, help="As JSON.")
def command(code: str | None, as_json: bool) -> None:
    """Explain CODE (as in error[CODE] or refused: CODE), or list every code by stage."""
    sys.exit(report.reported("explain", as_json, lambda: run(code)))


def run(code: str | None) -> int:
    if code is None:
        report.result(codes=list(driver.code_names()))
        if not report.json_mode():
            print(driver.explain_listing())
        return 0
    found = driver.explain(code)
    if found is None:
        hint = did_you_mean(code, driver.code_names())
        report.error("unknown-code", f"no code {code!r} is catalogued"
                     + (f"; {hint}" if hint else "; `alphac explain` lists them"))
        return 1
    report.result(**found.as_json())
    if not report.json_mode():
        print(found.text())
    return 0
