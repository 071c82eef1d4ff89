"""`alphac launch SPEC`: build if needed (the x86-64 kernels for this machine's CPU unless
--cpu says otherwise), run every owner on 127.0.0.1, compare with the oracle.

Prints the table (owner, role, target, transport, version, digest, oracle), the words of
each distinct digest (a summary; every word with --full) and the run directory, or, with
--json, the keys of `alphac oracle --json` plus `match` per owner and at the top, `run_dir`,
and per owner `transport`, `connections` and its measured `persistent_bytes` and
`peak_bytes` (its `--stats`). On a terminal it shows what it is doing on stderr
(alphac.launch.progress) unless --quiet. Exit 0 only if every owner matched; a failed
owner's stderr is shown on stderr. With `--mutant NAME` the owners are an executed mutant's
executables: every owner should mismatch the declared program's oracle, and a note says
whether they computed the oracle's evaluation of the mutant. With `--emit slurm|mpirun` it
runs nothing: it builds into -o DIR (the x86-64 kernels for the baseline CPU) and writes
the files an existing engine starts the owners from (alphac.launch.emit), and prints what
it wrote. The spec is loaded through
alphac.driver; running the owners is alphac.launch's (which builds through the driver).
Ctrl-C, SIGTERM and SIGHUP stop the launch in any phase, every owner first (exit 128 +
the signal's number).
"""

from __future__ import annotations

import sys

import click

from alphac import driver
from alphac.commands import report
from alphac.commands.options import ROUNDS
from alphac.commands.build import mutant_help
from alphac.commands.report import error, interrupted
from alphac.commands.words import DIGEST_DIGITS, lines
from alphac.diagnostics import CompileError
from alphac.launch.emit import DEFAULT_BASE_PORT, ENGINES
from alphac.launch.runner import TRANSPORTS


# The largest --timeout: a day (the interval timer that bounds a launch takes any float,
# but a bound no one waits for is a typo).
MAX_TIMEOUT_S = 86400.0

EPILOG = """\b
Exit status: 0 when every owner matched the oracle (with --emit: when the files
were written), 1 otherwise, 2 for a usage error. Ctrl-C (SIGINT), SIGTERM and SIGHUP stop the launch in any phase
(planning, building, running, comparing): every owner is killed and reaped, no
partial executable is left, and the status is 128 + the signal's number: 130,
143, 129. Owners also die with the launcher if it is killed (SIGKILL)."""


@click.command("launch", epilog=EPILOG)
@click.argument("spec", type=str)
@click.option("--rounds", type=ROUNDS, default=None,
              help=f"Number of updates (default: the deployment's; at most {driver.MAX_ROUNDS}).")
@click.option("--deployment", "deployment", default=None, metavar="NAME",
              help="The deployment to run, where SPEC declares several.")
@click.option("--json", "as_json", is_flag=True, help="The result table as JSON.")
@click.option("--full", is_flag=True, help="Every word of each owner (default: a summary).")
@click.option("--quiet", is_flag=True, help="No progress on stderr (default: shown on a terminal).")
@click.option("--progress", is_flag=True, help="Progress on stderr even when it is not a terminal.")
@click.option("-o", "--output", "out_dir", default="out", show_default=True,
              help="Directory for executables and results.")
@click.option("--checkpoint-dir", type=click.Path(file_okay=False), default=None,
              help="Where the deployment's checkpoints go (default: its checkpointDirectory).")
@click.option("--resume", type=click.Path(exists=True, file_okay=False), default=None,
              help="Restore every owner from this checkpoint directory (ckpt-<u>) first.")
@click.option("--new-contract", is_flag=True,
              help="With --resume: start a new contract on the checkpoint's state (another owner "
                   "count or tree); without it the checkpoint's order of operations must be this one's.")
@click.option("--timeout", type=click.FloatRange(min=0, min_open=True, max=MAX_TIMEOUT_S),
              default=120.0, show_default=True,
              help="Seconds the whole launch may take, above 0: loading, planning, building, the "
                   "owners and the oracle; when they run out every owner is stopped and "
                   "error[launch-timeout] names the part that was running (with --emit: the "
                   "owners' own bound on connecting and each frame is a third of it, at most "
                   "30 s, as in a local launch).")
@click.option("--mutant", type=click.Choice(list(driver.MUTANTS)), default=None,
              help=mutant_help("Run") + " Every owner is then expected to mismatch (exit 1).")
@click.option("--transport", type=click.Choice(TRANSPORTS), default=None,
              help="What the owners may use with each other: shm (shared memory, TCP where it "
                   "cannot be set up; the default, or $ALPHAC_TRANSPORT), shm-only, or tcp.")
@click.option("--fresh-oracle", is_flag=True,
              help="Evaluate the oracle again even where an earlier launch of the same plan, update "
                   "count and compiler kept its words (docs/launch.md, \"The oracle's kept results\").")
