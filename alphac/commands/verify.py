"""`alphac verify RUN_DIR SPEC`: the owners' outputs of a run any launcher started, against
the oracle; the table (or --json) of `alphac launch`. The run directory is read, never
changed. Exit 0 only if every owner matched."""

from __future__ import annotations

import json
import sys

import click

from alphac.commands.launch import load, print_failures, table
from alphac.commands.report import error, stage_error
from alphac.diagnostics import CompileError

EPILOG = """\b
The run directory holds owner-I.out for every owner I (the name the files of
`alphac launch --emit` give, and `--out-dir RUN` of the executables), and the
root owner's commit record owner-R.out.commit. A run without its commit record
published nothing: every owner is reported run-not-committed. Exit status: 0
when every owner matched the oracle, 1 otherwise (a mismatch, a missing or bad
output, an uncommitted run, a run of another plan), 2 for a usage error."""


@click.command("verify", epilog=EPILOG)
@click.argument("run_dir", type=click.Path(exists=True, file_okay=False))
@click.argument("spec", type=str)
@click.option("--rounds", type=click.IntRange(min=0), default=None,
              help="Number of updates (default: the one the run's commit record names).")
@click.option("--json", "as_json", is_flag=True, help="The result table as JSON (the keys of `alphac launch --json`).")
@click.option("--resume", type=click.Path(exists=True, file_okay=False), default=None,
              help="The checkpoint the run resumed from (default: the spec's resume declaration).")
@click.option("--new-contract", is_flag=True, help="With --resume: the run started a new contract on it.")
def command(run_dir: str, spec: str, rounds: int | None, as_json: bool, resume: str | None,
            new_contract: bool) -> None:
    """Compare the owners' outputs in RUN_DIR with the oracle's evaluation of SPEC."""
    if new_contract and resume is None:
        error("usage", "--new-contract goes with --resume PATH")
        sys.exit(2)
    sys.exit(run(run_dir, spec, rounds, as_json, resume, new_contract))


def run(run_dir: str, spec: str, rounds: int | None, as_json: bool, resume: str | None,
        new_contract: bool) -> int:
    from alphac.launch.launcher import LaunchError
    from alphac.launch.verify import verify

    dep = load(spec)
    if dep is None:
        return 1
    try:
        checked = verify(dep, run_dir, rounds, spec, resume=resume, new_contract=new_contract)
    except LaunchError as exc:
        error(exc.code, exc.message)
        return 1
    except CompileError as exc:
        from alphac.commands.report import diagnostics

        diagnostics(exc)
        return 1
    except Exception as exc:  # a stage's one-line error (the checkpoint of --resume)
        return stage_error(exc)
    report = checked.report
    print(json.dumps(report.as_json(), indent=2) if as_json else table(report))
    print_failures(report)
    for note in checked.notes:
        print(f"alphac: note: {note}", file=sys.stderr)
    return 0 if report.match else 1
