"""`alphac oracle SPEC [--resume PATH [--key FILE]] [--new-contract] [--rounds N] [--mutant NAME]
[--timeout S] [--json]`: every owner's words after N updates. A resumed deployment (`--resume PATH`,
or a resume declaration in SPEC) starts from the checkpoint's words at its version u and evaluates
updates u, u+1, ... (by default up to the deployment's update count, or N more); with `--key
FILE` the checkpoint's tag is checked first (`checkpoint-auth`), and without it the output
says that the tag was not checked. With
`--mutant NAME`, the oracle's evaluation of that executed mutant instead of the declared
program: what `alphac build --mutant NAME` executables must compute. With `--timeout S` the
command stops after S seconds (between two updates, as a launch's oracle does) with
error[launch-timeout] naming the last update done, exit 1.

The table lists, per owner: owner, role, target, version, digest (its first 16 hex digits,
as every command's table prints it; --json has all 64), then a summary of the
parameter and state words it holds (the first few in decimal and hex; with --full every
word as 16-digit lowercase hex). `--json` prints the envelope (commands/report.py) with the
keys documented in docs/oracle.md; its `protocol` is the planner's identity of the deployment (the one the
executables check in every frame), looked up here, in the command layer, so that the
evaluator itself stays independent of the planner. A refusal prints `refused: CODE: detail` on stderr; a spec that does not
check prints its diagnostics; both exit 1.
"""

from __future__ import annotations

from alphac.commands.words import DIGEST_DIGITS

import sys
import time

import click

from alphac import driver
from alphac.commands import report
from alphac.commands.launch import MAX_TIMEOUT_S
from alphac.commands.options import ROUNDS
from alphac.commands.words import hex_word, lines
from alphac.diagnostics import CompileError


@click.command("oracle")
@click.argument("spec", type=str)
@click.option("--rounds", type=ROUNDS, default=None,
              help=f"Number of updates (default: the deployment's; at most {driver.MAX_ROUNDS}).")
@click.option("--resume", "resume", type=str, default=None, metavar="PATH",
              help="Start from the checkpoint directory PATH (default: SPEC's resume declaration).")
@click.option("--new-contract", is_flag=True,
              help="The resume starts a new contract on the checkpoint's state.")
@click.option("--key", "key", type=str, default=None, metavar="FILE",
              help="Check the resumed checkpoint's tag under this key file (the run's --checkpoint-key, "
                   "else its --key); without it the tag is not checked.")
@click.option("--mutant", type=click.Choice(list(driver.MUTANTS)), default=None,
              help="Evaluate this executed mutant instead of the declared program (a testing aid; "
                   "docs/oracle.md): the words `alphac build --mutant` executables compute.")
@click.option("--deployment", "deployment", default=None, metavar="NAME",
              help="The deployment to evaluate, where SPEC declares several.")
@click.option("--schedule", "schedule", type=click.Path(exists=True, file_okay=False), default=None,
              metavar="RUN_DIR", help="Bounded staleness: replay the versions the owners' outputs in RUN_DIR "
              "(owner-I.out) record each contribution read (default rounds: as many as they record).")
@click.option("--full", is_flag=True, help="Every word, in hex (default: a summary per owner).")
@click.option("--quiet", is_flag=True, help="No progress on stderr (default: shown on a terminal).")
@click.option("--progress", is_flag=True, help="Progress on stderr even when it is not a terminal.")
@click.option("--timeout", type=click.FloatRange(min=0, min_open=True, max=MAX_TIMEOUT_S), default=None,
              help="Seconds the command may take (default: no limit; 10000000 updates of a small learner "
                   "take about an hour); when they run out, error[launch-timeout] names the last update done.")
@click.option("--json", "as_json", is_flag=True, help="Per-owner words as JSON (keys in the README).")
def command(spec: str, rounds: int | None, resume: str | None, new_contract: bool, key: str | None,
            mutant: str | None, deployment: str | None, schedule: str | None, full: bool, quiet: bool,
            progress: bool, timeout: float | None, as_json: bool) -> None:
    """Evaluate SPEC's deployment with the independent binary64 oracle."""
    from alphac.launch.progress import Progress

    sys.exit(run(spec, rounds, as_json, resume, new_contract, mutant, deployment, full,
                 Progress.for_stderr(quiet, progress), key, timeout, schedule))


def protocol_hex(dep, mutant: str | None = None) -> str | None:
    """`alphac plan`'s protocol identity of `dep` (or of its executed mutant) as 16 hex
    digits; None when the deployment cannot be planned (`alphac plan` prints why)."""
    try:
        return driver.plan(dep, mutant).protocol_hex
    except (CompileError, driver.MutantError):
        return None


def as_json(spec: str, result, protocol: str | None = None, resume=None, mutant: str | None = None,
            tag: str = "unchecked") -> dict:
    out = {
        "spec": spec,
        "deployment": result.deployment,
        "rounds": result.rounds,
        "protocol": protocol,
        **({"mutant": mutant} if mutant else {}),
        "owners": [{
            "owner": o.owner,
            "role": o.role,
            "target": o.target,
            "version": o.version,
            "params": [hex_word(w) for w in o.params],
            "state": [hex_word(w) for w in o.state],
            "digest": o.digest,
        } for o in result.owners],
    }
    if resume is not None:
        out["resumed_from"] = {"path": resume.path, "version": result.start, "contract": resume.mode,
                               "tag": tag}
    return out


# what the table says of a resumed checkpoint's tag
TAG_TEXT = {"checked": "its tag checked under the key given",
            "unchecked": "its tag NOT checked (no --key)",
            "none": "untagged (written by an unkeyed run)"}


