"""Every field declared in alphac/std/**/*.alpha is named in docs/language.md, and the
reference section "The standard families, field by field" exists there."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
STD = ROOT / "alphac" / "std"
LANGUAGE = ROOT / "docs" / "language.md"
HEADING = "## The standard families, field by field"

FAMILY = re.compile(r"^\s*family\s+([A-Za-z_][A-Za-z0-9_']*)")
FIELD = re.compile(r"^\s*field\s+\S+\s+([A-Za-z_][A-Za-z0-9_']*)\s*:")


def std_fields() -> list[tuple[str, str, str]]:
    """(module file, family, field) for every field line of the std sources."""
    out = []
    for path in sorted(STD.rglob("*.alpha")):
        family = "?"
        for line in path.read_text(encoding="utf-8").splitlines():
            code = line.split("--", 1)[0]
            if m := FAMILY.match(code):
                family = m.group(1)
            elif m := FIELD.match(code):
                out.append((str(path.relative_to(ROOT)), family, m.group(1)))
    return out


def named(name: str, text: str) -> bool:
    """`name` occurs in `text` as a whole name, not inside a longer one
    (`dataParallelInitial` is not found in `dataParallelInitialState`)."""
    return re.search(rf"(?<![A-Za-z0-9_']){re.escape(name)}(?![A-Za-z0-9_'])", text) is not None


def test_every_std_field_is_named_in_the_language_docs():
    fields = std_fields()
    assert len(fields) >= 100, f"only {len(fields)} fields parsed from {STD}: the pattern broke?"
    text = LANGUAGE.read_text(encoding="utf-8")
    missing = [f"{family}.{field} ({where})" for where, family, field in fields
               if not named(field, text)]
    assert not missing, (f"{len(missing)} of {len(fields)} std fields are not named in "
                         f"docs/language.md:\n  " + "\n  ".join(missing))


def test_the_field_reference_section_exists():
    lines = LANGUAGE.read_text(encoding="utf-8").splitlines()
    assert HEADING in lines, f"docs/language.md has no section {HEADING!r}"
