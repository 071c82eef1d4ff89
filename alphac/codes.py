"""The one catalogue of diagnostic and refusal codes: stable kebab-case names and what they mean.

Each stage owns one section. A code used anywhere must be listed here; `tests/test_codes.py`
checks that every check/plan code has a bad spec under `tests/errors/`.
"""

# -- input and syntax (alphac/syntax) ------------------------------------------------------
SYNTAX = {
    "io-error": "the spec file cannot be read (missing, a directory, permissions)",
    "file-too-large": "the spec file exceeds the size limit",
    "invalid-encoding": "the spec file is not UTF-8 text",
    "syntax-error": "the text does not follow the grammar",
    "nesting-too-deep": "brackets nest deeper than the parser accepts",
}

# -- checker (alphac/check) -----------------------------------------------------------------
CHECK = {
}

# -- planner (alphac/plan) ------------------------------------------------------------------
PLAN = {
}

# -- oracle (alphac/oracle) -----------------------------------------------------------------
ORACLE = {
}

# -- executables at run time (alphac/codegen runtime): `refused: CODE: detail` --------------
RUNTIME = {
}

# -- build and launch (alphac/targets, alphac/launch) ---------------------------------------
TOOLING = {
}

CATALOGUE: dict[str, str] = {}
for _section in (SYNTAX, CHECK, PLAN, ORACLE, RUNTIME, TOOLING):
    for _code, _text in _section.items():
        assert _code not in CATALOGUE, f"code {_code} listed twice"
        CATALOGUE[_code] = _text
