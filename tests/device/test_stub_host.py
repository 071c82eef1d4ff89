"""The host flow of SM86 executables through the stand-in driver (stub_libcuda.c: NOT a GPU;
its cuLaunchKernel runs the host-compiled twin of the same kernel IR): binding by UUID,
memory admission (also of two processes on one GPU), one upload and in-place updates
(exact copy counts), capture before checkpoints, CUresults as named refusals, the host
shadow's irrelevance, and SM86 owners among x86-64 and AArch64 owners equal to the oracle,
resumed across targets. Without a driver the executable refuses cuda-unavailable."""

from __future__ import annotations

import collections
import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from alphac.launch.launcher import launch
from alphac.launch.plan_run import run_plan
from alphac.launch.ports import free_ports
from alphac.launch.runner import write_peers
from alphac.plan.device import device_bytes

from support import DEMO, NAN_RATE, build_twins, built, stub_env

pytestmark = pytest.mark.skipif(shutil.which("ptxas") is None, reason="ptxas is not installed")

UPDATES = 5


def _setup(tmp_path, spec="demo.alpha", placement=DEMO, edits=()):
    dep, plan, exes = built(tmp_path, spec, placement, edits)
    build_twins(plan, tmp_path / "out", tmp_path / "twin")
    return dep, plan, exes


def _env(monkeypatch, stub_dir, tmp_path, **extra):
    stub_env(monkeypatch, stub_dir, tmp_path / "twin", tmp_path / "ledger", log=tmp_path / "stub.log", **extra)


def _log(tmp_path) -> dict[int, list[str]]:
    by_pid = collections.defaultdict(list)
    for line in (tmp_path / "stub.log").read_text().splitlines():
        pid, what = line.split(" ", 1)
        by_pid[int(pid)].append(what)
    return dict(by_pid)


def _peers(path):
    return write_peers(path, free_ports(6))


def _single(exe, owner, tmp_path, *args, env=None):
    peers = _peers(tmp_path / "peers")
    out = tmp_path / f"single-{owner}-{time.monotonic_ns()}.out"
    done = subprocess.run([str(exe), "--owner", str(owner), "--peers", str(peers), "--out", str(out),
                           "--insecure", "--timeout-ms", "2000", *args], capture_output=True, text=True, timeout=60,
                          env=env)
    assert not list(tmp_path.glob(f"{out.name}*"))  # nothing published, nothing staged left
    return done


def test_without_a_driver_the_executable_refuses_cuda_unavailable(tmp_path, monkeypatch):
    dep, plan, exes = _setup(tmp_path)
    monkeypatch.setenv("LD_LIBRARY_PATH", str(tmp_path / "nothing-here"))
    done = _single(exes[("worker", "sm86")], 1, tmp_path)
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr == ("refused: cuda-unavailable: owner 1: libcuda.so.1: cannot open shared object "
                           "file: No such file or directory\n")


def test_sm86_owners_among_x86_64_and_aarch64_equal_the_oracle_with_one_upload(tmp_path, monkeypatch, stub_dir):
    dep, plan, _ = _setup(tmp_path)
    _env(monkeypatch, stub_dir, tmp_path)
    report = launch(dep, tmp_path / "out", plan=plan)
    assert report.match, report.failures
    logs = sorted(_log(tmp_path).values(), key=len)
    assert len(logs) == 2
    for log, share in zip(logs, (0, 4)):
        count = collections.Counter(w.split()[0] if not w.startswith("launch") else w for w in log)
        # once: parameters, state, (samples), rate, flags; per update: the mean
        assert count["htod"] == (5 if share else 4) + UPDATES
        # per update: (the local sum and its flags), the update's flag; then the digest's capture
        assert count["dtoh"] == (2 if share else 1) * UPDATES + 2
        assert count["launch alphac_dev_update_0 1"] == count["launch alphac_dev_update_1 3"] == UPDATES
        assert count[f"launch alphac_dev_contribution {share}"] == (UPDATES if share else 0)
        assert count["module"] == 1 and count["init"] == 1
        assert [w for w in log if w.startswith("htod")][:2] == ["htod 24", "htod 64"]  # k = 3, m = 8


def test_a_partitioned_learner_on_sm86_owners_equals_the_oracle(tmp_path, monkeypatch, stub_dir):
    dep, plan, _ = _setup(tmp_path, "lsq_adam_partitioned_hierarchy.alpha", ["sm86", "aarch64", "sm86", "x86_64"])
    _env(monkeypatch, stub_dir, tmp_path)
    report = launch(dep, tmp_path / "out", plan=plan)
    assert report.match, report.failures


