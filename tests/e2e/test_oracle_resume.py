"""`alphac oracle --resume`: the continuation from a checkpoint's words and version.

Resuming on the same deployment gives the uninterrupted run's words bit for bit; on
another owner count and tree (a new contract) the words of evaluating the new deployment
from the checkpoint's state."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from alphac import driver
from alphac.commands import main
from alphac.ir import nodes as ir
from alphac.oracle import Refusal, evaluate, start_of

ROOT = Path(__file__).resolve().parents[2]
CKPTS = ROOT / "tests" / "errors" / "checkpoints"
SPEC = CKPTS / "lsq-star.alpha"
FIXTURE = CKPTS / "lsq-star-v2"
sys.path.insert(0, str(ROOT / "scripts"))
import make_checkpoint  # noqa: E402

THREE_HIERARCHY = (SPEC.read_text()
                   .replace("deploymentOwners = 4", "deploymentOwners = 3")
                   .replace("[[0.5, 3, 2], [1, 0, 1], [2, 2, 1]],\n    [],",
                            "[[0.5, 3, 2], [1, 0, 1], [2, 2, 1]],")
                   .replace("roleOwners = [1 .. 4]", "roleOwners = [1 .. 3]")
                   .replace("TargetX86_64, TargetAArch64, TargetX86_64, TargetAArch64",
                            "TargetX86_64, TargetAArch64, TargetX86_64")
                   .replace("DataParallelStar", "DataParallelHierarchy { dataParallelFanout = 1 }"))


def oracle_json(*args: str) -> dict:
    out = CliRunner().invoke(main, ["oracle", *args, "--json"])
    assert out.exit_code == 0, out.output
    return json.loads(out.stdout)


def test_resuming_at_2_and_running_to_5_is_the_uninterrupted_run():
    dep = driver.deployment(str(SPEC))
    whole = evaluate(dep)
    start = start_of(FIXTURE, dep.learner)
    assert start.version == 2
    resumed = evaluate(dep, start=start)
    assert (resumed.rounds, resumed.version, resumed.start) == (3, 5, 2)
    assert resumed.params == whole.params and resumed.state == whole.state
    assert [o.digest for o in resumed.owners] == [o.digest for o in whole.owners]
    assert {o.version for o in resumed.owners} == {5}
    via_driver = driver.oracle(driver.resumed(dep, FIXTURE))
    assert via_driver.params == whole.params and via_driver.state == whole.state


def test_the_command_resumes_and_reports_where_from():
    whole = oracle_json(str(SPEC))
    got = oracle_json(str(SPEC), "--resume", str(FIXTURE))
    assert got["rounds"] == 3 and got["resumed_from"] == {"path": str(FIXTURE), "version": 2,
                                                          "contract": "same", "tag": "none"}
    assert [o["version"] for o in got["owners"]] == [5] * 4
    assert [(o["params"], o["state"], o["digest"]) for o in got["owners"]] == [
        (o["params"], o["state"], o["digest"]) for o in whole["owners"]]
    assert "resumed_from" not in whole
    assert got["protocol"] is not None and got["protocol"] != whole["protocol"]
    table = CliRunner().invoke(main, ["oracle", str(SPEC), "--resume", str(FIXTURE)])
    assert table.exit_code == 0
    assert table.stdout.splitlines()[0] == (
        f"oracle: run ({SPEC}) after 3 updates from version 2 of {FIXTURE} (same contract; untagged "
        "(written by an unkeyed run)), version 5")


def test_rounds_counts_the_updates_after_the_checkpoint():
    dep = driver.deployment(str(SPEC))
    got = oracle_json(str(SPEC), "--resume", str(FIXTURE), "--rounds", "1")
    want = evaluate(dep, rounds=3)
    assert got["rounds"] == 1 and got["owners"][0]["version"] == 3
    assert got["owners"][0]["params"] == [f"{w:016x}" for w in want.params]
    assert oracle_json(str(SPEC), "--resume", str(FIXTURE), "--rounds", "0")["owners"][0]["version"] == 2


def test_a_declared_resume_resumes_without_the_flag(tmp_path):
    spec = tmp_path / "r.alpha"
    shutil.copytree(FIXTURE, tmp_path / "ckpt-2")
    spec.write_text(SPEC.read_text() + '\nvalue fromStar : DeploymentResume = ResumeOf {\n'
                    '  resumeDeployment = run,\n  resumeCheckpoint = "ckpt-2",\n'
                    '  resumeContract = ResumeSameContract,\n}\n')
    got = oracle_json(str(spec))
    assert got["resumed_from"] == {"path": str(tmp_path / "ckpt-2"), "version": 2, "contract": "same",
                                   "tag": "none"}
    assert [o["params"] for o in got["owners"]] == [o["params"] for o in oracle_json(str(SPEC))["owners"]]
    new = oracle_json(str(spec), "--new-contract")
    assert new["resumed_from"]["contract"] == "new"
    assert new["protocol"] != got["protocol"]


def test_a_new_contract_on_another_owner_count_and_tree(tmp_path):
    """Three owners on a chain (fan-out 1) from the four-owner star's checkpoint: the words
    are those of the new deployment started from the checkpoint's words, run 3 updates."""
    spec = tmp_path / "three.alpha"
    spec.write_text(THREE_HIERARCHY)
    dep = driver.deployment(str(spec))
    assert dep.owners == 3 and isinstance(dep.topology, ir.Hierarchy)
    got = driver.oracle(driver.resumed(dep, FIXTURE, new_contract=True))
    start = start_of(FIXTURE)
    fresh = dataclasses.replace(dep, learner=dataclasses.replace(
        dep.learner, initial=ir.Words(tuple(int(w) for w in start.params)),
        initial_state=ir.Words(tuple(int(w) for w in start.state))))
    want = evaluate(fresh, rounds=3)
    assert (got.params, got.state) == (want.params, want.state)
    assert got.version == 5 and [o.version for o in got.owners] == [5, 5, 5]
    # and it is not the four-owner star's continuation
    star = evaluate(driver.deployment(str(SPEC)))
    assert (got.params, got.state) != (star.params, star.state)
    out = oracle_json(str(spec), "--resume", str(FIXTURE), "--new-contract")
    assert out["resumed_from"]["contract"] == "new" and len(out["owners"]) == 3


