"""`alphac oracle SPEC [--rounds N] [--json]`: every owner's words after N updates.

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
@click.option("--json", "as_json", is_flag=True, help="Per-owner words as JSON (keys in the README).")
def command(spec: str, rounds: int | None, as_json: bool) -> None:
    """Evaluate SPEC's deployment with the independent binary64 oracle."""
    sys.exit(run(spec, rounds, as_json))


def protocol_hex(dep) -> str | None:
    """`alphac plan`'s protocol identity of `dep` as 16 hex digits; None when the deployment
    cannot be planned (`alphac plan` prints why)."""
    try:
        return driver.plan(dep).protocol_hex
    except CompileError:
        return None


def hex_word(w: int) -> str:
    return f"{int(w):016x}"


def as_json(spec: str, result, protocol: str | None = None) -> dict:
    return {
        "spec": spec,
        "deployment": result.deployment,
        "rounds": result.rounds,
        "protocol": protocol,
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


def _word_lines(name: str, words: tuple[int, ...]) -> list[str]:
    if not words:
        return [f"  {name:<6} (none)"]
    out = []
    for i in range(0, len(words), WORDS_PER_LINE):
        head = name if i == 0 else ""
        out.append(f"  {head:<6} " + " ".join(hex_word(w) for w in words[i:i + WORDS_PER_LINE]))
    return out


def as_table(spec: str, result) -> str:
    lines = [f"oracle: {result.deployment} ({spec}) after {result.rounds} updates"]
    for o in result.owners:
        lines.append(f"owner {o.owner}  role {o.role}  target {o.target}  "
                     f"version {o.version}  digest {o.digest}")
        lines += _word_lines("params", o.params)
        lines += _word_lines("state", o.state)
    return "\n".join(lines)


def run(spec: str, rounds: int | None, as_json_flag: bool) -> int:
    try:
        dep = driver.deployment(spec)
    except CompileError as err:
        print(render_all(err.diagnostics), file=sys.stderr)
        return 1
    try:
        result = driver.oracle(dep, rounds)
    except driver.Refusal as r:
        print(r.line(), file=sys.stderr)
        return 1
    if as_json_flag:
        print(json.dumps(as_json(spec, result, protocol_hex(dep)), indent=2))
    else:
        print(as_table(spec, result))
    return 0
