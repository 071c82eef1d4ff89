"""alphac.driver: what the commands call, one function per stage."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from alphac import driver
from alphac.commands import main

ROOT = Path(__file__).resolve().parents[2]
ERRORS = ROOT / "tests" / "errors"


def test_check_of_a_good_spec_keeps_the_checked_spec():
    result = driver.check(str(ROOT / "specs" / "demo.alpha"))
    assert result.ok and result.diagnostics == ()
    assert [d.name for d in result.spec.deployments] == ["demo"]


def test_checker_diagnostics_come_without_a_spec_and_without_planning():
    result = driver.check(str(ERRORS / "nat-range.alpha"))
    assert not result.ok and result.spec is None
    assert [d.code for d in result.diagnostics] == ["nat-range"]


def test_every_deployment_of_the_file_is_planned(tmp_path):
    text = (ERRORS / "combine-leaf-missing.alpha").read_text()
    good = text[text.index("value run : Deployment"):].replace("value run :", "value star :")
    good = good[:good.index("  deploymentTopology")] + "  deploymentTopology = DataParallelStar,\n" + \
        good[good.index("  deploymentPartitioning"):]
    spec = tmp_path / "two.alpha"
    spec.write_text(text.replace("-- stage: plan\n", "") + "\n" + good)
    result = driver.check(str(spec))
    assert result.spec is not None and [d.name for d in result.spec.deployments] == ["run", "star"]
    assert [d.code for d in result.diagnostics] == ["combine-leaf-missing"]
    out = CliRunner().invoke(main, ["check", str(spec)])
    assert out.exit_code == 1
    assert out.stderr.startswith(f"{spec}:43:24: error[combine-leaf-missing]: ")
    with pytest.raises(driver.CompileError) as err:
        driver.deployment(str(spec))
    assert [d.code for d in err.value.diagnostics] == ["no-deployment"]


def test_load_deployment_plan_build_and_describe(tmp_path):
    dep = driver.deployment(str(ROOT / "specs" / "lsq_plain_star.alpha"))
    assert driver.load(str(ROOT / "specs" / "lsq_plain_star.alpha")).deployments == (dep,)
    plan = driver.plan(dep)
    exe = driver.build(plan, "coordinator", "x86_64", tmp_path)
    assert exe == tmp_path / "lsq_plain_star-coordinator-x86_64"
    info = driver.describe(exe)
    assert info["metadata"]["protocol"] == plan.protocol_hex and info["machine"] == "EM_X86_64"
    assert driver.oracle(dep, 1).rounds == 1
    assert "x86_64" in driver.buildable_targets() and "sm86" in driver.target_names()


def test_the_oracles_refusal_is_reachable_from_the_driver():
    from alphac.oracle.refusal import Refusal

    assert driver.Refusal is Refusal
    with pytest.raises(AttributeError):
        driver.nothing_of_that_name  # noqa: B018
