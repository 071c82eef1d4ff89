"""`alphac qualify`: the gate suite on this hardware, every run recorded in the tracker;
`--report` prints the history, `--html FILE` writes it as a page. The suite is
alphac.qualify's; this module parses the command line and prints."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from alphac.commands import report as reporting
from alphac.commands.report import error, interrupted

EPILOG = """\b
Exit status: 0 when the run passed (every gate that ran passed, and every
control that applies passed), 1 when it failed or is invalid (a control did not
pass: the checks themselves are not shown to work), or the tracker cannot be
used; 2 for a usage error. --report and --html run nothing (exit 0)."""


def _gate_names() -> list[str]:
    from alphac.qualify.suite import gate_names

    return gate_names()


@click.command("qualify", epilog=EPILOG)
@click.option("--gate", "gates", multiple=True, type=click.Choice(_gate_names()),
              help="Run this gate (repeatable; default: every gate). The controls run in every run.")
@click.option("--gpu", is_flag=True, help="The GPU gates must run: no GPU fails them (default: not run without one).")
@click.option("--db", type=click.Path(dir_okay=False), default=None,
              help="The tracker, a SQLite file [default: $XDG_DATA_HOME/alphac/qualify.db].")
@click.option("-o", "--output", "work", type=click.Path(file_okay=False), default=None,
              help="Build and run here, and keep it (default: a temporary directory, removed).")
@click.option("--specs", type=click.Path(exists=True, file_okay=False), default=None,
              help="The gate specs (default: specs/ of the checkout alphac runs from).")
@click.option("--json", "as_json", is_flag=True, help="The run's record as JSON.")
@click.option("--report", is_flag=True, help="Print every recorded run, oldest first; run nothing.")
@click.option("--html", "html_file", type=click.Path(dir_okay=False), default=None,
              help="Write every recorded run as an HTML page, one row per run; run nothing.")
def command(gates: tuple[str, ...], gpu: bool, db: str | None, work: str | None, specs: str | None,
            as_json: bool, report: bool, html_file: str | None) -> None:
    """Run the gate suite on this hardware and record the run."""
    from alphac.launch.beside import leave
    from alphac.launch.interrupts import interruptible
    from alphac.qualify.tracker import TrackerError, default_db

    from alphac.qualify.gates import default_specs

    db_path = Path(db) if db is not None else default_db()
    run_only = [f for f, v in (("--gate", gates), ("--gpu", gpu), ("-o", work), ("--specs", specs),
                               ("--json", as_json)) if v]
    if (report or html_file) and run_only:
        error("usage", f"{run_only[0]} goes with a run, not with --report or --html")
        sys.exit(2)
    if not (report or html_file) and specs is None and not default_specs().is_dir():
        def missing() -> int:
            error("usage", f"no gate specs at {default_specs()} (alphac is not run from a checkout): "
                  "give --specs DIR")
            return 2
        sys.exit(reporting.reported("qualify", as_json, missing))
    try:
        if report or html_file:
            sys.exit(show(db_path, report, html_file))
        with interruptible(forward=True):
            try:
                status = reporting.reported("qualify", as_json, lambda: tracked(
                    db_path, gates, gpu, work, specs, as_json))
            except KeyboardInterrupt as exc:
                status = interrupted(exc, "; every owner was stopped, nothing was recorded")
    except TrackerError as exc:
        error(exc.code, exc.message)
        status = 1
    leave(status)


def tracked(db: Path, gates: tuple[str, ...], gpu: bool, work: str | None, specs: str | None,
            as_json: bool) -> int:
    """The run, with a tracker that cannot be used reported as its refusal."""
    from alphac.qualify.tracker import TrackerError

    try:
        return run(db, gates, gpu, work, specs, as_json)
    except TrackerError as exc:
        error(exc.code, exc.message)
        return 1


def show(db: Path, report: bool, html_file: str | None) -> int:
    from alphac.qualify.render import history_html, history_table
    from alphac.qualify.tracker import history

    # a tracker not made yet holds no run: an empty history, not an error
    runs = history(db) if Path(db).exists() else []
    if html_file:
        Path(html_file).write_text(history_html(runs))
    if report:
        print(history_table(runs) if runs else f"qualify: no run recorded in {db} yet")
    return 0


def run(db: Path, gates: tuple[str, ...], gpu: bool, work: str | None, specs: str | None, as_json: bool) -> int:
    from alphac.qualify.render import run_table
    from alphac.qualify.suite import qualify

    done = qualify(db, gates or None, gpu, work, specs, log=lambda m: print(f"alphac: {m}", file=sys.stderr))
    if as_json:
        reporting.result(**done.as_json())
    else:
        print(run_table(done))
        print(f"qualify: run {done.id} {done.result}, recorded in {db}")
    return 0 if done.result == "passed" else 1
