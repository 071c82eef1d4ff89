"""When `alphac launch` reuses an executable and when it rebuilds it."""

import os
import shutil
import time
from dataclasses import replace
from pathlib import Path

from alphac.testing import session
from alphac import driver
from alphac.launch.cache import compiler_digest, deps_path, ensure_built, record_inputs, stale_reason
from alphac.targets.elf import read_metadata

SPECS = Path(__file__).resolve().parents[2] / "specs"

SPEC = f"{SPECS}/lsq_plain_star.alpha"


def _fresh_copy(tmp_path):
    dep = session.deployment(SPEC)
    plan = session.plan("lsq_plain_star", dep)
    exe = session.built("lsq_plain_star", dep)[("coordinator", "x86_64")]
    copy = tmp_path / exe.name
    shutil.copy2(exe, copy)
    shutil.copy2(deps_path(exe), deps_path(copy))
    return plan, copy


def test_metadata_names_protocol_role_and_target(tmp_path):
    plan, exe = _fresh_copy(tmp_path)
    meta = read_metadata(exe)
    assert meta["protocol"] == plan.protocol_hex
    assert (meta["role"], meta["target"], meta["owners"]) == ("coordinator", "x86_64", 4)


def test_the_record_of_inputs_names_the_compiler_and_every_file_read(tmp_path):
    plan, exe = _fresh_copy(tmp_path)
    lines = deps_path(exe).read_text().splitlines()
    assert lines[:2] == ["alphac-deps 1", f"compiler {compiler_digest()}"]
    files = [line.split(" ", 2)[2] for line in lines[2:]]
    assert files == list(driver.build_order(plan).inputs)
    assert str(Path(SPEC).resolve()) in files and str((SPECS / "Gates" / "Lsq.alpha").resolve()) in files
    assert all(not f.endswith("lsq_plain_hierarchy.alpha") for f in files)


def test_reuse_and_each_reason_to_rebuild(tmp_path):
    plan, exe = _fresh_copy(tmp_path)
    order = driver.build_order(plan, "host", [("coordinator", "x86_64")])  # what a launch builds
    (wanted,), inputs = order.wanted, order.inputs
    host = wanted.cpu
    args = (plan.protocol_hex, wanted, inputs)
    assert stale_reason(exe, *args) is None
    os.utime(exe, (1, 1))  # the time of a file is not its content
    assert stale_reason(exe, *args) is None
    assert stale_reason(exe, "0" * 16, wanted, inputs).startswith("protocol ")
    assert stale_reason(exe, plan.protocol_hex, replace(wanted, role="worker"), inputs) == \
        "built for another role or target"
    (v3,) = driver.build_order(plan, "x86-64-v3", [("coordinator", "x86_64")]).wanted
    assert stale_reason(exe, plan.protocol_hex, v3, inputs) == (
        f"built for CPU level host (LLVM cpu {host['llvm_cpu']}), not x86-64-v3 (LLVM cpu x86-64-v3)")
    other = "znver4" if host["llvm_cpu"] != "znver4" else "skylake-avx512"
    elsewhere = replace(wanted, cpu=dict(host, llvm_cpu=other))  # a host build from another machine
    assert stale_reason(exe, plan.protocol_hex, elsewhere, inputs) == (
        f"built for CPU level host (LLVM cpu {host['llvm_cpu']}), not host (LLVM cpu {other})")
    assert stale_reason(tmp_path / "nothing", *args) == "missing"
    (tmp_path / "text").write_text("not an executable")
    assert stale_reason(tmp_path / "text", *args) == "no .alphac metadata"
    data = tmp_path / "samples.npy"
    data.write_bytes(b"")
    more = (plan.protocol_hex, wanted, (*inputs, str(data.resolve())))
    assert stale_reason(exe, *more) == f"{data.resolve()} is a new input"
    record_inputs(exe, more[2])
    assert stale_reason(exe, *more) is None
    data.write_bytes(b"x")  # a data file the executable embeds, edited after the build
    assert stale_reason(exe, *more) == f"{data.resolve()} changed"
    data.unlink()
    assert stale_reason(exe, *more).startswith("cannot read its input ")
    deps_path(exe).write_text("alphac-deps 1\ncompiler " + "0" * 64 + "\n")
    assert stale_reason(exe, *args) == "the compiler changed"
    deps_path(exe).unlink()
    assert stale_reason(exe, *args) == f"no record of its inputs ({exe.name}.deps)"


