"""The resume declaration (Learning.Deployment.DeploymentResume): its lowering to
Deployment.resume, the protocol identity it changes, and what `alphac check` and
`alphac plan` refuse of it, located."""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from alphac import driver
from alphac.checkpoint import read_manifest, render
from alphac.commands import main
from alphac.diagnostics import CompileError
from alphac.ir import nodes as ir

ROOT = Path(__file__).resolve().parents[2]
CKPTS = ROOT / "tests" / "errors" / "checkpoints"
BASE = (CKPTS / "lsq-star.alpha").read_text()
FIXTURE = CKPTS / "lsq-star-v2"


def resume_text(ckpt: str, mode: str = "ResumeSameContract", name: str = "fromStar",
                dep: str = "run") -> str:
    return (f"\nvalue {name} : DeploymentResume = ResumeOf {{\n  resumeDeployment = {dep},\n"
            f"  resumeCheckpoint = \"{ckpt}\",\n  resumeContract = {mode},\n}}\n")


def spec(tmp_path: Path, *resumes: str, base: str = BASE, name: str = "r.alpha") -> str:
    p = tmp_path / name
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(base + "".join(resumes))
    return str(p)


def codes_of(path: str) -> list[str]:
    return [d.code for d in driver.check(path).diagnostics]


@pytest.fixture
def ckpt(tmp_path) -> Path:
    d = tmp_path / "ckpts" / "ckpt-2"
    shutil.copytree(FIXTURE, d)
    return d


# ----------------------------------------------------------------------------- lowering

def test_a_resume_declaration_sets_the_deployment_resume(tmp_path, ckpt):
    path = spec(tmp_path, resume_text("ckpts/ckpt-2"))
    dep = driver.deployment(path)
    assert dep.resume == ir.Resume(str(tmp_path / "ckpts" / "ckpt-2"), "same")
    assert dep.resume.span.file == path and dep.resume.span.line == BASE.count("\n") + 2
    new = driver.deployment(spec(tmp_path, resume_text("ckpts/ckpt-2", "ResumeNewContract"), name="n.alpha"))
    assert new.resume.mode == "new"
    assert driver.deployment(spec(tmp_path, name="plain.alpha")).resume is None


def test_the_checkpoint_path_is_relative_to_the_spec_files_directory(tmp_path, ckpt):
    path = spec(tmp_path, resume_text("../ckpts/ckpt-2"), name="sub/r.alpha")
    dep = driver.deployment(path)
    assert Path(dep.resume.path) == tmp_path / "sub" / ".." / "ckpts" / "ckpt-2"
    absolute = driver.deployment(spec(tmp_path, resume_text(str(ckpt)), name="abs.alpha"))
    assert absolute.resume.path == str(ckpt)
    assert driver.check(path).ok


def test_the_resume_may_come_before_its_deployment(tmp_path, ckpt):
    head, tail = BASE.split("value run :")
    path = spec(tmp_path, base=head + resume_text("ckpts/ckpt-2") + "\nvalue run :" + tail)
    assert driver.deployment(path).resume.mode == "same"


def test_two_resumes_of_one_deployment_are_refused(tmp_path, ckpt):
    path = spec(tmp_path, resume_text("ckpts/ckpt-2"), resume_text("ckpts/ckpt-2", name="again"))
    result = driver.check(path)
    assert [d.code for d in result.diagnostics] == ["resume-duplicate"]
    d = result.diagnostics[0]
    assert d.span.file == path and "again" in d.message and "fromStar" in d.notes[0]


def test_a_resume_of_a_value_that_is_not_a_deployment_of_this_file(tmp_path, ckpt):
    helper = tmp_path / "Other.alpha"
    helper.write_text("module Other\n" + BASE)
    path = spec(tmp_path, "import Learning.Deployment\nimport Other\n",
                resume_text("ckpts/ckpt-2", dep="Other.run"), base="")
    assert codes_of(path) == ["resume-foreign-deployment"]
    inline = BASE[BASE.index("value run : Deployment = ") + len("value run : Deployment = "):]
    path = spec(tmp_path, resume_text("ckpts/ckpt-2", dep=inline.strip()), name="inline.alpha")
    assert codes_of(path) == ["resume-foreign-deployment"]


