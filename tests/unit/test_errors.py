"""Golden diagnostics: every tests/errors/<code>.alpha gives exactly `code`, rendered as
tests/errors/<code>.expected says.

Leading `--` lines may carry directives: `-- stage: plan` also runs the planner through the
driver, with a declared resume's checkpoint checks (and `alphac check` must report the same), `-- stage: deployment` asks for the file's single deployment, and
`-- env: NAME=VALUE` sets an environment variable for the run. Set ALPHAC_UPDATE_GOLDEN=1
to rewrite the .expected files after a deliberate change of wording.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from alphac.check import check_file, load_deployment
from alphac.diagnostics import CompileError, SourceCache

ROOT = Path(__file__).resolve().parents[2]
ERRORS = ROOT / "tests" / "errors"
CASES = sorted(p for p in ERRORS.glob("*.alpha"))


def directives(path: Path) -> tuple[str, dict[str, str]]:
    stage, env = "check", {}
    if not path.is_file():
        return stage, env
    for raw in path.read_bytes().splitlines():
        line = raw.decode("utf-8", "replace").strip()
        if not line.startswith("--"):
            break
        body = line[2:].strip()
        if body.startswith("stage:"):
            stage = body.split(":", 1)[1].strip()
        elif body.startswith("env:"):
            name, _, value = body.split(":", 1)[1].strip().partition("=")
            env[name] = value
    return stage, env


def diagnostics_of(rel: str, stage: str):
    _, diagnostics, _ = check_file(rel)
    if diagnostics or stage == "check":
        return diagnostics
    try:
        if stage == "deployment":
            load_deployment(rel)
        elif stage == "plan":
            try:
                from alphac.plan import plan_spec  # noqa: F401
            except ImportError:
                pytest.skip("the planner is not built")
            from alphac import driver

            driver.plan(load_deployment(rel))  # the planner, then a declared resume's checks
        else:
            raise AssertionError(f"unknown stage {stage!r}")
    except CompileError as exc:
        return exc.diagnostics
    return []


def render(diagnostics) -> str:
    sources = SourceCache()
    for d in diagnostics:
        try:
            sources.add(d.span.file, Path(d.span.file).read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError):
            pass
    return "".join(d.render(sources) + "\n" for d in diagnostics)


@pytest.mark.parametrize("case", CASES, ids=[p.stem for p in CASES])
def test_golden_diagnostic(case: Path, monkeypatch):
    monkeypatch.chdir(ROOT)
    stage, env = directives(case)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    rel = str(case.relative_to(ROOT))
    diagnostics = diagnostics_of(rel, stage)
    assert [d.code for d in diagnostics] == [case.stem], render(diagnostics)
    text = render(diagnostics)
    golden = case.with_suffix(".expected")
    if os.environ.get("ALPHAC_UPDATE_GOLDEN"):
        golden.write_text(text, encoding="utf-8")
    assert golden.is_file(), f"{golden.name} is missing; run with ALPHAC_UPDATE_GOLDEN=1"
    assert text == golden.read_text(encoding="utf-8")


PLAN_CASES = [p for p in CASES if directives(p)[0] == "plan"]


@pytest.mark.parametrize("case", PLAN_CASES, ids=[p.stem for p in PLAN_CASES])
def test_check_reports_what_the_planner_refuses(case: Path, monkeypatch):
    """`alphac check` runs the planner's checks too: same code, same rendering, exit 1."""
    from click.testing import CliRunner

    from alphac import driver
    from alphac.commands import main

    monkeypatch.chdir(ROOT)
    rel = str(case.relative_to(ROOT))
    result = driver.check(rel)
    assert not result.ok and result.spec is not None
    assert [d.code for d in result.diagnostics] == [case.stem]
    out = CliRunner().invoke(main, ["check", rel])
    assert out.exit_code == 1 and out.stdout == ""
    assert out.stderr == case.with_suffix(".expected").read_text(encoding="utf-8")
    out = CliRunner().invoke(main, ["check", "--json", rel])
    payload = json.loads(out.stdout)
    assert out.exit_code == 1 and payload["ok"] is False and "module" not in payload
    assert [d["code"] for d in payload["diagnostics"]] == [case.stem]
