"""`alphac launch SPEC`: build if needed, run every owner on 127.0.0.1, compare with the oracle.

Prints the table (owner, role, target, transport, version, digest, oracle) or, with --json,
the keys of `alphac oracle --json` plus `match` per owner and at the top, and per owner
`transport`, `connections` and its measured `persistent_bytes` and `peak_bytes` (its
`--stats`). Exit 0 only if every owner matched; a failed owner's stderr is shown on stderr.
With `--mutant NAME` the owners are an executed mutant's executables: every owner should
mismatch the declared program's oracle, and a note says whether they computed the oracle's
evaluation of the mutant. The spec is loaded through
alphac.driver; running the owners is alphac.launch's (which builds through the driver).
Ctrl-C, SIGTERM and SIGHUP stop the launch in any phase, every owner first (exit 128 +
the signal's number).
"""

from __future__ import annotations

import json
import sys

import click

from alphac import driver
from alphac.commands.build import mutant_help
from alphac.commands.report import diagnostics as print_diagnostics
from alphac.commands.report import error, interrupted, stage_error
from alphac.diagnostics import CompileError
from alphac.launch.runner import TRANSPORTS


EPILOG = """\b
Exit status: 0 when every owner matched the oracle, 1 otherwise, 2 for a usage
error. Ctrl-C (SIGINT), SIGTERM and SIGHUP stop the launch in any phase
(planning, building, running, comparing): every owner is killed and reaped, no
partial executable is left, and the status is 128 + the signal's number: 130,
143, 129. Owners also die with the launcher if it is killed (SIGKILL)."""


@click.command("launch", epilog=EPILOG)
@click.argument("spec", type=str)
@click.option("--rounds", type=click.IntRange(min=0), default=None,
              help="Number of updates (default: the deployment's).")
@click.option("--json", "as_json", is_flag=True, help="The result table as JSON.")
@click.option("-o", "--output", "out_dir", default="out", show_default=True,
              help="Directory for executables and results.")
@click.option("--checkpoint-dir", type=click.Path(file_okay=False), default=None,
              help="Where the deployment's checkpoints go (default: its checkpointDirectory).")
@click.option("--resume", type=click.Path(exists=True, file_okay=False), default=None,
              help="Restore every owner from this checkpoint directory (ckpt-<u>) first.")
@click.option("--new-contract", is_flag=True,
              help="With --resume: start a new contract on the checkpoint's state (another owner "
                   "count or tree); without it the checkpoint's order of operations must be this one's.")
@click.option("--timeout", type=float, default=120.0, show_default=True,
              help="Seconds before every owner is stopped.")
@click.option("--mutant", type=click.Choice(list(driver.MUTANTS)), default=None,
              help=mutant_help("Run") + " Every owner is then expected to mismatch (exit 1).")
@click.option("--transport", type=click.Choice(TRANSPORTS), default=None,
              help="What the owners may use with each other: shm (shared memory, TCP where it "
                   "cannot be set up; the default, or $ALPHAC_TRANSPORT), shm-only, or tcp.")
def command(spec: str, rounds: int | None, as_json: bool, out_dir: str, checkpoint_dir: str | None,
            resume: str | None, new_contract: bool, timeout: float, mutant: str | None,
            transport: str | None) -> None:
    """Build if needed, run every owner on 127.0.0.1, compare each with the oracle."""
    from alphac.launch.runner import interruptible

    if new_contract and resume is None:
        error("usage", "--new-contract goes with --resume PATH")
        sys.exit(2)
    # this process is the command: a compiler it started gets SIGTERM too (see run)
    with interruptible(forward=True):
        try:
            status = run(spec, rounds, as_json, out_dir, timeout, checkpoint_dir=checkpoint_dir,
                         resume=resume, new_contract=new_contract, mutant=mutant, transport=transport)
        except KeyboardInterrupt as exc:  # before or after run's own handling
            status = interrupted(exc, "; every owner was stopped")
    sys.exit(status)


def table(report) -> str:
    head = ("owner", "role", "target", "transport", "version", "digest", "oracle")
    rows = [head]
    for r in report.rows:
        verdict = "match" if r.match else ("MISMATCH" if r.params is not None
                                           else r.why.split(":", 1)[0])
        rows.append((str(r.owner), r.role, r.target, r.transport, "-" if r.version is None else str(r.version),
                     (r.digest or "-")[:16], verdict))
    widths = [max(len(row[i]) for row in rows) for i in range(len(head))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in rows)


def print_failures(report, err=None) -> None:
    err = sys.stderr if err is None else err
    for line in report.failures:
        code, msg = line.split(": ", 1)
        print(f"alphac: error[{code}]: {msg}", file=err)
    if report.oracle_refusal:
        agree = "; every owner refused by the same code" if report.refusals_agree else ""
        print(f"alphac: note: the oracle refuses: {report.oracle_refusal}{agree}", file=err)
    if report.mutant:
        did = "computed" if report.mutant_match else "did not compute"
        print(f"alphac: note: built as mutant {report.mutant}: the owners {did} the oracle's "
              "evaluation of the mutant", file=err)
    for owner, text in sorted(report.stderr.items()):
        print(f"--- owner {owner} stderr ---", file=err)
        print(text.rstrip("\n"), file=err)


def load(spec: str):
    """The spec's deployment; located diagnostics (and None) if it does not check."""
    try:
        return driver.deployment(spec)
    except CompileError as exc:
        print_diagnostics(exc)
        return None


def run(spec: str, rounds: int | None, as_json: bool, out_dir: str, timeout: float, **options) -> int:
    """The launch with its exit status; SIGINT, SIGTERM and SIGHUP are handled like Ctrl-C
    from the first step to the last, and the previous handlers restored afterwards."""
    from alphac.launch.runner import Interrupted, interruptible

    stopped = "; every owner was stopped"
    with interruptible() as interrupts:
        try:
            status = _run(spec, rounds, as_json, out_dir, timeout, **options)
        except KeyboardInterrupt as exc:
            return interrupted(exc, stopped)
        except Exception:
            if interrupts.fired is None:
                raise
            status = 1
        if interrupts.fired is not None:  # an interrupt that surfaced as another error
            return interrupted(Interrupted(interrupts.fired), stopped)
        return status


def _run(spec: str, rounds: int | None, as_json: bool, out_dir: str, timeout: float, **options) -> int:
    from alphac.launch.launcher import LaunchError, launch

    dep = load(spec)
    if dep is None:
        return 1
    try:
        report = launch(dep, out_dir=out_dir, rounds=rounds, deadline_s=timeout, spec=spec,
                        log=lambda m: print(f"alphac: {m}", file=sys.stderr), **options)
    except LaunchError as exc:
        error(exc.code, exc.message)
        return 1
    except CompileError as exc:
        print_diagnostics(exc)
        return 1
    except Exception as exc:  # a stage's one-line error (build, targets)
        return stage_error(exc)
    if as_json:
        print(json.dumps(report.as_json(), indent=2))
    else:
        print(table(report))
    print_failures(report)
    return 0 if report.match else 1
