"""docs/elementary.md's measured table: it parses, names the six functions, says which
command produced it with what count, and is the table of the record kept beside it (which
hashes to its name), unedited."""

from __future__ import annotations

import re
from pathlib import Path

from alphac.codegen import elementary
from alphac.qualify import conform
from alphac.plan import evidence

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "elementary.md"
KEPT = ROOT / "docs" / "evidence"
HEADING = "# Elementary functions: accuracy"


def measured_block() -> str:
    text = DOC.read_text(encoding="utf-8")
    start, end = text.index("<!-- conform: begin -->"), text.index("<!-- conform: end -->")
    return text[start:end]


def test_the_doc_is_linked_from_the_language_docs():
    assert DOC.read_text(encoding="utf-8").splitlines()[0] == HEADING
    assert "(elementary.md)" in (ROOT / "docs" / "language.md").read_text(encoding="utf-8")


def test_the_table_parses_and_names_the_six_functions():
    rows = conform.parse_table(measured_block())
    assert list(rows) == list(conform.FUNCTIONS)
    for name, row in rows.items():
        level = "correctly rounded" if name in ("exp", "log", "log1p", "expm1") else "declared"
        assert row["level"] == level
        assert re.fullmatch(r"[0-9]+\.[0-9]{3}|inf", row["max_ulps"])
        assert row["arguments"] >= 1


def test_the_doc_says_which_command_and_count_produced_it():
    block = measured_block()
    m = re.search(r"Measured by `alphac conform --count ([0-9]+) --seed ([0-9]+)[^`]*`", block)
    assert m, block
    count = int(m.group(1))
    assert f"({count} arguments per function" in block
    assert all(row["arguments"] == count for row in conform.parse_table(block).values())


def test_the_table_is_the_kept_records():
    block = measured_block()
    name = re.search(r"evidence `([0-9a-f]{64})`", block).group(1)
    kept = sorted(KEPT.glob("*.json"))
    assert [p.stem for p in kept] == [name]
    record = evidence.read(kept[0], name)  # its bytes hash to its name
    assert conform.table(record) in block
    assert f"--count {record['count']} --seed {record['seed']}" in block


def test_the_table_measures_the_kernels_of_this_tree():
    """The kept record names the sha256 of the kernels' IR it measured: these kernels. A
    change of the elementary functions' code makes this fail until `make conform` measures
    the new kernels and rewrites the table."""
    import json

    (kept,) = sorted(KEPT.glob("*.json"))
    measured = json.loads(kept.read_text())["kernels"]["ir_sha256"]
    assert measured == elementary.ir_sha256(), "docs/elementary.md measures other kernels: run make conform"
