"""`alphac conform [--count N] [--seed S] [--jobs J] [--function F]... [--target T | --cpu
LEVEL] [--store DIR] [--table FILE] [--json]`: measure the elementary-function kernels
against the real functions (mpmath) and store the conformance evidence: a record named by
its sha256 in DIR (alphac/qualify/conform.py, alphac/plan/evidence.py, docs/elementary.md).

Prints the record's sha256 and path, and a markdown table (function | level | largest error
(ulps) | arguments tested); `--table FILE` writes that table to FILE. A bounded contract
names the hash: `NumericalBoundedUlps { numericalBoundUlps = N, numericalEvidence = "HASH" }`.
"""

from __future__ import annotations

import os
import subprocess
import sys

import click

from alphac.commands import report

FUNCTIONS = ("exp", "log", "log1p", "expm1", "sigmoid", "tanh")


@click.command("conform")
@click.option("--count", type=click.IntRange(1, 10 ** 8), default=10_000_000, show_default=True,
              help="Arguments per function.")
@click.option("--seed", type=click.IntRange(0, 2 ** 63 - 1), default=0, show_default=True,
              help="The seed of the random arguments.")
@click.option("--jobs", type=click.IntRange(1, 4096), default=None,
              help="Worker processes (default: one per core).")
@click.option("--function", "functions", multiple=True, type=click.Choice(FUNCTIONS),
              help="Measure this function only (repeatable; default: all six).")
@click.option("--target", type=click.Choice(["x86_64", "aarch64"]), default=None,
              help="The kernels built for this CPU target and run as an executable (AArch64 "
                   "under qemu-aarch64 elsewhere); default: JIT-compiled in this process.")
@click.option("--cpu", type=click.Choice(["baseline", "host"]), default="baseline",
              show_default=True, help="The CPU level of the JIT-compiled kernels.")
@click.option("--store", "store", default=None, metavar="DIR",
              help="Where the record is stored (default: the cache's evidence/ directory).")
@click.option("--table", "table_file", default=None, metavar="FILE",
              help="Write the markdown table to FILE.")
@click.option("--quiet", is_flag=True, help="No progress on stderr (default: shown on a terminal).")
@click.option("--json", "as_json", is_flag=True, help="The record, its hash and path, as JSON.")
def command(count: int, seed: int, jobs: int | None, functions: tuple[str, ...], target: str | None,
            cpu: str, store: str | None, table_file: str | None, quiet: bool, as_json: bool) -> None:
    """Measure the elementary-function kernels against the real functions; store the evidence."""
    from alphac.commands.report import interrupted
    from alphac.launch.interrupts import interruptible

    if target is not None and cpu != "baseline":
        raise click.UsageError("--cpu applies to the JIT-compiled kernels; --target builds "
                               "them at the target's baseline")
    chosen = tuple(f for f in FUNCTIONS if f in functions) if functions else FUNCTIONS
    with interruptible():
        try:
            status = report.reported("conform", as_json, lambda: run(
                count, seed, jobs or os.cpu_count() or 1, chosen, store, table_file,
                quiet or as_json, target=target, cpu=cpu))
        except KeyboardInterrupt as exc:  # Ctrl-C, SIGTERM, SIGHUP: nothing is stored
            status = interrupted(exc)
    sys.exit(status)


def run(count: int, seed: int, jobs: int, functions: tuple[str, ...], store: str | None,
        table_file: str | None, quiet: bool, kernels=None, kernel_identity=None,
        target: str | None = None, cpu: str = "baseline") -> int:
    """The command with its exit status; `kernels` (name -> a function of float64 arrays)
    and `kernel_identity` replace this host's kernels."""
    from alphac.launch.progress import Progress
    from alphac.qualify import conform

    progress = Progress.for_stderr(quiet)
    say = progress.say if progress.enabled else None
    try:
        if kernels is None:
            kernels, kernel_identity = conform.kernels_for(target, cpu)
        record = conform.conform(count, seed, jobs, functions, kernels, kernel_identity, say)
    except KeyboardInterrupt:
        raise
    except (ImportError, FileNotFoundError, subprocess.SubprocessError) as exc:
        report.error("conform-kernels-unavailable", _unavailable(target, exc))
        return 1
    except Exception as exc:  # noqa: BLE001 - a stage's coded error, else a bug: one line
        if getattr(exc, "code", None) is not None:
            return report.stage_error(exc)
        if isinstance(exc, RuntimeError) and target is not None:
            report.error("conform-kernels-unavailable", _unavailable(target, exc))
            return 1
        report.internal("measuring the elementary functions", exc)
        return 1
    try:
        name, path = conform.store(record, store)
    except OSError as exc:
        report.error("io-error", f"{exc.filename or store}: {exc.strerror or exc}")
        return 1
    text = conform.table(record)
    if table_file is not None:
        try:
            with open(table_file, "w", encoding="utf-8") as f:
                f.write(text)
        except OSError as exc:
            report.error("io-error", f"{exc.filename or table_file}: {exc.strerror or exc}")
            return 1
    report.result(hash=name, path=str(path), table=text, record=record)
    if not report.json_mode():
        print(f"evidence {name}")
        print(f"stored {path}")
        print()
        print(text, end="")
        print()
        for fn in FUNCTIONS:
            if fn in record["functions"]:
                print(_mismatch_line(fn, record["functions"][fn]))
    return 0


def _unavailable(target: str | None, exc: Exception) -> str:
    where = f"for {target}" if target else "on this host"
    detail = getattr(exc, "stderr", None)
    detail = detail.decode(errors="replace").strip() if isinstance(detail, bytes) else str(exc)
    return f"the elementary-function kernels cannot be compiled or run {where}: {detail or exc}"


def _mismatch_line(name: str, entry: dict) -> str:
    if entry["level"] == "correctly-rounded":
        n, what = entry["mismatches_vs_correctly_rounded"], "the correctly rounded result"
    else:
        n, what = entry["mismatches_vs_declared_algorithm"], "the declared algorithm's result"
    line = f"{name}: {n} of {entry['arguments']} results differ from {what}"
    if n:
        line += f" (first at {entry['first_mismatch']})"
    return line + f"; largest error at {entry['worst_argument']}"
