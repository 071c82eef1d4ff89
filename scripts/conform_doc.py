"""Rewrite the measured table of docs/elementary.md from an `alphac conform` result.

    python scripts/conform_doc.py RESULT.json [DOC]

RESULT.json is what `alphac conform --json` printed (or the stored record itself,
`<sha256>.json`); DOC defaults to docs/elementary.md. The text between the markers
`<!-- conform: begin -->` and `<!-- conform: end -->` is replaced by the command that
measured, the host, the evidence's sha256 and the table `alphac conform --table` writes,
and the record is kept beside the doc as evidence/<sha256>.json (the one record there).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from alphac.qualify import conform
from alphac.plan import evidence

BEGIN = "<!-- conform: begin -->"
END = "<!-- conform: end -->"


def block(record: dict, name: str) -> str:
    host = record["host"]
    functions = " ".join(f"--function {f}" for f in conform.FUNCTIONS if f in record["functions"])
    every = set(record["functions"]) == set(conform.FUNCTIONS)
    kernels = record["kernels"]
    where = kernels.get("target", "host")
    options = (f" --target {where}" if where != "host" else "") + (
        f" --cpu {kernels['cpu']}" if kernels.get("cpu", "baseline") != "baseline" else "")
    command = f"alphac conform --count {record['count']} --seed {record['seed']}" + (
        "" if every else f" {functions}") + options + " --table FILE"
    how = "JIT-compiled for the host" if where == "host" else f"built for {where}"
    return (f"{BEGIN}\nMeasured by `{command}` ({record['count']} arguments per function; "
            f"kernels {how}, CPU level {kernels.get('cpu', 'baseline')}) on "
            f"{host['cpu']} ({host['machine']}, LLVM CPU {host['llvm_cpu']}); evidence "
            f"`{name}`, kernels' IR sha256 `{record['kernels'].get('ir_sha256', '-')}`, "
            f"reference {record['reference']['library']} at "
            f"{record['reference']['precision_bits']} bits:\n\n{conform.table(record)}{END}")


def main(argv: list[str]) -> int:
    if len(argv) not in (2, 3):
        print(__doc__, file=sys.stderr)
        return 2
    data = json.loads(Path(argv[1]).read_text())
    record = data.get("record", data)
    name = data.get("hash") or evidence.record_hash(record)
    doc = Path(argv[2] if len(argv) == 3 else "docs/elementary.md")
    text = doc.read_text()
    start, end = text.index(BEGIN), text.index(END) + len(END)
    # the record beside the doc, the only one there: tests/unit/test_elementary_doc.py checks
    # that the table is this record's
    kept = doc.parent / "evidence"
    written, _ = evidence.write(record, kept)
    if written != name:
        print(f"{argv[1]}: the record hashes to {written}, not {name}", file=sys.stderr)
        return 1
    for old in kept.glob("*.json"):
        if old.stem != name:
            old.unlink()
    doc.write_text(text[:start] + block(record, name) + text[end:])
    print(f"{doc}: table of evidence {name} (record {kept / (name + '.json')})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
