"""The C runtime performs no floating-point arithmetic: its objects for x86-64, AArch64 and
the SM86 host (the x86-64 runtime with the CUDA driver side, alphac/runtime/device/),
disassembled, hold no floating-point arithmetic, conversion or comparison instruction (every
such operation of an executable is emitted by llvmlite). A control object compiled from
`a*b+c` shows that the pattern finds them."""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest

from alphac.targets import load_target, runtime_object
from alphac.targets.runtime import FLAGS

FP = {
    "x86_64": re.compile(r"\b(v?(add|sub|mul|div|sqrt|min|max)[sp][sd]|v?fn?m(add|sub)\w*|v?cvt\w*"
                         r"|v?u?comis[sd]|v?round[sp][sd]|v?hadd\w*|v?dp[sp]{2})\b"),
    "aarch64": re.compile(r"\b(fadd\w*|fsub|fmul\w*|fdiv|fsqrt|fn?madd|fn?msub|fnmul|fabs|fneg|fcvt\w*"
                          r"|[su]cvtf|fcmp\w*|fccmp\w*|fmin\w*|fmax\w*|frint\w*)\b"),
}
FP["sm86"] = FP["x86_64"]  # the SM86 executable's runtime runs on its x86-64 host
OBJDUMP = {"x86_64": "objdump", "aarch64": "aarch64-linux-gnu-objdump", "sm86": "objdump"}


def _instructions(target: str, obj) -> list[str]:
    tool = OBJDUMP[target]
    if shutil.which(tool) is None or shutil.which(load_target(target).cc[0]) is None:
        pytest.skip(f"{tool} or the {target} C compiler is not installed")
    text = subprocess.run([tool, "-d", "--no-show-raw-insn", str(obj)], capture_output=True, text=True,
                          check=True).stdout
    return [ln.split("\t", 1)[1].strip() for ln in text.splitlines() if "\t" in ln and ln.strip()[:1].isalnum()]


@pytest.mark.parametrize("target", ["x86_64", "aarch64", "sm86"])
def test_the_runtime_object_has_no_floating_point_arithmetic(target):
    insns = _instructions(target, runtime_object(target))
    assert len(insns) > 500  # the whole runtime was read
    hits = [i for i in insns if FP[target].search(i.split()[0] if i.split() else "")]
    assert hits == []


@pytest.mark.parametrize("target", ["x86_64", "aarch64"])
def test_the_pattern_finds_floating_point_code(tmp_path, target):
    src = tmp_path / "f.c"
    src.write_text("double f(double a, double b, double c) { return a * b + c; }\n"
                   "long g(double x) { return (long)x; }\n")
    obj = tmp_path / "f.o"
    subprocess.run([*load_target(target).cc, *FLAGS, "-c", str(src), "-o", str(obj)], check=True)
    found = {i.split()[0] for i in _instructions(target, obj) if FP[target].search(i.split()[0])}
    want = {"x86_64": {"mulsd", "addsd", "cvttsd2si"}, "aarch64": {"fmul", "fadd", "fcvtzs"}}[target]
    assert want <= found, found


def test_the_runtime_flags_forbid_contraction_and_fast_math():
    assert {"-ffp-contract=off", "-fno-fast-math", "-std=c11", "-Werror", "-O2"} <= set(FLAGS)
