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

from alphac.diagnostics import CompileError, render_all
from alphac.oracle.driver import OracleResult, evaluate
from alphac.oracle.refusal import Refusal
from alphac.oracle.words import hex_word

WORDS_PER_LINE = 4


def protocol_hex(dep) -> str | None:
    """`alphac plan`'s protocol identity of `dep` as 16 hex digits; None when the deployment
    cannot be planned (`alphac plan` prints why)."""
    from alphac.plan import plan

    try:
        return plan(dep).protocol_hex
    except CompileError:
        return None


def as_json(spec: str, result: OracleResult, protocol: str | None = None) -> dict:
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


def as_table(spec: str, result: OracleResult) -> str:
    lines = [f"oracle: {result.deployment} ({spec}) after {result.rounds} updates"]
    for o in result.owners:
        lines.append(f"owner {o.owner}  role {o.role}  target {o.target}  "
                     f"version {o.version}  digest {o.digest}")
        lines += _word_lines("params", o.params)
        lines += _word_lines("state", o.state)
    return "\n".join(lines)


def run(spec: str, rounds: int | None, as_json_flag: bool) -> int:
    from alphac.check import load_deployment

    try:
        dep = load_deployment(spec)
    except CompileError as err:
        print(render_all(err.diagnostics), file=sys.stderr)
        return 1
    try:
        result = evaluate(dep, rounds)
    except Refusal as r:
        print(r.line(), file=sys.stderr)
        return 1
    if as_json_flag:
        print(json.dumps(as_json(spec, result, protocol_hex(dep)), indent=2))
    else:
        print(as_table(spec, result))
    return 0
