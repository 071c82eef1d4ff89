"""The C role runtime (`alphac/runtime/*.c`, `*.h`, with the generated `alphac_gen.h`)
compiled for a target by the C compiler its toml names, with the runtime's own flags, into
one relocatable object. Objects are cached by target, compiler command and version, flags
and the bytes of every source, under $ALPHAC_CACHE (default: $XDG_CACHE_HOME/alphac or
~/.cache/alphac).

The flags forbid what would let C change floating-point results (GNU C contracts a*b+c by
default); the runtime performs no floating-point arithmetic at all, which a test checks by
disassembly.
"""

from __future__ import annotations

import functools
import hashlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from alphac.image.cheader import HEADER_NAME, runtime_header
from alphac.resources import data_path
from alphac.targets.target import Target, TargetError

FLAGS = ("-O2", "-std=c11", "-Wall", "-Wextra", "-Werror", "-ffp-contract=off", "-fno-fast-math",
         "-fno-builtin")
COMPILE_TIMEOUT_S = 300
OBJECT = "alphac_rt.o"


def cache_dir() -> Path:
    if os.environ.get("ALPHAC_CACHE"):
        return Path(os.environ["ALPHAC_CACHE"])
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "alphac"


def sources(device: bool = False) -> dict[str, bytes]:
    """The runtime's files by name: the shipped sources and the generated header, and for a
    device target's host executable the driver side too (`device/*.c`)."""
    root = data_path("alphac", "runtime")
    dirs = (root, root / "device") if device else (root,)
    out = {p.relative_to(root).as_posix(): p.read_bytes() for d in dirs for p in sorted(d.iterdir())
           if p.suffix in (".c", ".h")}
    out[HEADER_NAME] = runtime_header().encode()
    return out


@functools.lru_cache(maxsize=None)
def compiler_version(cc: tuple[str, ...]) -> str:
    if shutil.which(cc[0]) is None:
        raise TargetError("compiler-missing", f"{cc[0]}: not found (the C compiler of the role runtime)")
    done = subprocess.run([*cc, "--version"], capture_output=True, text=True, timeout=60)
    return (done.stdout.splitlines() or [""])[0]


def _run(command: list[str], cwd: str) -> None:
    # the compiler's own temporary files go to `cwd` too, a directory removed afterwards
    # whatever happens, also when the build is interrupted
    env = {**os.environ, "TMPDIR": cwd}
    try:
        done = subprocess.run(command, cwd=cwd, capture_output=True, text=True,
                              timeout=COMPILE_TIMEOUT_S, env=env)
    except subprocess.TimeoutExpired:
        raise TargetError("compile-failed", f"{command[0]} ran longer than {COMPILE_TIMEOUT_S} s") from None
    if done.returncode != 0:
        lines = [ln for ln in (done.stderr + done.stdout).splitlines() if ln.strip()]
        first = next((ln for ln in lines if "error" in ln), lines[0] if lines else "no message")
        raise TargetError("compile-failed", f"{command[0]} exited {done.returncode}: {first.strip()}")


def runtime_object(target: Target, pic: bool = False) -> Path:
    """The cached object of the runtime for `target` (position-independent code for a
    shared library when `pic`), compiling it on a miss."""
    if not target.cc:
        raise TargetError("compiler-missing", f"target {target.name} names no C compiler (cc)")
    files = sources(device=bool(target.host))
    flags = (*FLAGS, *target.cflags, *(("-fPIC",) if pic else ()))
    key = hashlib.sha256()
    for part in (target.name, "\0".join(target.cc), compiler_version(target.cc), "\0".join(flags)):
        key.update(part.encode() + b"\0")
    for name, data in files.items():
        key.update(name.encode() + b"\0" + hashlib.sha256(data).digest())
    out = cache_dir() / f"runtime-{target.name}{'-pic' if pic else ''}-{key.hexdigest()[:20]}.o"
    if out.is_file():
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="alphac-rt-") as tmp:
        for name, data in files.items():
            Path(tmp, name).parent.mkdir(exist_ok=True)
            Path(tmp, name).write_bytes(data)
        units = sorted(n for n in files if n.endswith(".c"))
        _run([*target.cc, *flags, "-c", *(u for u in units if "/" not in u)], tmp)
        for unit in (u for u in units if "/" in u):  # device/x.c becomes device/x.o beside it
            _run([*target.cc, *flags, "-c", unit, "-o", unit[:-2] + ".o"], tmp)
        _run([*target.cc, "-r", "-nostdlib", "-o", OBJECT, *(u[:-2] + ".o" for u in units)], tmp)
        # another build may finish the same object meanwhile: both have the same bytes
        fd, staged_name = tempfile.mkstemp(prefix=out.name, dir=out.parent)
        os.close(fd)
        staged = Path(staged_name)
        try:
            shutil.copyfile(Path(tmp, OBJECT), staged)
            os.replace(staged, out)
        except BaseException:  # also an interrupt: no stray copy is left in the cache
            staged.unlink(missing_ok=True)
            raise
    return out


# The role image goes in as data assembled by the target's C compiler: `.incbin` copies the
# bytes, however many, where an LLVM constant of them would be text many times their size.
_IMAGE_ASM = """\
    .section {section}
    .balign 16
    .globl {symbol}
    .type {symbol}, %object
{symbol}:
    .incbin "{file}"
    .size {symbol}, . - {symbol}
    .section .note.GNU-stack,"",%progbits
"""


def data_object(target: Target, symbol: str, data: bytes, directory: str | os.PathLike,
                section: str = ".rodata") -> Path:
    """An object defining the read-only, 16-byte aligned symbol `symbol` holding `data`,
    written in `directory` (under fixed names, so builds stay reproducible), in `section`
    (another name than .rodata: a section of its own, which `alphac inspect` reads back)."""
    if not target.cc:
        raise TargetError("compiler-missing", f"target {target.name} names no C compiler (cc)")
    compiler_version(target.cc)  # compiler-missing if it is not installed
    d = Path(directory)
    (d / f"{symbol}.bin").write_bytes(data)
    flags = "" if section == ".rodata" else ',"a",%progbits'
    (d / f"{symbol}.S").write_text(_IMAGE_ASM.format(symbol=symbol, file=f"{symbol}.bin",
                                                     section=section + flags))
    _run([*target.cc, "-c", f"{symbol}.S", "-o", f"{symbol}.o"], str(d))
    return d / f"{symbol}.o"