def test_a_resume_of_something_else_is_a_type_mismatch(tmp_path, ckpt):
    path = spec(tmp_path, resume_text("ckpts/ckpt-2", dep="learner"))
    assert codes_of(path) == ["type-mismatch"]


# ----------------------------------------------------------------------------- identity

def test_the_protocol_identity_covers_the_resumed_manifest_and_the_mode(tmp_path, ckpt):
    plain = driver.plan(driver.deployment(spec(tmp_path, name="plain.alpha")))
    same = driver.plan(driver.deployment(spec(tmp_path, resume_text("ckpts/ckpt-2"))))
    new = driver.plan(driver.deployment(spec(tmp_path, resume_text("ckpts/ckpt-2", "ResumeNewContract"),
                                             name="n.alpha")))
    assert len({plain.protocol_id, same.protocol_id, new.protocol_id}) == 3
    again = driver.plan(driver.deployment(spec(tmp_path, resume_text(str(FIXTURE)), name="f.alpha")))
    assert again.protocol_id == same.protocol_id  # the same manifest, elsewhere


def test_another_checkpoint_gives_another_identity(tmp_path, ckpt):
    import sys

    sys.path.insert(0, str(ROOT / "scripts"))
    import make_checkpoint

    make_checkpoint.make(CKPTS / "lsq-star.alpha", 3, tmp_path / "ckpts" / "ckpt-3", True)
    two = driver.plan(driver.deployment(spec(tmp_path, resume_text("ckpts/ckpt-2"))))
    three = driver.plan(driver.deployment(spec(tmp_path, resume_text("ckpts/ckpt-3"), name="t.alpha")))
    assert two.protocol_id != three.protocol_id
    assert driver.check(spec(tmp_path, resume_text("ckpts/ckpt-3"), name="t.alpha")).ok


# ----------------------------------------------------------------------------- check time

def test_a_matching_checkpoint_checks(tmp_path, ckpt):
    path = spec(tmp_path, resume_text("ckpts/ckpt-2"))
    assert driver.check(path).ok
    out = CliRunner().invoke(main, ["check", path])
    assert out.exit_code == 0, out.output


def test_another_tree_needs_a_new_contract(tmp_path, ckpt):
    hier = BASE.replace("DataParallelStar", "DataParallelHierarchy { dataParallelFanout = 2 }")
    same = spec(tmp_path, resume_text("ckpts/ckpt-2"), base=hier)
    result = driver.check(same)
    assert [d.code for d in result.diagnostics] == ["numerical-order-mismatch"]
    d = result.diagnostics[0]
    assert (d.span.file, d.span.line) == (same, hier.count("\n") + 2)
    assert any(f"{ckpt}/manifest.txt:6" in n for n in d.notes)
    assert any("star in the checkpoint, hierarchy 2 here" in n for n in d.notes)
    new = spec(tmp_path, resume_text("ckpts/ckpt-2", "ResumeNewContract"), base=hier, name="n.alpha")
    assert driver.check(new).ok


def test_another_owner_count_under_a_new_contract_checks(tmp_path, ckpt):
    three = (BASE.replace("deploymentOwners = 4", "deploymentOwners = 3")
             .replace("[[0.5, 3, 2], [1, 0, 1], [2, 2, 1]],\n    [],", "[[0.5, 3, 2], [1, 0, 1], [2, 2, 1]],")
             .replace("roleOwners = [1 .. 4]", "roleOwners = [1 .. 3]")
             .replace("TargetX86_64, TargetAArch64, TargetX86_64, TargetAArch64",
                      "TargetX86_64, TargetAArch64, TargetX86_64"))
    assert driver.check(spec(tmp_path, name="plain3.alpha", base=three)).ok
    assert driver.check(spec(tmp_path, resume_text("ckpts/ckpt-2", "ResumeNewContract"), base=three)).ok
    assert codes_of(spec(tmp_path, resume_text("ckpts/ckpt-2"), base=three, name="s.alpha")) == [
        "numerical-order-mismatch"]


