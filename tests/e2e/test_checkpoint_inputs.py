"""A checkpoint names the inputs it was taken on (docs/checkpoints.md, the `inputs` line): the
sha256 of the samples and the rate. Continuing its contract on other samples or another rate
is refused `checkpoint-learner-mismatch` by every reader — the executables' restore, the
oracle, `alphac check` of a declared resume — and goes on under a new contract. A launch
never reports `match` for a run the oracle did not evaluate on the owners' inputs."""

from __future__ import annotations

import dataclasses
import json
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from alphac import driver
from alphac.checkpoint import read_key, read_manifest, render
from alphac.checkpoint.manifest import manifest_tag
from alphac.commands import main
from alphac.image.ckpt import inputs_line, samples_sha
from alphac.launch.checkpoints import changed_since, checkpoint_key_file, resume_start
from alphac.launch.ports import free_ports
from alphac.launch.report import unmatched

ROOT = Path(__file__).resolve().parents[2]
CKPTS = ROOT / "tests" / "errors" / "checkpoints"
SPEC = CKPTS / "lsq-star.alpha"
FIXTURE = CKPTS / "lsq-star-v2"
BASE = SPEC.read_text()
DEP = driver.deployment(str(SPEC))
RATE = "dataParallelRate = 0.125"
SAMPLE = "[[1, 2, 3]],"


def other_rate(dep=DEP):
    return dataclasses.replace(dep, learner=dataclasses.replace(dep.learner, rate=0x3FB0000000000000))  # 0.0625


def other_samples(dep=DEP):
    words = np.array(dep.learner.samples.words, dtype=np.uint64)
    words[0, 0] ^= 1  # one bit of one sample word
    return dataclasses.replace(dep, learner=dataclasses.replace(
        dep.learner, samples=dataclasses.replace(dep.learner.samples, words=words)))


def redealt(dep=DEP):
    """The same six sample rows dealt out 2, 2, 1, 1 instead of 1, 2, 3, 0."""
    return dataclasses.replace(dep, learner=dataclasses.replace(
        dep.learner, samples=dataclasses.replace(dep.learner.samples, shares=(2, 2, 1, 1))))


def test_the_inputs_line_names_the_samples_and_the_rate():
    line = read_manifest(FIXTURE).inputs
    assert line == inputs_line(DEP.learner) == f"samples {samples_sha(DEP.learner.samples)} rate 3fc0000000000000"
    assert inputs_line(other_rate().learner) == line.replace("rate 3fc0000000000000", "rate 3fb0000000000000")
    assert inputs_line(other_samples().learner) != line
    # how the rows are dealt to owners is the contract's to judge (its order digest), not the inputs'
    assert inputs_line(redealt().learner) == line


# ----------------------------------------------------------------------------- the executables

@pytest.fixture(scope="module")
def exes(tmp_path_factory):
    """Owner 0's executable of the fixture's deployment, of it with another rate and of it
    with another sample word."""
    out = tmp_path_factory.mktemp("inputs-exes")
    return {name: driver.build(driver.plan(dep), "coordinator", "x86_64", out / name)
            for name, dep in (("same", DEP), ("rate", other_rate()), ("samples", other_samples()))}


def restore(exe: Path, ckpt: Path, tmp_path: Path, *extra: str) -> str:
    """Owner 0 alone restoring `ckpt`: its refusal (a restore that passes goes on to connect
    and is refused connect-timeout)."""
    peers = tmp_path / "peers"
    ports = free_ports(4)  # never fixed ports: another test may hold one
    peers.write_text("".join(f"{o} 127.0.0.1:{port}\n" for o, port in enumerate(ports)))
    out = tmp_path / "o0"
    for stale in (out, Path(f"{out}.tmp")):
        stale.unlink(missing_ok=True)
    done = subprocess.run([str(exe), "--owner", "0", "--peers", str(peers), "--out", str(out), "--insecure",
                           "--resume", str(ckpt), "--timeout-ms", "300", *extra], capture_output=True, text=True,
                          timeout=10)
    assert done.returncode == 1, (done.returncode, done.stderr)
    return done.stderr.strip()


@pytest.mark.parametrize("name,theirs", [("rate", "3fb0000000000000"), ("samples", "")])
def test_the_restore_refuses_other_inputs_on_the_same_contract(exes, tmp_path, name, theirs):
    err = restore(exes[name], FIXTURE, tmp_path)
    line = read_manifest(FIXTURE).inputs
    assert err.startswith(f"refused: checkpoint-learner-mismatch: {FIXTURE / 'manifest.txt'} was taken on "
                          f"inputs '{line}', this executable reads '"), err
    assert err.endswith("': resume with --new-contract to go on from its state with these"), err
    assert theirs in err


@pytest.mark.parametrize("name", ["same", "rate", "samples"])
def test_a_new_contract_goes_on_from_the_state_with_other_inputs(exes, tmp_path, name):
    extra = () if name == "same" else ("--new-contract",)
    assert restore(exes[name], FIXTURE, tmp_path, *extra).startswith("refused: connect-timeout: ")


# ----------------------------------------------------------------------------- the oracle