def test_the_host_shadow_is_not_the_authority_and_device_corruption_is_caught(tmp_path, monkeypatch, stub_dir):
    dep, plan, _ = _setup(tmp_path)
    # the 1st and 2nd uploads come from the host's parameters and state: scribbled over after
    _env(monkeypatch, stub_dir, tmp_path, scribble="1,2")
    assert launch(dep, tmp_path / "out", plan=plan).match
    _env(monkeypatch, stub_dir, tmp_path, scribble="", corrupt="alphac_dev_update_1:3")
    report = launch(dep, tmp_path / "out", plan=plan)
    assert not report.match
    assert any("corrupted alphac_dev_update_1" in w for log in _log(tmp_path).values() for w in log)


def test_a_gpu_without_the_sm86_binary_jit_loads_the_ptx(tmp_path, monkeypatch, stub_dir):
    dep, plan, _ = _setup(tmp_path)
    _env(monkeypatch, stub_dir, tmp_path, sm="90")
    assert launch(dep, tmp_path / "out", plan=plan).match
    for log in _log(tmp_path).values():
        assert [w for w in log if w.startswith("module")] == ["module cubin refused", "module ptx"]


UUIDS = "aa000000000000000000000000000001,bb000000000000000000000000000002"
GPU_B = "GPU-bb000000-0000-0000-0000-000000000002"


def test_owners_bind_their_gpu_by_uuid_or_by_placement_index(tmp_path, monkeypatch, stub_dir):
    dep, plan, exes = _setup(tmp_path)
    _env(monkeypatch, stub_dir, tmp_path, uuids=UUIDS)
    run = run_plan(dep, exes, tmp_path / "run1", root=plan.tree.owner)
    assert run.committed
    assert sorted(w for log in _log(tmp_path).values() for w in log if w.startswith("context")) == \
        ["context 0", "context 1"]  # the first and second SM86 owners
    (tmp_path / "stub.log").unlink()
    run = run_plan(dep, exes, tmp_path / "run2", root=plan.tree.owner,
                   extra_argv={1: ("--gpu", GPU_B), 4: ("--gpu", GPU_B[4:].upper())})
    assert run.committed
    assert sorted(w for log in _log(tmp_path).values() for w in log if w.startswith("context")) == \
        ["context 1", "context 1"]
    done = _single(exes[("worker", "sm86")], 1, tmp_path, "--gpu", "GPU-cc")
    assert (done.returncode, done.stderr) == (1, "refused: gpu-not-found: owner 1: --gpu GPU-cc is none of "
                                              "the 2 GPUs the driver reports: GPU-aa000000-0000-0000-0000-"
                                              "000000000001, GPU-bb000000-0000-0000-0000-000000000002\n")


def _bytes(share):
    return device_bytes(3, 8, 3, 4, share, False)  # replicated: every word held


def test_a_ledger_another_user_could_write_or_a_link_is_refused(tmp_path, monkeypatch, stub_dir):
    """The ledger is truncated and rewritten by every owner: a world-writable ledger
    directory, or a link planted at the ledger's name, is refused before anything is
    written through it; a planted ledger holding more than 2^64 bytes reads as full."""
    dep, plan, exes = _setup(tmp_path)
    exe = exes[("worker", "sm86")]
    _env(monkeypatch, stub_dir, tmp_path)
    ledger_dir = tmp_path / "ledger"
    ledger_dir.mkdir(mode=0o700)
    ledger_dir.chmod(0o777)
    done = _single(exe, 4, tmp_path)
    assert (done.returncode, done.stderr) == (1, f"refused: memory-admission: owner 4: the GPU ledger directory "
                                              f"{ledger_dir} is not a directory of this user (uid {os.geteuid()}) "
                                              "that no one else can write\n")
    ledger_dir.chmod(0o700)
    victim = tmp_path / "victim"
    victim.write_text("kept\n")
    (ledger_dir / "GPU-53545542-0000-0000-0000-000000000000").symlink_to(victim)
    done = _single(exe, 4, tmp_path)
    assert done.returncode == 1 and done.stderr.startswith("refused: memory-admission: owner 4: the GPU ledger "
                                                           f"{ledger_dir}/GPU-"), done.stderr
    assert victim.read_text() == "kept\n"
    (ledger_dir / "GPU-53545542-0000-0000-0000-000000000000").unlink()
    (ledger_dir / "GPU-53545542-0000-0000-0000-000000000000").write_text(
        f"{os.getpid()} 18446744073709551615\n{os.getppid()} 18446744073709551615\n")
    done = _single(exe, 4, tmp_path)
    assert done.returncode == 1 and "18446744073709551615 held by other alphac owners" in done.stderr, done.stderr


