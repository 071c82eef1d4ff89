"""`alphac plan SPEC [--json | --dot]`: the plan as text, as JSON (alphac.plan.render) or
the combine tree as Graphviz dot."""

from __future__ import annotations

import sys

import click

from alphac import driver
from alphac.commands import report
from alphac.diagnostics import CompileError


@click.command("plan")
@click.argument("spec", type=str)
@click.option("--json", "as_json", is_flag=True, help="The plan as JSON (keys documented in the README).")
@click.option("--dot", "as_dot", is_flag=True, help="The combine tree as Graphviz dot.")
@click.option("--deployment", "deployment", default=None, metavar="NAME",
              help="The deployment to plan, where SPEC declares several.")
def command(spec: str, as_json: bool, as_dot: bool, deployment: str | None) -> None:
    """Plan SPEC's deployment: partitioning and coordinate blocks, combine tree, phases,
    shard maps, each owner's protocol and bytes."""
    if as_json and as_dot:
        click.echo("alphac: error[usage]: --json and --dot exclude each other", err=True)
        sys.exit(2)
    sys.exit(run(spec, as_json, as_dot, deployment))


def run(spec: str, as_json: bool = False, as_dot: bool = False, deployment: str | None = None) -> int:
    return report.reported("plan", as_json, lambda: _run(spec, as_dot, deployment))


def _run(spec: str, as_dot: bool, deployment: str | None = None) -> int:
    from alphac.plan.render import plan_dot, plan_json, plan_text

    try:
        p = driver.plan(driver.deployment(spec, deployment))
    except CompileError as err:
        report.diagnostics(err)
        return 1
    except Exception as exc:  # a planner bug must still end in one line, never a traceback
        report.internal(f"planning {spec}", exc)
        return 1
    if report.json_mode():
        report.result(**plan_json(p))
    elif as_dot:
        print(plan_dot(p))
    else:
        print(plan_text(p))
    return 0
