"""Targets: toml descriptions, the backend registry, object emission, linking, running."""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import FrozenInstanceError, replace

import pytest
from elftools.elf.elffile import ELFFile
from llvmlite import ir

from alphac.targets import aarch64, compile_object, link_bytes, load_target, sm86, target_names, x86_64
from alphac.targets.native import NativeBackend
from alphac.targets.registry import BUILDERS, backend, buildable
from alphac.targets.target import TargetError, parse_target

HAVE_AARCH64 = shutil.which("aarch64-linux-gnu-gcc") is not None and shutil.which("qemu-aarch64") is not None
needs_aarch64 = pytest.mark.skipif(not HAVE_AARCH64, reason="aarch64 cross tools not installed")

I32 = ir.IntType(32)


def exit_module(code: int, extern: str | None = None) -> ir.Module:
    """`int main(void) { return code; }`, optionally calling an undefined function first."""
    m = ir.Module("exit")
    f = ir.Function(m, ir.FunctionType(I32, []), "main")
    b = ir.IRBuilder(f.append_basic_block())
    if extern:
        b.call(ir.Function(m, ir.FunctionType(I32, []), extern), [])
    b.ret(ir.Constant(I32, code))
    return m


def test_target_descriptions():
    assert target_names() == ("aarch64", "sm86", "x86_64")
    x, a, g = load_target("x86_64"), load_target("aarch64"), load_target("sm86")
    assert (x.triple, x.cpu, x.machine, x.runner, x.static) == (
        "x86_64-unknown-linux-gnu", "x86-64", "EM_X86_64", (), False)
    assert (a.triple, a.cpu, a.machine, a.runner, a.static) == (
        "aarch64-unknown-linux-gnu", "generic", "EM_AARCH64", ("qemu-aarch64",), True)
    # every target links OpenSSL's libcrypto statically, after the objects
    assert a.link_command("o.o", "exe") == ["aarch64-linux-gnu-gcc", "-static", "-o", "exe", "o.o",
                                            "/usr/lib/aarch64-linux-gnu/libcrypto.a"]
    assert x.link_command("o.o", "exe") == ["cc", "-o", "exe", "o.o", "/usr/lib/x86_64-linux-gnu/libcrypto.a"]
    assert g.libs == x.libs
    assert (g.triple, g.cpu, g.host) == ("nvptx64-nvidia-cuda", "sm_86", "x86_64")
    assert g.assembler[:2] == ("ptxas", "-arch=sm_86")
    with pytest.raises(FrozenInstanceError):
        x.cpu = "native"


def test_registry_names_match_modules():
    assert buildable() == ("aarch64", "sm86", "x86_64")
    assert {x86_64.NAME, aarch64.NAME, sm86.NAME} == set(BUILDERS)
    for name in BUILDERS:
        assert backend(name).name == name == load_target(name).name


def test_unknown_and_unbuildable_targets():
    with pytest.raises(TargetError) as err:
        load_target("riscv64")
    assert err.value.code == "unknown-target"
    assert err.value.message == "unknown target 'riscv64'; known: aarch64, sm86, x86_64"
    with pytest.raises(TargetError) as err:
        backend("mips")
    assert (err.value.code, err.value.message) == (
        "unknown-target", "unknown target 'mips'; known: aarch64, sm86, x86_64")


def test_malformed_target_files(tmp_path, monkeypatch):
    with pytest.raises(TargetError) as err:
        parse_target('name = "t"\ntriple = "x"\n', "t.toml")
    assert err.value.code == "bad-target-file"
    assert err.value.message == "t.toml: missing cpu, features, machine, linker, cc"
    with pytest.raises(TargetError) as err:
        parse_target('name = "t"\ntriple = ', "t.toml")
    assert err.value.code == "bad-target-file"
    with pytest.raises(TargetError) as err:
        parse_target('name="t"\ntriple="x"\ncpu=""\nfeatures=""\nmachine="m"\nlinker="cc"\ncc=["cc"]\n', "t.toml")
    assert err.value.message == "t.toml: linker must be a list of strings"
    (tmp_path / "odd.toml").write_text(
        'name="even"\ntriple="x"\ncpu=""\nfeatures=""\nmachine="m"\nlinker=["cc"]\ncc=["cc"]\n')
    monkeypatch.setenv("ALPHAC_TARGETS", str(tmp_path))
    with pytest.raises(TargetError) as err:
        load_target("odd")
    assert err.value.code == "bad-target-file"
    assert err.value.message.endswith("name 'even' differs from the file name")