@click.option("--cpu", default="host", show_default=True, metavar="LEVEL",
              help="The CPU level of the x86-64 kernels (every owner runs on this machine, so by "
                   "default its own CPU): baseline, x86-64-v2, x86-64-v3, x86-64-v4 or host. "
                   "AArch64 kernels are built for its baseline.")
@click.option("--emit", type=click.Choice(ENGINES), default=None,
              help="Run nothing: build into -o DIR (x86-64 kernels for the baseline CPU) and write the "
                   "files an existing engine starts every owner from: slurm (an srun --multi-prog "
                   "configuration and an sbatch script) or mpirun (an MPMD script and its hostfile).")
@click.option("--base-port", type=click.IntRange(1, 65535), default=None,
              help=f"With --emit: an owner listens on this port plus its place among the owners of its "
                   f"host [default: {DEFAULT_BASE_PORT}].")
@click.option("--hosts", metavar="LIST", default=None,
              help="With --emit: the hosts, in Slurm hostlist syntax (node[1-4]); owners go to them in "
                   "blocks, the first hosts one more (default: Slurm's choice; mpirun: localhost).")
@click.option("--native", multiple=True, type=click.Choice(list(driver.target_names())),
              help="With --emit: owners on this target run without its runner (qemu-aarch64), on nodes "
                   "of that instruction set. Repeatable.")
def command(spec: str, rounds: int | None, deployment: str | None, as_json: bool, full: bool,
            quiet: bool, progress: bool, out_dir: str, checkpoint_dir: str | None,
            resume: str | None, new_contract: bool, timeout: float, mutant: str | None,
            transport: str | None, fresh_oracle: bool, cpu: str, emit: str | None, base_port: int | None,
            hosts: str | None, native: tuple[str, ...]) -> None:
    """Build if needed, run every owner on 127.0.0.1, compare each with the oracle; or, with
    --emit, write the files Slurm or mpirun runs them from."""
    from alphac.launch.beside import leave
    from alphac.launch.progress import Progress
    from alphac.launch.interrupts import interruptible

    if new_contract and resume is None:
        error("usage", "--new-contract goes with --resume PATH")
        sys.exit(2)
    engine_only = [f for f, v in (("--base-port", base_port), ("--hosts", hosts), ("--native", native)) if v]
    if engine_only and emit is None:
        error("usage", f"{engine_only[0]} goes with --emit slurm|mpirun")
        sys.exit(2)
    if emit is not None and mutant is not None:
        error("usage", "--mutant runs a local launch; --emit writes the declared program's files")
        sys.exit(2)
    if emit is not None and fresh_oracle:
        error("usage", "--fresh-oracle goes with a local launch: an emitted run is compared by "
              "alphac verify, which always evaluates the oracle")
        sys.exit(2)
    local_only = [f for f, v in (("--transport", transport), ("--cpu", cpu != "host")) if v]
    if emit is not None and local_only:
        error("usage", f"{local_only[0]} goes with a local launch: owners an engine starts speak TCP "
              "and run kernels built for the baseline CPU")
        sys.exit(2)
    options = dict(checkpoint_dir=checkpoint_dir, resume=resume, new_contract=new_contract,
                   name=deployment)
    shown = Progress.for_stderr(quiet, progress)
    # this process is the command: a compiler it started gets SIGTERM too (see run)
    with interruptible(forward=True):
        try:
            if emit is not None:
                status = report.reported("launch", as_json, lambda: run_emit(
                    spec, emit, rounds, as_json, out_dir, timeout, base_port or DEFAULT_BASE_PORT,
                    hosts, native, **options))
            else:
                status = report.reported("launch", as_json, lambda: run(
                    spec, rounds, as_json, out_dir, timeout, mutant=mutant, transport=transport,
                    cpu=cpu, full=full, progress=shown, oracle_cache=not fresh_oracle, **options))
        except KeyboardInterrupt as exc:  # before or after run's own handling
            status = interrupted(exc, "; every owner was stopped")
    leave(status)


def run_emit(spec: str, engine: str, rounds: int | None, as_json: bool, out_dir: str, timeout: float,
             base_port: int, hosts: str | None, native: tuple[str, ...], name: str | None = None,
             **options) -> int:
    """Build and write the engine's files; print them, and how to start and verify a run."""
    from alphac.launch.emit import emit

    dep = load(spec, name)
    if dep is None:
        return 1
    # with --json the envelope on stdout is the whole answer: no builds logged on stderr
    log = None if as_json else (lambda m: print(f"alphac: {m}", file=sys.stderr))
    done, failed = report.staged(lambda: emit(
        driver.plan(dep), engine, out_dir, base_port, hosts, native, rounds, timeout,
        log=log, **options))
    if failed is not None:
        return failed
    if as_json:
        report.result(**done.as_json())
        return 0
    for path in done.files:
        print(f"wrote {path}")
    print(f"start:  {done.start}")
    print(f"verify: alphac verify {done.run_dir} {spec}")
    return 0