def test_a_partitioned_checkpoint_restores_onto_replicated_owners(tmp_path):
    part = ROOT / "specs" / "lsq_momentum_partitioned_star.alpha"
    d = tmp_path / "ckpt-2"
    make_checkpoint.make(part, 2, d)
    rep = driver.deployment(str(ROOT / "specs" / "lsq_momentum_star.alpha"))
    got = driver.oracle(driver.resumed(rep, d, new_contract=True))
    assert (got.params, got.state) == (evaluate(rep).params, evaluate(rep).state)
    pdep = driver.deployment(str(part))
    again = driver.oracle(driver.resumed(pdep, d))
    whole = evaluate(pdep)
    assert [o.params for o in again.owners] == [o.params for o in whole.owners]


def _refused(args) -> str:
    out = CliRunner().invoke(main, ["oracle", *args])
    assert out.exit_code == 1 and out.stdout == ""
    lines = out.stderr.splitlines()
    assert len(lines) == 1, out.stderr
    return lines[0]


def test_a_checkpoint_that_does_not_verify_refuses(tmp_path):
    d = tmp_path / "ckpt-2"
    shutil.copytree(FIXTURE, d)
    raw = bytearray((d / "shard-0.bin").read_bytes())
    raw[-1] ^= 1
    (d / "shard-0.bin").write_bytes(bytes(raw))
    assert _refused([str(SPEC), "--resume", str(d)]).startswith("refused: checkpoint-hash-mismatch: ")
    (d / "shard-0.bin").unlink()
    assert _refused([str(SPEC), "--resume", str(d)]).startswith("refused: checkpoint-shard-missing: ")
    assert _refused([str(SPEC), "--resume", str(tmp_path / "nope")]).startswith(
        "refused: checkpoint-manifest: ")


def test_a_checkpoint_of_another_learner_refuses(tmp_path):
    plain = ROOT / "tests" / "errors" / "checkpoint-learner-mismatch.alpha"  # m = 0, k = 2
    line = _refused([str(plain), "--resume", str(FIXTURE), "--new-contract"])
    assert line.startswith("refused: checkpoint-learner-mismatch: ") and "2, 0, 3" in line
    with pytest.raises(Refusal) as info:
        evaluate(driver.deployment(str(SPEC)), start=((1, 2, 3), (0, 0), 2))
    assert info.value.code == "checkpoint-learner-mismatch"
    other = tmp_path / "other.alpha"  # same shapes, another update program
    other.write_text(SPEC.read_text().replace("slot 2 := 0.9 * slot 2", "slot 2 := 0.5 * slot 2"))
    line = _refused([str(other), "--resume", str(FIXTURE), "--new-contract"])
    assert line.startswith("refused: checkpoint-learner-mismatch: ")


def test_new_contract_without_a_checkpoint_is_a_usage_error():
    assert _refused([str(SPEC), "--new-contract"]).startswith("refused: usage: ")


def test_the_command_in_a_process_of_its_own():
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    out = subprocess.run([sys.executable, "-m", "alphac", "oracle", str(SPEC), "--resume", str(FIXTURE),
                          "--json"], capture_output=True, text=True, env=env, cwd=ROOT, check=True)
    assert json.loads(out.stdout)["resumed_from"]["version"] == 2
