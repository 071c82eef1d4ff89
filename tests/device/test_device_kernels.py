"""The SM86 device kernels without a GPU: every spec's programs lower to PTX whose binary64
arithmetic is only `.rn` add/sub/mul, `div.rn.f64`, `sqrt.rn.f64` and `neg.f64` (no fma), ptxas
assembles it for sm_86, and in the SASS no DFMA is a contraction: a `--fmad=false` build has
the very same DFMA instructions (those of ptxas's IEEE division and square-root sequences),
and a program without division or square root has none. The update is cut into segments
as the declared order allows."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from alphac import driver
from alphac.codegen.device import Segment, check_supported, device_module, kernel_names, segments
from alphac.diagnostics import CompileError
from alphac.ir import nodes as n
from alphac.targets import llvm, load_target
from alphac.targets.cubin import cubin_sm
from alphac.targets.sm86 import assemble, nvdisasm

ROOT = Path(__file__).resolve().parents[2]
SPECS = sorted(p for p in (ROOT / "specs").rglob("*.alpha") if "Gates" not in p.parts)
F64_ARITH = re.compile(r"^\s+((?:add|sub|mul|div|sqrt|fma|neg)\.[a-z0-9.]*f64)\b", re.M)
needs_ptxas = pytest.mark.skipif(shutil.which("ptxas") is None, reason="ptxas is not installed")


def _images(spec: Path):
    try:
        plan = driver.plan(driver.deployment(str(spec)))
    except CompileError:
        return []  # e.g. the benchmark learner before bench/make_big_data.py ran
    return [driver.image(plan, role.name, "sm86") for role in plan.deployment.roles]


CASES = [(spec, img) for spec in SPECS for img in _images(spec)]


def _ptx(img) -> tuple[str, tuple[Segment, ...]]:
    module, segs = device_module(img)
    return llvm.compile_assembly(module, load_target("sm86")), segs


def test_the_cases_cover_every_runnable_spec():
    assert len({spec for spec, _ in CASES}) >= 15


@needs_ptxas
@pytest.mark.parametrize("spec,img", CASES, ids=[f"{s.stem}-{i.role}" for s, i in CASES])
def test_every_spec_lowers_to_rounded_ptx_that_ptxas_assembles(spec, img):
    ptx, segs = _ptx(img)
    ops = set(F64_ARITH.findall(ptx))
    # neg.f64 flips the sign bit (exact): the elementary functions negate their argument
    assert ops <= {"add.rn.f64", "sub.rn.f64", "mul.rn.f64", "div.rn.f64", "sqrt.rn.f64", "neg.f64"}
    assert {"add.rn.f64", "mul.rn.f64"} <= ops
    assert "fma" not in ptx and ".target sm_86" in ptx
    assert re.findall(r"^\.visible \.entry (\w+)\(", ptx, re.M) == list(kernel_names(segs))
    assert cubin_sm(assemble(ptx, load_target("sm86"))) == 86


def _dfma(ptx: str, tmp_path: Path, fmad: str) -> list[str]:
    src, out = tmp_path / "k.ptx", tmp_path / f"k-{fmad}.cubin"
    src.write_text(ptx)
    subprocess.run(["ptxas", "-arch=sm_86", f"--fmad={fmad}", str(src), "-o", str(out)], check=True)
    sass = subprocess.run([nvdisasm(), "-c", str(out)], capture_output=True, text=True, check=True).stdout
    assert "alphac_dev_local" in sass
    return [ln.split("*/", 1)[1].strip() for ln in sass.splitlines() if "DFMA" in ln]


@needs_ptxas
@pytest.mark.skipif(nvdisasm() is None, reason="nvdisasm (pip nvidia-cuda-nvdisasm) is not installed")
@pytest.mark.parametrize("spec", ["demo.alpha", "lsq_adam_partitioned_hierarchy.alpha",
                                  "lsq_momentum_star.alpha", "order10_star.alpha"])
def test_no_dfma_outside_ieee_division_and_square_root(spec, tmp_path):
    img = _images(ROOT / "specs" / spec)[-1]
    ptx, _ = _ptx(img)
    fused, unfused = _dfma(ptx, tmp_path, "true"), _dfma(ptx, tmp_path, "false")
    assert fused == unfused  # nothing ptxas could fuse became a DFMA
    if "div.rn.f64" in ptx or "sqrt.rn.f64" in ptx:
        assert len(fused) > 0  # the pattern does read DFMAs
    else:
        assert fused == []


def _program(body) -> n.Program:
    return n.Program(slots=16, body=tuple(body))


def _slot(base, var=None):
    return n.SlotRef(n.Index(base, var))


def test_segments_follow_the_declared_order():
    img = _images(ROOT / "specs" / "demo.alpha")[0]
    segs = segments(img.update, owned=False)
    # p1, p2 by one thread; the loop over 3 coordinates by one thread each
    assert [(s.first, len(s.stmts), s.threads) for s in segs] == [(1, 2, 1), (3, 1, 3)]
    let = n.Let("t", _slot(0))
    loop = n.Loop("i", 0, 4, (n.Assign(n.Index(4, "i"), n.Binary("mul", _slot(8, "i"), n.Local("t"))),))
    assert len(segments(_program([let, loop]), owned=False)) == 1  # t cannot cross kernels
    free = n.Loop("i", 0, 4, (n.Assign(n.Index(4, "i"), n.Binary("mul", _slot(8, "i"), _slot(0))),))
    assert [s.threads for s in segments(_program([let, free]), owned=False)] == [1, 4]
    owned = _images(ROOT / "specs" / "lsq_adam_partitioned_hierarchy.alpha")[0]
    assert [s.threads for s in segments(owned.update, owned=True)] == [1]


def test_a_missing_or_failing_assembler_is_a_one_line_error():
    from dataclasses import replace

    from alphac.targets.target import TargetError

    target = load_target("sm86")
    with pytest.raises(TargetError) as err:
        assemble(".version 7.1\n", replace(target, assembler=("alphac-no-such-ptxas", "{ptx}")))
    assert (err.value.code, err.value.message) == (
        "assembler-missing", "alphac-no-such-ptxas: not found (needed to build for sm86)")
    if shutil.which("ptxas") is None:
        return
    with pytest.raises(TargetError) as err:
        assemble("this is not PTX\n", target)
    assert err.value.code == "assemble-failed" and err.value.message.startswith("ptxas exited 255: ")


def test_cubin_sm_reads_both_abi_versions():
    import struct

    def elf(abi: int, flags: int) -> bytes:
        ident = b"\x7fELF" + bytes([2, 1, 1, 0x33, abi]) + bytes(7)
        header = struct.pack("<HHIQQQIHHHHHH", 2, 190, 1, 0, 0, 0, flags, 64, 56, 0, 64, 0, 0)
        return ident + header

    assert cubin_sm(elf(8, 0x5605)) == 86  # CUDA 13 ptxas: (e_flags >> 8) & 0xff
    assert cubin_sm(elf(7, 0x00560056)) == 86  # older: e_flags & 0xff


def test_the_sample_tree_on_sm86_owners_is_refused_by_name(tmp_path):
    from alphac.image.image import ImageError

    import support

    path = support.placed("lsq_adam_sampletree.alpha", ["x86_64", "sm86", "x86_64", "sm86"], tmp_path)
    plan = driver.plan(driver.deployment(str(path)))
    with pytest.raises(ImageError) as err:
        check_supported(driver.image(plan, "worker", "sm86"))
    assert err.value.code == "device-unsupported"
    assert err.value.message.endswith("fold their samples as blocks of the sample tree, which SM86 owners "
                                      "do not run yet")
