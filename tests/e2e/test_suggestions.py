"""Suggestions: "did you mean" for names, fields, modules, targets and roles, the list of
a family's constructors where they are few, and no follow-on errors after a root one."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from alphac.commands import main
from alphac.diagnostics import did_you_mean, edit_distance, nearest

SPECS = Path(__file__).resolve().parents[2] / "specs"
STAR = (SPECS / "lsq_plain_star.alpha").read_text()


def test_edit_distance():
    assert [edit_distance(a, b) for a, b in [("", "abc"), ("kitten", "sitting"), ("ab", "ab")]] == [3, 3, 0]


def test_nearest_keeps_only_the_closest():
    assert nearest("TargetArm64", ["TargetAArch64", "TargetX86_64", "TargetSM86"]) == ["TargetAArch64"]
    assert nearest("zzz", ["TargetAArch64"]) == []
    assert did_you_mean("roleOwner", ["roleName", "roleOwners"]) == "did you mean roleOwners?"
    assert did_you_mean("x86-64-v5", ["x86-64-v2", "x86-64-v3", "x86-64-v4", "host"]) == (
        "did you mean x86-64-v2, x86-64-v3 or x86-64-v4?")


@pytest.fixture
def misspelt(tmp_path, monkeypatch):
    shutil.copytree(SPECS / "Gates", tmp_path / "Gates")
    monkeypatch.chdir(tmp_path)

    def check(old: str, new: str) -> tuple[int, str]:
        assert old in STAR
        Path("m.alpha").write_text(STAR.replace(old, new, 1))
        out = CliRunner().invoke(main, ["check", "m.alpha"])
        return out.exit_code, out.stderr
    return check


def test_a_misspelt_constructor_lists_the_family(misspelt):
    assert misspelt("TargetAArch64, TargetX86_64, TargetAArch64]",
                    "TargetArm64, TargetX86_64, TargetAArch64]") == (1, """\
m.alpha:16:40: error[unknown-name]: no value or constructor named TargetArm64 is in scope
    deploymentPlacement = [TargetX86_64, TargetArm64, TargetX86_64, TargetAArch64],
                                         ^~~~~~~~~~~
  note: did you mean TargetAArch64?
  note: DeploymentTarget is one of: TargetX86_64, TargetAArch64, TargetSM86
""")


def test_a_misspelt_field_is_not_also_missing(misspelt):
    assert misspelt("roleOwners = [0]", "roleOwner = [0]") == (1, """\
m.alpha:13:40: error[unknown-field]: RoleOf has no field roleOwner
      RoleOf { roleName = "coordinator", roleOwner = [0] },
                                         ^~~~~~~~~~~~~~~
  note: did you mean roleOwners?
  note: its fields: roleName, roleOwners
""")


def test_a_missing_field_without_a_misspelling_is_still_reported(misspelt):
    code, err = misspelt('roleName = "coordinator", roleOwners = [0]', 'roleName = "coordinator"')
    assert code == 1 and "error[missing-field]: RoleOf needs field roleOwners" in err


def test_a_misspelt_value(misspelt):
    code, err = misspelt("deploymentLearner = lsqPlain", "deploymentLearner = lsqPlan")
    assert code == 1 and err.splitlines()[-1] == "  note: did you mean lsqPlain?"


def test_a_misspelt_module_has_no_follow_on(misspelt):
    assert misspelt("import Learning.Deployment", "import Learning.Deploymnt") == (1, """\
m.alpha:5:1: error[unknown-module]: no module Learning.Deploymnt in the std library or beside m.alpha
  import Learning.Deploymnt
  ^~~~~~~~~~~~~~~~~~~~~~~~~
  note: looked for Learning/Deploymnt.alpha
  note: did you mean Learning.Deployment?
  note: names it would define are not reported as unknown
""")


def test_a_misspelt_topology_lists_the_topologies(misspelt):
    code, err = misspelt("DataParallelStar,", "DataParallelStarr,")
    notes = [line for line in err.splitlines() if line.startswith("  note:")]
    assert code == 1 and notes[0] == "  note: did you mean DataParallelStar?"
    assert notes[1].startswith("  note: DataParallelTopology is one of: DataParallelStar, "
                               "DataParallelHierarchy, ")


def test_a_misspelt_role_and_target_on_the_command_line():
    out = CliRunner().invoke(main, ["build", str(SPECS / "lsq_plain_star.alpha"), "--role", "workr"])
    assert out.exit_code == 1 and out.stderr == (
        "alphac: error[unknown-role]: unknown role 'workr'; roles: coordinator, worker; "
        "did you mean worker?\n")
    out = CliRunner().invoke(main, ["build", str(SPECS / "lsq_plain_star.alpha"), "--target", "x86-64"])
    assert out.exit_code == 1 and out.stderr == (
        "alphac: error[unknown-target]: unknown target 'x86-64'; targets: aarch64, sm86, x86_64; "
        "did you mean x86_64?\n")


def test_the_only_field_left_is_what_an_unknown_one_meant(misspelt):
    code, err = misspelt("DataParallelStar,", "DataParallelHierarchy { hierarchyFanout = 2 },")
    assert code == 1 and err.splitlines()[3:] == [
        "  note: did you mean dataParallelFanout?", "  note: its fields: dataParallelFanout"]
    assert "missing-field" not in err


def test_a_missing_data_file_suggests_the_files_beside_it(tmp_path):
    shutil.copytree(SPECS / "Gates", tmp_path / "Gates")
    lib = tmp_path / "Gates" / "SampleTree.alpha"
    lib.write_text(lib.read_text().replace('load "sampletree13.npy" shares [6, 1, 0, 6]',
                                           'load "sampletree31.npy" shares [6, 1, 0, 6]'))
    spec = tmp_path / "lsq_adam_sampletree.alpha"
    spec.write_text((SPECS / "lsq_adam_sampletree.alpha").read_text())
    out = CliRunner().invoke(main, ["check", str(spec)])
    assert out.exit_code == 1
    lines = out.stderr.splitlines()
    assert lines[0] == (f"{tmp_path}/Gates/SampleTree.alpha:17:25: error[sample-file]: "
                        f"{tmp_path}/Gates/sampletree31.npy does not exist; did you mean sampletree13.npy?")
    assert lines[3] == "  note: .npy files beside it: logistic.npy, logistic32.npy, sampletree13.npy, softmax.npy"
    lib.write_text(lib.read_text().replace('load "sampletree31.npy"', 'load "data/x.npy"'))
    lines = CliRunner().invoke(main, ["check", str(spec)]).stderr.splitlines()
    assert lines[3] == f"  note: its directory {tmp_path}/Gates/data does not exist"
