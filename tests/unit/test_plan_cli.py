"""`alphac plan` on real spec files: text, JSON and dot output, and every planner refusal on
its bad spec under tests/errors/ (exactly its own code, rendered as the golden file)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from alphac.commands import main
from alphac.codes import PLAN, PLAN_API_ONLY
from alphac.diagnostics import CompileError, SourceCache
from alphac.plan import plan_spec


def planned(path: str):
    """What `alphac plan` runs: the planner, then a declared resume's checkpoint checks."""
    from alphac import driver

    return driver.plan(driver.deployment(path))

ROOT = Path(__file__).resolve().parents[2]
ERRORS = ROOT / "tests" / "errors"

API_ONLY = PLAN_API_ONLY

GOOD = """import Learning.DataParallel
import Learning.Deployment

value learner : (family DataParallelSystem 7 7) = DataParallelSystemOf {
  dataParallelParameterCount = 2,
  dataParallelSampleWidth = 3,
  dataParallelContribution = [
    slot 5 := ((slot 0 * slot 2 + slot 1 * slot 3) - slot 4) * slot 2,
    slot 6 := ((slot 0 * slot 2 + slot 1 * slot 3) - slot 4) * slot 3,
  ],
  dataParallelUpdate = [
    slot 2 := 0.9 * slot 2 + slot 4,
    slot 3 := 0.9 * slot 3 + slot 5,
    slot 0 := slot 0 - slot 6 * slot 2,
    slot 1 := slot 1 - slot 6 * slot 3,
  ],
  dataParallelInitial = [0.5, -0.25],
  dataParallelInitialState = [0, 0],
  dataParallelRate = 0.125,
  dataParallelSamples = [[[1, 2, 3]], [[2, 1, 0.5], [1, 1, 1]], [[0.5, 3, 2]], [], [[1, 0, 1]], [], []],
}

value run : Deployment = DeploymentOf {
  deploymentLearner = learner,
  deploymentOwners = 7,
  deploymentTopology = DataParallelHierarchy { dataParallelFanout = 2 },
  deploymentPartitioning = DataParallelPartitioned {
    partitionOptimizerState = true,
    partitionParameters = false,
    partitionGradients = true,
    partitionWordsPerCoordinate = 1,
    partitionSharedState = [],
  },
  deploymentRoles = [
    RoleOf { roleName = "coordinator", roleOwners = [0] },
    RoleOf { roleName = "worker", roleOwners = [1 .. 7] },
  ],
  deploymentPlacement = [TargetX86_64, TargetAArch64, TargetX86_64, TargetAArch64,
                         TargetX86_64, TargetAArch64, TargetX86_64],
  deploymentUpdates = 3,
  deploymentContract = binary64Exact,
  deploymentCheckpoint = CheckpointNever,
}
"""


@pytest.fixture(scope="module")
def good(tmp_path_factory) -> str:
    path = tmp_path_factory.mktemp("plan") / "momentum7.alpha"
    path.write_text(GOOD)
    return str(path)


def invoke(*args):
    return CliRunner().invoke(main, ["plan", *args])


def test_text_lists_tree_phases_protocols_and_bytes(good):
    res = invoke(good)
    assert res.exit_code == 0, res.output
    p = plan_spec(good)
    lines = res.output.splitlines()
    assert lines[0] == f"plan run: 7 owners, hierarchy 2, protocol {p.protocol_hex}"
    assert "  b0 at owner 1 = c1 + c3" in lines and "  b5 at owner 0 = b2 + b4" in lines
    assert "  2: 1 -> 0  b1 into b2" in lines
    assert "reductions: " + ", ".join(f"CombineDeliverTo {t}" for t in range(7)) in lines
    assert ("  owner 4 (worker, x86_64): persistent 16 B (parameters 16, state 0), peak "
            f"{p.owners[4].peak_bytes} B (replica 0, registers {p.owners[4].bytes.registers}, "
            f"scratch {p.owners[4].bytes.scratch}); sends 9 words per update") in lines
    # owner 4 sends its parent 1 its slices to owners 0 and 1 (a sum and the count each), the
    # count alone to owners 2 .. 6, and its offer of no coordinates: 2 + 2 + 5 + 0 words
    assert p.owners[0].persistent_bytes == 8 * (2 + 1) and p.owners[1].persistent_bytes == 8 * (2 + 1)