def test_admission_refuses_what_does_not_fit_also_across_processes(tmp_path, monkeypatch, stub_dir):
    dep, plan, exes = _setup(tmp_path)
    exe = exes[("worker", "sm86")]
    need = _bytes(4)
    _env(monkeypatch, stub_dir, tmp_path, mem_free=need - 1)
    done = _single(exe, 4, tmp_path)
    ledger = tmp_path / "ledger" / "GPU-53545542-0000-0000-0000-000000000000"
    assert (done.returncode, done.stderr) == (1, f"refused: memory-admission: owner 4: the plan needs {need} "
                                              f"device bytes on GPU-53545542-0000-0000-0000-000000000000: "
                                              f"{need - 1} are free, {8 << 30} in all, 0 held by other "
                                              f"alphac owners (ledger {ledger})\n")
    # two processes on one GPU whose total holds one of them: the second is refused while
    # the first holds its bytes, and admitted once the first is gone
    _env(monkeypatch, stub_dir, tmp_path, mem_free="", mem_total=need + _bytes(0) - 1)
    peers = _peers(tmp_path / "peers2")
    first = subprocess.Popen([str(exe), "--owner", "4", "--peers", str(peers), "--out", str(tmp_path / "first"),
                              "--insecure", "--timeout-ms", "20000"], stderr=subprocess.PIPE, text=True)
    try:
        for _ in range(200):
            if ledger.exists() and ledger.read_text():
                break
            time.sleep(0.05)
        assert ledger.read_text() == f"{first.pid} {need}\n"
        done = _single(exe, 1, tmp_path)
        assert done.returncode == 1
        assert done.stderr.startswith(f"refused: memory-admission: owner 1: the plan needs {_bytes(0)} device bytes")
        assert f"{need} held by other alphac owners" in done.stderr
    finally:
        first.kill()
        first.wait()
    done = _single(exe, 1, tmp_path)  # admitted now (it refuses later, connecting to no one)
    assert done.stderr.startswith("refused: connect-timeout"), done.stderr


@pytest.mark.parametrize("call,code,result,name", [
    ("cuInit", "cuda-unavailable", 100, "CUDA_ERROR_NO_DEVICE"),
    ("cuDeviceGetCount", "cuda-unavailable", 3, "CUDA_ERROR_NOT_INITIALIZED"),
    ("cuDevicePrimaryCtxRetain", "cuda-error", 46, "CUDA_ERROR_DEVICE_UNAVAILABLE"),
    ("cuMemGetInfo_v2", "cuda-error", 201, "CUDA_ERROR_INVALID_CONTEXT"),
    ("cuMemAlloc_v2", "memory-admission", 2, "CUDA_ERROR_OUT_OF_MEMORY"),
    ("cuMemcpyHtoD_v2", "cuda-error", 700, "CUDA_ERROR_ILLEGAL_ADDRESS"),
    ("cuModuleGetFunction", "cuda-module", 500, "CUDA_ERROR_NOT_FOUND"),
])
def test_cuda_results_become_named_refusals(tmp_path, monkeypatch, stub_dir, call, code, result, name):
    dep, plan, exes = _setup(tmp_path)
    _env(monkeypatch, stub_dir, tmp_path, fail=f"{call}={result}")
    done = _single(exes[("worker", "sm86")], 4, tmp_path)
    assert (done.returncode, done.stderr) == (1, f"refused: {code}: owner 4: {call} returned {name} ({result})\n")


def test_a_module_that_loads_neither_way_and_a_failed_launch_are_refused(tmp_path, monkeypatch, stub_dir):
    dep, plan, exes = _setup(tmp_path)
    _env(monkeypatch, stub_dir, tmp_path, fail="cuModuleLoadData=218")
    done = _single(exes[("worker", "sm86")], 4, tmp_path)
    assert done.stderr == ("refused: cuda-module: owner 4: the cubin: CUDA_ERROR_INVALID_PTX (218); "
                           "the PTX: CUDA_ERROR_INVALID_PTX (218)\n")
    _env(monkeypatch, stub_dir, tmp_path, fail="cuLaunchKernel=719")
    report = launch(dep, tmp_path / "out", plan=plan)
    assert not report.match
    assert "refused: cuda-error: owner 4: cuLaunchKernel returned CUDA_ERROR_LAUNCH_FAILED (719)" in report.stderr[4]


def _refusal(report, owner) -> str:
    return report.stderr[owner].split("refused: ", 1)[1].split("\n")[0].replace(f"owner {owner}", "owner _")


