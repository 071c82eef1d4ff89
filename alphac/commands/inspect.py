"""`alphac inspect EXE [--json]`: the plan, contract and target embedded in an executable's
`.alphac` section, with what the ELF header says (machine, static or dynamic, size)."""

from __future__ import annotations

import json
import sys

import click

from alphac import driver
from alphac.commands.report import stage_error


@click.command("inspect")
@click.argument("executable", type=str)
@click.option("--json", "as_json", is_flag=True, help="As JSON.")
def command(executable: str, as_json: bool) -> None:
    """Show the plan, contract and target embedded in a built executable."""
    sys.exit(run(executable, as_json))


def summary(path: str) -> dict:
    """The embedded metadata plus `machine`, `linking`, `static` and `size`; TargetError."""
    info = driver.describe(path)
    out = dict(info["metadata"])
    out.update({
        "executable": str(path),
        "machine": info["machine"],
        "linking": "static" if info["static"] else "dynamic",
        "static": info["static"],
        "size": info["size"],
    })
    return out


def render(s: dict) -> str:
    contract = s.get("contract", {})
    profile = " ".join(str(contract.get(k, "?")) for k in ("format", "rounding", "subnormals",
                                                             "exceptional"))
    owners = s.get("role_owners", [])
    rows = [
        ("executable", s["executable"]),
        ("machine", f"{s['machine']} ({s.get('triple', '?')}), {s['linking']}, {s['size']} bytes"),
        ("spec", f"{s.get('spec', '?')}  deployment {s.get('deployment', '?')}"),
        ("role", f"{s.get('role', '?')}: owners {', '.join(map(str, owners)) or '-'} "
                 f"of {s.get('owners', '?')}"),
        ("target", str(s.get("target", "?"))),
        ("topology", str(s.get("topology", "?"))),
        ("protocol", str(s.get("protocol", "?"))),
        ("contract", f"{profile}; relation {contract.get('relation', '?')}; "
                     f"{contract.get('operations', '?')} ops, order sha256 "
                     f"{str(contract.get('order_digest', '?'))[:16]}"),
        ("placement", " ".join(s.get("placement", []))),
        ("updates", str(s.get("updates", "?"))),
    ]
    width = max(len(k) for k, _ in rows)
    return "\n".join(f"{k.ljust(width)}  {v}" for k, v in rows)


def run(executable: str, as_json: bool) -> int:
    try:
        s = summary(executable)
    except driver.TargetError as exc:
        return stage_error(exc)
    if as_json:
        print(json.dumps(s, indent=2, sort_keys=True, ensure_ascii=False))
    else:
        print(render(s))
    return 0