def table(report) -> str:
    head = ("owner", "role", "target", "transport", "version", "digest", "oracle")
    rows = [head]
    for r in report.rows:
        verdict = "match" if r.match else ("MISMATCH" if r.params is not None
                                           else r.why.split(":", 1)[0])
        rows.append((str(r.owner), r.role, r.target, r.transport, "-" if r.version is None else str(r.version),
                     (r.digest or "-")[:DIGEST_DIGITS], verdict))
    widths = [max(len(row[i]) for row in rows) for i in range(len(head))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in rows)


def words(result, full: bool = False) -> str:
    """The words of each distinct digest once, with the owners holding them."""
    groups: dict[str, list] = {}
    for r in result.rows:
        if r.digest is not None:
            groups.setdefault(r.digest, []).append(r)
    out = []
    for digest, rows in groups.items():
        out.append(f"digest {digest[:DIGEST_DIGITS]}: owner{'s' if len(rows) > 1 else ''} "
                   f"{', '.join(str(r.owner) for r in rows)}")
        out += (lines("params", rows[0].params, full, result.storage)
                + lines("state", rows[0].state, full, result.storage))
    return "\n".join(out)


def checkpoints_line(result) -> str:
    """`checkpoints: DIR: ckpt-2, ckpt-4; resume the newest with --resume OUT/D/latest`."""
    versions = result.checkpoints
    listed = ", ".join(f"ckpt-{u}" for u in versions) if versions else "none published"
    tail = f"; resume the newest with --resume {result.latest}" if result.latest is not None else ""
    return f"checkpoints: {result.checkpoint_dir}: {listed}{tail}"


def print_failures(report, err=None) -> None:
    """Each cause once (every owner refusing by one code is one line), the oracle's refusal,
    the mutant's verdict, then the stderr of each failed owner (of the first, when they all
    refused alike)."""
    err = sys.stderr if err is None else err
    causes = report.causes()
    for code, msg, _ in causes:
        print(f"alphac: error[{code}]: {msg}", file=err)
    if report.oracle_refusal:
        agree = "; every owner refused by the same code" if report.refusals_agree else ""
        print(f"alphac: note: the oracle refuses: {report.oracle_refusal}{agree}", file=err)
    if report.mutant:
        did = "computed" if report.mutant_match else "did not compute"
        print(f"alphac: note: built as mutant {report.mutant}: the owners {did} the oracle's "
              "evaluation of the mutant", file=err)
    shown = sorted(report.stderr.items())
    alike = len(causes) == 1 and causes[0][2] is None  # every owner refused by one code
    for owner, text in shown[:1] if alike else shown:
        others = f" (owners {', '.join(str(o) for o, _ in shown[1:])} refused alike)" if alike and len(shown) > 1 else ""
        print(f"--- owner {owner} stderr{others} ---", file=err)
        print(text.rstrip("\n"), file=err)


def load(spec: str, name: str | None = None):
    """The spec's deployment; located diagnostics (and None) if it does not check."""
    try:
        return driver.deployment(spec, name)
    except CompileError as exc:
        report.diagnostics(exc)
        return None


def run(spec: str, rounds: int | None, as_json: bool, out_dir: str, timeout: float, **options) -> int:
    """The launch with its exit status; SIGINT, SIGTERM and SIGHUP are handled like Ctrl-C
    from the first step to the last, and the previous handlers restored afterwards."""
    from alphac.launch.interrupts import Interrupted, bounded, doing, interruptible

    stopped = "; every owner was stopped"
    with interruptible() as interrupts:
        try:
            with bounded(timeout):  # the whole command, from here: spec, plan, build, owners, oracle
                doing("loading and checking the spec")
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


def _run(spec: str, rounds: int | None, as_json: bool, out_dir: str, timeout: float,
         name: str | None = None, full: bool = False, progress=None, **options) -> int:
    from alphac.launch.launcher import launch
    from alphac.launch.progress import Progress

    dep = load(spec, name)
    if dep is None:
        return 1
    progress = progress or Progress(None)
    result, failed = report.staged(lambda: launch(
        dep, out_dir=out_dir, rounds=rounds, deadline_s=timeout, spec=spec, log=progress.say,
        progress=progress, **options))
    if failed is not None:
        return failed
    if as_json:
        report.result(**result.as_json(), run_dir=str(result.run_dir))
        for code, message, owner in result.causes():
            error(code, message, owner)
        return 0 if result.match else 1
    print(table(result))
    print(words(result, full))
    print(f"run directory: {result.run_dir}")
    if result.checkpoint_dir is not None:
        print(checkpoints_line(result))
    print_failures(result)
    return 0 if result.match else 1
