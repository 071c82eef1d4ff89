"""The code catalogue: kebab-case names, and one bad spec per syntax, check and plan code."""

from __future__ import annotations

import re
from pathlib import Path

from alphac import codes

ERRORS = Path(__file__).resolve().parents[1] / "errors"
KEBAB = re.compile(r"^[a-z][a-z0-9]*(-[a-z0-9]+)*$")


def _missing(section: dict) -> list[str]:
    return sorted(c for c in section if not (ERRORS / f"{c}.alpha").exists()
                  or not (ERRORS / f"{c}.expected").is_file())


def test_every_code_is_kebab_case_and_described():
    for code, text in codes.CATALOGUE.items():
        assert KEBAB.match(code), code
        assert text.strip(), code


def test_every_syntax_code_has_a_golden_bad_spec():
    assert _missing(codes.SYNTAX) == []


def test_every_check_code_has_a_golden_bad_spec():
    assert _missing(codes.CHECK) == []


def test_every_plan_code_reachable_from_a_spec_has_a_golden_bad_spec():
    from alphac.plan import plan_spec  # noqa: F401

    reachable = {c: t for c, t in codes.PLAN.items() if c not in codes.PLAN_API_ONLY}
    assert _missing(reachable) == []


def test_plan_codes_unreachable_from_one_spec_are_few_and_catalogued():
    # These compare two plans or check shard maps the planner itself builds; their tests
    # construct the offending data directly (tests/test_plan_*.py).
    assert codes.PLAN_API_ONLY <= set(codes.PLAN)
    assert len(codes.PLAN_API_ONLY) == 8


def test_every_bad_spec_is_named_after_a_catalogued_code():
    stems = {p.stem for p in ERRORS.glob("*.alpha")}
    assert sorted(stems - set(codes.CATALOGUE)) == []


def test_checker_sources_use_only_catalogued_codes():
    root = Path(__file__).resolve().parents[2] / "alphac"
    used = set()
    for sub in ("syntax", "check"):
        for py in (root / sub).glob("*.py"):
            used |= set(re.findall(r'(?:error|_error|WordError)\(\s*"([a-z0-9-]+)"', py.read_text()))
            used |= set(re.findall(r'bag\.error\(\s*"([a-z0-9-]+)"', py.read_text()))
    assert used, "no codes found: the pattern above no longer matches the sources"
    assert sorted(used - set(codes.CATALOGUE)) == []
