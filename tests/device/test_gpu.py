"""The SM86 gates on a real GPU (marked `gpu`: `make test-gpu` / scripts/gpu-gates; skipped,
saying why, where libcuda.so.1 or a GPU is missing): the demo and the partitioned Adam
hierarchy with owners on sm86 among x86-64 and AArch64 owners, bit-identical to the oracle;
a rate that overflows refused on the device by name; a checkpoint of GPU owners resumed on
CPU owners; two owners bound to one GPU by its UUID, both admitted through its ledger; the
learner shapes' SM86 build families (docs/learners.md) on two GPU owners."""

from __future__ import annotations

import ctypes
import shutil

import pytest

from alphac import driver
from alphac.launch.launcher import launch
from alphac.launch.plan_run import run_plan

from support import DEMO, NAN_RATE, SPECS, built


def _gpu_uuid() -> str | None:
    """The UUID of device 0 as the executables print it, or None without a usable GPU."""
    try:
        cu = ctypes.CDLL("libcuda.so.1")
    except OSError:
        return None
    raw = (ctypes.c_ubyte * 16)()
    dev, count = ctypes.c_int(), ctypes.c_int()
    if cu.cuInit(0) or cu.cuDeviceGetCount(ctypes.byref(count)) or count.value < 1:
        return None
    if cu.cuDeviceGet(ctypes.byref(dev), 0) or cu.cuDeviceGetUuid_v2(raw, dev):
        return None
    h = bytes(raw).hex()
    return f"GPU-{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


UUID = _gpu_uuid()
pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(UUID is None, reason="no CUDA driver (libcuda.so.1) or no GPU on this machine"),
    pytest.mark.skipif(shutil.which("ptxas") is None, reason="ptxas is not installed"),
]


@pytest.fixture(autouse=True)
def _ledger(tmp_path, monkeypatch):
    monkeypatch.setenv("ALPHAC_GPU_LEDGER", str(tmp_path / "ledger"))


@pytest.mark.parametrize("spec,placement", [
    ("demo.alpha", DEMO),
    ("lsq_adam_partitioned_hierarchy.alpha", ["sm86", "aarch64", "sm86", "x86_64"]),
])
def test_sm86_owners_among_cpu_owners_equal_the_oracle(tmp_path, spec, placement):
    dep, plan, _ = built(tmp_path, spec, placement)
    report = launch(dep, tmp_path / "out", plan=plan)
    assert report.match, report.failures


@pytest.mark.parametrize("spec", ["partitioned_regression_sm86.alpha", "coordinate_device.alpha",
                                  "coordinate_memory.alpha"])
def test_the_shapes_sm86_families_equal_the_oracle(tmp_path, spec):
    dep = driver.deployment(str(SPECS / spec))
    report = launch(dep, tmp_path / "out")
    assert report.match, report.failures


def test_a_rate_that_overflows_is_refused_on_the_device(tmp_path):
    dep, plan, _ = built(tmp_path, "demo.alpha", DEMO, NAN_RATE)
    report = launch(dep, tmp_path / "out", plan=plan)
    assert report.refusals_agree, (report.oracle_refusal, report.stderr)
    assert "refused: non-finite: update statement" in report.stderr[4]


def test_a_checkpoint_of_gpu_owners_resumes_on_cpu_owners(tmp_path):
    spec = "lsq_adam_hierarchy_ckpt.alpha"
    dep, plan, _ = built(tmp_path, spec, ["sm86", "aarch64", "sm86", "x86_64"])
    assert launch(dep, tmp_path / "out", plan=plan, checkpoint_dir=tmp_path / "ck").match
    cdep, cplan, _ = built(tmp_path / "cpu", spec, ["x86_64", "aarch64", "x86_64", "aarch64"])
    back = launch(cdep, tmp_path / "cpu" / "out", plan=cplan, resume=tmp_path / "ck" / "ckpt-2",
                  checkpoint_dir=tmp_path / "ck2")
    assert back.match, back.failures


def test_two_owners_on_one_gpu_bound_by_uuid_and_admitted(tmp_path):
    dep, plan, exes = built(tmp_path, "demo.alpha", DEMO)
    run = run_plan(dep, exes, tmp_path / "run", root=plan.tree.owner,
                   extra_argv={1: ("--gpu", UUID), 4: ("--gpu", UUID)})
    assert run.committed, run.result
    ledger = tmp_path / "ledger" / UUID
    assert ledger.exists() and ledger.read_text() == ""  # both left it at exit


@pytest.mark.parametrize("spec", ["logistic_regression.alpha", "softmax_regression.alpha",
                                  "logistic_regression_binary32.alpha"])
def test_the_elementary_function_gates_on_sm86_owners_equal_the_oracle(tmp_path, spec):
    """exp, log1p, sigmoid, log and round32 emitted for SM86 (no __nv_* function, no
    fused multiply-add): owners 0 and 2 on the GPU give the words of the x86-64 and
    AArch64 owners and of the oracle."""
    import dataclasses

    from alphac.launch.cache import ensure_built

    dep = driver.deployment(str(SPECS / spec), "run")
    dep = dataclasses.replace(dep, placement=("sm86", "aarch64", "sm86", "x86_64"))
    plan = driver.plan(dep)
    ensure_built(plan, tmp_path / "out")
    report = launch(dep, tmp_path / "out", plan=plan)
    assert report.match, report.failures
