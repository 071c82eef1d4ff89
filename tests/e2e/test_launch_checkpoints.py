"""A launch's checkpoints belong to its run: the same checkpointing spec launched twice,
then resumed from `OUT/D/latest`, just works; an explicit directory holding a version the
run would write is refused once, before anything is built or started; clean removes the
pointer with the runs, and pruning keeps the run the pointer leads into."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from alphac.commands import main
from alphac.launch.runs import KEEP_RUNS, checkpoint_home, prune_runs, runs_of

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def spec(tmp_path) -> Path:
    """specs/lsq_adam_hierarchy_ckpt.alpha (checkpointDirectory "ckpt", every 2 of 5
    updates) with every owner on x86-64."""
    shutil.copytree(ROOT / "specs" / "Gates", tmp_path / "Gates")
    text = (ROOT / "specs" / "lsq_adam_hierarchy_ckpt.alpha").read_text(encoding="utf-8")
    path = tmp_path / "lsq_adam_hierarchy_ckpt.alpha"
    path.write_text(text.replace("TargetAArch64", "TargetX86_64"), encoding="utf-8")
    return path


def launch(*args: str):
    return CliRunner().invoke(main, ["launch", *args, "--quiet", "--json"])


def test_a_checkpointing_spec_launched_twice_then_resumed_just_works(spec, tmp_path):
    out = tmp_path / "out"
    docs = []
    for _ in range(2):
        got = launch(str(spec), "-o", str(out))
        assert got.exit_code == 0, got.output
        docs.append(json.loads(got.stdout))
    for doc in docs:
        run_dir = Path(doc["run_dir"])
        assert doc["checkpoint_dir"] == str(run_dir / "ckpt")
        assert doc["checkpoints"] == [2, 4]
        assert doc["latest"] == str(out / "ckpt" / "latest")
    # the pointer names the second run's newest checkpoint, by a relative link
    latest = out / "ckpt" / "latest"
    assert os.readlink(latest) == f"../runs/{Path(docs[1]['run_dir']).name}/ckpt/ckpt-4"
    assert not (spec.parent / "ckpt").exists()  # nothing beside the spec

    got = launch(str(spec), "-o", str(out), "--resume", str(latest), "--rounds", "8")
    assert got.exit_code == 0, got.output
    doc = json.loads(got.stdout)
    assert doc["match"] is True
    # the oracle's keys: the updates after the checkpoint, and where it resumed
    assert (doc["rounds"], doc["resumed_from"]) == (4, {"path": str(latest), "version": 4,
                                                        "contract": "same", "tag": "checked"})
    assert doc["checkpoints"] == [6, 8]
    assert os.readlink(latest).endswith("/ckpt/ckpt-8")


def test_an_explicit_directory_holding_a_version_is_refused_before_anything_starts(spec, tmp_path):
    ck = tmp_path / "mine"
    (ck / "ckpt-4").mkdir(parents=True)
    out = tmp_path / "out"
    got = CliRunner().invoke(main, ["launch", str(spec), "-o", str(out), "--checkpoint-dir", str(ck)])
    assert got.exit_code == 1
    assert got.stderr == (
        f"alphac: error[checkpoint-exists]: {ck / 'ckpt-4'} exists; checkpoints are never overwritten: "
        "give another --checkpoint-dir, or leave it out and the run checkpoints into its own run "
        "directory (OUT/runs/RUN/D)\n")
    assert not out.exists()  # nothing built, no run directory, no owner
    # a directory holding other versions only is fine: the run writes 2 and 4
    shutil.rmtree(ck / "ckpt-4")
    (ck / "ckpt-6").mkdir()
    got = launch(str(spec), "-o", str(out), "--checkpoint-dir", str(ck))
    assert got.exit_code == 0, got.output
    assert sorted(p.name for p in ck.iterdir()) == ["ckpt-2", "ckpt-4", "ckpt-6"]
    assert json.loads(got.stdout)["latest"] is None  # an explicit place has no pointer


def test_clean_removes_the_pointer_with_the_runs(spec, tmp_path):
    out = tmp_path / "out"
    assert launch(str(spec), "-o", str(out)).exit_code == 0
    (out / "notes.txt").write_text("mine")
    got = CliRunner().invoke(main, ["clean", "-o", str(out), "--runs"])
    assert got.exit_code == 0
    assert got.stdout.splitlines()[:2] == [f"removed {out / 'ckpt' / 'latest'}", f"removed {out / 'runs'}"]
    assert not (out / "ckpt").exists()
    assert (out / "notes.txt").read_text() == "mine"


def test_pruning_keeps_the_run_the_pointer_leads_into(tmp_path):
    from alphac.launch.runs import new_run_dir, point_latest

    first = new_run_dir(tmp_path, "s")
    (first / "ckpt" / "ckpt-2").mkdir(parents=True)
    assert point_latest(tmp_path, Path("ckpt"), first / "ckpt") == tmp_path / "ckpt" / "latest"
    os.utime(first, (1, 1))  # the oldest of all
    for _ in range(KEEP_RUNS + 2):
        new_run_dir(tmp_path, "s")
    prune_runs(tmp_path)
    assert first in runs_of(tmp_path) and len(runs_of(tmp_path)) == KEEP_RUNS + 1
    assert (tmp_path / "ckpt" / "latest").resolve() == (first / "ckpt" / "ckpt-2").resolve()


@pytest.mark.parametrize("declared,home", [("ckpt", Path("ckpt")), ("./a/b", Path("a/b")),
                                           ("/abs/ck", None)])
def test_the_run_s_checkpoint_directory_is_the_declared_one_inside_it(declared, home):
    assert checkpoint_home(declared) == home


@pytest.mark.parametrize("declared", ["../ck", "a/../../b", ".", ""])
def test_a_declared_directory_that_climbs_out_of_the_run_is_refused(declared):
    with pytest.raises(ValueError, match="does not name a directory inside the run directory"):
        checkpoint_home(declared)


def test_a_checkpoint_directory_for_a_deployment_that_never_checkpoints_is_a_usage_error(tmp_path):
    got = CliRunner().invoke(main, ["launch", str(ROOT / "specs" / "lsq_plain_star.alpha"), "-o",
                                    str(tmp_path / "out"), "--checkpoint-dir", str(tmp_path / "ck")])
    assert got.exit_code == 2
    assert got.stderr == (f"alphac: error[usage]: --checkpoint-dir {tmp_path / 'ck'}: deployment run never "
                          "checkpoints (CheckpointNever)\n")
