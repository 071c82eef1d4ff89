"""`alphac build`: role/target selection, one-line errors, reproducible executables."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

import alphac.driver
from alphac.targets import native
from alphac.commands import main
from alphac.targets.elf import read_metadata
from alphac.ir import nodes as n
from alphac.commands.build import select_pairs
from alphac.driver import needed
from alphac.targets.target import TargetError
from test_inspect import small_deployment

ROOT = Path(__file__).resolve().parents[2]
HAVE_AARCH64 = shutil.which("aarch64-linux-gnu-gcc") is not None
needs_aarch64 = pytest.mark.skipif(not HAVE_AARCH64, reason="aarch64 cross tools not installed")


@pytest.fixture
def spec(monkeypatch, tmp_path):
    """A spec path whose deployment is the hand-built four-owner one."""
    deps = {"small.alpha": small_deployment(),
            "hier.alpha": small_deployment(topology=n.Hierarchy(2), stem="lsq_small_h",
                                           placement=("x86_64",) * 4)}
    monkeypatch.setattr(alphac.driver, "deployment", lambda path, name=None: deps[Path(path).name])
    return tmp_path / "small.alpha"


def build(*args: str):
    return CliRunner().invoke(main, ["build", *args])


def test_pairs_the_placement_needs():
    dep = small_deployment()
    assert needed(dep) == [("coordinator", "x86_64"), ("worker", "aarch64"), ("worker", "x86_64")]
    assert select_pairs(dep, "worker", None, False) == [("worker", "aarch64"), ("worker", "x86_64")]
    assert select_pairs(dep, None, "x86_64", False) == [("coordinator", "x86_64"), ("worker", "x86_64")]
    assert select_pairs(dep, "coordinator", "aarch64", False) == [("coordinator", "aarch64")]


@needs_aarch64
def test_build_all_names_every_executable(spec, tmp_path):
    out = tmp_path / "out"
    result = build(str(spec), "--all", "-o", str(out))
    assert result.exit_code == 0, result.output + result.stderr
    names = sorted(p.name for p in out.iterdir())
    exes = ["lsq_small-coordinator-x86_64", "lsq_small-worker-aarch64", "lsq_small-worker-x86_64"]
    assert names == sorted(exes + [f"{e}.deps" for e in exes])  # each with its record of inputs
    lines = result.output.splitlines()
    assert len(lines) == 4 and lines[-1].startswith("built 3 of 3 executables in ")
    assert lines[1].startswith(f"built {out}/lsq_small-worker-aarch64  (aarch64, cpu baseline, static, ")
    assert lines[0].startswith(f"built {out}/lsq_small-coordinator-x86_64  (x86_64, cpu baseline, dynamic, ")
    meta = read_metadata(out / "lsq_small-worker-aarch64")
    assert (meta["role"], meta["target"], meta["role_owners"]) == ("worker", "aarch64", [1, 2, 3])


def test_a_build_with_nothing_changed_is_up_to_date(spec, tmp_path):
    out = tmp_path / "out"
    assert build(str(spec), "--all", "-o", str(out)).exit_code == 0
    stamps = {p.name: p.stat().st_mtime_ns for p in out.iterdir()}
    again = build(str(spec), "--all", "-o", str(out))
    assert again.exit_code == 0, again.output
    lines = again.output.splitlines()
    assert [ln.split("  (")[0] for ln in lines[:3]] == [
        f"up to date {out}/lsq_small-coordinator-x86_64", f"up to date {out}/lsq_small-worker-aarch64",
        f"up to date {out}/lsq_small-worker-x86_64"]
    assert lines[3].startswith("built 0 of 3 executables in ") and lines[3].endswith(" (3 up to date)")
    assert {p.name: p.stat().st_mtime_ns for p in out.iterdir()} == stamps  # nothing relinked
    # what makes one stale is launch's rule (tests/e2e/test_launch_cache.py); --force builds
    # what is up to date too
    forced = build(str(spec), "--role", "worker", "--target", "x86_64", "-o", str(out), "--force")
    assert forced.output.startswith(f"built {out}/lsq_small-worker-x86_64  ("), forced.output


@needs_aarch64
def test_builds_are_byte_identical(spec, tmp_path, monkeypatch):
    a, b = tmp_path / "a", tmp_path / "elsewhere" / "b"
    assert build(str(spec), "--all", "-o", str(a)).exit_code == 0
    monkeypatch.chdir(tmp_path)  # another working directory and output path
    assert build(str(spec), "--all", "-o", str(b)).exit_code == 0
    for exe in sorted(p for p in a.iterdir() if p.suffix != ".deps"):
        assert exe.read_bytes() == (b / exe.name).read_bytes(), exe.name


def test_one_role_one_target(spec, tmp_path):
    out = tmp_path / "o"
    result = build(str(spec), "--role", "coordinator", "--target", "x86_64", "-o", str(out))
    assert result.exit_code == 0, result.stderr
    assert sorted(p.name for p in out.iterdir()) == ["lsq_small-coordinator-x86_64",
                                                     "lsq_small-coordinator-x86_64.deps"]
    assert result.output.count("\n") == 1


def test_star_and_hierarchy_executables_differ(spec, tmp_path):
    out = tmp_path / "o"
    assert build(str(spec), "--role", "worker", "--target", "x86_64", "-o", str(out)).exit_code == 0
    assert build(str(spec.with_name("hier.alpha")), "--role", "worker", "--target", "x86_64",
                 "-o", str(out)).exit_code == 0
    star = read_metadata(out / "lsq_small-worker-x86_64")
    hier = read_metadata(out / "lsq_small_h-worker-x86_64")
    assert star["protocol"] != hier["protocol"]
    assert (star["topology"], hier["topology"]) == ("star", "hierarchy:2")


@pytest.mark.parametrize("args,code,message,status", [
    (("--role", "boss", "--target", "x86_64"), "unknown-role",
     "unknown role 'boss'; roles: coordinator, worker", 1),
    (("--role", "worker", "--target", "riscv64"), "unknown-target",
     "unknown target 'riscv64'; targets: aarch64, sm86, x86_64", 1),
    ((), "build-usage", "give --role ROLE and/or --target TARGET, or --all", 2),
    (("--all", "--role", "worker"), "build-usage", "--all builds every (role, target); give it alone", 2),
])
def test_bad_requests_are_one_line_errors(spec, tmp_path, args, code, message, status):
    result = build(str(spec), *args, "-o", str(tmp_path / "o"))
    assert result.exit_code == status
    assert result.stderr == f"alphac: error[{code}]: {message}\n"
    assert not (tmp_path / "o").exists()


def test_a_target_no_owner_is_placed_on_is_refused(spec, tmp_path):
    result = build(str(spec.with_name("hier.alpha")), "--target", "aarch64", "-o", str(tmp_path / "o"))
    assert result.exit_code == 1
    assert result.stderr == "alphac: error[role-not-placed]: no owner is placed on 'aarch64'\n"
    assert not (tmp_path / "o").exists()


def test_select_pairs_errors_carry_codes():
    with pytest.raises(TargetError) as err:
        select_pairs(small_deployment(), "nobody", None, False)
    assert err.value.code == "unknown-role"


def test_a_spec_that_does_not_check_gets_located_diagnostics(tmp_path):
    bad = tmp_path / "bad.alpha"
    bad.write_text("value k : Nat = \n")
    result = build(str(bad), "--all", "-o", str(tmp_path / "o"))
    assert result.exit_code == 1
    assert result.stderr.startswith(f"{bad}:")
    assert "error[" in result.stderr and "Traceback" not in result.stderr


@pytest.mark.skipif(not (ROOT / "specs" / "demo.alpha").exists() or not HAVE_AARCH64,
                    reason="specs/demo.alpha or the aarch64 tools are missing")
def test_demo_spec_builds_reproducibly(tmp_path, monkeypatch):
    # each build links for itself: an executable store of its own, empty
    spec = ROOT / "specs" / "demo.alpha"
    a, b = tmp_path / "a", tmp_path / "b"
    for out in (a, b):
        monkeypatch.setattr(native, "store_dir", lambda out=out: out.with_suffix(".store"))
        assert build(str(spec), "--all", "-o", str(out)).exit_code == 0
        stored = len(list(out.with_suffix(".store").glob("*.exe")))
        assert stored == len([p for p in out.iterdir() if p.suffix != ".deps"]) > 0
    names = sorted(p.name for p in a.iterdir() if p.suffix != ".deps")
    assert {read_metadata(a / name)["target"] for name in names} == {"x86_64", "aarch64"}
    for name in names:
        assert (a / name).read_bytes() == (b / name).read_bytes()


def test_an_output_path_that_cannot_be_a_directory(spec, tmp_path):
    (tmp_path / "file").write_text("")
    result = build(str(spec), "--role", "worker", "--target", "x86_64", "-o", str(tmp_path / "file" / "o"))
    assert (result.exit_code, result.stderr) == (
        1, f"alphac: error[io-error]: {tmp_path / 'file' / 'o'}: Not a directory\n")
