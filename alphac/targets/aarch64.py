"""AArch64 Linux: llvmlite object, linked statically by `aarch64-linux-gnu-gcc -static` so
that it runs under `qemu-aarch64` without a target sysroot."""

from alphac.targets.native import NativeBackend
from alphac.targets.target import load_target

NAME = "aarch64"


def backend() -> NativeBackend:
    return NativeBackend(load_target(NAME))
