"""CPU levels: the x86-64 kernels built for baseline, x86-64-v2/v3/v4 or this machine's CPU
give byte-identical owner outputs (nothing is contracted: no FMA in any kernel object), the
build and launch record and key their level, and an executable built above the baseline
refuses `cpu-unsupported` by name on a CPU lacking the level's features."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from alphac import driver
from alphac.commands import main
from alphac.codegen.module import kernel_module
from alphac.launch.cache import ensure_built
from alphac.launch.plan_run import run_plan
from alphac.launch.runs import new_run_dir
from alphac.targets import compile_object, levels, llvm, load_target
from alphac.targets.llvm import host_cpu
from alphac.targets.target import TargetError, parse_target
from alphac.launch.ports import free_ports
from spec_sweep import every_deployment, spec_files

ROOT = Path(__file__).resolve().parents[2]
SPECS = ROOT / "specs"
X86 = load_target("x86_64")
LEVELS = levels.names(X86)
HERE = [lv for lv in LEVELS if levels.runs_here(levels.at_level(X86, lv))]
V3_LACKS = "avx avx2 bmi bmi2 f16c fma lzcnt movbe xsave"
FUSED = re.compile(r"^v?f(n)?m(add|sub)|^vfmaddsub|^vfmsubadd|^fml[as]")

# one of each kind of kernel: plain, momentum and Adam updates, ordered sums, partitioned
# (owned) updates on a star and a 7-owner hierarchy, the indexed form, 10 owners
LAUNCHED = ("lsq_plain_hierarchy", "lsq_momentum_partitioned_star", "lsq_adam_star",
            "lsq_adam_partitioned_hierarchy7", "indexed_lsq", "order10_star")
HAVE_AARCH64 = shutil.which("aarch64-linux-gnu-gcc") is not None and shutil.which("qemu-aarch64") is not None


def test_x86_64_describes_the_psabi_levels_and_host():
    assert LEVELS == ("baseline", "x86-64-v2", "x86-64-v3", "x86-64-v4", "host")
    assert levels.names(load_target("aarch64")) == ("baseline",)
    v2, v3, v4 = (levels.at_level(X86, f"x86-64-v{i}") for i in (2, 3, 4))
    assert (v3.cpu, v3.level, v3.requires) == ("x86-64-v3", "x86-64-v3", (
        "cmpxchg16b", "lahf_lm", "popcnt", "sse3", "ssse3", "sse4.1", "sse4.2",
        "avx", "avx2", "bmi", "bmi2", "f16c", "fma", "lzcnt", "movbe", "xsave"))
    assert set(v2.requires) < set(v3.requires) < set(v4.requires)
    assert v4.requires[-5:] == ("avx512f", "avx512bw", "avx512cd", "avx512dq", "avx512vl")
    assert levels.at_level(X86, "baseline") == X86 and X86.cpu == "x86-64" and X86.requires == ()
    # the mask is over cpu_checks in file order: v2 is exactly the first seven
    assert levels.required_mask(v2) == 0b1111111 and levels.required_mask(X86) == 0
    assert levels.label(v3) == "x86-64-v3 (LLVM cpu x86-64-v3)"


def test_host_is_llvms_view_of_this_machine():
    name, features, have = host_cpu()
    host = levels.at_level(X86, "host")
    assert (host.cpu, host.features, host.level) == (name, levels.host_features(features, have), "host")
    assert host.requires == tuple(c for c, f in X86.cpu_checks if f in have)
    assert "sse4.2" in host.requires  # every x86-64 machine this suite runs on is v2 at least
    assert levels.runs_here(host) and "host" in HERE and "baseline" in HERE


def test_unknown_levels_are_refused_by_code():
    with pytest.raises(TargetError) as err:
        levels.at_level(X86, "x86-64-v9")
    assert (err.value.code, err.value.message) == (
        "unknown-cpu-level", "target x86_64 has no CPU level 'x86-64-v9'; levels: baseline, "
        "x86-64-v2, x86-64-v3, x86-64-v4, host")
    with pytest.raises(TargetError) as err:
        driver.cpu_level_for("aarch64", "skylake")
    assert err.value.code == "unknown-cpu-level"
    # a level AArch64 does not describe builds its baseline (its owners run under qemu)
    assert driver.cpu_level_for("aarch64", "x86-64-v3") == "baseline"
    assert driver.cpu_level_for("x86_64", "x86-64-v3") == "x86-64-v3"


@pytest.mark.parametrize("text", [
    '[levels.baseline]\ncpu = "x"\n',
    '[levels.v9]\ncpu = "x"\nrequires = ["avx9"]\n',
    '[levels.v9]\nrequires = []\n',
    '[levels.v9]\nhost = true\ncpu = "x"\n',
])
def test_bad_level_tables_are_bad_target_files(text):
    base = ('name = "t"\ntriple = "x86_64-unknown-linux-gnu"\ncpu = "x86-64"\nfeatures = ""\n'
            'machine = "EM_X86_64"\nlinker = ["cc"]\ncc = ["cc"]\n[cpu_checks]\n"avx" = "avx"\n')
    with pytest.raises(TargetError) as err:
        parse_target(base + text, "t.toml")
    assert err.value.code == "bad-target-file"


# ----------------------------------------------------------------------------- bits and objects

def _spec_plans():
    return [(name.replace(":", "-"), driver.plan(dep)) for name, dep in every_deployment()]


def _mnemonics(obj: Path) -> list[str]:
    text = subprocess.run(["objdump", "-d", str(obj)], capture_output=True, text=True, check=True).stdout
    return [ln.split("\t")[2].split()[0] for ln in text.splitlines() if ln.count("\t") >= 2]


def _assert_no_fma(tmp_path: Path, level: str, plans: list) -> None:
    target = levels.at_level(X86, level)
    seen = set()
    for stem, plan in plans:
        for role in sorted({r.name for r in plan.deployment.roles}):
            if "x86_64" not in {plan.deployment.placement[o] for o in
                                next(r for r in plan.deployment.roles if r.name == role).owners}:
                continue
            module = kernel_module(driver.image(plan, role, "x86_64", level))
            obj = tmp_path / f"{stem}-{role}.o"
            obj.write_bytes(compile_object(module, target))
            found = _mnemonics(obj)
            assert [m for m in found if FUSED.match(m)] == [], (stem, role)
            seen.update(found)
    assert {"addsd", "mulsd", "divsd", "sqrtsd"} <= {m.lstrip("v") for m in seen}
    # the level is honoured: the kernels use its registers (256-bit AVX from v3 on)
    uses_ymm = any(m.startswith("v") and m.endswith("pd") for m in seen)
    assert uses_ymm == (level not in ("baseline", "x86-64-v2"))


NEEDS_OBJDUMP = pytest.mark.skipif(shutil.which("objdump") is None, reason="objdump not installed")


# by default the levels with FMA instructions to avoid (v3 and this machine's); every level
# is in the exhaustive sweep
@NEEDS_OBJDUMP
@pytest.mark.parametrize("level", [lv if lv in ("x86-64-v3", "host") else
                                   pytest.param(lv, marks=pytest.mark.exhaustive) for lv in LEVELS])
def test_no_fma_in_the_kernel_objects_of_each_kind_at_any_level(tmp_path, level):
    plans = [(stem, driver.plan(driver.deployment(str(SPECS / f"{stem}.alpha")))) for stem in LAUNCHED]
    _assert_no_fma(tmp_path, level, plans)


@pytest.mark.exhaustive
@NEEDS_OBJDUMP
@pytest.mark.parametrize("level", LEVELS)
def test_no_fma_in_any_kernel_object_at_any_level(tmp_path, level):
    plans = _spec_plans()
    # every deployment of every spec but the one that declares none
    assert len({name.split("-")[0] for name, _ in plans}) == spec_files() - 1
    _assert_no_fma(tmp_path, level, plans)


NEEDS_AARCH64 = pytest.mark.skipif(not HAVE_AARCH64, reason="aarch64 cross tools not installed")
# the default suite launches the widest kernels (partitioned Adam on seven owners) at every
# level; the other kinds are exhaustive
LAUNCHED_BY_DEFAULT = ("lsq_adam_partitioned_hierarchy7",)


def _outputs_are_byte_identical_at_every_level(tmp_path: Path, stem: str) -> None:
    plan = driver.plan(driver.deployment(str(SPECS / f"{stem}.alpha")))
    dep = plan.deployment
    outputs = {}
    for level in HERE:
        exes = ensure_built(plan, tmp_path / level, cpu=level)
        for (role, target), exe in exes.items():
            want = driver.cpu_level_for(target, level)
            assert driver.describe(exe)["metadata"]["cpu"]["level"] == want
        run = run_plan(dep, exes, new_run_dir(tmp_path / level, stem), authenticate=False, root=plan.tree.owner)
        assert run.committed, [oc.stderr for oc in run.result.outcomes]
        outputs[level] = [(run.run_dir / f"owner-{o}.out").read_bytes() for o in range(dep.owners)]
    assert len(outputs) == len(HERE) >= 2
    first = outputs[HERE[0]]
    assert all(len(b) > 40 for b in first)
    for level in HERE[1:]:
        assert outputs[level] == first, level


@NEEDS_AARCH64
@pytest.mark.parametrize("stem", LAUNCHED_BY_DEFAULT)
def test_owner_outputs_are_byte_identical_at_every_level_this_machine_runs(tmp_path, stem):
    _outputs_are_byte_identical_at_every_level(tmp_path, stem)


@pytest.mark.exhaustive
@NEEDS_AARCH64
@pytest.mark.parametrize("stem", [s for s in LAUNCHED if s not in LAUNCHED_BY_DEFAULT])
def test_every_kind_of_kernel_gives_byte_identical_outputs_at_every_level(tmp_path, stem):
    _outputs_are_byte_identical_at_every_level(tmp_path, stem)


def test_launch_builds_for_the_host_and_rebuilds_for_another_level(tmp_path):
    plan = driver.plan(driver.deployment(str(SPECS / "lsq_plain_star.alpha")))
    logged: list[str] = []
    exes = ensure_built(plan, tmp_path, log=logged.append)
    exe = exes[("coordinator", "x86_64")]
    meta = driver.describe(exe)["metadata"]["cpu"]
    assert meta == levels.record(levels.at_level(X86, "host"))
    assert ensure_built(plan, tmp_path, log=logged.append) == exes
    assert [m for m in logged if "built for CPU level" in m] == []
    # another level is another artifact beside it: the host's is neither rebuilt nor replaced
    assert exe.name == "lsq_plain_star-coordinator-x86_64-host"
    before = exe.read_bytes()
    v2 = ensure_built(plan, tmp_path, log=logged.append, cpu="x86-64-v2")[("coordinator", "x86_64")]
    assert v2 == tmp_path / "lsq_plain_star-coordinator-x86_64-x86-64-v2"
    assert f"build {v2.name}: missing" in logged
    assert driver.describe(v2)["metadata"]["cpu"]["level"] == "x86-64-v2"
    assert exe.read_bytes() == before and driver.describe(exe)["metadata"]["cpu"] == meta
    # a stale level recorded under a level's name is still rebuilt
    shutil.copy2(exe, v2)
    ensure_built(plan, tmp_path, log=logged.append, cpu="x86-64-v2")
    assert f"build {v2.name}: built for CPU level host (LLVM cpu {meta['llvm_cpu']}), not " \
           "x86-64-v2 (LLVM cpu x86-64-v2)" in logged
    assert driver.describe(v2)["metadata"]["cpu"]["level"] == "x86-64-v2"


# ----------------------------------------------------------------------------- the refusal

QEMU_X86 = shutil.which("qemu-x86_64")


def _run_on(cpu_model: str, exe: Path, tmp_path: Path) -> subprocess.CompletedProcess:
    """Owner 1 of `exe` on an emulated CPU model, without peers (it can only time out)."""
    peers = tmp_path / "peers"
    peers.write_text("".join(f"{o} 127.0.0.1:{p}\n" for o, p in enumerate(free_ports(4))))
    return subprocess.run([QEMU_X86, "-cpu", cpu_model, str(exe), "--owner", "1", "--peers",
                           str(peers), "--out", str(tmp_path / f"out-{exe.parent.name}"),
                           "--insecure", "--timeout-ms", "200"], capture_output=True, text=True, timeout=60)


def _refusal(done: subprocess.CompletedProcess) -> list[str]:
    return [ln for ln in done.stderr.splitlines() if ln.startswith("refused: ")]


@pytest.mark.skipif(QEMU_X86 is None, reason="qemu-x86_64 (qemu-user) not installed")
def test_above_the_baseline_an_executable_refuses_a_cpu_lacking_its_features(tmp_path):
    plan = driver.plan(driver.deployment(str(SPECS / "lsq_adam_star.alpha")))
    exes = {lv: driver.build(plan, "worker", "x86_64", tmp_path / lv, cpu=lv)
            for lv in ("baseline", "x86-64-v2", "x86-64-v3", "x86-64-v4")}
    # Nehalem has every x86-64-v2 feature and no AVX
    for lv in ("baseline", "x86-64-v2"):
        done = _run_on("Nehalem", exes[lv], tmp_path)
        assert done.returncode == 1 and _refusal(done)[0].startswith("refused: connect-timeout: ")
    done = _run_on("Nehalem", exes["x86-64-v3"], tmp_path)
    assert (done.returncode, _refusal(done)) == (1, [
        "refused: cpu-unsupported: the kernels of this executable are built for x86-64-v3 "
        f"(LLVM cpu x86-64-v3); this CPU lacks {V3_LACKS}"])
    # Haswell has v3 and no AVX-512
    assert _refusal(_run_on("Haswell-v4", exes["x86-64-v3"], tmp_path))[0].startswith(
        "refused: connect-timeout: ")
    assert _refusal(_run_on("Haswell-v4", exes["x86-64-v4"], tmp_path)) == [
        "refused: cpu-unsupported: the kernels of this executable are built for x86-64-v4 "
        "(LLVM cpu x86-64-v4); this CPU lacks avx512f avx512bw avx512cd avx512dq avx512vl"]
    assert not (tmp_path / "out-x86-64-v3.tmp").exists()  # refused before staging anything


def test_version_and_inspect_name_the_level(tmp_path):
    plan = driver.plan(driver.deployment(str(SPECS / "lsq_plain_star.alpha")))
    exe = driver.build(plan, "worker", "x86_64", tmp_path, cpu="x86-64-v3")
    version = subprocess.run([str(exe), "--version"], capture_output=True, text=True, check=True).stdout
    assert ", target x86_64, cpu x86-64-v3 (LLVM cpu x86-64-v3), protocol " in version
    shown = CliRunner().invoke(main, ["inspect", str(exe)]).output.splitlines()
    assert shown[5] == ("cpu         x86-64-v3 (LLVM cpu x86-64-v3); checks at startup: cmpxchg16b "
                        f"lahf_lm popcnt sse3 ssse3 sse4.1 sse4.2 {V3_LACKS}")


def test_build_and_launch_take_cpu(tmp_path):
    spec = str(SPECS / "lsq_plain_star.alpha")
    bad = CliRunner().invoke(main, ["build", spec, "--all", "-o", str(tmp_path), "--cpu", "v3"])
    assert bad.exit_code == 1 and "error[unknown-cpu-level]: unknown CPU level 'v3'; levels: " \
        "baseline, x86-64-v2, x86-64-v3, x86-64-v4, host" in bad.output + bad.stderr
    assert list(tmp_path.iterdir()) == []
    done = CliRunner().invoke(main, ["build", spec, "--target", "x86_64", "-o", str(tmp_path),
                                     "--cpu", "host"])
    assert done.exit_code == 0, done.output
    assert "(x86_64, cpu host, dynamic, " in done.output
    bad = CliRunner().invoke(main, ["launch", spec, "-o", str(tmp_path), "--cpu", "v3"])
    assert bad.exit_code == 1 and "error[unknown-cpu-level]" in bad.output + bad.stderr


def test_the_same_level_and_machine_build_the_same_bytes(tmp_path, monkeypatch):
    plan = driver.plan(driver.deployment(str(SPECS / "lsq_plain_star.alpha")))
    built = []
    for name, cpu in (("a", "host"), ("b", "host"), ("c", "x86-64-v4")):
        objects = tmp_path / f"objects-{name}"  # the kernels are compiled each time
        monkeypatch.setattr(llvm, "_objects_dir", lambda: objects)
        monkeypatch.setattr(llvm, "_OBJECTS", {})  # (nor kept by this process)
        built.append(driver.build(plan, "worker", "x86_64", tmp_path / name, cpu=cpu).read_bytes())
        assert len(list(objects.glob("*.o"))) == 1
    a, b, c = built
    assert a == b != c


def test_launch_leaves_build_s_portable_executables_as_they_are(tmp_path):
    # `alphac build` writes baseline executables; a launch into the same -o builds its own
    # for this machine beside them and never replaces them at their path
    spec = str(SPECS / "lsq_plain_star.alpha")
    out = tmp_path / "out"
    assert CliRunner().invoke(main, ["build", spec, "--all", "-o", str(out)]).exit_code == 0
    portable = {p.name: p.read_bytes() for p in out.iterdir() if p.is_file() and not p.name.endswith(".deps")}
    assert sorted(portable) == ["lsq_plain_star-coordinator-x86_64", "lsq_plain_star-worker-aarch64",
                                "lsq_plain_star-worker-x86_64"]
    launched = CliRunner().invoke(main, ["launch", spec, "-o", str(out), "--quiet"])
    assert launched.exit_code == 0, launched.output
    for name, data in portable.items():
        assert (out / name).read_bytes() == data, name
        assert driver.describe(out / name)["metadata"]["cpu"]["level"] == "baseline"
    hosts = sorted(p.name for p in out.iterdir() if p.name.endswith("-host"))
    assert hosts == ["lsq_plain_star-coordinator-x86_64-host", "lsq_plain_star-worker-x86_64-host"]
    # the AArch64 kernels are the baseline's: the launch reused the build's executable
    assert not (out / "lsq_plain_star-worker-aarch64-host").exists()
