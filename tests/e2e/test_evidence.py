"""Bounded numerical relations against conformance evidence (alphac/plan/evidence.py): a
bound is accepted when the record it names is found, hashes to its name and bounds every
elementary function the programs call; refused otherwise, each way with its own code."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from alphac import driver
from alphac.plan import evidence

ROOT = Path(__file__).resolve().parents[2]
BASE = (ROOT / "tests" / "errors" / "numerical-bound-below-evidence.alpha").read_text()
RECORD = ROOT / "tests" / "errors" / "evidence" / \
    "4f72c315f919a9c4866f78628ea98a467ef7f60e305a7e19cceb91c14880cc1a.json"
NAME = RECORD.stem
# what the record measured (tests/errors/evidence/: `alphac conform --count 10000`)
MEASURED = {"exp": "0.500", "log": "0.500", "log1p": "0.500", "expm1": "0.500",
            "sigmoid": "1.646", "tanh": "2.371"}
GRADIENT = "(sigmoid(slot 0 * slot 2 + slot 1 * slot 3) - slot 4)"


def spec(tmp_path: Path, bound: int, ref: str | None, function: str | None = "sigmoid",
         name: str = "run.alpha") -> str:
    text = BASE
    if function is None:
        text = text.replace(GRADIENT, "((slot 0 * slot 2 + slot 1 * slot 3) - slot 4)")
    else:
        text = text.replace("sigmoid(", f"{function}(")
    text = text.replace("numericalBoundUlps = 1,", f"numericalBoundUlps = {bound},")
    old = f'numericalEvidence = "evidence/{NAME}.json",'
    assert old in text
    text = text.replace(old, "" if ref is None else f"numericalEvidence = {json.dumps(ref)},")
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def codes(path: str) -> list[str]:
    return [d.code for d in driver.check(path).diagnostics]


def diagnostics(path: str):
    return driver.check(path).diagnostics


@pytest.fixture
def beside(tmp_path):
    """The record copied beside the specs, under evidence/."""
    (tmp_path / "evidence").mkdir()
    shutil.copy(RECORD, tmp_path / "evidence" / RECORD.name)
    return tmp_path


def test_the_fixture_is_what_it_says():
    record = evidence.read(RECORD, NAME)
    assert {f: e["max_ulps"] for f, e in record["functions"].items()} == MEASURED
    assert all(e["arguments"] == 10000 for e in record["functions"].values())


def test_a_bound_at_the_measured_error_is_accepted_by_path(beside):
    ok = spec(beside, 2, f"evidence/{NAME}.json")
    assert codes(ok) == []
    dep = driver.deployment(ok)
    plan = driver.plan(dep)
    assert plan.contract.relation == f"ulps:2@evidence/{NAME}.json"


def test_a_bound_below_the_measured_error_names_the_function(beside):
    found = diagnostics(spec(beside, 1, f"evidence/{NAME}.json"))
    assert [d.code for d in found] == ["numerical-bound-below-evidence"]
    assert "sigmoid, 1.646 ulps" in found[0].message and "bound of 1 ulp " in found[0].message
    assert "declare numericalBoundUlps = 2 or more" in found[0].notes


@pytest.mark.parametrize("function, least", [("tanh", 3), ("exp", 1), ("log1p", 1)])
def test_the_bound_is_compared_with_the_functions_the_programs_call(beside, function, least):
    ref = f"evidence/{NAME}.json"
    assert codes(spec(beside, least, ref, function)) == []
    if least > 1:
        assert codes(spec(beside, least - 1, ref, function)) == ["numerical-bound-below-evidence"]
    assert codes(spec(beside, 0, ref, function)) == ["numerical-bound-below-evidence"]


def test_programs_calling_none_are_compared_with_every_function_of_the_record(beside):
    ref = f"evidence/{NAME}.json"
    found = diagnostics(spec(beside, 2, ref, function=None))
    assert [d.code for d in found] == ["numerical-bound-below-evidence"]
    assert "tanh, 2.371 ulps" in found[0].message
    assert any("none of the six" in n for n in found[0].notes)
    assert codes(spec(beside, 3, ref, function=None)) == []


def test_a_bare_hash_is_found_in_the_store_or_beside_the_spec(tmp_path, monkeypatch):
    monkeypatch.setenv("ALPHAC_CACHE", str(tmp_path / "cache"))
    path = spec(tmp_path, 2, NAME)
    found = diagnostics(path)
    assert [d.code for d in found] == ["numerical-relation-unverified"]
    assert "not found" in found[0].message
    assert any(str(tmp_path / "cache" / "evidence" / RECORD.name) in n for n in found[0].notes)
    assert any("alphac conform" in n for n in found[0].notes)
    shutil.copy(RECORD, tmp_path / RECORD.name)
    assert codes(path) == []
    (tmp_path / RECORD.name).unlink()
    (tmp_path / "cache" / "evidence").mkdir(parents=True)
    shutil.copy(RECORD, tmp_path / "cache" / "evidence" / RECORD.name)
    assert codes(path) == []


def test_no_evidence_is_unverified_and_says_how_to_make_it(tmp_path):
    found = diagnostics(spec(tmp_path, 5, None))
    assert [d.code for d in found] == ["numerical-relation-unverified"]
    assert "names no conformance evidence" in found[0].message
    assert any("alphac conform" in n for n in found[0].notes)


def test_an_altered_record_is_corrupt(beside):
    target = beside / "evidence" / RECORD.name
    target.write_bytes(target.read_bytes().replace(b'"1.646"', b'"0.646"'))
    found = diagnostics(spec(beside, 1, f"evidence/{NAME}.json"))
    assert [d.code for d in found] == ["numerical-evidence-corrupt"]
    assert "does not hash to its name" in found[0].message


def test_a_record_of_another_format_or_not_json_is_corrupt(tmp_path):
    for data in (b"not json at all", json.dumps({"format": "alphac-evidence-9"}).encode(),
                 evidence.encode({"format": evidence.FORMAT, "functions": {"sin": {}}}),
                 evidence.encode({"format": evidence.FORMAT, "functions": {"exp": {
                     "level": "correctly-rounded", "max_ulps": 0.5, "arguments": 3}}})):
        import hashlib

        name = hashlib.sha256(data).hexdigest()
        (tmp_path / f"{name}.json").write_bytes(data)
        found = diagnostics(spec(tmp_path, 3, f"{name}.json"))
        assert [d.code for d in found] == ["numerical-evidence-corrupt"], data


def test_a_path_not_named_by_a_hash_is_corrupt(beside):
    shutil.copy(RECORD, beside / "record.json")
    found = diagnostics(spec(beside, 3, "record.json"))
    assert [d.code for d in found] == ["numerical-evidence-corrupt"]
    assert "<sha256>.json" in found[0].message


def test_a_function_the_record_does_not_measure_is_unverified(tmp_path):
    record = evidence.read(RECORD, NAME)
    record["functions"] = {"exp": record["functions"]["exp"]}
    name, _ = evidence.write(record, tmp_path)
    found = diagnostics(spec(tmp_path, 3, f"{name}.json", "tanh"))
    assert [d.code for d in found] == ["numerical-relation-unverified"]
    assert "tanh" in found[0].message
    assert codes(spec(tmp_path, 1, f"{name}.json", "exp")) == []


def test_a_path_with_spaces_stays_one_token_of_the_contract(tmp_path):
    (tmp_path / "my evidence").mkdir()
    shutil.copy(RECORD, tmp_path / "my evidence" / RECORD.name)
    path = spec(tmp_path, 2, f"my evidence/{NAME}.json")
    assert codes(path) == []
    relation = driver.plan(driver.deployment(path)).contract.relation
    assert " " not in relation and relation.startswith("ulps:2@my%20evidence/")
    assert evidence.parse_relation(relation) == evidence.Bounded(2, f"my evidence/{NAME}.json")


def test_the_evidence_is_part_of_the_protocol_identity(beside, tmp_path):
    a = driver.plan(driver.deployment(spec(beside, 2, f"evidence/{NAME}.json")))
    b = driver.plan(driver.deployment(spec(beside, 3, f"evidence/{NAME}.json", name="b.alpha")))
    assert a.contract.relation != b.contract.relation


def test_used_functions_walk_loops_lets_and_sums():
    from alphac.ir import nodes as ir

    x = ir.SlotRef(ir.Index(0))
    body = (ir.Let("t", ir.Unary("tanh", x)),
            ir.Loop("i", 0, 2, (ir.Assign(ir.Index(1, "i"),
                                          ir.Sum("j", 0, 2, ir.Unary("log1p", x))),)),
            ir.Assign(ir.Index(0), ir.Binary("add", x, ir.Local("exp"))))
    learner = type("L", (), {"contribution": ir.Program(4, body), "update": ir.Program(4, ())})()
    assert evidence.used_functions(learner) == ("log1p", "tanh")
    assert evidence.used_functions(None) == ()


def test_check_reports_it_through_the_command_line(beside):
    path = spec(beside, 1, f"evidence/{NAME}.json")
    out = CliRunner().invoke(__import__("alphac.commands", fromlist=["main"]).main, ["check", path])
    assert out.exit_code == 1 and "error[numerical-bound-below-evidence]" in out.stderr
    assert "Traceback" not in out.output


def test_a_build_refuses_evidence_of_other_kernels(beside, tmp_path):
    """The fixture measured kernels of another IR (an older tree's): a bound it supports is
    accepted by the planner, but no executable is built on it; a record naming these
    kernels' IR sha256 builds."""
    from alphac.codegen.elementary import ir_sha256
    from alphac.image import ImageError

    record = evidence.read(RECORD, NAME)
    assert record["kernels"]["ir_sha256"] != ir_sha256()
    plan = driver.plan(driver.deployment(spec(beside, 2, f"evidence/{NAME}.json")))
    with pytest.raises(ImageError) as refused:
        driver.build(plan, "coordinator", "x86_64", tmp_path / "out")
    assert refused.value.code == "numerical-evidence-stale"
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())

    record["kernels"]["ir_sha256"] = ir_sha256()
    name, _ = evidence.write(record, beside / "evidence")
    plan = driver.plan(driver.deployment(spec(beside, 2, f"evidence/{name}.json", name="now.alpha")))
    assert driver.build(plan, "coordinator", "x86_64", tmp_path / "out").is_file()
