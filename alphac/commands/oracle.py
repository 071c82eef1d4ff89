"""`alphac oracle SPEC [--resume PATH] [--new-contract] [--rounds N] [--mutant NAME] [--json]`:
every owner's words after N updates. A resumed deployment (`--resume PATH`, or a resume
declaration in SPEC) starts from the checkpoint's words at its version u and evaluates
updates u, u+1, ... (by default up to the deployment's update count, or N more). With
`--mutant NAME`, the oracle's evaluation of that executed mutant instead of the declared
program: what `alphac build --mutant NAME` executables must compute.

The table lists, per owner: owner, role, target, version, digest, then the parameter and
state words it holds as 16-digit lowercase hex. `--json` prints the keys documented in
docs/oracle.md; its `protocol` is the planner's identity of the deployment (the one the
executables check in every frame), looked up here, in the command layer, so that the
evaluator itself stays independent of the planner. A refusal prints `refused: CODE: detail` on stderr; a spec that does not
check prints its diagnostics; both exit 1.
"""

from __future__ import annotations

import json
import sys

import click

from alphac import driver
from alphac.diagnostics import CompileError, render_all

WORDS_PER_LINE = 4


@click.command("oracle")
@click.argument("spec", type=str)
@click.option("--rounds", type=click.IntRange(min=0), default=None,
              help="Number of updates (default: the deployment's).")
@click.option("--resume", "resume", type=str, default=None, metavar="PATH",
              help="Start from the checkpoint directory PATH (default: SPEC's resume declaration).")
@click.option("--new-contract", is_flag=True,
              help="The resume starts a new contract on the checkpoint's state.")
@click.option("--mutant", type=click.Choice(list(driver.MUTANTS)), default=None,
              help="Evaluate this executed mutant instead of the declared program (a testing aid; "
                   "docs/oracle.md): the words `alphac build --mutant` executables compute.")
@click.option("--json", "as_json", is_flag=True, help="Per-owner words as JSON (keys in the README).")
def command(spec: str, rounds: int | None, resume: str | None, new_contract: bool,
            mutant: str | None, as_json: bool) -> None:
    """Evaluate SPEC's deployment with the independent binary64 oracle."""
    sys.exit(run(spec, rounds, as_json, resume, new_contract, mutant))


def protocol_hex(dep, mutant: str | None = None) -> str | None:
    """`alphac plan`'s protocol identity of `dep` (or of its executed mutant) as 16 hex
    digits; None when the deployment cannot be planned (`alphac plan` prints why)."""
    try:
        return driver.plan(dep, mutant).protocol_hex
    except (CompileError, driver.MutantError):
        return None


def hex_word(w: int) -> str:
    return f"{int(w):016x}"


def as_json(spec: str, result, protocol: str | None = None, resume=None, mutant: str | None = None) -> dict:
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
        out["resumed_from"] = {"path": resume.path, "version": result.start, "contract": resume.mode}
    return out


def _word_lines(name: str, words: tuple[int, ...]) -> list[str]:
    if not words:
        return [f"  {name:<6} (none)"]
    out = []
    for i in range(0, len(words), WORDS_PER_LINE):
        head = name if i == 0 else ""
        out.append(f"  {head:<6} " + " ".join(hex_word(w) for w in words[i:i + WORDS_PER_LINE]))
    return out


def as_table(spec: str, result, resume=None, mutant: str | None = None) -> str:
    head = f"oracle: {result.deployment} ({spec}) after {result.rounds} updates"
    if resume is not None:
        head += (f" from version {result.start} of {resume.path} ({resume.mode} contract), "
                 f"version {result.version}")
    if mutant:
        head += f", evaluated as mutant {mutant}"
    lines = [head]
    for o in result.owners:
        lines.append(f"owner {o.owner}  role {o.role}  target {o.target}  "
                     f"version {o.version}  digest {o.digest}")
        lines += _word_lines("params", o.params)
        lines += _word_lines("state", o.state)
    return "\n".join(lines)


def run(spec: str, rounds: int | None, as_json_flag: bool, resume: str | None = None,
        new_contract: bool = False, mutant: str | None = None) -> int:
    try:
        dep = driver.deployment(spec)
    except CompileError as err:
        print(render_all(err.diagnostics), file=sys.stderr)
        return 1
    if resume is not None or (new_contract and dep.resume is not None):
        dep = driver.resumed(dep, resume if resume is not None else dep.resume.path, new_contract)
    elif new_contract:
        print("refused: usage: --new-contract needs --resume PATH or a resume declaration",
              file=sys.stderr)
        return 1
    try:
        result = driver.oracle(dep, rounds, mutant)
    except driver.Refusal as r:
        print(r.line(), file=sys.stderr)
        return 1
    if as_json_flag:
        print(json.dumps(as_json(spec, result, protocol_hex(dep, mutant), dep.resume, mutant), indent=2))
    else:
        print(as_table(spec, result, dep.resume, mutant))
    return 0
