"""The `alphac` command line: argument handling only; each command lives in its stage."""

from __future__ import annotations

import sys

import click

from alphac import __version__


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="alphac")
def main() -> None:
    """Compile a declarative spec of a distributed learner into native per-role executables.

    \b
    alphac check SPEC              parse and check; every problem as FILE:LINE:COL: error[CODE]
    alphac plan SPEC               combine tree, phases, per-owner protocol and bytes
    alphac oracle SPEC             independent binary64 evaluation of the declared order
    alphac build SPEC [--role R] [--target T] | --all
    alphac launch SPEC             run every owner on 127.0.0.1 and compare with the oracle
    alphac inspect EXE             the plan, contract and target embedded in an executable
    """


@main.command()
@click.argument("spec", type=str)
@click.option("--json", "as_json", is_flag=True, help="Print the result or diagnostics as JSON.")
def check(spec: str, as_json: bool) -> None:
    """Parse and check SPEC. Exit 0 with one `ok` line, or 1 with every diagnostic."""
    from alphac.check.command import run

    sys.exit(run(spec, as_json))


@main.command()
@click.argument("spec", type=str)
@click.option("--json", "as_json", is_flag=True, help="The plan as JSON (keys documented in the README).")
@click.option("--dot", "as_dot", is_flag=True, help="The combine tree as Graphviz dot.")
def plan(spec: str, as_json: bool, as_dot: bool) -> None:
    """Plan SPEC's deployment: combine tree, phases, each owner's protocol and bytes."""
    if as_json and as_dot:
        click.echo("alphac: error: --json and --dot exclude each other", err=True)
        sys.exit(2)
    from alphac.plan.command import run

    sys.exit(run(spec, as_json, as_dot))


@main.command()
@click.argument("spec", type=str)
@click.option("--rounds", type=click.IntRange(min=0), default=None,
              help="Number of updates (default: the deployment's).")
@click.option("--json", "as_json", is_flag=True, help="Per-owner words as JSON (keys in the README).")
def oracle(spec: str, rounds: int | None, as_json: bool) -> None:
    """Evaluate SPEC's deployment with the independent binary64 oracle."""
    from alphac.oracle.command import run

    sys.exit(run(spec, rounds, as_json))


@main.command()
@click.argument("spec", type=str)
@click.option("--role", help="The role to build (see `alphac plan`); alone: on every target it is placed on.")
@click.option("--target", help="The target: x86_64 or aarch64; alone: every role placed on it.")
@click.option("--all", "build_all", is_flag=True, help="Build every (role, target) the placement needs.")
@click.option("-o", "--output", "out_dir", default="out", show_default=True, help="Output directory.")
def build(spec: str, role: str | None, target: str | None, build_all: bool, out_dir: str) -> None:
    """Compile SPEC into native executables, one per role and target."""
    from alphac.targets.command import run

    sys.exit(run(spec, role, target, build_all, out_dir))


@main.command()
@click.argument("spec", type=str)
@click.option("--rounds", type=click.IntRange(min=0), default=None,
              help="Number of updates (default: the deployment's).")
@click.option("--json", "as_json", is_flag=True, help="The result table as JSON.")
@click.option("-o", "--output", "out_dir", default="out", show_default=True,
              help="Directory for executables and results.")
@click.option("--timeout", type=float, default=120.0, show_default=True,
              help="Seconds before every owner is stopped.")
def launch(spec: str, rounds: int | None, as_json: bool, out_dir: str, timeout: float) -> None:
    """Build if needed, run every owner on 127.0.0.1, compare each with the oracle."""
    from alphac.launch.command import run

    sys.exit(run(spec, rounds, as_json, out_dir, timeout))


@main.command()
@click.argument("executable", type=str)
@click.option("--json", "as_json", is_flag=True, help="As JSON.")
def inspect(executable: str, as_json: bool) -> None:
    """Show the plan, contract and target embedded in a built executable."""
    from alphac.targets.inspect import run

    sys.exit(run(executable, as_json))


if __name__ == "__main__":
    main()