def test_a_nan_rate_is_refused_on_the_device_by_name(tmp_path, monkeypatch, stub_dir):
    dep, plan, _ = _setup(tmp_path, edits=NAN_RATE)
    _env(monkeypatch, stub_dir, tmp_path)
    report = launch(dep, tmp_path / "out", plan=plan)
    assert report.refusals_agree, (report.oracle_refusal, report.stderr)
    assert _refusal(report, 2).startswith("non-finite: update statement 'w[i] (demo.alpha:")
    assert _refusal(report, 1) == _refusal(report, 4) == _refusal(report, 2)  # the device names the CPU's


# Two statements appended to the demo's update loop: coordinates 1 and 2 (w < 0.2 after the
# first step) take the square root of a negative number, and the next statement overwrites it.
LAST = "      w[i] := w[i] - rate * (m1[i] / (1.0 - p1)) / (sqrt(m2[i] / (1.0 - p2)) + 1e-8)\n"
OVERWRITTEN = ((LAST, LAST + "      w[i] := sqrt(w[i] - 0.2)\n      w[i] := 0.5\n"),)


def test_an_overwritten_non_finite_word_refuses_at_the_first_coordinate_in_order(tmp_path, monkeypatch,
                                                                                  stub_dir):
    dep, plan, _ = _setup(tmp_path, edits=OVERWRITTEN)
    _env(monkeypatch, stub_dir, tmp_path)
    report = launch(dep, tmp_path / "out", plan=plan)
    assert report.refusals_agree, (report.oracle_refusal, report.stderr)
    cpu = _refusal(report, 2)
    assert cpu.startswith("non-finite: update statement 'w[i] (demo.alpha:")
    assert cpu.endswith(" coordinate 1 at update 0"), cpu
    assert _refusal(report, 1) == _refusal(report, 4) == cpu  # threads 1 and 2 failed: 1 is named


def test_checkpoints_of_sm86_owners_resume_on_cpu_owners_and_back(tmp_path, monkeypatch, stub_dir):
    cpu = ["x86_64", "aarch64", "x86_64", "aarch64"]
    gpu = ["sm86", "aarch64", "sm86", "x86_64"]
    dep, plan, _ = _setup(tmp_path, "lsq_adam_hierarchy_ckpt.alpha", gpu)
    _env(monkeypatch, stub_dir, tmp_path)
    report = launch(dep, tmp_path / "out", plan=plan, checkpoint_dir=tmp_path / "ck")
    assert report.match, report.failures
    # before each checkpoint (2, 4) and the digest, every SM86 owner copies its words back
    for log in _log(tmp_path).values():
        dtoh = [w for w in log if w.startswith("dtoh")]
        assert dtoh.count("dtoh 16") == 3  # k = 2 parameters
    cdep, cplan, _ = _setup(tmp_path / "cpu", "lsq_adam_hierarchy_ckpt.alpha", cpu)
    back = launch(cdep, tmp_path / "cpu" / "out", plan=cplan, resume=tmp_path / "ck" / "ckpt-2",
                  checkpoint_dir=tmp_path / "ck2")
    assert back.match, back.failures
    again = launch(dep, tmp_path / "out", plan=plan, resume=tmp_path / "ck2" / "ckpt-4",
                   checkpoint_dir=tmp_path / "ck3")
    assert again.match, again.failures


def test_inspect_shows_the_embedded_cubin_ptx_and_kernels(tmp_path):
    import json
    import sys

    dep, plan, exes = _setup(tmp_path)
    exe = exes[("worker", "sm86")]
    done = subprocess.run([sys.executable, "-m", "alphac", "inspect", str(exe)], capture_output=True, text=True,
                          check=True)
    lines = dict(ln.split(None, 1) for ln in done.stdout.splitlines())
    assert lines["target"] == "sm86" and lines["ptx"] == "version 7.1, target sm_86"
    assert lines["cubin"].startswith("sm_86, ") and lines["cubin"].endswith(" bytes")
    assert lines["kernels"] == "alphac_dev_contribution, alphac_dev_local, alphac_dev_update_0, alphac_dev_update_1"
    record = json.loads(subprocess.run([sys.executable, "-m", "alphac", "inspect", "--json", str(exe)],
                                       capture_output=True, text=True, check=True).stdout)
    assert (record["device"]["cubin_sm"], record["device"]["ptx_target"]) == (86, "sm_86")
    cpu = json.loads(subprocess.run([sys.executable, "-m", "alphac", "inspect", "--json",
                                     str(exes[("worker", "x86_64")])], capture_output=True, text=True,
                                    check=True).stdout)
    assert "device" not in cpu
