"""`alphac explain`: every catalogued code has a fix and, where a bad spec exists, its
example; the listing names every code once, by stage; an unknown code is one line."""

from __future__ import annotations

import json

from click.testing import CliRunner

from alphac import codes
from alphac.commands import main
from alphac.explain import EXAMPLES, FIXES, STAGES, explain


def test_every_code_has_exactly_one_fix():
    assert sorted(FIXES) == sorted(codes.CATALOGUE)
    assert all(fix.strip().endswith(".") for fix in FIXES.values())


def test_the_stages_cover_the_catalogue_once():
    listed = [code for _, section in STAGES for code in section]
    assert sorted(listed) == sorted(codes.CATALOGUE) and len(listed) == len(set(listed))


def test_every_bad_spec_is_an_example():
    for path in EXAMPLES.glob("*.alpha"):
        e = explain(path.stem)
        assert e.example == path and e.rendering == path.with_suffix(".expected").read_text()
        assert f"error[{path.stem}]" in e.text()


def test_explain_a_code():
    out = CliRunner().invoke(main, ["explain", "missing-field"])
    assert out.exit_code == 0
    lines = out.stdout.splitlines()
    assert lines[0] == "missing-field (checker): a constructor's field is not given"
    assert lines[2] == "fix: " + FIXES["missing-field"]
    assert lines[4] == "example: tests/errors/missing-field.alpha"
    assert "  tests/errors/missing-field.alpha:4:31: error[missing-field]: RoleOf needs field " \
           "roleOwners" in lines


def test_a_runtime_code_has_no_example():
    out = CliRunner().invoke(main, ["explain", "peer-timeout"])
    assert out.exit_code == 0
    assert out.stdout.splitlines()[-1] == "example: none; no single spec produces it"


def test_an_unknown_code_suggests_the_nearest():
    out = CliRunner().invoke(main, ["explain", "missing-fild"])
    assert out.exit_code == 1 and out.stdout == ""
    assert out.stderr == ("alphac: error[unknown-code]: no code 'missing-fild' is catalogued; "
                          "did you mean missing-field?\n")
    out = CliRunner().invoke(main, ["explain", "zzzzzzzz"])
    assert out.stderr == ("alphac: error[unknown-code]: no code 'zzzzzzzz' is catalogued; "
                          "`alphac explain` lists them\n")


def test_the_listing_names_every_code_by_stage():
    out = CliRunner().invoke(main, ["explain"])
    assert out.exit_code == 0
    lines = out.stdout.splitlines()
    heads = [line[:-1] for line in lines if not line.startswith(" ")]
    assert heads == [name for name, _ in STAGES]
    listed = [line.split()[0] for line in lines if line.startswith("  ")]
    assert listed == [code for _, section in STAGES for code in section]


def test_explain_json():
    doc = json.loads(CliRunner().invoke(main, ["explain", "--json", "duplicate-field"]).stdout)
    assert (doc["format"], doc["ok"], doc["code"], doc["stage"]) == (
        "alphac-explain-1", True, "duplicate-field", "checker")
    assert doc["example_text"] == (EXAMPLES / "duplicate-field.alpha").read_text()
    doc = json.loads(CliRunner().invoke(main, ["explain", "--json", "nope-nope"]).stdout)
    assert doc["ok"] is False and [r["code"] for r in doc["refusals"]] == ["unknown-code"]
