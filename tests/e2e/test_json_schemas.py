"""Every command's --json output, success and failure alike, is one envelope that
validates against its schema under docs/schemas/ (jsonschema, draft 2020-12)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import jsonschema
import pytest
from click.testing import CliRunner
from referencing import Registry, Resource

from alphac.commands import main

ROOT = Path(__file__).resolve().parents[2]
SCHEMAS = ROOT / "docs" / "schemas"
SPEC = str(ROOT / "specs" / "lsq_plain_star.alpha")
BAD = str(ROOT / "tests" / "errors" / "unknown-field.alpha")
BAD_PLAN = str(ROOT / "tests" / "errors" / "combine-leaf-order.alpha")
CKPT = str(ROOT / "tests" / "errors" / "checkpoints" / "lsq-star-v2")
COMMANDS = ("check", "plan", "oracle", "build", "launch", "verify", "inspect", "qualify", "conform",
            "explain", "clean")
needs_qemu = pytest.mark.skipif(shutil.which("qemu-aarch64") is None, reason="qemu-aarch64 missing")


def _registry() -> Registry:
    resources = []
    for path in SCHEMAS.glob("*.json"):
        schema = json.loads(path.read_text())
        resources.append((schema["$id"], Resource.from_contents(schema)))
    return Registry().with_resources(resources)


REGISTRY = _registry()


def validated(command: str, *args: str, status: int) -> dict:
    """`alphac COMMAND ARGS --json`: its exit status is `status`, nothing on stderr, and
    stdout is one document valid under docs/schemas/COMMAND.json."""
    out = CliRunner().invoke(main, [command, *args, "--json"])
    assert out.exit_code == status, out.output
    assert out.stderr == ""
    doc = json.loads(out.stdout)
    schema = json.loads((SCHEMAS / f"{command}.json").read_text())
    jsonschema.Draft202012Validator(schema, registry=REGISTRY).validate(doc)
    assert doc["ok"] is (status == 0)
    assert doc["format"].startswith(f"alphac-{command}-")
    return doc


def test_every_command_has_a_schema():
    assert sorted(p.stem for p in SCHEMAS.glob("*.json")) == sorted(COMMANDS + ("envelope",))
    for path in SCHEMAS.glob("*.json"):
        jsonschema.Draft202012Validator.check_schema(json.loads(path.read_text()))


def test_a_schema_rejects_what_it_must():
    schema = json.loads((SCHEMAS / "check.json").read_text())
    validator = jsonschema.Draft202012Validator(schema, registry=REGISTRY)
    good = {"format": "alphac-check-1", "ok": False, "diagnostics": [], "refusals": [],
            "suppressed": 0, "suppressed_codes": {}, "file": "x"}
    validator.validate(good)
    for bad in ({**good, "ok": True}, {**good, "format": "alphac-plan-2"},
                {**good, "refusals": [{"code": "Not Kebab", "message": "m"}]},
                {k: v for k, v in good.items() if k != "diagnostics"}):
        assert not validator.is_valid(bad), bad


def test_check():
    doc = validated("check", SPEC, status=0)
    assert doc["deployments"] == ["run"]
    doc = validated("check", BAD, status=1)
    d = doc["diagnostics"][0]
    assert (d["code"], d["line"], d["col"], d["end_line"], d["end_col"]) == ("unknown-field", 4, 79, 4, 104)


def test_plan():
    assert validated("plan", SPEC, status=0)["owners"] == 4
    doc = validated("plan", BAD_PLAN, status=1)
    assert [d["code"] for d in doc["diagnostics"]] == ["combine-leaf-order"]


def test_oracle():
    doc = validated("oracle", SPEC, "--rounds", "2", status=0)
    assert [o["version"] for o in doc["owners"]] == [2] * 4
    assert [d["code"] for d in validated("oracle", BAD, status=1)["diagnostics"]] == ["unknown-field"]
    doc = validated("oracle", SPEC, "--new-contract", status=1)
    assert [r["code"] for r in doc["refusals"]] == ["usage"]


def test_explain():
    assert "missing-field" in validated("explain", status=0)["codes"]
    assert validated("explain", "missing-field", status=0)["stage"] == "checker"
    assert [r["code"] for r in validated("explain", "nope", status=1)["refusals"]] == ["unknown-code"]


def test_inspect_of_a_checkpoint_and_of_what_is_not_one(tmp_path):
    doc = validated("inspect", CKPT, status=0)
    assert doc["kind"] == "checkpoint" and len(doc["words"]["params"]["hex"]) == 2
    junk = tmp_path / "junk"
    junk.write_bytes(b"not an executable")
    doc = validated("inspect", str(junk), status=1)
    assert [r["code"] for r in doc["refusals"]] == ["not-an-alphac-executable"]


@needs_qemu
def test_build_launch_inspect_and_clean(tmp_path):
    out = str(tmp_path / "out")
    doc = validated("build", SPEC, "--all", "-o", out, status=0)
    assert [(e["role"], e["target"]) for e in doc["executables"]] == [
        ("coordinator", "x86_64"), ("worker", "aarch64"), ("worker", "x86_64")]
    assert validated("inspect", doc["executables"][0]["path"], status=0)["kind"] == "executable"
    doc = validated("launch", SPEC, "--rounds", "2", "-o", out, status=0)
    assert doc["match"] is True and Path(doc["run_dir"]).parent == Path(out) / "runs"
    checked = validated("verify", doc["run_dir"], SPEC, status=0)
    assert checked["match"] is True and checked["owners"][1]["params"] == doc["owners"][1]["params"]
    output = validated("inspect", str(Path(doc["run_dir"]) / "owner-1.out"), status=0)
    assert (output["kind"], output["version"], output["words"]["params"]["hex"]) == (
        "output", 2, doc["owners"][1]["params"])
    removed = validated("clean", "-o", out, status=0)["removed"]
    # runs; build's 3 executables and launch's 2 x86-64 ones for this machine, each with its record
    assert len(removed) == 11 and removed[0] == str(Path(out) / "runs")


def test_build_and_launch_failures(tmp_path):
    out = str(tmp_path / "out")
    doc = validated("build", BAD, "--all", "-o", out, status=1)
    assert [d["code"] for d in doc["diagnostics"]] == ["unknown-field"]
    doc = validated("build", SPEC, "--role", "workr", "-o", out, status=1)
    assert [r["code"] for r in doc["refusals"]] == ["unknown-role"]
    doc = validated("launch", BAD, "-o", out, status=1)
    assert [d["code"] for d in doc["diagnostics"]] == ["unknown-field"]
    doc = validated("verify", str(tmp_path), BAD, status=1)
    assert [d["code"] for d in doc["diagnostics"]] == ["unknown-field"]
    assert validated("clean", "-o", str(tmp_path / "none"), status=0)["removed"] == []


def test_qualify_with_a_tracker_it_cannot_use(tmp_path, monkeypatch):
    """The tracker's refusal in the envelope. The gate suite itself takes minutes, so a
    stand-in for alphac.qualify.suite.qualify raises what the tracker raises."""
    from alphac.qualify import suite
    from alphac.qualify.tracker import TrackerError

    def refuse(db, *args, **kwargs):
        raise TrackerError(f"{db}: not a tracker")
    monkeypatch.setattr(suite, "qualify", refuse)
    db = tmp_path / "q.db"
    doc = validated("qualify", "--db", str(db), "--specs", str(ROOT / "specs"), status=1)
    assert doc["refusals"] == [{"code": "qualify-db", "message": f"{db}: not a tracker"}]


def test_conform(tmp_path):
    """A small measurement of two functions against this host's kernels, and a store that
    cannot be written."""
    doc = validated("conform", "--count", "40", "--function", "exp", "--function", "tanh",
                    "--jobs", "1", "--store", str(tmp_path / "ev"), status=0)
    assert list(doc["record"]["functions"]) == ["exp", "tanh"]
    assert Path(doc["path"]) == tmp_path / "ev" / f"{doc['hash']}.json"
    blocked = tmp_path / "file"
    blocked.write_text("not a directory")
    doc = validated("conform", "--count", "5", "--function", "log", "--jobs", "1",
                    "--store", str(blocked), status=1)
    assert [r["code"] for r in doc["refusals"]] == ["io-error"]