def test_another_learner_is_refused(tmp_path, ckpt):
    other = BASE.replace("slot 2 := 0.9 * slot 2 + slot 4", "slot 2 := 0.5 * slot 2 + slot 4")
    path = spec(tmp_path, resume_text("ckpts/ckpt-2", "ResumeNewContract"), base=other)
    result = driver.check(path)
    assert [d.code for d in result.diagnostics] == ["checkpoint-learner-mismatch"]
    d = result.diagnostics[0]
    assert d.span.file == path
    assert any(n.startswith("the checkpoint's learner: ") and f"{ckpt}/manifest.txt:4" in n for n in d.notes)
    assert any(n.startswith("this deployment's learner: ") for n in d.notes)
    assert any(n.startswith("update: ") for n in d.notes)


def test_another_profile_or_relation_is_refused(tmp_path, ckpt):
    root = read_manifest(ckpt)
    fields = root.contract.split(" ")
    for i, value in ((2, "flush-to-zero"), (4, "ulps:2")):
        changed = fields.copy()
        changed[i] = value
        (ckpt / "manifest.txt").write_text(render(dataclasses.replace(root, contract=" ".join(changed))))
        result = driver.check(spec(tmp_path, resume_text("ckpts/ckpt-2", "ResumeNewContract")))
        assert [d.code for d in result.diagnostics] == ["numerical-profile-mismatch"]
        notes = result.diagnostics[0].notes
        assert repr(value) in notes[0] and f"{ckpt}/manifest.txt:6" in notes[1]


def test_a_truncated_manifest_is_its_own_located_diagnostic(tmp_path, ckpt):
    text = (ckpt / "manifest.txt").read_text()
    (ckpt / "manifest.txt").write_text(text[:text.index("\nowners ") + 1] + "owners 0 1")
    path = spec(tmp_path, resume_text("ckpts/ckpt-2"))
    result = driver.check(path)
    assert [d.code for d in result.diagnostics] == ["checkpoint-manifest"]
    d = result.diagnostics[0]
    assert (d.span.file, d.span.line) == (str(ckpt / "manifest.txt"), 10)
    out = CliRunner().invoke(main, ["check", path])
    assert out.exit_code == 1
    assert out.stderr.startswith(f"{ckpt}/manifest.txt:10:1: error[checkpoint-manifest]: ")
    assert "  owners 0 1\n" in out.stderr
    with pytest.raises(CompileError) as info:  # the planner alone fails cleanly too
        from alphac.plan import plan

        plan(driver.deployment(path))
    assert [x.code for x in info.value.diagnostics] == ["checkpoint-manifest"]


def test_a_changed_manifest_is_a_hash_mismatch(tmp_path, ckpt):
    text = (ckpt / "manifest.txt").read_text()
    (ckpt / "manifest.txt").write_text(text.replace("region state 2", "region state 3"))
    result = driver.check(spec(tmp_path, resume_text("ckpts/ckpt-2")))
    assert [d.code for d in result.diagnostics] == ["checkpoint-hash-mismatch"]
    assert result.diagnostics[0].span.line == len(text.splitlines())


def test_a_missing_checkpoint_is_located_at_the_declaration(tmp_path):
    path = spec(tmp_path, resume_text("ckpts/ckpt-9"))
    result = driver.check(path)
    assert [d.code for d in result.diagnostics] == ["checkpoint-manifest"]
    d = result.diagnostics[0]
    assert d.span.file == path and d.span.line == BASE.count("\n") + 2
    out = CliRunner().invoke(main, ["plan", path])
    assert out.exit_code == 1 and "error[checkpoint-manifest]" in out.stderr
    partial = tmp_path / "ckpts" / "ckpt-2.partial-00000000000000aa"
    shutil.copytree(FIXTURE, partial)
    result = driver.check(spec(tmp_path, resume_text(f"ckpts/{partial.name}"), name="p.alpha"))
    assert [d.code for d in result.diagnostics] == ["checkpoint-manifest"]
    assert "partial" in result.diagnostics[0].message


def test_plan_json_of_a_resumed_deployment(tmp_path, ckpt):
    out = CliRunner().invoke(main, ["plan", spec(tmp_path, resume_text("ckpts/ckpt-2"))])
    assert out.exit_code == 0, out.output
