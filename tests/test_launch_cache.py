"""When `alphac launch` reuses an executable and when it rebuilds it."""

import os
import shutil
import time
from pathlib import Path

from alphac.launch import session
from alphac.launch.cache import cpu_wanted, stale_reason
from alphac.targets.elf import read_metadata
from alphac.launch.launcher import ensure_built

SPECS = Path(__file__).resolve().parents[1] / "specs"

SPEC = f"{SPECS}/lsq_plain_star.alpha"


def _fresh_copy(tmp_path):
    dep = session.deployment(SPEC)
    plan = session.plan("lsq_plain_star", dep)
    exe = session.built("lsq_plain_star", dep)[("coordinator", "x86_64")]
    copy = tmp_path / exe.name
    shutil.copy2(exe, copy)
    ahead = time.time() + 3600  # newer than the spec and every compiler module
    os.utime(copy, (ahead, ahead))
    return plan, copy


def test_metadata_names_protocol_role_and_target(tmp_path):
    plan, exe = _fresh_copy(tmp_path)
    meta = read_metadata(exe)
    assert meta["protocol"] == plan.protocol_hex
    assert (meta["role"], meta["target"], meta["owners"]) == ("coordinator", "x86_64", 4)


def test_reuse_and_each_reason_to_rebuild(tmp_path):
    plan, exe = _fresh_copy(tmp_path)
    host = cpu_wanted("x86_64", "host")  # what a launch builds for
    args = (plan.protocol_hex, "coordinator", "x86_64", host, SPEC)
    assert stale_reason(exe, *args) is None
    assert stale_reason(exe, "0" * 16, "coordinator", "x86_64", host, SPEC).startswith("protocol ")
    assert stale_reason(exe, plan.protocol_hex, "worker", "x86_64", host, SPEC) == \
        "built for another role or target"
    assert stale_reason(exe, plan.protocol_hex, "coordinator", "x86_64",
                        cpu_wanted("x86_64", "x86-64-v3"), SPEC) == (
        f"built for CPU level host (LLVM cpu {host['llvm_cpu']}), not x86-64-v3 (LLVM cpu x86-64-v3)")
    elsewhere = dict(host, llvm_cpu="znver4")  # a host build from another machine
    assert stale_reason(exe, plan.protocol_hex, "coordinator", "x86_64", elsewhere, SPEC) == (
        f"built for CPU level host (LLVM cpu {host['llvm_cpu']}), not host (LLVM cpu znver4)")
    assert stale_reason(tmp_path / "nothing", *args) == "missing"
    (tmp_path / "text").write_text("not an executable")
    assert stale_reason(tmp_path / "text", *args) == "no .alphac metadata"
    data = tmp_path / "samples.npy"
    data.write_bytes(b"")
    assert stale_reason(exe, *args, (str(data),)) is None
    later = time.time() + 7200  # a data file the executable embeds, edited after the build
    os.utime(data, (later, later))
    assert stale_reason(exe, *args, (str(data),)) == f"older than its data file {data}"
    assert stale_reason(exe, *args, (str(tmp_path / "gone.npy"),)) == \
        f"cannot read its data file {tmp_path / 'gone.npy'}"
    os.utime(exe, (1, 1))
    assert stale_reason(exe, *args) == "older than the spec or the compiler"


def test_data_files_are_the_loaded_sources(tmp_path):
    import numpy as np

    from alphac.check import load_deployment

    rows = np.arange(12, dtype=np.float64).reshape(4, 3) / 7.0
    np.save(tmp_path / "rows.npy", rows)
    from alphac.launch.cache import data_files

    dep = session.deployment(SPEC)
    assert data_files(dep) == ()  # inline samples and words
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
    (src,) = data_files(load_deployment(str(spec)))
    assert Path(src).resolve() == (tmp_path / "rows.npy").resolve()


def test_ensure_built_rebuilds_only_what_is_stale(tmp_path):
    plan, exe = _fresh_copy(tmp_path)
    before = exe.stat().st_mtime_ns
    logs = []
    exes = ensure_built(plan, tmp_path, log=logs.append)
    assert exes[("coordinator", "x86_64")] == exe
    assert exe.stat().st_mtime_ns == before
    assert sorted(logs) == ["build lsq_plain_star-worker-aarch64: missing",
                            "build lsq_plain_star-worker-x86_64: missing"]
    # a rebuild gives the same bytes (reproducible builds)
    ref = session.built("lsq_plain_star", session.deployment(SPEC))
    for key, path in exes.items():
        assert path.read_bytes() == ref[key].read_bytes(), key