@pytest.mark.parametrize("name,machine", [("x86_64", "EM_X86_64"), ("aarch64", "EM_AARCH64")])
def test_objects_are_relocatable_for_their_machine_and_reproducible(tmp_path, name, machine):
    obj = compile_object(exit_module(3), name)
    assert obj == compile_object(exit_module(3), load_target(name))
    path = tmp_path / "o.o"
    path.write_bytes(obj)
    with path.open("rb") as f:
        elf = ELFFile(f)
        assert (elf["e_type"], elf["e_machine"]) == ("ET_REL", machine)


def test_x86_64_links_and_runs(tmp_path):
    exe = link_bytes(compile_object(exit_module(42), "x86_64"), "x86_64", tmp_path / "exe")
    assert subprocess.run(load_target("x86_64").run_command(exe)).returncode == 42


@needs_aarch64
def test_aarch64_links_statically_and_runs_under_qemu(tmp_path):
    exe = link_bytes(compile_object(exit_module(42), "aarch64"), "aarch64", tmp_path / "exe")
    with exe.open("rb") as f:
        elf = ELFFile(f)
        assert elf["e_machine"] == "EM_AARCH64"
        assert not any(seg["p_type"] == "PT_INTERP" for seg in elf.iter_segments())
    cmd = load_target("aarch64").run_command(exe)
    assert cmd[0] == "qemu-aarch64"
    assert subprocess.run(cmd).returncode == 42


def test_links_are_byte_identical(tmp_path):
    obj = compile_object(exit_module(5), "x86_64")
    (tmp_path / "elsewhere").mkdir()
    a = link_bytes(obj, "x86_64", tmp_path / "elsewhere" / "exe")
    b = link_bytes(obj, "x86_64", tmp_path / "b")
    assert a.read_bytes() == b.read_bytes()


def test_link_failures_are_one_line_errors(tmp_path):
    with pytest.raises(TargetError) as err:
        link_bytes(compile_object(exit_module(0, extern="alphac_missing"), "x86_64"), "x86_64",
                   tmp_path / "exe")
    assert err.value.code == "link-failed"
    assert "\n" not in err.value.message and "alphac_missing" in err.value.message
    assert not (tmp_path / "exe").exists()
    gone = NativeBackend(replace(load_target("x86_64"), linker=("alphac-no-such-cc", "{obj}")))
    with pytest.raises(TargetError) as err:
        gone.link_bytes(b"", tmp_path / "exe")
    assert (err.value.code, err.value.message) == (
        "linker-missing", "alphac-no-such-cc: not found (needed to link for x86_64)")



def test_sm86_description_lowers_programs_to_rounded_ptx(tmp_path):
    """The device target's triple and cpu lower the Adam update to `.rn` binary64 PTX without
    fused multiply-add, which ptxas accepts."""
    import re

    from alphac.codegen.program import emit_program, program_regions
    from alphac.targets import llvm
    from test_codegen_program import adam_update

    module = ir.Module("adam")
    emit_program(module, adam_update(1000), "adam", program_regions("update", 1000, 0, 2002))
    target = load_target("sm86")
    ptx = llvm.compile_assembly(module, target)
    f64_ops = set(re.findall(r"^\s+([a-z]+(?:\.[a-z0-9]+)*\.f64)\b", ptx, re.M))
    arith = {op for op in f64_ops if op.split(".")[0] in ("add", "sub", "mul", "div", "sqrt", "fma", "neg")}
    assert arith == {"add.rn.f64", "sub.rn.f64", "mul.rn.f64", "div.rn.f64", "sqrt.rn.f64"}
    assert ".target sm_86" in ptx and "fma" not in ptx
    if shutil.which(target.assembler[0]) is None:
        return
    (tmp_path / "adam.ptx").write_text(ptx)
    subst = {"{ptx}": str(tmp_path / "adam.ptx"), "{cubin}": str(tmp_path / "adam.cubin")}
    cmd = [subst.get(a, a) for a in target.assembler]
    assert subprocess.run(cmd, capture_output=True).returncode == 0
    with (tmp_path / "adam.cubin").open("rb") as f:
        assert ELFFile(f)["e_machine"] == "EM_CUDA"


def test_a_missing_library_refuses_by_name(tmp_path):
    t = replace(load_target("x86_64"), libs=(str(tmp_path / "libabsent.a"),))
    with pytest.raises(TargetError) as err:
        NativeBackend(t).link([tmp_path / "o.o"], tmp_path / "exe")
    assert err.value.code == "library-missing"
    assert str(tmp_path / "libabsent.a") in str(err.value)
