"""`alphac clean [-o DIR] [--runs] [--json]`: remove DIR/runs/ (every launch's run
directory) and the executables alphac built in DIR; nothing else in DIR is touched.
Launches themselves keep only the newest 20 run directories (docs/launch.md)."""

from __future__ import annotations

import sys

import click

from alphac.commands import report


@click.command("clean")
@click.option("-o", "--output", "out_dir", default="out", show_default=True,
              help="The output directory of build and launch.")
@click.option("--runs", "runs_only", is_flag=True, help="Remove only the run directories.")
@click.option("--json", "as_json", is_flag=True, help="What was removed, as JSON.")
def command(out_dir: str, runs_only: bool, as_json: bool) -> None:
    """Remove the run directories and the executables alphac built in DIR."""
    sys.exit(report.reported("clean", as_json, lambda: run(out_dir, runs_only)))


def run(out_dir: str, runs_only: bool) -> int:
    from alphac.launch.runs import clean

    try:
        removed = clean(out_dir, runs_only)
    except OSError as exc:
        report.error("io-error", f"{exc.filename or out_dir}: {exc.strerror or exc}")
        return 1
    report.result(removed=[str(p) for p in removed])
    if not report.json_mode():
        for p in removed:
            print(f"removed {p}")
        if not removed:
            print(f"clean: nothing of alphac's in {out_dir}")
    return 0
