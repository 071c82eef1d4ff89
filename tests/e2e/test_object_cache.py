"""The kernel objects' cache: an object is emitted once per (LLVM, llvmlite, triple, cpu,
features, module text) and read back after; anything else that differs is another object;
an unwritable cache is passed by; the oldest are removed beyond the cap."""

from __future__ import annotations

import os
from pathlib import Path

from alphac import driver
from alphac.codegen.module import kernel_module
from alphac.targets import levels, llvm, load_target
from alphac.targets.elf import describe

SPEC = Path(__file__).resolve().parents[2] / "specs" / "lsq_plain_star.alpha"
X86 = load_target("x86_64")


def _module(target=X86):
    plan = driver.plan(driver.deployment(str(SPEC)))
    return kernel_module(driver.image(plan, "worker", "x86_64", "baseline"))


def _objects(cache: Path) -> list[Path]:
    return sorted((cache / "objects").glob("*.o"))


def test_roles_with_the_same_kernels_compile_once(tmp_path, monkeypatch):
    """The kernel module holds nothing of the role: the demo's coordinator and worker (the
    same learner) build from one object, while their executables differ (image, record)."""
    # an empty directory of kernel objects (the runtime's objects from the cache as they are)
    monkeypatch.setattr(llvm, "_objects_dir", lambda: tmp_path / "cache" / "objects")
    monkeypatch.setattr(llvm, "_OBJECTS", {})  # (nor kept by this process)
    plan = driver.plan(driver.deployment(str(SPEC.with_name("demo.alpha"))))
    texts = {role: str(kernel_module(driver.image(plan, role, "x86_64", "baseline")))
             for role in ("coordinator", "worker")}
    assert texts["coordinator"] == texts["worker"]
    exes = [driver.build(plan, role, "x86_64", tmp_path / "out") for role in ("coordinator", "worker")]
    assert len(_objects(tmp_path / "cache")) == 1
    assert exes[0].read_bytes() != exes[1].read_bytes()
    assert [describe(e)["metadata"]["role"] for e in exes] == ["coordinator", "worker"]


def test_an_object_is_emitted_once_and_read_back(tmp_path, monkeypatch):
    monkeypatch.setenv("ALPHAC_CACHE", str(tmp_path))
    first = llvm.compile_object(_module(), X86)
    [obj] = _objects(tmp_path)
    assert obj.read_bytes() == first and first[:4] == b"\x7fELF"
    stamp = obj.stat().st_mtime_ns
    assert llvm.compile_object(_module(), X86) == first
    assert _objects(tmp_path) == [obj] and obj.stat().st_mtime_ns == stamp
    # another cpu: another object, other bytes
    v3 = levels.at_level(X86, "x86-64-v3")
    other = llvm.compile_object(_module(v3), v3)
    assert len(_objects(tmp_path)) == 2 and other != first


def test_a_cached_object_is_what_it_was_compiled_from(tmp_path, monkeypatch):
    monkeypatch.setenv("ALPHAC_CACHE", str(tmp_path / "a"))
    cached = llvm.compile_object(_module(), X86)
    llvm.compile_object(_module(), X86)
    monkeypatch.setenv("ALPHAC_CACHE", str(tmp_path / "b"))
    assert llvm.compile_object(_module(), X86) == cached  # compiled afresh: the same bytes


def test_an_unwritable_cache_is_passed_by(tmp_path, monkeypatch):
    blocked = tmp_path / "file"
    blocked.write_text("not a directory")
    monkeypatch.setenv("ALPHAC_CACHE", str(blocked))
    assert llvm.compile_object(_module(), X86)[:4] == b"\x7fELF"
    assert blocked.read_text() == "not a directory"


