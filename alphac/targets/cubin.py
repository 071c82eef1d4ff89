"""Reading the device code an SM86 executable embeds: its cubin (an ELF of EM_CUDA) and
its PTX, from the sections alphac.targets.sm86 puts them in.

    cubin_sm(cubin) -> int                    the SM the cubin was assembled for
    describe_device(elf) -> dict | None       {cubin_sm, cubin_bytes, ptx_version, ptx_target,
                                               kernels} of an opened ELFFile, None without them
"""

from __future__ import annotations

import io
import re
import struct

from alphac.targets.sm86 import PTX, CUBIN, SECTIONS
from alphac.targets.target import TargetError


def cubin_sm(cubin: bytes) -> int:
    """The SM number of a cubin: ptxas of CUDA 13 writes EI_ABIVERSION 8 and the SM in bits
    8..15 of e_flags; ABI version 7 (older toolkits) keeps it in bits 0..7."""
    from elftools.common.exceptions import ELFError
    from elftools.elf.elffile import ELFFile

    try:
        elf = ELFFile(io.BytesIO(cubin))
        machine, abi, flags = elf["e_machine"], elf["e_ident"]["EI_ABIVERSION"], elf["e_flags"]
    except (ELFError, ValueError, KeyError) as exc:
        raise TargetError("bad-metadata", f"the embedded cubin is not an ELF file ({exc})") from None
    if machine != "EM_CUDA":
        raise TargetError("bad-metadata", f"the embedded cubin is for {machine}, not EM_CUDA")
    return (flags >> 8) & 0xFF if abi >= 8 else flags & 0xFF


def _blob(elf, symbol: str) -> bytes | None:
    section = elf.get_section_by_name(SECTIONS[symbol])
    if section is None:
        return None
    data = section.data()
    (size,) = struct.unpack_from("<Q", data)
    return data[8:8 + size]


def describe_device(elf) -> dict | None:
    cubin, ptx = _blob(elf, CUBIN), _blob(elf, PTX)
    if cubin is None or ptx is None:
        return None
    text = ptx.rstrip(b"\0").decode("utf-8", "replace")
    version = re.search(r"^\.version\s+(\S+)", text, re.M)
    target = re.search(r"^\.target\s+(\S+)", text, re.M)
    return {
        "cubin_sm": cubin_sm(cubin),
        "cubin_bytes": len(cubin),
        "ptx_version": version.group(1) if version else None,
        "ptx_target": target.group(1) if target else None,
        "kernels": re.findall(r"^\.visible \.entry (\w+)\(", text, re.M),
    }
