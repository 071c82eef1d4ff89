"""The learner shapes' SM86 build families (PartitionedRegression.Build.NativeHost,
Build.CoordinateDevice, Build.CoordinateMemory) through the stand-in driver: both owners on
sm86 equal the oracle, and corrupting the host shadow changes nothing. The stub is not a GPU
(stub_libcuda.c); on a GPU these run among the gates of `make test-gpu`."""

from __future__ import annotations

import shutil

import pytest

from alphac import driver
from alphac.launch.cache import ensure_built
from alphac.launch.launcher import launch

from support import SPECS, build_twins, stub_env

pytestmark = pytest.mark.skipif(shutil.which("ptxas") is None, reason="ptxas is not installed")

# each spec with the uploads that come from the host's parameters and state (the regression
# learner has no state: its second upload is the samples, read in place from the image)
SHAPES = {"partitioned_regression_sm86.alpha": "1", "coordinate_device.alpha": "1,2",
          "coordinate_memory.alpha": "1,2"}


@pytest.mark.parametrize("spec", SHAPES)
@pytest.mark.parametrize("scribble", [False, True], ids=["plain", "host-shadow-scribbled"])
def test_a_shape_on_two_sm86_owners_equals_the_oracle(spec, scribble, tmp_path, monkeypatch, stub_dir):
    dep = driver.deployment(str(SPECS / spec))
    assert dep.placement == ("sm86", "sm86")
    plan = driver.plan(dep)
    ensure_built(plan, tmp_path / "out")
    build_twins(plan, tmp_path / "out", tmp_path / "twin")
    extra = {"scribble": SHAPES[spec]} if scribble else {}  # scribbled over after the upload
    stub_env(monkeypatch, stub_dir, tmp_path / "twin", tmp_path / "ledger", **extra)
    report = launch(dep, tmp_path / "out", plan=plan)
    assert report.match, report.failures
    assert [r.target for r in report.rows] == ["sm86", "sm86"]


def test_the_tanh_network_on_sm86_owners_equals_the_oracle(tmp_path, monkeypatch, stub_dir):
    """A 2-D view, nested loops and vector temporaries in the device kernels: each sample's
    contribution thread holds the temporaries in its local memory; SM86 owners among x86-64
    and AArch64 owners give the oracle's words."""
    from support import built

    dep, plan, _ = built(tmp_path, "tanh_network_adam.alpha", ["x86_64", "sm86", "aarch64", "sm86"])
    build_twins(plan, tmp_path / "out", tmp_path / "twin")
    stub_env(monkeypatch, stub_dir, tmp_path / "twin", tmp_path / "ledger")
    report = launch(dep, tmp_path / "out", plan=plan)
    assert report.match, report.failures
    assert [r.target for r in report.rows] == ["x86_64", "sm86", "aarch64", "sm86"]
