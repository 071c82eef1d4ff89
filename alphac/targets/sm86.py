"""NVIDIA SM86: the program kernels as PTX (llvmlite, `nvptx64-nvidia-cuda`, `sm_86`),
assembled into a cubin by the toml's assembler (ptxas); both are embedded, with the device
table, in a host executable built for the toml's `host` target (x86-64), whose runtime
also holds the CUDA driver side (alphac/runtime/device/).

    backend() -> DeviceBackend           compiles host objects and links like the host target
    assemble(ptx, target) -> bytes        the cubin; assembler-missing, assemble-failed
    device_parts(ptx, cubin, table) -> parts    the embedded blobs, for the data object
    nvdisasm() -> str | None              the SASS disassembler of the nvidia-cuda-nvdisasm package
"""

from __future__ import annotations

import os
import shutil
import struct
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from alphac.targets import llvm
from alphac.targets.native import NativeBackend
from alphac.targets.target import Target, TargetError, load_target

NAME = "sm86"
ASSEMBLE_TIMEOUT_S = 120
# the embedded blobs: symbol -> section (each a u64 byte count, then the bytes)
PTX, CUBIN, TABLE = "alphac_ptx", "alphac_cubin", "alphac_device"
SECTIONS = {PTX: ".alphac_ptx", CUBIN: ".alphac_cubin", TABLE: ".alphac_device"}


@dataclass(frozen=True)
class DeviceBackend(NativeBackend):
    """Objects and links of the host target; `target` stays the device's (its runtime, with
    the driver side, is compiled by the toml's `cc`)."""

    host: Target | None = None

    def compile_object(self, module) -> bytes:
        return llvm.compile_object(module, self.host)


def backend() -> DeviceBackend:
    target = load_target(NAME)
    return DeviceBackend(target, load_target(target.host))


def assemble(ptx: str, target: Target) -> bytes:
    """The cubin of `ptx` by the target's assembler command."""
    if not target.assembler or shutil.which(target.assembler[0]) is None:
        tool = target.assembler[0] if target.assembler else "an assembler"
        raise TargetError("assembler-missing", f"{tool}: not found (needed to build for {target.name})")
    with tempfile.TemporaryDirectory(prefix="alphac-ptx-") as tmp:
        src, out = Path(tmp, "kernels.ptx"), Path(tmp, "kernels.cubin")
        src.write_text(ptx)
        subst = {"{ptx}": str(src), "{cubin}": str(out)}
        command = [subst.get(a, a) for a in target.assembler]
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=ASSEMBLE_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            raise TargetError("assemble-failed", f"{command[0]} ran longer than {ASSEMBLE_TIMEOUT_S} s") from None
        if done.returncode != 0:
            lines = [ln.strip() for ln in (done.stderr + done.stdout).splitlines() if ln.strip()]
            raise TargetError("assemble-failed", f"{command[0]} exited {done.returncode}: "
                              f"{lines[0] if lines else 'no message'}")
        return out.read_bytes()


def blob(data: bytes) -> bytes:
    """A byte count, then the bytes (PTX text gets its NUL, as cuModuleLoadData wants)."""
    return struct.pack("<Q", len(data)) + data


def device_parts(ptx: str, cubin: bytes, table: bytes) -> "dict[str, tuple[bytes, str]]":
    """The PTX, the cubin and the device table as data parts (symbol: (bytes, section)), each
    in its own section, for the host executable's data object."""
    parts = {PTX: blob(ptx.encode() + b"\0"), CUBIN: blob(cubin), TABLE: table}
    return {symbol: (data, SECTIONS[symbol]) for symbol, data in parts.items()}


def nvdisasm() -> str | None:
    """The path of `nvdisasm` from the nvidia-cuda-nvdisasm package (nvidia/cu*/bin), if
    installed."""
    try:
        import nvidia
    except ImportError:
        return None
    for root in nvidia.__path__:
        for found in sorted(Path(root).glob("cu*/bin/nvdisasm"), reverse=True):
            if os.access(found, os.X_OK):
                return str(found)
    return None