@pytest.mark.parametrize("make", [other_rate, other_samples])
def test_the_oracle_refuses_other_inputs_on_the_same_contract(make):
    with pytest.raises(driver.Refusal) as err:
        driver.oracle(driver.resumed(make(), FIXTURE))
    assert err.value.code == "checkpoint-learner-mismatch"
    assert err.value.detail == (f"{FIXTURE} was taken on inputs {inputs_line(DEP.learner)}; deployment run reads "
                                f"{inputs_line(make().learner)} (a new contract goes on from its state with these)")
    new = driver.oracle(driver.resumed(make(), FIXTURE, new_contract=True))
    assert new.start == 2 and new.version == 5


def test_the_oracle_command_refuses_another_rate(tmp_path):
    spec = tmp_path / "rate.alpha"
    spec.write_text(BASE.replace(RATE, "dataParallelRate = 0.0625"))
    out = CliRunner().invoke(main, ["oracle", str(spec), "--resume", str(FIXTURE)])
    assert out.exit_code == 1
    assert out.stderr.startswith("refused: checkpoint-learner-mismatch: ") and "rate 3fc0000000000000" in out.stderr


# ----------------------------------------------------------------------------- alphac check

def _declared(tmp_path: Path, base: str, mode: str) -> str:
    shutil.copytree(FIXTURE, tmp_path / "ckpt-2", dirs_exist_ok=True)
    p = tmp_path / f"r-{mode}.alpha"
    p.write_text(base + f"\nvalue fromStar : DeploymentResume = ResumeOf {{\n  resumeDeployment = run,\n"
                        f"  resumeCheckpoint = \"ckpt-2\",\n  resumeContract = {mode},\n}}\n")
    return str(p)


def test_check_refuses_a_declared_resume_of_other_samples(tmp_path):
    path = _declared(tmp_path, BASE.replace(SAMPLE, "[[1, 2, 3.5]],"), "ResumeSameContract")
    result = driver.check(path)
    assert [d.code for d in result.diagnostics] == ["checkpoint-learner-mismatch"]
    d = result.diagnostics[0]
    assert d.message == (f"the checkpoint {tmp_path}/ckpt-2 was taken on other inputs than deployment run's "
                         "(ResumeSameContract)")
    assert d.notes[0] == f"the checkpoint's inputs: {read_manifest(FIXTURE).inputs} ({tmp_path}/ckpt-2/manifest.txt:5)"
    assert d.notes[-1] == "ResumeNewContract goes on from the checkpoint's state with these inputs"
    assert "samples: " in d.notes[2] and " in the checkpoint, " in d.notes[2]
    assert driver.check(_declared(tmp_path, BASE.replace(SAMPLE, "[[1, 2, 3.5]],"), "ResumeNewContract")).ok
    assert driver.check(_declared(tmp_path, BASE, "ResumeSameContract")).ok


# ----------------------------------------------------------------------------- launch

def tagged_copy(d: Path, key: bytes) -> Path:
    """A copy of the fixture whose root manifest is tagged under the run key `key`."""
    shutil.copytree(FIXTURE, d)
    m = read_manifest(d)
    (d / "manifest.txt").write_text(render(dataclasses.replace(m, auth=f"hmac-sha256 {manifest_tag(m, key)}")))
    return d


def test_a_launch_of_another_rate_refuses_and_does_not_match(tmp_path):
    spec = tmp_path / "rate.alpha"
    spec.write_text(BASE.replace(RATE, "dataParallelRate = 0.0625"))
    ckpt = tagged_copy(tmp_path / "ckpt-2", read_key(checkpoint_key_file()))
    out = CliRunner().invoke(main, ["launch", str(spec), "-o", str(tmp_path / "out"), "--resume", str(ckpt),
                                    "--json", "--quiet"])
    assert out.exit_code == 1, out.output
    doc = json.loads(out.stdout)
    assert doc["match"] is False and all(o["match"] is False for o in doc["owners"])
    assert doc["oracle_refusal"].startswith("checkpoint-learner-mismatch: ")
    assert all("exited 1: refused: checkpoint-learner-mismatch: " in o["error"] for o in doc["owners"]), doc["owners"]


def test_a_checkpoint_replaced_while_a_run_is_under_way_is_no_match(tmp_path):
    """The oracle evaluates from the words read before the owners start; the checkpoint is
    read again once they end, and a changed one makes every owner's row a mismatch."""
    d = tmp_path / "ckpt-2"
    shutil.copytree(FIXTURE, d)
    start = resume_start(d)
    assert changed_since(start) == ""
    text = (d / "manifest.txt").read_text()
    (d / "manifest.txt").write_text(text.replace("region parameters", "region  parameters"))
    why = changed_since(start)
    assert why.startswith(f"checkpoint-hash-mismatch: {d}/manifest.txt changed while the run was under way "
                          f"(sha256 {start.sha256[:16]} when the oracle read it, now unreadable "), why
    from alphac.launch.report import LaunchReport, OwnerRow

    report = LaunchReport("s", "run", 3, "0" * 16, (OwnerRow(0, "coordinator", "x86_64", 5, (1,), (2,), True),),
                          (), {}, None, tmp_path)
    assert report.match and not unmatched(report, why).match
    assert unmatched(report, why).failures == (why,) and unmatched(report, "") == report
