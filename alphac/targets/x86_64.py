"""x86-64 Linux: llvmlite object for the baseline x86-64 CPU, linked by the system `cc`."""

from alphac.targets.native import NativeBackend
from alphac.targets.target import load_target

NAME = "x86_64"


def backend() -> NativeBackend:
    return NativeBackend(load_target(NAME))