def test_beyond_the_cap_the_oldest_objects_are_removed(tmp_path, monkeypatch):
    monkeypatch.setenv("ALPHAC_CACHE", str(tmp_path))
    monkeypatch.setattr(llvm, "OBJECTS_KEPT", 2)
    (tmp_path / "objects").mkdir()
    for i, name in enumerate(("old.o", "older.o")):
        p = tmp_path / "objects" / name
        p.write_bytes(b"x")
        os.utime(p, ns=(10**9 * (100 - i), 10**9 * (100 - i)))
    llvm.compile_object(_module(), X86)
    names = [p.name for p in _objects(tmp_path)]
    assert len(names) == 2 and "old.o" in names and "older.o" not in names


# -- the executable store (alphac.targets.native.stored_link) ------------------------------

def _main_object(tmp_path: Path, value: int) -> Path:
    import subprocess

    src = tmp_path / f"m{value}.c"
    src.write_text(f"int main(void) {{ return {value}; }}\n")
    subprocess.run(["cc", "-c", str(src), "-o", str(tmp_path / f"m{value}.o")], check=True)
    return tmp_path / f"m{value}.o"


def test_a_link_is_stored_once_and_copied_after_with_the_same_bytes(tmp_path, monkeypatch):
    import subprocess

    from alphac.targets import native

    monkeypatch.setenv("ALPHAC_CACHE", str(tmp_path / "cache"))
    backend = native.NativeBackend(X86)
    obj = _main_object(tmp_path, 7)
    first = native.stored_link(backend, [obj], tmp_path / "first")
    [kept] = sorted(native.store_dir().glob("*.exe"))
    calls = []
    monkeypatch.setattr(native.NativeBackend, "link", lambda self, o, e: (calls.append(e), e.write_bytes(b"linked")))
    second = native.stored_link(backend, [obj], tmp_path / "second")
    assert calls == [] and second.read_bytes() == first.read_bytes() == kept.read_bytes()
    assert os.access(second, os.X_OK) and subprocess.run([str(second)]).returncode == 7
    # other object bytes: another key, linked (here: the stand-in records the call)
    native.stored_link(backend, [_main_object(tmp_path, 8)], tmp_path / "third")
    assert calls == [tmp_path / "third"]


def test_an_unwritable_store_links_every_time(tmp_path, monkeypatch):
    import subprocess

    from alphac.targets import native

    blocked = tmp_path / "file"
    blocked.write_text("not a directory")
    monkeypatch.setenv("ALPHAC_CACHE", str(blocked))
    backend = native.NativeBackend(X86)
    exe = native.stored_link(backend, [_main_object(tmp_path, 3)], tmp_path / "exe")
    assert subprocess.run([str(exe)]).returncode == 3 and blocked.read_text() == "not a directory"


def test_the_kernel_module_reads_only_its_kernel_fields_of_the_image():
    """A process keeps one kernel module per KERNEL_FIELDS of the image (targets/llvm.py
    compile_kept), so kernel_module must read nothing else of it."""
    import inspect
    import re

    from alphac.codegen import module

    read = set(re.findall(r"\bimage\.(\w+)", inspect.getsource(module.kernel_module)))
    assert read == set(module.KERNEL_FIELDS)


def test_a_process_generates_a_deployment_s_kernels_once(tmp_path, monkeypatch):
    """Two roles, and the same role again, on two targets: one kernel module generated, one
    object compiled per target, in this process."""
    from alphac.codegen import module

    monkeypatch.setattr(llvm, "_MODULES", {})
    monkeypatch.setattr(llvm, "_OBJECTS", {})
    made = []
    real = module.kernel_module
    monkeypatch.setattr(module, "kernel_module", lambda image: made.append(image) or real(image))
    plan = driver.plan(driver.deployment(str(SPEC)))
    for role, target in (("worker", "x86_64"), ("coordinator", "x86_64"), ("worker", "x86_64"),
                         ("worker", "aarch64")):
        driver.build(plan, role, target, tmp_path / f"{role}-{target}")
    assert len(made) == 1 and len(llvm._OBJECTS) == 2
