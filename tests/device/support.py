"""What the SM86 tests share: specs re-placed onto sm86, the stand-in driver (stub_libcuda.c,
built with the C compiler into a temporary directory) and the twins of the kernels it runs.
The stub is not a GPU: see stub_libcuda.c."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

from alphac import driver
from alphac.codegen.device import device_module
from alphac.targets import compile_object

ROOT = Path(__file__).resolve().parents[2]
SPECS = ROOT / "specs"
STUB = Path(__file__).resolve().parent / "stub_libcuda.c"
DEMO = ["x86_64", "sm86", "x86_64", "aarch64", "sm86", "aarch64"]  # owners 1 (0 samples), 4 (4)
# a rate whose first Adam step overflows: the update refuses non-finite
NAN_RATE = (("dataParallelRate = 0.001", "dataParallelRate = 1e308"),)
TARGET_NAMES = {"x86_64": "TargetX86_64", "aarch64": "TargetAArch64", "sm86": "TargetSM86"}


def placed(spec: str, placement: list[str], directory: Path, edits=()) -> Path:
    """specs/SPEC with its placement replaced and each (old, new) text of `edits` replaced,
    written in `directory` with the Gates modules beside it."""
    directory.mkdir(parents=True, exist_ok=True)
    if not (directory / "Gates").exists():
        shutil.copytree(SPECS / "Gates", directory / "Gates")
    text = (SPECS / spec).read_text()
    names = ", ".join(TARGET_NAMES[t] for t in placement)
    text, count = re.subn(r"deploymentPlacement = \[[^\]]*\]", f"deploymentPlacement = [{names}]", text)
    assert count == 1
    for old, new in edits:
        assert old in text, old
        text = text.replace(old, new)
    out = directory / spec
    out.write_text(text)
    return out


def built(tmp_path: Path, spec: str, placement: list[str], edits=()):
    """The deployment, plan and executables (under tmp_path/out) of `spec` re-placed."""
    from alphac.launch.cache import ensure_built

    dep = driver.deployment(str(placed(spec, placement, tmp_path / "specs", edits)))
    plan = driver.plan(dep)
    return dep, plan, ensure_built(plan, tmp_path / "out")


def build_stub(directory: Path) -> Path:
    """libcuda.so.1 built from stub_libcuda.c in `directory`."""
    directory.mkdir(parents=True, exist_ok=True)
    lib = directory / "libcuda.so.1"
    subprocess.run(["cc", "-O1", "-shared", "-fPIC", "-Wall", "-Werror", "-o", str(lib), str(STUB), "-ldl"],
                   check=True)
    return lib


def build_twins(plan, exe_dir: Path, twin_dir: Path) -> list[Path]:
    """The twin of every sm86 executable of `plan`: its device kernels built for x86-64 as
    `twin_dir/EXE.twin.so`, which the stub loads for executable EXE."""
    twin_dir.mkdir(parents=True, exist_ok=True)
    dep = plan.deployment
    out = []
    for role in sorted({dep.role_of(o).name for o in range(dep.owners) if dep.placement[o] == "sm86"}):
        module, _ = device_module(driver.image(plan, role, "sm86"), twin=True)
        obj = twin_dir / f"{role}.twin.o"
        obj.write_bytes(compile_object(module, "x86_64"))
        lib = twin_dir / f"{driver.executable_name(plan, role, 'sm86')}.twin.so"
        subprocess.run(["cc", "-shared", "-o", str(lib), str(obj)], check=True)
        out.append(lib)
    return out


def stub_env(monkeypatch, stub_dir: Path, twin_dir: Path, ledger: Path, **extra) -> None:
    """The environment an sm86 owner finds the stub in (LD_LIBRARY_PATH), with its twins,
    a private GPU ledger directory, and ALPHAC_STUB_* settings from `extra`."""
    monkeypatch.setenv("LD_LIBRARY_PATH", str(stub_dir))
    monkeypatch.setenv("ALPHAC_STUB_TWIN", str(twin_dir))
    monkeypatch.setenv("ALPHAC_GPU_LEDGER", str(ledger))
    for key, value in extra.items():
        monkeypatch.setenv(f"ALPHAC_STUB_{key.upper()}", str(value))