def test_an_unrelated_file_beside_the_spec_does_not_make_it_stale(tmp_path):
    shutil.copytree(SPECS / "Gates", tmp_path / "Gates")
    spec = tmp_path / "star.alpha"
    spec.write_text(Path(SPEC).read_text())
    plan, exe = _fresh_copy(tmp_path)
    here = driver.plan(driver.deployment(str(spec)))
    order = driver.build_order(here, "host", [("coordinator", "x86_64")])
    record_inputs(exe, order.inputs)
    args = (plan.protocol_hex, order.wanted[0], order.inputs)
    (tmp_path / "other.alpha").write_text("value k : Nat = 1\n")
    (tmp_path / "Gates" / "Unused.alpha").write_text("value j : Nat = 1\n")
    assert stale_reason(exe, *args) is None
    lsq = tmp_path / "Gates" / "Lsq.alpha"
    lsq.write_text(lsq.read_text() + "\n-- an edit of an imported module\n")
    assert stale_reason(exe, *args) == f"{lsq.resolve()} changed"


def test_data_files_are_the_loaded_sources(tmp_path):
    import numpy as np

    from alphac.check import load_deployment

    rows = np.arange(12, dtype=np.float64).reshape(4, 3) / 7.0
    np.save(tmp_path / "rows.npy", rows)
    dep = session.deployment(SPEC)
    plan = session.plan("lsq_plain_star", dep)
    assert all(f.endswith(".alpha") for f in driver.build_order(plan).inputs)  # inline samples and words
    spec = tmp_path / "loaded.alpha"
    spec.write_text(
        "import Learning.DataParallel\nimport Learning.Deployment\n"
        "value learner : (family DataParallelSystem 7 5) = DataParallelSystemOf {\n"
        "  dataParallelParameterCount = 2, dataParallelSampleWidth = 3,\n"
        "  dataParallelContribution = [slot 5 := slot 2, slot 6 := slot 3],\n"
        "  dataParallelUpdate = [slot 0 := slot 0 - slot 4 * slot 2, slot 1 := slot 1 - slot 4 * slot 3],\n"
        "  dataParallelInitial = [0.5, 0.25], dataParallelInitialState = [],\n"
        "  dataParallelRate = 0.125,\n"
        "  dataParallelSamples = load \"rows.npy\" shares [1, 3],\n"
        "}\n"
        "value run : Deployment = DeploymentOf {\n"
        "  deploymentLearner = learner, deploymentOwners = 2, deploymentTopology = DataParallelStar,\n"
        "  deploymentPartitioning = DataParallelReplicated,\n"
        "  deploymentRoles = [RoleOf { roleName = \"coordinator\", roleOwners = [0] },\n"
        "                     RoleOf { roleName = \"worker\", roleOwners = [1] }],\n"
        "  deploymentPlacement = [TargetX86_64, TargetX86_64], deploymentUpdates = 1,\n"
        "  deploymentContract = binary64Exact, deploymentCheckpoint = CheckpointNever,\n"
        "}\n")
    files = driver.build_order(driver.plan(load_deployment(str(spec)))).inputs
    assert [f for f in files if not f.endswith(".alpha")] == [str((tmp_path / "rows.npy").resolve())]


def test_ensure_built_rebuilds_only_what_is_stale(tmp_path):
    plan, exe = _fresh_copy(tmp_path)
    before = exe.stat().st_mtime_ns
    logs = []
    exes = ensure_built(plan, tmp_path, log=logs.append)
    assert exes[("coordinator", "x86_64")] == exe
    assert exe.stat().st_mtime_ns == before
    assert sorted(logs) == ["build lsq_plain_star-worker-aarch64: missing",
                            "build lsq_plain_star-worker-x86_64-host: missing"]
    # a rebuild gives the same bytes (reproducible builds)
    ref = session.built("lsq_plain_star", session.deployment(SPEC))
    for key, path in exes.items():
        assert path.read_bytes() == ref[key].read_bytes(), key