def as_table(spec: str, result, resume=None, mutant: str | None = None, full: bool = False,
             tag: str = "unchecked") -> str:
    head = f"oracle: {result.deployment} ({spec}) after {result.rounds} updates"
    if resume is not None:
        head += (f" from version {result.start} of {resume.path} ({resume.mode} contract; "
                 f"{TAG_TEXT[tag]}), version {result.version}")
    if mutant:
        head += f", evaluated as mutant {mutant}"
    rows = [head]
    for o in result.owners:
        rows.append(f"owner {o.owner}  role {o.role}  target {o.target}  "
                     f"version {o.version}  digest {o.digest[:DIGEST_DIGITS]}")
        rows += lines("params", o.params, full, result.storage)
        rows += lines("state", o.state, full, result.storage)
    return "\n".join(rows)


def _schedule(run_dir: str, owners: int, protocol: str | None):
    """The versions each owner's contributions read, from the outputs in run_dir, a run of
    the deployment's plan (`protocol`, its identity)."""
    from alphac.launch.plan_run import run_outputs
    from alphac.launch.results import ResultError, read_result, recorded_schedule

    outputs = {}
    for o, path in run_outputs(run_dir, owners).items():
        try:
            outputs[o] = read_result(path) if path.is_file() else None
        except (OSError, ResultError) as err:
            raise driver.Refusal("oracle-schedule", f"{path}: {err}") from None
    other = next((o for o in outputs.values() if o is not None and f"{o.protocol:016x}" != protocol), None)
    if other is not None:
        raise driver.Refusal("oracle-schedule", f"{run_dir} holds a run of protocol {other.protocol:016x}; "
                             f"the deployment plans {protocol}")
    got = recorded_schedule(outputs, owners)
    if got is None:
        missing = [o for o in range(owners) if outputs[o] is None or outputs[o].reads is None]
        raise driver.Refusal("oracle-schedule", f"{run_dir} holds no recorded reads of owner(s) "
                             f"{', '.join(map(str, missing))} (owner-I.out of a bounded-staleness run)")
    return got


def _untagged(path: str) -> bool:
    """Whether the checkpoint's root manifest says `auth none` (it verified a moment ago)."""
    from alphac.checkpoint import read_manifest

    try:
        return read_manifest(path).auth == "none"
    except driver.CheckpointError:
        return False


def run(spec: str, rounds: int | None, as_json_flag: bool, resume: str | None = None,
        new_contract: bool = False, mutant: str | None = None, deployment: str | None = None,
        full: bool = False, progress=None, key: str | None = None, timeout: float | None = None,
        schedule: str | None = None) -> int:
    """The command's exit status; with `timeout`, the whole command runs under it
    (`interrupts.bounded`, as launch and verify do)."""
    go = (lambda: _run(spec, rounds, resume, new_contract, mutant, deployment, full, progress, key, schedule))
    if timeout is None:
        return report.reported("oracle", as_json_flag, go)
    from alphac.launch.interrupts import bounded, doing, interruptible

    def bounded_run() -> int:
        try:
            with bounded(timeout):
                doing("loading and checking the spec")
                return go()
        except KeyboardInterrupt as exc:
            return report.interrupted(exc)

    with interruptible():
        return report.reported("oracle", as_json_flag, bounded_run)


class _Done:
    """The last update the oracle finished, for the report of a --timeout that runs out."""

    def __init__(self) -> None:
        self.at: int | None = None

    def tick(self, u: int) -> None:
        self.at = u

    def __call__(self) -> str:
        return "the oracle evaluated " + ("no update yet" if self.at is None else f"updates to {self.at:,}")


def _run(spec: str, rounds: int | None, resume: str | None, new_contract: bool,
         mutant: str | None, deployment: str | None, full: bool, progress, key: str | None = None,
         schedule: str | None = None) -> int:
    from alphac.launch.interrupts import doing

    try:
        dep = driver.deployment(spec, deployment)
    except CompileError as err:
        report.diagnostics(err)
        return 1
    if resume is not None or (new_contract and dep.resume is not None):
        dep = driver.resumed(dep, resume if resume is not None else dep.resume.path, new_contract)
    elif new_contract:
        report.refused("usage", "--new-contract needs --resume PATH or a resume declaration")
        return 1
    if key is not None and dep.resume is None:
        report.refused("usage", "--key checks a resumed checkpoint's tag: give --resume PATH")
        return 1
    if schedule is not None and not dep.consistency.bound:
        report.refused("usage", f"--schedule replays a bounded-staleness run; deployment {dep.name} "
                       f"declares {dep.consistency.kind.value}, whose contributions read no recorded versions")
        return 1
    if progress is not None:
        progress.say(f"evaluating deployment {dep.name} ({dep.owners} owners, "
                     f"{dep.updates if rounds is None else rounds} updates)")
    t0 = time.perf_counter()
    done = _Done()
    doing(done)
    try:
        secret = driver.read_key(key) if key is not None else None
        reads = _schedule(schedule, dep.owners, protocol_hex(dep, mutant)) if schedule is not None else None
        if reads is not None and rounds is None:
            rounds = len(reads[0])
        result = driver.oracle(dep, rounds, mutant, key=secret, tick=done.tick, schedule=reads)
    except driver.Refusal as r:
        report.refused(r.code, r.detail)
        return 1
    except driver.CheckpointError as exc:
        report.refused(exc.code, exc.message)
        return 1
    tag = "checked" if key is not None else "unchecked"
    if dep.resume is not None and key is None and _untagged(dep.resume.path):
        tag = "none"
    if progress is not None:
        progress.say(f"evaluated in {time.perf_counter() - t0:.2f} s")
    if report.json_mode():
        report.result(**as_json(spec, result, protocol_hex(dep, mutant), dep.resume, mutant, tag))
    else:
        print(as_table(spec, result, dep.resume, mutant, full, tag))
    return 0
