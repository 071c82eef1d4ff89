"""What the learner shapes' gate tests share: the other instruction set of each target,
the skip mark of tests that run AArch64 owners, and a word's float."""

from __future__ import annotations

import shutil
import struct

import pytest

SWAP = {"x86_64": "aarch64", "aarch64": "x86_64"}  # the other instruction set

needs_qemu = pytest.mark.skipif(shutil.which("qemu-aarch64") is None
                                or shutil.which("aarch64-linux-gnu-gcc") is None,
                                reason="qemu-aarch64 / aarch64-linux-gnu-gcc not installed")


def f64(bits: int) -> float:
    return struct.unpack("<d", struct.pack("<Q", bits))[0]
