"""Reading a built executable: its `.alphac` section and what the ELF header says.

    describe(path) -> {metadata, machine, elf_type, static, size, device}     TargetError
    read_metadata(path) -> dict                                       TargetError
    global_symbols(path) -> (defined, undefined)     of an object or executable

The section holds the plan, contract and target of one (role, target) executable as sorted
UTF-8 JSON (alphac.image.metadata), a record of format FORMAT. Errors:
`io-error`, `not-an-alphac-executable` (not ELF, or no section), `bad-metadata` (not JSON,
or not a format FORMAT record).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from alphac.image.metadata import FORMAT, SECTION
from alphac.targets.cubin import describe_device
from alphac.targets.target import TargetError


def describe(path: "str | os.PathLike") -> dict:
    """The embedded metadata plus what the ELF file itself says: machine (the e_machine
    name), elf_type, static (no PT_INTERP segment), size in bytes, and for an SM86
    executable its device code (alphac.targets.cubin.describe_device; else None)."""
    from elftools.common.exceptions import ELFError
    from elftools.elf.elffile import ELFFile

    p = Path(path)
    try:
        size = p.stat().st_size
        with p.open("rb") as f:
            try:
                elf = ELFFile(f)
                machine = elf["e_machine"]
                elf_type = elf["e_type"]
                interp = any(seg["p_type"] == "PT_INTERP" for seg in elf.iter_segments())
                section = elf.get_section_by_name(SECTION)
                raw = section.data() if section is not None else None
                device = describe_device(elf)
            except (ELFError, ValueError, KeyError) as exc:
                raise TargetError("not-an-alphac-executable", f"{p}: not an ELF file ({exc})") from None
    except OSError as exc:
        raise TargetError("io-error", f"{p}: {exc.strerror or exc}") from None
    if raw is None:
        raise TargetError("not-an-alphac-executable", f"{p}: no {SECTION} section")
    try:
        meta = json.loads(raw.rstrip(b"\0").decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise TargetError("bad-metadata", f"{p}: {SECTION} is not JSON ({exc})") from None
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        raise TargetError("bad-metadata", f"{p}: {SECTION} has no format {FORMAT} record")
    return {
        "metadata": meta,
        "machine": machine,
        "elf_type": elf_type,
        "static": not interp,
        "size": size,
        "device": device,
    }


def read_metadata(path: "str | os.PathLike") -> dict:
    """The embedded JSON record of an executable."""
    return describe(path)["metadata"]


def global_symbols(path: "str | os.PathLike") -> tuple[set[str], set[str]]:
    """The names of the global symbols an ELF file defines, and of those it uses without
    defining (weak references are neither)."""
    from elftools.elf.elffile import ELFFile
    from elftools.elf.sections import SymbolTableSection

    defined: set[str] = set()
    undefined: set[str] = set()
    with Path(path).open("rb") as f:
        for sec in ELFFile(f).iter_sections():
            if isinstance(sec, SymbolTableSection):
                for sym in sec.iter_symbols():
                    if sym.name and sym["st_info"]["bind"] == "STB_GLOBAL":
                        (undefined if sym["st_shndx"] == "SHN_UNDEF" else defined).add(sym.name)
    return defined, undefined
