"""`alphac verify RUN_DIR SPEC`: the owners' outputs of a run any launcher started, against
the oracle; the table (or --json) of `alphac launch`. The run directory is read, never
changed. Exit 0 only if every owner matched."""

from __future__ import annotations

import sys

import click

from alphac import driver
from alphac.commands import report
from alphac.commands.options import ROUNDS
from alphac.commands.launch import MAX_TIMEOUT_S, load, print_failures, table
from alphac.commands.report import error, interrupted
from alphac.launch.beside import leave

EPILOG = """\b
The run directory holds owner-I.out for every owner I (the name the files of
`alphac launch --emit` give, and `--out-dir RUN` of the executables), and the
root owner's commit record owner-R.out.commit. A run without its commit record
published nothing: every owner is reported run-not-committed. Exit status: 0
when every owner matched the oracle, 1 otherwise (a mismatch, a missing or bad
output, an uncommitted run, a run of another plan, a commit record that is no
record, files added to a committed run), 2 for a usage error."""


@click.command("verify", epilog=EPILOG)
@click.argument("run_dir", type=click.Path(exists=True, file_okay=False))
@click.argument("spec", type=str)
@click.option("--rounds", type=ROUNDS, default=None,
              help="Number of updates (default: the one the run's commit record names; a "
                   "committed run of another count is refused before the oracle runs).")
@click.option("--json", "as_json", is_flag=True, help="The result table as JSON (the keys of `alphac launch --json`).")
@click.option("--resume", type=click.Path(exists=True, file_okay=False), default=None,
              help="The checkpoint the run resumed from (default: the spec's resume declaration).")
@click.option("--new-contract", is_flag=True, help="With --resume: the run started a new contract on it.")
@click.option("--key", "key", default=None, metavar="FILE",
              help="With --resume: check the checkpoint's tag under this key file (the run's --checkpoint-key, "
                   "else its --key); without it the report says the tag was not checked.")
@click.option("--deployment", "deployment", default=None, metavar="NAME",
              help="The deployment the run is of, where SPEC declares several.")
@click.option("--timeout", type=click.FloatRange(min=0, min_open=True, max=MAX_TIMEOUT_S),
              default=120.0, show_default=True,
              help="Seconds the whole verification may take, the oracle's evaluation included; "
                   "when they run out, error[launch-timeout] names the part that was running.")
def command(run_dir: str, spec: str, rounds: int | None, as_json: bool, resume: str | None,
            new_contract: bool, key: str | None, deployment: str | None, timeout: float) -> None:
    """Compare the owners' outputs in RUN_DIR with the oracle's evaluation of SPEC."""
    from alphac.launch.interrupts import bounded, doing, interruptible

    if new_contract and resume is None:
        error("usage", "--new-contract goes with --resume PATH")
        sys.exit(2)
    if key is not None and resume is None:
        error("usage", "--key goes with --resume PATH (it checks the resumed checkpoint's tag)")
        sys.exit(2)

    def bounded_run() -> int:
        try:
            with bounded(timeout):
                doing("loading and checking the spec")
                return run(run_dir, spec, rounds, as_json, resume, new_contract, deployment, key)
        except KeyboardInterrupt as exc:
            return interrupted(exc)

    with interruptible():
        status = report.reported("verify", as_json, bounded_run)
    leave(status)


def run(run_dir: str, spec: str, rounds: int | None, as_json: bool, resume: str | None,
        new_contract: bool, deployment: str | None = None, key: str | None = None) -> int:
    from alphac.launch.verify import verify

    dep = load(spec, deployment)
    if dep is None:
        return 1
    checked, failed = report.staged(lambda: verify(dep, run_dir, rounds, spec, resume=resume,
                                                   new_contract=new_contract, key_file=key))
    if failed is not None:
        return failed
    result = checked.report
    foreign = checked.foreign_error()
    ok = result.match and foreign is None
    if as_json:
        report.result(**result.as_json(), notes=list(checked.notes))
        for code, message, owner in result.causes():
            error(code, message, owner)
        if foreign is not None:
            error("run-foreign-files", foreign)
        return 0 if ok else 1
    print(table(result))
    print_failures(result)
    if foreign is not None:
        error("run-foreign-files", foreign)
    for note in checked.notes:
        print(f"alphac: note: {note}", file=sys.stderr)
    return 0 if ok else 1