def test_json_has_the_documented_keys_and_the_same_protocols(good):
    res = invoke(good, "--json")
    assert res.exit_code == 0, res.output
    data = json.loads(res.output)
    assert sorted(data) == ["combine_placement", "contract", "deliveries", "deployment", "diagnostics",
                            "format", "learner", "ok", "owners", "partitioning", "per_owner", "protocol",
                            "reduce", "refusals", "replicate", "sample_tree", "shard_maps",
                            "suppressed", "suppressed_codes", "topology", "tree"]
    assert (data["ok"], data["diagnostics"], data["refusals"]) == (True, [], [])
    assert data["sample_tree"] is None  # a hierarchy: the tree over owners is the combine
    p = plan_spec(good)
    assert data["format"] == "alphac-plan-2" and data["protocol"] == p.protocol_hex
    assert data["tree"]["leaf_order"] == [0, 1, 3, 4, 2, 5, 6]
    assert data["tree"]["nodes"][-1] == {"id": 12, "name": "b5", "kind": "branch", "owner": 0,
                                         "left": 6, "right": 11}
    assert data["reduce"][0] == {"step": 0, "sender": 3, "receiver": 1, "value": "c3", "branch": 0}
    for owner, row in zip(p.owners, data["per_owner"]):
        assert [tuple(op[key] for key in ("kind", "peer", "dst", "a", "b")) for op in row["update_ops"]] == [
            (op.kind, op.peer, op.dst, op.a, op.b) for op in owner.protocol.update_ops]
        assert row["persistent_bytes"] == owner.persistent_bytes
    assert data["contract"]["order_digest"] == p.contract.order_digest
    assert [m["field"] for m in data["shard_maps"]] == ["parameters", "state"]


def test_dot_draws_every_node_and_edge(good):
    res = invoke(good, "--dot")
    assert res.exit_code == 0, res.output
    out = res.output
    assert out.startswith('digraph "run" {') and out.rstrip().endswith("}")
    assert out.count("shape=box") == 7 and out.count("shape=ellipse") == 6
    assert out.count("->") == 12 and out.count("style=bold") == 6


def test_a_refusal_prints_located_diagnostics_and_exits_1():
    res = invoke(str(ERRORS / "combine-branch-owner.alpha"))
    assert res.exit_code == 1
    assert "error[combine-branch-owner]: branch combines at owner 1" in res.output
    assert "Traceback" not in res.output


def test_a_missing_file_is_one_line_not_a_traceback(tmp_path):
    res = invoke(str(tmp_path / "absent.alpha"))
    assert res.exit_code == 1 and "Traceback" not in res.output and "error[" in res.output


def _plan_codes() -> list[str]:
    return sorted(c for c in PLAN if c not in API_ONLY)


@pytest.mark.parametrize("code", _plan_codes())
def test_each_refusal_fires_on_its_bad_spec_and_no_other(code):
    path = ERRORS / f"{code}.alpha"
    assert path.read_text().startswith("-- stage: plan\n")
    with pytest.raises(CompileError) as err:
        planned(str(path.relative_to(ROOT)) if Path.cwd() == ROOT else str(path))
    assert [d.code for d in err.value.diagnostics] == [code]
    d = err.value.diagnostics[0]
    assert d.span.line > 0 and d.notes


def test_rendered_refusals_match_their_golden_files(monkeypatch):
    monkeypatch.chdir(ROOT)
    for code in _plan_codes():
        rel = f"tests/errors/{code}.alpha"
        with pytest.raises(CompileError) as err:
            planned(rel)
        cache = SourceCache()
        cache.add(rel, (ROOT / rel).read_text())
        got = "\n".join(d.render(cache) for d in err.value.diagnostics) + "\n"
        assert got == (ROOT / f"tests/errors/{code}.expected").read_text(), code


def test_every_bad_spec_of_the_planner_is_accounted_for():
    stems = {p.stem for p in ERRORS.glob("*.alpha")}
    assert set(_plan_codes()) <= stems
    assert API_ONLY <= set(PLAN)


def test_json_refusal_lists_every_diagnostic():
    res = invoke(str(ERRORS / "combine-leaf-order.alpha"), "--json")
    assert res.exit_code == 1
    data = json.loads(res.stdout)
    assert data["ok"] is False
    assert [d["code"] for d in data["diagnostics"]] == ["combine-leaf-order"]
    assert data["diagnostics"][0]["notes"] == ["leaf 2 is owner 3, member 2 is owner 2"]


def test_renderers_cover_a_single_owner_and_a_partitioned_plan():
    from alphac.ir.nodes import Hierarchy
    from alphac.plan import plan
    from alphac.plan.render import plan_dot, plan_json, plan_text
    from test_plan_support import adam_partitioning, deployment

    one = plan(deployment(1))
    text = plan_text(one).splitlines()
    assert "  c0 (a single leaf)" in text and "reduce phase (0 transfers):" in text
    assert plan_dot(one).count("shape=box") == 1
    part = plan(deployment(5, Hierarchy(2), k=3, kind="adam", partitioning=adam_partitioning(3)))
    data = json.loads(json.dumps(plan_json(part)))
    assert [d["target"] for d in data["deliveries"]] == [0, 1, 2, 3, 4]
    kinds = {op["kind"] for row in data["per_owner"] for op in row["update_ops"]}
    assert kinds == {"offer", "send", "recv", "select", "replica-install", "local", "replica-release",
                     "slice", "recv-add-right", "update-owned"}
    assert "    owner 1 host owner: 1" in plan_text(part).splitlines()


def test_json_and_dot_together_are_a_usage_error(good):
    res = invoke(good, "--json", "--dot")
    assert res.exit_code == 2
    assert res.stderr == "alphac: error[usage]: --json and --dot exclude each other\n"
    assert res.stdout == ""
